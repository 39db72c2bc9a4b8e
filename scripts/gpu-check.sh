#!/usr/bin/env bash
# One-shot GPU check: builds paro's CUDA targets (Release, CUDA on, MPI only where found) and runs every GPU
# test, the PyTorch backend's tests on CUDA tensors where they exist, and a short GPU benchmark sweep, writing
# logs and summary.json to OUTDIR. Meant for one GPU machine, within the budget below; without a GPU every GPU
# test reports SKIPPED, the benchmarks are skipped, summary.json says "gpu": false with the reason, and the
# check is ok.
#   scripts/gpu-prepare.sh            # once, where GoogleTest/CLI11/nlohmann-json are installed; then copy the
#                                     # tree with third_party/ to the GPU machine (it needs no network access)
#   scripts/gpu-check.sh OUTDIR       # on the GPU machine; exit 0 when summary.json says "ok": true
# Every step runs under its own timeout (PARO_GPU_TIMEOUT_<STEP>, seconds), all of them within
# PARO_GPU_CHECK_BUDGET (540 s). summary.json is rewritten after every step (docs/gpu.md has its format).
# PARO_GPU_BUILD: the build folder (build-gpu); PARO_GPU_MPI=ON|OFF: MPI (default: ON where mpicxx is found);
# PARO_GPU_CHECK_REQUIRE_GPU=1: no usable GPU is a failure; PARO_GPU_CHECK_FAIL=STEP[:hang|:crash],...: make
# those steps fail, hang or crash on purpose, to see it reported (tests/gpu_check_test.sh).
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: scripts/gpu-check.sh OUTDIR" >&2; exit 2; }
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$1"
out=$(cd "$1" && pwd)
export PATH="/usr/local/cuda/bin:$PATH"
build=${PARO_GPU_BUILD:-build-gpu}
jobs=${PARO_JOBS:-$(nproc)}
budget=${PARO_GPU_CHECK_BUDGET:-540}  # 540 s by default, so that the check fits a 10-minute job slot
mpi=${PARO_GPU_MPI:-$(command -v mpicxx >/dev/null && echo ON || echo OFF)}
plan=(configure build kernels tests torch busbw_all_reduce busbw_all_gather busbw_reduce_scatter busbw_separate
  busbw_nccl)

# A previous run's files must not pass for this one's (a stale tests.json would hide a crash).
rm -f "$out"/{summary,kernels,tests}.json "$out"/busbw_*.json "$out"/*.log "$out"/{plan.txt,steps.tsv,nvidia-smi.txt}
printf '%s\n' "${plan[@]}" >"$out/plan.txt"
timeout -k 5 30 nvidia-smi -L >"$out/nvidia-smi.txt" 2>&1
ngpu=$(grep -c '^GPU ' "$out/nvidia-smi.txt")

record() {  # record NAME KIND RC SECONDS LIMIT REASON: one line of steps.tsv, then summary.json again
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$out/steps.tsv"
  python3 scripts/gpu_summary.py "$out"
}
skip() {  # skip NAME REASON
  echo "=== $1: skipped ($2)"
  record "$1" skipped "" "" "" "$2"
}
finish() {  # finish [REASON]: the steps not recorded yet are not run (for REASON), then the verdict and exit
  local name
  for name in "${plan[@]}"; do
    grep -q "^$name"$'\t' "$out/steps.tsv" || record "$name" not_run "" "" "" "${1:-not run}"
  done
  python3 scripts/gpu_summary.py "$out" --final
  exit
}
step() {  # step NAME DEFAULT_LIMIT COMMAND...: runs COMMAND under timeout, logs to OUTDIR/NAME.log, records it
  local name=$1 var="PARO_GPU_TIMEOUT_${1^^}" start=$SECONDS rc secs
  local limit=${!var:-$2} left=$((budget - SECONDS))
  shift 2
  if ((left < 10)); then
    record "$name" not_run "" "" "" "the check's budget of $budget s (PARO_GPU_CHECK_BUDGET) was spent"
    return 1
  fi
  ((limit <= left)) || limit=$left
  case ",${PARO_GPU_CHECK_FAIL:-}," in
    *",$name,"*) set -- sh -c 'echo "PARO_GPU_CHECK_FAIL: failing on purpose" >&2; exit 3' ;;
    *",$name:hang,"*) set -- sleep $((limit + 60)) ;;
    *",$name:crash,"*) set -- sh -c 'ulimit -c 0; kill -SEGV $$' ;;
  esac
  echo "=== $name (limit $limit s)"
  # timeout signals the whole process group it leads, so nvcc under ninja or a test's threads go too.
  timeout -k 10 "$limit" "$@" >"$out/$name.log" 2>&1
  rc=$? secs=$((SECONDS - start))
  record "$name" ran "$rc" "$secs" "$limit" ""
  echo "=== $name: exit $rc ($secs s)"
  tail -3 "$out/$name.log"
  return $rc
}

step configure 120 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPARO_CUDA_ONLY=ON \
  -DPARO_WITH_MPI="$mpi" -DPARO_WITH_UCX=OFF || finish "configure did not pass"
step build 420 cmake --build "$build" -j "$jobs" || finish "build did not pass"
bin=$build/bin

step kernels 60 "$bin/paro-cuda-kernels-bench" --json "$out/kernels.json"
step tests 180 env PARO_TIMEOUT=60 "$bin/paro-tests-gpu" --gtest_output="json:$out/tests.json"
# The PyTorch backend on CUDA tensors: the package built with CUDA and its CUDA tests, where the machine has
# scripts/test-torch.sh's torch environment (it cannot be downloaded from a machine without internet).
torch_venv=${PARO_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/paro/venv-torch}
if ! "$torch_venv/bin/python" -c 'import torch' 2>/dev/null; then
  skip torch "no torch environment at $torch_venv (scripts/test-torch.sh makes it; it needs PyPI)"
else
  step torch 300 env PARO_TORCH_CUDA=1 PARO_TORCH_STAGES=pytest PARO_TORCH_TESTS="-k cuda" PARO_TIMEOUT=60 \
    scripts/test-torch.sh
fi

# The benchmarks need a GPU: the kernels bench's word for it, or nvidia-smi's where that bench left none.
gpu=$(python3 -c 'import json, sys; print(int(json.load(open(sys.argv[1]))["gpu"]))' "$out/kernels.json" \
  2>/dev/null || echo $((ngpu > 0)))
for coll in all_reduce all_gather reduce_scatter; do
  if [ "$gpu" = 1 ]; then
    # Device-memory threads backend: 8 ranks on an emulated 2 x 4 cluster sharing the GPU(s), every algorithm.
    step "busbw_$coll" 90 env PARO_TIMEOUT=60 "$bin/paro-bench-cuda" --backend threads --device cuda -t 8 \
      --emulate nodes=2,ranks=4 --coll $coll --algo ring,tree,mics_hcs,paro_seq,paro_cc,automatic \
      -b 1M -e 64M -f 8 -n 10 -w 2 --json "$out/busbw_$coll.json"
  else
    skip "busbw_$coll" "no usable GPU"
  fi
done
# SEPARATE on the GPU (cuBLAS, device Philox) beside the plain all-reduce of the same 64 MiB gradient, 2 device
# ranks; where the build has it (Random123 found: scripts/gpu-prepare.sh copies it).
if [ "$gpu" != 1 ]; then
  skip busbw_separate "no usable GPU"
elif ! grep -q 'cuda_compression=ON' "$out/configure.log"; then  # configure's component line
  skip busbw_separate "built without SEPARATE on the GPU (Random123 not found; scripts/gpu-prepare.sh copies it)"
else
  step busbw_separate 90 env PARO_TIMEOUT=60 "$bin/paro-bench-cuda" --backend threads --device cuda -t 2 \
    --emulate nodes=2,ranks=1 --coll compressed_all_reduce --ratio 32 --shape 16384x1024 --algo ring,tree \
    --block-cols 0,128 -n 10 -w 2 --json "$out/busbw_separate.json"
fi
# NCCL (its own ring/tree as the native baseline, and paro's algorithms over it), one GPU per thread rank.
if [ "$gpu" != 1 ] || ((ngpu < 2)); then
  skip busbw_nccl "needs 2 GPUs or more; nvidia-smi lists $ngpu"
elif [ "$mpi" = ON ]; then
  skip busbw_nccl "built with MPI, where the nccl backend bootstraps under mpirun, not over -t thread ranks"
else
  step busbw_nccl 90 env PARO_TIMEOUT=60 "$bin/paro-bench-cuda" --backend nccl -t "$ngpu" --coll all \
    --algo native,ring,paro_cc -b 1M -e 64M -f 8 -n 10 -w 2 --json "$out/busbw_nccl.json"
fi
finish
