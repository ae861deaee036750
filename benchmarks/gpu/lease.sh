#!/usr/bin/env bash
# One GPU lease, prepared as one command (issues 60 and 62): install the carried wheels and narbench, then
#   1. breakdown.txt  where an epoch's time goes on the GPU (benchmarks.speed.breakdown --device cuda,
#                     narbench beside the plain-PyG peer, GPU utilisation sampled) -- issue 60
#   1b. layer-memory.txt  what recomputing layers saves on a paper-size real batch (benchmarks.speed.layer_memory)
#   1c. probe.txt     with PROBES="gps:real-2.3:unseen ...": seconds per paper-profile step of an encoder too slow to
#                     finish in a lease, and its whole run's training time at that rate (benchmarks.speed.epoch_probe)
#   1d. warm.txt      with WARM_GPS=DATASET: gps' encodings of its graphs computed once in every core, into the cache
#   2. solo.txt       one paper-profile run alone (nas gcn, seed 0: 35-54 s before issue 60's trainer), after a
#                     smoke run that warms numba's kernels: its wall time and peak GPU memory -- issue 60
#   3. the paper grid GRID through benchmarks/gpu/paper_sweep.sh until the lease's budget -- issue 62
# Each step has its own time limit (BREAKDOWN_S, LAYER_S, PROBE_S, SOLO_S; 0 skips 1b and 2), so the sweep gets what
# is left of BUDGET_S.
#
#   GRID=benchmarks/gpu/paper-gpu-62-23.toml bash benchmarks/gpu/lease.sh "$OUT" 570    # on the device
# Carry .whl (`bash benchmarks/gpu/wheels.sh`: ranx and its needs, zstandard; py3.12 wheels) and .gpucache
# (nas-1.0.narg). Back come logs.tar.gz (every text file below), results.tar.gz and, with KEEP_SNAPSHOTS=1,
# snapshots.tar.gz (paper_sweep.sh). The tree a call sends is capped at 64 MiB: move leaderboard/results'
# sidecars and embeddings aside for the call (paper_sweep.sh says which), keeping the result files the sweep skips by.
set -uo pipefail
out=${1:?usage: lease.sh OUT [BUDGET_S]}
budget=${2:-570}
start=$(date +%s)
root=$(pwd)
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 NARBENCH_NO_PROGRESS=1
export NARBENCH_GIT_COMMIT=${NARBENCH_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null)}
export NARBENCH_CACHE=${NARBENCH_CACHE:-/tmp/nbcache}
. benchmarks/gpu/install.sh || exit 3
site=$PYTHONPATH
echo "installed after $(( $(date +%s) - start )) s"
# Everything runs outside the checkout: from its root, `python -m` and `python -` put the checkout's
# narbench/ (which has no narbench.baselines: baselines/ sits beside it) ahead of the install.
bench=$(mktemp -d); cp -r "$root/benchmarks" "$bench"/
cd "$bench" || exit 3
# 1. the per-phase breakdown (benchmarks/ copied from the checkout, narbench from the install)
PYTHONPATH=$site:$bench timeout -k 5 ${BREAKDOWN_S:-100} $py -m benchmarks.speed.breakdown --device cuda --rounds 1 \
    > "$out/breakdown.txt" 2>&1; echo "breakdown rc $? after $(( $(date +%s) - start )) s" | tee -a "$out/breakdown.txt"
# 1b. what recomputing layers saves and costs on a paper-size real batch (gcn, gat, gin) -- issue 60
[ "${LAYER_S:-45}" -gt 0 ] && { PYTHONPATH=$site:$bench timeout -k 5 ${LAYER_S:-45} $py -m benchmarks.speed.layer_memory \
    --device cuda > "$out/layer-memory.txt" 2>&1
    echo "layer-memory rc $? after $(( $(date +%s) - start )) s" | tee -a "$out/layer-memory.txt"; }
# 1c. PROBES ("encoder:dataset:split ..."): seconds per paper-profile step of encoders too slow to finish in a lease,
#     and the whole run's training time at that rate (benchmarks.speed.epoch_probe), PROBE_S each -- issues 60, 62
for p in ${PROBES:-}; do
    IFS=: read -r enc ds split <<< "$p"
    PYTHONPATH=$site:$bench timeout -k 5 ${PROBE_S:-60} $py -m benchmarks.speed.epoch_probe --encoder "$enc" \
        --dataset "$ds" --split "$split" --graphs ${PROBE_GRAPHS:-1024} --device cuda >> "$out/probe.txt" 2>&1
    echo "probe $p rc $? after $(( $(date +%s) - start )) s" | tee -a "$out/probe.txt"
done
# 1d. WARM_GPS=DATASET: gps' random-walk encodings of all its graphs computed once in every core, into the cache the
#     grid's gps runs read (each would otherwise compute them on its own THREADS) -- issue 62
[ -n "${WARM_GPS:-}" ] && { PYTHONPATH=$site timeout -k 5 ${WARM_S:-120} $py "$bench/benchmarks/gpu/warm_encodings.py" \
    --dataset "$WARM_GPS" > "$out/warm.txt" 2>&1; echo "warm rc $? after $(( $(date +%s) - start )) s" | tee -a "$out/warm.txt"; }
# 2. one paper-profile run alone: wall time and peak GPU memory of the process (SOLO_S=0 skips it)
cd /tmp || exit 3
[ "${SOLO_S:-90}" -gt 0 ] && timeout -k 5 ${SOLO_S:-90} $py - > "$out/solo.txt" 2>&1 <<'PY'
import time, torch
from narbench.cli import main
# a smoke run first, in the same process: numba compiles ranx's kernels on a fresh machine (14.7 s of the 2026-11-30
# solo run's 39.4), which a run with warm caches does not pay
main(["run", "--encoder", "gcn", "--dataset", "nas", "--profile", "smoke", "--device", "cuda", "--seed", "0",
      "--out", "/tmp/solo-warm", "--no-progress"])
torch.cuda.reset_peak_memory_stats()
t = time.perf_counter()
rc = main(["run", "--encoder", "gcn", "--dataset", "nas", "--profile", "paper", "--device", "cuda",
           "--seed", "0", "--out", "/tmp/solo", "--no-progress"])
print(f"solo nas gcn paper s0: rc {rc}, wall {time.perf_counter() - t:.1f} s, "
      f"peak allocated {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB, "
      f"peak reserved {torch.cuda.max_memory_reserved() / 2**30:.2f} GiB")
PY
[ "${SOLO_S:-90}" -gt 0 ] && echo "solo rc $? after $(( $(date +%s) - start )) s" | tee -a "$out/solo.txt"
# 3. the grid, with what is left (paper_sweep.sh keeps 25 s for packing the results)
left=$(( budget - ($(date +%s) - start) ))
nvidia-smi --query-compute-apps=pid,used_memory --format=csv -l 2 > "$out/gpu-apps.csv" 2>&1 &
apps=$!
cd "$root" || exit 3
NO_GATE=1 bash "$root/benchmarks/gpu/paper_sweep.sh" "$out" "$left"
kill "$apps" 2>/dev/null
echo "lease done after $(( $(date +%s) - start )) s"
# the text files as one (a device call returns at most 8 files): logs.tar.gz, results.tar.gz, snapshots
( cd "$out" && shopt -s nullglob && logs=(*.txt *.csv *.log) && [ ${#logs[@]} -gt 0 ] \
    && tar -czf logs.tar.gz --remove-files -- "${logs[@]}"; ls -la "$out" )
