#!/usr/bin/env bash
# The paper grid's trained runs on one lent GPU machine (issue 42): `narbench sweep` of GRID
# (default benchmarks/gpu/paper-gpu.toml: the runs of leaderboard/grid.toml at --profile paper that
# need a GPU, headline cells first) with JOBS runs side by side on the one GPU (default `auto`: as many as the
# GPU's free memory holds at RUN_GIB GiB a run, default 14: six real 2.2 runs peaked at 84 GiB, and as
# many as the cores hold at THREADS threads a run), then the
# failed ones again one at a time, until BUDGET_S.
# Beside it, on the machine's CPU, the gate records that host (torch's CUDA wheel there) against
# the committed reference. Everything that comes back is under OUT:
#   results.tar.gz   result files and their per-query sidecars, leaderboard-ready, and each run's log
#                    (.sweep/logs); embeddings stay behind: a returned file is capped at 16 MiB, and the
#                    tree a call sends at 64 MiB
#   snapshots.tar.gz with KEEP_SNAPSHOTS=1, the snapshots of runs stopped at the budget (below)
#   sweep.log        the sweep's output (one line per finished run, with its wall time)
#   gpu-util.csv     nvidia-smi every 2 s: where the GPU waits
#   gate-device.json the gate's measurement on that host (narbench check --record), gate.log its verdict
#   host.txt         python, torch, GPU, CPU, what was installed
#
#   INSTALL=1 NARBENCH_GIT_COMMIT=<commit> bash benchmarks/gpu/paper_sweep.sh "$OUT" 540   # on the device
#   PROFILE=smoke DEVICE=cpu JOBS=2 bash benchmarks/gpu/paper_sweep.sh /tmp/ps 120         # a dry run here
#   GRID=leaderboard/grid.toml PROFILE=quick DEVICE=cpu JOBS=14 THREADS=1 NO_GATE=1 \
#     SWEEP_ARGS="--block table2 --seeds 0 1 2" ... bash benchmarks/gpu/paper_sweep.sh "$OUT" 540  # quick CPU runs
#                    on the lent machine's 16 cores (they join the quick cpu blocks; environment.cpu says which host)
#
# The tree a device call sends is capped at 64 MiB and the checkout is over it (107 MB tracked on 2026-11-30,
# leaderboard/results 62 MB of it): move the results' per-query sidecars and embeddings aside for the call
# (`*.queries.json.gz`, `*.npz`: 50 MB) and back after it; the result files themselves (12 MB) stay, so the sweep
# still skips the runs they hold.
# INSTALL=1 installs the carried wheels (.whl: ranx and its needs) and narbench itself (install.sh) with
# `pip --no-deps --target /tmp/site`, and runs from /tmp (the repo root has no narbench.baselines).
# Runs already in leaderboard/results (same configuration hash) are skipped; runs still going at
# the budget are stopped (the sweep keeps their snapshots, which do not come back) and re-run by
# the next lease. KEEP_SNAPSHOTS=1 puts the snapshots of runs still going into snapshots.tar.gz
# (a curve run's snapshots hold its per-epoch probes; a paper-profile real run's are about 22 MB), so a later lease
# resumes them with the tar unpacked into its --out (`narbench sweep` resumes a run from its last finished epoch).
set -uo pipefail
out=${1:?usage: paper_sweep.sh OUT [BUDGET_S]}
budget=${2:-480}
root=$(pwd)
grid=$(realpath "${GRID:-benchmarks/gpu/paper-gpu.toml}")
threads=${THREADS:-2}
jobs=${JOBS:-auto}
if [ "$jobs" = auto ]; then  # as many runs as the GPU's free memory holds at RUN_GIB each, and the cores at THREADS each
    by_cpu=$(( $(nproc) / threads ))
    free=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits 2>/dev/null | head -1)
    by_mem=$(( ${free:-0} / 1024 / ${RUN_GIB:-14} ))
    [ -n "$free" ] && [ "$by_mem" -lt "$by_cpu" ] && jobs=$by_mem || jobs=$by_cpu
    [ "$jobs" -ge 1 ] || jobs=1
    echo "jobs $jobs: ${free:-unknown} MiB of GPU memory free at ${RUN_GIB:-14} GiB a run, $(nproc) cores at $threads threads a run"
fi
profile=${PROFILE:-paper}
device=${DEVICE:-cuda}
py=${PYTHON:-python3}
start=$(date +%s)
export NARBENCH_GIT_COMMIT=${NARBENCH_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null)}
export NARBENCH_NO_PROGRESS=1 PYTHONUNBUFFERED=1
mkdir -p "$out"
out=$(realpath "$out")
work=$(mktemp -d)
if [ -n "${INSTALL:-}" ]; then
    . benchmarks/gpu/install.sh || exit 3
fi
cd /tmp
{
    $py -c "import torch, platform, narbench, ranx; print('python', platform.python_version(), 'torch', torch.__version__, 'cuda', torch.cuda.is_available() and torch.cuda.get_device_name(0)); print('narbench from', narbench.__file__)" || exit 4
    lscpu | grep -E 'Model name|^CPU\(s\)'; echo "avx512f: $(grep -c -m1 avx512f /proc/cpuinfo)"
    echo "commit $NARBENCH_GIT_COMMIT; grid $grid; jobs $jobs; threads $threads; profile $profile; device $device"
} > "$out/host.txt" 2>&1 || { cat "$out/host.txt"; exit 4; }
cat "$out/host.txt"
if [ "$device" != cpu ] && command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 2 > "$out/gpu-util.csv" 2>&1 &
    smi=$!
fi
if [ -z "${NO_GATE:-}" ]; then
    ( timeout $((budget - 30)) $py -m narbench check --baseline "$root/leaderboard/reference.json" \
        --record "$out/gate-device.json" > "$out/gate.log" 2>&1; echo "gate rc $?" >> "$out/gate.log" ) &
    gate=$!
fi
left=$((budget - ($(date +%s) - start) - 25))
export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}
sweep() {  # JOBS runs side by side, then (while budget is left) one at a time: what failed for memory
    local left=$((budget - ($(date +%s) - start) - 25))
    [ "$left" -gt 30 ] || return 0
    timeout -k 20 "$left" $py -m narbench sweep "$grid" --profile "$profile" --device "$device" --jobs "$1" \
        --threads "$2" --out "$work" --results "$root/leaderboard/results" ${SWEEP_ARGS:-} 2>&1 | tee -a "$out/sweep.log"
    echo "sweep (jobs $1) rc ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s" | tee -a "$out/sweep.log"
}
sweep "$jobs" "$threads"
grep -q '^failed' "$out/sweep.log" && sweep 1 "$((jobs * threads))"
[ -n "${gate:-}" ] && wait "$gate"   # bounded by its own timeout
[ -n "${smi:-}" ] && kill "$smi" 2>/dev/null
# results with their sidecars (and the runs' logs) as one file: a device machine hands back at most 8 files,
# 64 MiB in all. Snapshots go in a file of their own, so that they can never push a result out: on 2026-11-30
# ten paper-profile snapshots (22 MB a run) made a 77 MB tar, cut in six parts; the part that did not come
# back sat in the middle, and five of the six results after it had to be dug out of the tail by hand
# (benchmarks/results/paper-sweep-h200-2026-11-30-real23).
tar -C "$work" -czf "$out/results.tar.gz" --exclude=.snapshots --exclude=.sweep/claims --exclude="*.embeddings.npz" .
echo "results: $(tar -tzf "$out/results.tar.gz" | grep -c '[0-9]Z\.json$') result files, $(du -h "$out/results.tar.gz" | cut -f1)"
if [ -n "${KEEP_SNAPSHOTS:-}" ] && [ -d "$work/.snapshots" ]; then
    # the snapshots of runs still going, for a later lease to resume from (`narbench sweep` resumes a run from its
    # last finished epoch; unpack into its --out); only as many as fit SNAPSHOT_MIB (default 40) beside the rest
    tar -C "$work" -czf "$out/snapshots.tar.gz" .snapshots
    size=$(( $(stat -c %s "$out/snapshots.tar.gz") / 1048576 ))
    if [ "$size" -gt "${SNAPSHOT_MIB:-40}" ]; then
        echo "snapshots: ${size} MiB, over SNAPSHOT_MIB=${SNAPSHOT_MIB:-40}: not kept (a device call returns 64 MiB in all)"
        rm "$out/snapshots.tar.gz"
    elif [ "$size" -ge 15 ]; then  # a returned file is capped at 16 MiB: parts, joined by `cat snapshots.tar.gz.* | tar -xz`
        split -d -b 15M "$out/snapshots.tar.gz" "$out/snapshots.tar.gz." && rm "$out/snapshots.tar.gz"
        echo "snapshots: ${size} MiB in $(ls "$out"/snapshots.tar.gz.* | wc -l) parts of at most 15 MiB"
    fi
fi
rm -rf "$work"
