#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (ASan+UBSan) and runs each for SECONDS from its seed
# corpus (tests/fuzz/corpus/TARGET; what it finds goes to build-fuzz/corpus/TARGET, not into the repository).
#   scripts/fuzz.sh [SECONDS] [TARGET...]      (default: 15 s each, every target, as CI runs it)
# A crash, a sanitizer finding, an exception other than paro::Error, a 10 s input or 2 GiB of memory fails
# the run; the input that did it is kept in build-fuzz/artifacts/ (replay: build-fuzz/bin/TARGET FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-15}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=()
  for f in tests/fuzz/*_fuzz.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
clang=$(command -v clang++ || true)
[ -n "$clang" ] || { echo "fuzz: clang++ not found (Debian: clang)" >&2; exit 1; }
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER="$clang" -DPARO_BUILD_FUZZERS=ON \
  -DPARO_BUILD_TESTS=OFF -DPARO_BUILD_BENCH=OFF -DPARO_BUILD_EXAMPLES=OFF -DPARO_WITH_MPI=OFF -DPARO_WITH_UCX=OFF \
  -DPARO_WITH_CUDA=OFF >"${TMPDIR:-/tmp}/paro-fuzz-configure.log" 2>&1 ||
  { cat "${TMPDIR:-/tmp}/paro-fuzz-configure.log"; exit 1; }
# checkpoint_fuzz needs the compression component (BLAS, Random123); a target this configuration lacks is said
# and skipped.
present=()
for t in "${targets[@]}"; do
  if grep -q "build $t:" build-fuzz/build.ninja; then present+=("$t"); else echo "fuzz: $t: not configured here, skipped"; fi
done
targets=("${present[@]}")
cmake --build build-fuzz -j "${PARO_JOBS:-2}" --target "${targets[@]}"
mkdir -p build-fuzz/artifacts
for t in "${targets[@]}"; do
  name=${t%_fuzz}
  mkdir -p "build-fuzz/corpus/$name"
  log=build-fuzz/$t.log
  if ! build-fuzz/bin/"$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="build-fuzz/artifacts/$name-" "build-fuzz/corpus/$name" "tests/fuzz/corpus/$name" >"$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz: $t FAILED (log: $log; input in build-fuzz/artifacts/)" >&2
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  echo "fuzz: $t: $runs inputs in $seconds s, $cov, corpus $(ls "build-fuzz/corpus/$name" | wc -l) files, no failure"
done
