#!/usr/bin/env bash
# PaRO-DP under PyTorch, measured (docs/paro-dp.md, "paro_torch.dp measured"), on a fresh Debian machine:
#   0. torch's environment and the package as scripts/test-torch.sh makes them (no tests);
#   1. python/bench/train_lm.py under torchrun: a 4.9 M-parameter byte-level GPT on Debian's fortunes, on the
#      paro backend's emulated links (PARO_EMULATE, intra 96 : inter 1 Gbit/s per rank, the ratio of the
#      paper's cluster as paro-advise describes it), as 2 nodes x 2 processes and 2 x 4: DDP, FSDP2 (GGG) and
#      HSDP (III) with flat ring collectives and with paro's automatic ones, and the 14 paro_torch.dp
#      strategies; 3 interleaved rounds of 4 measured steps, the slowest rank's time, the median round; the
#      advisor (paro_torch.dp.advise, calibrated on the same processes) beside each strategy;
#   2. the plot of step time against state bytes per rank (Debian's python3-matplotlib).
# Tables, JSON and the plot go to results/dp/ (PARO_DP_RESULTS); about 12 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${PARO_DP_RESULTS:-results/dp}
venv=${PARO_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/paro/venv-torch}
PARO_TORCH_STAGES=none scripts/test-torch.sh
mkdir -p "$out"
root=$PWD
cd python/bench  # not python/: `import paro_torch` must find the installed package
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 PARO_TRACE=1
for ranks in 2 4; do
  PARO_EMULATE=nodes=2,ranks=$ranks,intra_gbps=96,inter_gbps=1 "$venv/bin/torchrun" --standalone \
    --nproc-per-node $((2 * ranks)) train_lm.py --rounds 3 --advise --json "$root/$out/train-lm-2x$ranks.json" |
    grep -v '^# round' | tee "$root/$out/train-lm-2x$ranks.md"
done
/usr/bin/python3 plot.py dp "$root/$out"/train-lm-2x{2,4}.json -o "$root/$out/paro-dp-step-vs-memory.png"
echo "bench-dp: tables and the plot in $out/"
