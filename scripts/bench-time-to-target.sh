#!/usr/bin/env bash
# SEPARATE end to end (docs/compression.md, "Time to the same loss under PyTorch"), on a fresh Debian machine:
#   0. torch's environment and the package as scripts/test-torch.sh makes them (no tests);
#   1. time to the same loss: python/bench/time_to_target.py under torchrun, 2 nodes x 2 processes on the paro
#      backend's emulated links at 1 and at 10 Gbit/s between nodes: train_lm.py's byte-level GPT trained with
#      DDP in fp32, with torch's bf16 compression hook, with PowerSGD (rank matched to SEPARATE's bytes at
#      ratio 16), with separate_hook at ratios 8, 16 and 32 (and 16 block-diagonal, b = 64) and G-SEPARATE at
#      32, from the same weights on the same batches, AdamW; 300 steps, a run that has not reached fp32's
#      final loss by then goes on up to 450; time to fp32's loss, the loss at its wall time, bytes per step,
#      the hook's time split;
#   2. quality: the loss after 300 steps, unpaced (the links do not change it), AdamW and SGD (momentum 0.9,
#      lr 0.1) at ratios 16 and 32 with the defaults, block-diagonal b = 64, beta 0.99 and 30 plain steps;
#   3. the plot of loss against wall time (Debian's python3-matplotlib).
# Tables, JSON and the plot go to results/separate/ (PARO_SEPARATE_RESULTS); STEPS overrides 300; QUALITY=0
# skips step 2. About 35 minutes for step 1 and 45 for step 2 on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${PARO_SEPARATE_RESULTS:-results/separate}
venv=${PARO_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/paro/venv-torch}
PARO_TORCH_STAGES=none scripts/test-torch.sh
mkdir -p "$out"
root=$PWD
cd python/bench  # not python/: `import paro_torch` must find the installed package
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
steps=${STEPS:-300}
train() {  # train NAME ARGS...: one time_to_target.py run, its table in NAME.md and its records in NAME.json
  local name=$1
  shift
  "$venv/bin/torchrun" --standalone --nproc-per-node 4 time_to_target.py --steps "$steps" \
    --json "$root/$out/$name.json" "$@" | grep -v '^# [a-z]*[0-9:b]*: ' | tee "$root/$out/$name.md"
}
for gbps in 1 10; do
  PARO_TRACE=1 PARO_EMULATE=nodes=2,ranks=2,inter_gbps=$gbps train "time-to-target-${gbps}g"
done
if [ "${QUALITY:-1}" != 0 ]; then
  for opt in adamw sgd; do
    train "quality-$opt" --patience 1 --optimizer "$opt" --methods fp32,separate:16,separate:32,separate:16:b64,separate:32:b64
    train "quality-$opt-beta99" --patience 1 --optimizer "$opt" --methods fp32,separate:16,separate:32 --beta 0.99
    train "quality-$opt-warm30" --patience 1 --optimizer "$opt" --methods fp32,separate:16,separate:32 --warm-up 30
  done
fi
/usr/bin/python3 plot.py ttt "$root/$out"/time-to-target-{1,10}g.json -o "$root/$out/time-to-target.png"
echo "bench-time-to-target: tables and the plot in $out/"
