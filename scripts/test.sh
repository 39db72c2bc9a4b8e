#!/usr/bin/env bash
# Builds and runs every test of paro on a fresh machine (Debian, root or sudo):
#   0. the include layering check (scripts/check-includes.py), the format check (scripts/format.sh) and the
#      check that docs, scripts and comments speak of the library only (scripts/check-references.py);
#   1. the Release build: unit tests, threads tests at 1..16 ranks, mpirun at 2/3/4/8 ranks, the C++20 check;
#   2. an ASan+UBSan build of the unit, threads and SEPARATE tests, and a TSan build of the threads tests (the mpi
#      and ucx tests stay in step 1: their libraries' own threads and allocations would drown the reports);
#      the libFuzzer targets of every parser of outside input, 15 s each from their seed corpora (scripts/fuzz.sh);
#   3. `cmake --install` and two consumer projects, one with find_package(paro), one with add_subdirectory;
#   4. where nvcc is found: the CUDA targets compiled and linked, the GPU tests run (they skip without a GPU),
#      scripts/gpu-check.sh's verdicts checked (tests/gpu_check_test.sh);
#   5. paro-bench built against SimGrid's SMPI and run on 16 simulated ranks (bench/sim/run --tiny), and the scale
#      study's committed records checked: every simulated time at or above its lower bound;
#   6. the PyTorch package (scripts/test-torch.sh: torch in a virtual environment made once per machine, the
#      extension built, its tests against gloo, a selection of torch's own distributed tests, mpirun).
# Ends with one line "stages: N passed, M failed" over those stages. PARO_JOBS sets build parallelism (2).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=${PARO_JOBS:-2}
passed=0
failed=0
failures=()

stage() {  # stage NAME COMMAND...: runs a stage, counts it, keeps going so that one failure shows all
  local name=$1
  shift
  echo "=== $name"
  local start=$SECONDS
  if "$@"; then
    passed=$((passed + 1))
    echo "=== $name: passed ($((SECONDS - start)) s)"
  else
    failed=$((failed + 1))
    failures+=("$name")
    echo "=== $name: FAILED ($((SECONDS - start)) s)"
  fi
}

./scripts/install-deps.sh || exit 1
export PATH="/usr/local/cuda/bin:$PATH"  # the CUDA toolkit is preinstalled there, not a Debian package
# ccache keeps the objects of earlier runs (under ~/.cache/ccache): a change to the tests or the docs alone
# then rebuilds little. CCACHE_BASEDIR makes its keys relative, so clones at other paths share them.
export CCACHE_BASEDIR=$root
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

# The layers of include/paro point one way (docs/architecture.md), and the sources keep .clang-format's layout.
stage "include layering" python3 scripts/check-includes.py
stage "format" scripts/format.sh --check
# No tracker numbers, outside paths or private tools in the tree's text (and the check itself catches one).
references() { python3 scripts/check-references.py --self-test && python3 scripts/check-references.py; }
stage "references (docs speak of the library only)" references

main_build() {
  # CUDA is built once, in its own stage below.
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPARO_WITH_CUDA=OFF "${launcher[@]}" >/dev/null &&
    cmake --build build -j "$jobs"
}
stage "release build" main_build || true
# Two at a time: the multi-rank tests spend much of their time waiting on each other's messages.
stage "ctest (unit, threads 1..16 ranks, mpirun 2/3/4/8, C++20)" ctest --test-dir build --output-on-failure -j "$jobs"

sanitizer_build() {  # sanitizer_build DIR KIND OPTIMISATION TARGET...: those targets DIR's configuration has
  local dir=$1 kind=$2 flags=$3 targets=() target
  shift 3
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="$flags" -DPARO_SANITIZE="$kind" \
    -DPARO_BUILD_BENCH=OFF -DPARO_BUILD_EXAMPLES=OFF -DPARO_WITH_MPI=OFF -DPARO_WITH_UCX=OFF -DPARO_WITH_CUDA=OFF \
    "${launcher[@]}" >/dev/null || return 1
  for target in "$@"; do
    if grep -q "$target:" "$dir/build.ninja"; then targets+=("$target"); fi
  done
  cmake --build "$dir" -j "$jobs" --target "${targets[@]}"
}
# The multi-MiB cases (Sizes/*, HierarchicalLarge.*, the 1.5 MiB jobs of Reproducible.*) and the calibration's
# sweep of every algorithm over sizes up to MiBs (Calibrate.*: 124 s of the TSan stage's 684 s) add minutes
# under sanitizers and no new interleavings: the tiny-chunk, small-count and lane tests cover the same code. For the same reason the
# matrices run three data types and three ops there (PARO_TEST_MATRIX=reduced), all of them above.
sanitized_tests() {  # sanitized_tests DIR: the test programs that DIR has
  if [ -x "$1/bin/paro-tests-core" ]; then "$1/bin/paro-tests-core" --gtest_brief=1 || return 1; fi
  PARO_TEST_MATRIX=reduced PARO_TIMEOUT=600 "$1/bin/paro-tests-threads" --gtest_brief=1 \
    --gtest_filter='-Sizes/*:HierarchicalLarge.*:Reproducible.*:Calibrate.*' || return 1
  if [ -x "$1/bin/paro-tests-separate" ]; then
    OPENBLAS_NUM_THREADS=1 PARO_TIMEOUT=600 "$1/bin/paro-tests-separate" --gtest_brief=1 || return 1
  fi
}
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
# ASan at -O1 -g1 builds in half the time of -O2 -g with the same findings; TSan keeps -O2, where its
# run time, not the build, dominates. ASan+UBSan takes the host code: core, the threads backend and
# every algorithm over it, SEPARATE; TSan the threads backend, where paro's own threads meet (lanes,
# progress, nonblocking verbs, faults). The ucx and mpi backends run in the release stage: their
# libraries' own threads and allocations would drown the sanitizers' reports.
stage "ASan+UBSan build" sanitizer_build build-asan address "-O1 -g1" paro-tests-core paro-tests-threads \
  paro-tests-separate
stage "ASan+UBSan tests" sanitized_tests build-asan
stage "TSan build" sanitizer_build build-tsan thread "-O2 -g" paro-tests-threads
stage "TSan tests" sanitized_tests build-tsan
stage "fuzz targets (libFuzzer + ASan/UBSan, 15 s each)" scripts/fuzz.sh 15

consumers() {
  rm -rf build/install build/consumer-find build/consumer-subdir
  cmake --install build --prefix build/install >/dev/null &&
    cmake -S tests/consumer -B build/consumer-find -G Ninja -DPARO_CONSUMER_MODE=find \
      -DCMAKE_PREFIX_PATH="$root/build/install" >/dev/null &&
    cmake --build build/consumer-find && build/consumer-find/paro-consumer &&
    cmake -S tests/consumer -B build/consumer-subdir -G Ninja -DPARO_CONSUMER_MODE=subdirectory \
      -DPARO_SOURCE_DIR="$root" >/dev/null &&
    cmake --build build/consumer-subdir && build/consumer-subdir/paro-consumer
}
stage "install + find_package and add_subdirectory consumers" consumers

# CUDA: nvcc compiles every GPU header (the GPU tests include them all) and links the GPU tests and the
# benchmarks (paro-bench-cuda, the kernels benchmark); without a GPU every GPU test reports SKIPPED. Then
# scripts/gpu-check.sh runs on this tree (tests/gpu_check_test.sh), configured with its options so that it
# rebuilds nothing.
cuda_stage() {
  cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DPARO_CUDA_ONLY=ON -DPARO_WITH_MPI=OFF \
    -DPARO_WITH_UCX=OFF "${launcher[@]}" >/dev/null &&
    cmake --build build-cuda -j "$jobs" --target paro-tests-gpu paro-cuda-kernels-bench paro-bench-cuda &&
    build-cuda/bin/paro-tests-gpu --gtest_brief=1 && build-cuda/bin/paro-cuda-kernels-bench &&
    PARO_JOBS=$jobs tests/gpu_check_test.sh build-cuda
}
if command -v nvcc >/dev/null; then
  stage "CUDA compile + link (GPU tests skip)" cuda_stage
else
  echo "=== CUDA compile + link: skipped, nvcc not found"
fi

# The scale study's build and one tiny simulation, so that the SMPI path cannot rot (bench/sim/run); then
# the study's committed records again: tables, and every simulated time at or above its lower bound.
sim_stage() {
  bench/sim/run --tiny --out build-smpi/ci && bench/sim/run --report docs/data/sim-results.json --out build-smpi/report &&
    bench/sim/run --report docs/data/sim-all-to-all.json --out build-smpi/report-all-to-all
}
stage "SimGrid SMPI build + 16 simulated ranks + the study's bounds" sim_stage

stage "PyTorch: the paro backend, separate_hook, FSDP (scripts/test-torch.sh)" scripts/test-torch.sh

if ((failed)); then printf 'failed stage: %s\n' "${failures[@]}"; fi
echo "stages: $passed passed, $failed failed"
((failed == 0))
