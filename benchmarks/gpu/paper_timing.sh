#!/usr/bin/env bash
# Wall time of gcn, gat and ours at the `paper` profile on nas and real (SEEDS, default 0), one after another,
# on one GPU (issue 42's goal: the six runs in <= 15 min on one H100), with the GPU's utilisation
# sampled every 2 s beside them (where it waits). Prints one line per run; the result files (with their per-query sidecars) go to
# OUT/results.tar.gz, the GPU samples to OUT/gpu-util.csv, the runs' output to OUT/runs.log.
#
#   bash benchmarks/gpu/paper_timing.sh OUT [BUDGET_S]      # PROFILE=paper DEVICE=cuda by default
#   PROFILE=smoke DEVICE=cpu bash benchmarks/gpu/paper_timing.sh /tmp/t 120   # a dry run on a CPU
#
# A device machine gets the working tree without .git: pass the commit, NARBENCH_GIT_COMMIT=$(git
# rev-parse HEAD) here, so the result files record it (the runner reads git where there is one).
#
# Measured 2026-11-26 on one H200 (torch 2.11.0+cu130, 16 cores, nothing cached but the nas graphs):
# the six seed-0 runs took 316 s (nas gcn 54, gat 38, ours 94; real gcn 42, gat 49, ours 39; the
# first run pays ranx's numba compilation, ~11 s); the GPU was busy 19% of the samples on average
# and idle in 48% of them: the runs are bound by batching graphs on the CPU, not by the GPU.
#
# Runs stop at the budget (the one in flight is killed and reported as such); each run's time
# includes loading the dataset and, for ours, splitting graphs not in the parts cache.
set -uo pipefail
out=${1:?usage: paper_timing.sh OUT [BUDGET_S]}
budget=${2:-480}
profile=${PROFILE:-paper}
datasets=${DATASETS:-nas real}
seeds=${SEEDS:-0}
device=${DEVICE:-cuda}
py=${PYTHON:-python3}
export NARBENCH_GIT_COMMIT=${NARBENCH_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null)}
mkdir -p "$out"
work=$(mktemp -d)
start=$(date +%s)
$py -c "import torch, platform; print('torch', torch.__version__, 'cuda', torch.cuda.is_available() and torch.cuda.get_device_name(0), 'python', platform.python_version())"
if [ "$device" != cpu ] && command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 2 > "$out/gpu-util.csv" 2>&1 &
    smi=$!
fi
printf 'dataset\tencoder\tseed\trc\twall_s\n'
for seed in $seeds; do
for ds in $datasets; do
    for enc in gcn gat ours; do
        left=$((budget - ($(date +%s) - start)))
        if [ "$left" -lt 15 ]; then printf '%s\t%s\t%s\tskipped\t-\n' "$ds" "$enc" "$seed"; continue; fi
        t0=$(date +%s.%N)
        timeout "$left" $py -m narbench run --profile "$profile" --encoder "$enc" --dataset "$ds" \
            --device "$device" --seed "$seed" --out "$work" --no-progress >>"$out/runs.log" 2>&1
        rc=$?
        printf '%s\t%s\t%s\t%s\t%.1f\n' "$ds" "$enc" "$seed" "$([ $rc = 124 ] && echo timeout || echo $rc)" \
            "$(awk "BEGIN{print $(date +%s.%N) - $t0}")"
    done
done
done
[ -n "${smi:-}" ] && kill "$smi" 2>/dev/null
# result files with their per-query sidecars (the leaderboard needs both), as one file: a device
# machine hands back at most 8 files
tar -C "$work" -czf "$out/results.tar.gz" --exclude=.snapshots .
rm -rf "$work"
