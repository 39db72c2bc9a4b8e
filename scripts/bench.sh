#!/usr/bin/env bash
# The main job: builds paro-bench and compares every algorithm (ring, tree, mics_hcs, paro_seq, paro_cc,
# automatic) on an emulated cluster of the in-process threads backend: 8 ranks as 2 nodes x 4, intra-node
# links paced at 20 Gbit/s per rank, one 2 Gbit/s NIC shared per node (PARO_BENCH_EMULATE overrides).
#   1. calibrates the cost model on that cluster (results/cost.json, used as PARO_COST_FILE below)
#   2. all three collectives at 64 MiB, side by side, with a Chrome trace of one call per algorithm
#   3. a sweep 1 KiB .. 256 MiB, and whether automatic picked within 10% of the fastest at every size
# Prints nccl-tests tables, lower bounds and ratios; writes JSON, traces and plots to results/ (RESULTS_DIR
# overrides). Another cluster: PARO_BENCH_EMULATE, PARO_BENCH_RANKS (default 8) and PARO_BENCH_MAX (the
# sweep's largest size, default 256M). Extra arguments go to every paro-bench call. Exit status non-zero if
# any value was wrong.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPARO_WITH_CUDA=OFF >/dev/null
cmake --build build -j "${PARO_JOBS:-2}" --target paro-bench
out=${RESULTS_DIR:-results}
mkdir -p "$out"
emulate=${PARO_BENCH_EMULATE:-nodes=2,ranks=4,intra_gbps=20,inter_gbps=2,nic=shared}
ranks=${PARO_BENCH_RANKS:-8}
largest=${PARO_BENCH_MAX:-256M}
bench() { build/bin/paro-bench --backend threads -t "$ranks" --emulate "$emulate" "$@"; }
status=0

echo "== 1. calibration on $emulate"
bench --calibrate "$out/cost.json" "$@"
export PARO_COST_FILE=$out/cost.json

echo "== 2. 64 MiB, every algorithm side by side"
bench --coll all --algo all -b 64M -e 64M -n 3 -w 1 --json "$out/emulated-64M.json" --trace "$out/trace-64M.json" "$@" || status=1

echo "== 3. sweep 1 KiB .. $largest"
# Sizes to 16 MiB: rounds of calls that interleave the algorithms, each row its median round, so that a
# neighbour's burst on a shared machine slows one round, not an algorithm's row (on the 16-rank 3-level
# cluster, single calls of paro_cc's all-reduce of 4 MiB took 27.8 to 33.4 ms within a minute). Up to
# 1 MiB 5 rounds of 8 calls; 4 and 16 MiB 3 rounds of 2; from 64 MiB, where one call takes 0.1-1 s, one
# round of 2.
largest_bytes=$(numfmt --from=iec "$largest")
sweep() {  # sweep <json> <from> <to> paro-bench options...: the part of from..to up to the largest size
  local json=$1 from=$2 to
  to=$(numfmt --from=iec "$3")
  shift 3
  if (($(numfmt --from=iec "$from") <= largest_bytes)); then
    sweeps+=("$json")
    bench --coll all --algo all -b "$from" -e $((to < largest_bytes ? to : largest_bytes)) -f 4 --json "$json" "$@" ||
      status=1
  fi
}
sweeps=()
sweep "$out/emulated-small.json" 1K 1M -n 8 -w 2 --rounds 5 "$@"
sweep "$out/emulated-medium.json" 4M 16M -n 2 -w 1 --rounds 3 "$@"
sweep "$out/emulated-large.json" 64M "$largest" -n 2 -w 1 "$@"
/usr/bin/python3 bench/auto_check.py "${sweeps[@]}" | tee "$out/auto-check.md" || true

/usr/bin/python3 bench/plot.py "${sweeps[@]}" -o "$out/emulated-busbw.png" \
  --title "${PARO_BENCH_EMULATE:+$ranks ranks, $emulate}${PARO_BENCH_EMULATE:-2 nodes x 4 ranks, 20 Gbit/s intra, one 2 Gbit/s NIC per node}"
/usr/bin/python3 bench/trace_plot.py "$out/trace-64M.json" -o "$out/trace-64M.png" \
  --match "all_gather paro_seq 67108864" --match "all_gather paro_cc 67108864" \
  --match "all_reduce paro_seq 67108864" --match "all_reduce paro_cc 67108864"
exit $status
