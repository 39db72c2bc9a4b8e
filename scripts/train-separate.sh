#!/usr/bin/env bash
# paro-train with SEPARATE, side by side from the same start: 8 thread ranks as 2 nodes x 4, NNN, the
# same data and steps, uncompressed and with the gradient synchronisation through SEPARATE at ratio 32:
# the beta_on_residual error rule (the SEPARATE paper's), the smoothed one, no error feedback, the smoothed
# rule with the block-diagonal projection, and G-SEPARATE. Writes JSON, a loss plot and a table to
# results/train/ (RESULTS_DIR overrides). STEPS (300) sets the length. About 4 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPARO_WITH_CUDA=OFF >/dev/null
cmake --build build -j "${PARO_JOBS:-2}" --target paro-train
out=${RESULTS_DIR:-results}/train
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=1
steps=${STEPS:-300}
train() { build/bin/paro-train --strategy NNN --steps "$steps" --log-every 50 "$@"; }

train --json "$out/uncompressed.json"
train --compress separate --ratio 32 --error-rule beta_on_residual --json "$out/separate-beta-on-residual.json"
train --compress separate --ratio 32 --error-rule smoothed --json "$out/separate-smoothed.json"
train --compress separate --ratio 32 --no-error-feedback --json "$out/separate-no-ef.json"
train --compress separate --ratio 32 --error-rule smoothed --block-cols 128 --json "$out/separate-smoothed-b128.json"
train --compress separate --ratio 32 --error-rule smoothed --adaptive --json "$out/separate-smoothed-adaptive.json"
/usr/bin/python3 bench/train_plot.py "$out"/uncompressed.json "$out"/separate-*.json -o "$out/separate-training.png" \
  --table "$out/table.md"
