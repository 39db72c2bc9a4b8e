#!/usr/bin/env bash
# SEPARATE end to end (docs/compression.md, "Time to the same loss"), on a fresh Debian machine:
#   0. torch's environment and the package as scripts/test-torch.sh makes them (no tests);
#   1. python/bench/time_to_target.py under torchrun, 2 nodes x 2 processes on the paro backend's emulated
#      links at 1 and at 10 Gbit/s between nodes: train_lm.py's byte-level GPT trained with DDP in fp32, with
#      torch's bf16 compression hook, with PowerSGD (rank matched to SEPARATE's bytes at ratio 16), and with
#      separate_hook at ratios 8, 16 and 32 and G-SEPARATE at 32, the same weights and batches, 300 steps;
#      time to the fp32 run's final loss, the loss at its wall time, bytes per step, SEPARATE's time split;
#   2. the plot of loss against wall time (Debian's python3-matplotlib).
# Tables, JSON and the plot go to results/separate/ (PARO_SEPARATE_RESULTS); STEPS overrides 300.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${PARO_SEPARATE_RESULTS:-results/separate}
venv=${PARO_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/paro/venv-torch}
PARO_TORCH_STAGES=none scripts/test-torch.sh
mkdir -p "$out"
root=$PWD
cd python/bench  # not python/: `import paro_torch` must find the installed package
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 PARO_TRACE=1
for gbps in 1 10; do
  PARO_EMULATE=nodes=2,ranks=2,inter_gbps=$gbps "$venv/bin/torchrun" --standalone --nproc-per-node 4 \
    time_to_target.py --steps "${STEPS:-300}" --json "$root/$out/time-to-target-${gbps}g.json" |
    grep -v '^# [a-z]*[0-9:]*: ' | tee "$root/$out/time-to-target-${gbps}g.md"
done
/usr/bin/python3 plot.py ttt "$root/$out"/time-to-target-{1,10}g.json -o "$root/$out/time-to-target.png"
echo "bench-time-to-target: tables and the plot in $out/"
