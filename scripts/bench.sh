#!/usr/bin/env bash
# The main job: builds paro-bench and compares every algorithm on the in-process threads backend
# (8 ranks), for all-reduce, all-gather and reduce-scatter, 1 KiB to 16 MiB. Prints nccl-tests tables
# and ratios, and writes JSON records and a plot to results/ (RESULTS_DIR overrides). Extra arguments go to
# every paro-bench call (e.g. -t 16 -e 64M). Exit status is non-zero if any value was wrong.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "${PARO_JOBS:-2}" --target paro-bench
out=${RESULTS_DIR:-results}
mkdir -p "$out"
status=0
for coll in all_reduce all_gather reduce_scatter; do
  build/bin/paro-bench --backend threads -t 8 --coll "$coll" --algo all -b 1K -e 16M -f 4 -n 10 -w 3 \
    --json "$out/threads-$coll.json" "$@" || status=1
done
/usr/bin/python3 bench/plot.py "$out"/threads-*.json -o "$out/threads-busbw.png" --title "paro-bench, algorithms side by side"
exit $status
