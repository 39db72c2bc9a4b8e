#!/usr/bin/env bash
# SEPARATE's measurements (docs/compression.md), on the threads backend with emulated links:
#   1. micro-benchmarks: the shared-seed generator, and the projection / reconstruction with R generated
#      in the call, side by side with a plain sgemm of the same shape (paro-micro, Google Benchmark);
#   2. 2 ranks as 2 nodes (one rank per core) joined by a link paced at 1 Gbit/s: a 64 MiB f32 gradient
#      (16384 x 1024) all-reduced plainly (ring, tree, automatic) and compressed at ratio 32 (full and
#      block-diagonal projections), every cost included; then without error feedback, and without overlap;
#   3. the same at 8 ranks as 2 nodes x 4 (20 Gbit/s intra, one shared 1 Gbit/s NIC per node).
# One BLAS thread per rank (OPENBLAS_NUM_THREADS=1): the ranks already occupy the cores. Writes tables and
# JSON to results/separate/ (RESULTS_DIR overrides). About 6 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPARO_WITH_CUDA=OFF >/dev/null
cmake --build build -j "${PARO_JOBS:-2}" --target paro-bench paro-micro
out=${RESULTS_DIR:-results}/separate
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=1
compressed() { build/bin/paro-bench --coll compressed_all_reduce --ratio 32 --shape 16384x1024 -w 1 "$@"; }
two="nodes=2,ranks=1,inter_gbps=1"
eight="nodes=2,ranks=4,intra_gbps=20,inter_gbps=1,nic=shared"

echo "== 1. micro-benchmarks (one core)"
build/bin/paro-micro --benchmark_min_time=0.5 --benchmark_out="$out/micro.json" --benchmark_out_format=json |
  tee "$out/micro.txt"

echo "== 2. 2 ranks as 2 nodes, 1 Gbit/s"
compressed -t 2 --emulate "$two" --algo ring,tree,automatic --block-cols 0,256,128 -n 3 --rounds 5 \
  --json "$out/two-ranks.json" | tee "$out/two-ranks.txt"
compressed -t 2 --emulate "$two" --algo tree --block-cols 0,256 -n 3 --rounds 5 --no-error-feedback \
  --json "$out/two-ranks-no-ef.json" | tee "$out/two-ranks-no-ef.txt"
compressed -t 2 --emulate "$two" --algo tree --block-cols 0,256 -n 3 --rounds 5 --separate-chunk 0 \
  --json "$out/two-ranks-no-overlap.json" | tee "$out/two-ranks-no-overlap.txt"

echo "== 3. 8 ranks as 2 nodes x 4"
compressed -t 8 --emulate "$eight" --algo ring,paro_cc,automatic --block-cols 0,256 -n 2 --rounds 3 \
  --json "$out/eight-ranks.json" | tee "$out/eight-ranks.txt"
