#!/usr/bin/env bash
# The PyTorch package's measurements (docs/pytorch.md, "Results"), on a fresh Debian machine:
#   0. torch's environment and the package as scripts/test-torch.sh makes them (no tests), and paro-run +
#      paro-bench (Release, build/);
#   1. python/bench/bench_torch.py: every method a trainer calls (all_reduce, all_gather_into_tensor,
#      reduce_scatter_tensor, all_to_all_single even and uneven, broadcast, reduce, gather, scatter,
#      batch_isend_irecv) through torch.distributed on paro and on gloo, the first three also on the same
#      paro communicator without torch's layer, interleaved, 4 local processes, 1 MiB .. 256 MiB, the
#      slowest rank's time; paro-bench (ucx) for the same sizes;
#   2. python/bench/separate_hook_train.py: DDP on 4 processes, the default all-reduce against separate_hook
#      at ratios 16 and 32 with Adam, G-SEPARATE at 32, and SGD with momentum at 16 and 32, from the same
#      initial weights and batches;
#   3. plots (Debian's python3-matplotlib).
# Tables, JSON and plots go to results/torch/ (PARO_TORCH_RESULTS); step 1 alone takes about 7 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${PARO_TORCH_RESULTS:-results/torch}
venv=${PARO_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/paro/venv-torch}
PARO_TORCH_STAGES=none scripts/test-torch.sh
"$venv/bin/python" -c 'import sklearn' 2>/dev/null || "$venv/bin/pip" install --quiet --progress-bar off scikit-learn
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPARO_WITH_CUDA=OFF >/dev/null
cmake --build build -j "${PARO_JOBS:-2}" --target paro-bench paro-run
mkdir -p "$out"
root=$PWD
cd python/bench  # not python/: `import paro_torch` must find the installed package
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
"$venv/bin/python" bench_torch.py --procs 4 --min 1M --max 256M --rounds 5 --iters 5 --paro-bench "$root/build/bin" \
  --json "$root/$out/torch-bench.json" --markdown "$root/$out/torch-bench.md"
train() {  # train NAME ARGS...: one separate_hook_train.py run, its table and curves
  local name=$1
  shift
  "$venv/bin/python" separate_hook_train.py --procs 4 --steps 300 "$@" --json "$root/$out/$name.json" |
    tee "$root/$out/$name.md"
}
train separate-train --ratios 16 32                        # Adam
train separate-train-adaptive --ratios 32 --adaptive       # G-SEPARATE
train separate-train-sgd --ratios 16 32 --optimizer sgd    # SGD with momentum
/usr/bin/python3 plot.py bench "$root/$out/torch-bench.json" -o "$root/$out/torch-busbw.png"
/usr/bin/python3 plot.py train "$root/$out"/separate-train{,-adaptive,-sgd}.json -o "$root/$out/separate-hook-loss.png"
echo "bench-torch: tables and plots in $out/"
