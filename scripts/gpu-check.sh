#!/usr/bin/env bash
# One-shot GPU check: builds paro's CUDA targets (Release, CUDA on, MPI only where found) and runs every GPU
# test and a short GPU benchmark sweep, writing logs and summary.json to OUTDIR. Meant for one H200 in a few
# minutes; without a GPU every test reports SKIPPED and summary.json says "gpu": false (exit 0).
#   scripts/gpu-prepare.sh            # once, where GoogleTest/CLI11/nlohmann-json are installed
#   scripts/gpu-check.sh OUTDIR       # on the GPU machine
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: scripts/gpu-check.sh OUTDIR" >&2; exit 2; }
cd "$(dirname "$0")/.."
mkdir -p "$1"
out=$(cd "$1" && pwd)
export PATH="/usr/local/cuda/bin:$PATH"
build=${PARO_GPU_BUILD:-build-gpu}
jobs=${PARO_JOBS:-$(nproc)}
status=0
step() {  # step NAME COMMAND...: logs to OUTDIR/NAME.log, records the exit code and the seconds
  local name=$1 start=$SECONDS
  shift
  echo "=== $name"
  "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "$name $rc $((SECONDS - start))" >>"$out/steps.txt"
  echo "=== $name: exit $rc ($((SECONDS - start)) s)"
  tail -3 "$out/$name.log"
  [ $rc -eq 0 ] || status=1
  return $rc
}
: >"$out/steps.txt"
mpi=OFF
command -v mpicxx >/dev/null && mpi=ON
step configure cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPARO_CUDA_ONLY=ON -DPARO_WITH_MPI=$mpi \
  -DPARO_WITH_UCX=OFF || { echo "configure failed: see $out/configure.log"; exit 1; }
step build cmake --build "$build" -j "$jobs" || { echo "build failed: see $out/build.log"; exit 1; }
bin=$build/bin

step kernels "$bin/paro-cuda-kernels-bench" --json "$out/kernels.json"
step tests env PARO_TIMEOUT=60 "$bin/paro-tests-gpu" --gtest_output="json:$out/tests.json"
gpus=$(python3 -c "import json; print(1 if json.load(open('$out/kernels.json'))['gpu'] else 0)" 2>/dev/null || echo 0)
if [ "$gpus" = 1 ]; then
  # Device-memory threads backend: 8 ranks on an emulated 2 x 4 cluster sharing the GPU(s), every algorithm.
  for coll in all_reduce all_gather reduce_scatter; do
    step "busbw_$coll" env PARO_TIMEOUT=120 "$bin/paro-bench-cuda" --backend threads --device cuda -t 8 \
      --emulate nodes=2,ranks=4 --coll $coll --algo ring,tree,mics_hcs,paro_seq,paro_cc,automatic \
      -b 1M -e 64M -f 8 -n 10 -w 2 --json "$out/busbw_$coll.json"
  done
  # NCCL (its own ring/tree as the native baseline, and paro's algorithms over it), one GPU per thread rank.
  ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
  if [ "${ngpu:-0}" -ge 2 ] && [ $mpi = OFF ]; then
    step busbw_nccl env PARO_TIMEOUT=120 "$bin/paro-bench-cuda" --backend nccl -t "$ngpu" --coll all \
      --algo native,ring,paro_cc -b 1M -e 64M -f 8 -n 10 -w 2 --json "$out/busbw_nccl.json"
  fi
fi
python3 - "$out" "$gpus" <<'PY'
import json, os, sys
out, gpus = sys.argv[1], sys.argv[2] == "1"
summary = {"gpu": gpus, "steps": {}, "tests": {}}
for line in open(os.path.join(out, "steps.txt")):
    name, rc, secs = line.split()
    summary["steps"][name] = {"exit": int(rc), "seconds": int(secs)}
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except (OSError, ValueError):
        return None
kernels = load("kernels.json")
if kernels and not kernels.get("gpu"):
    summary["reason"] = kernels.get("reason", "no GPU")
tests = load("tests.json")
if tests:
    cases = [t for s in tests["testsuites"] for t in s["testsuite"]]
    summary["tests"] = {"total": len(cases),
                        "skipped": sum(1 for t in cases if t.get("result") == "SKIPPED"),
                        "failed": sum(1 for t in cases if "failures" in t)}
summary["benchmarks"] = {n[:-5]: load(n) for n in sorted(os.listdir(out)) if n.startswith(("busbw_", "kernels")) and n.endswith(".json")}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
print("summary:", json.dumps({k: summary[k] for k in ("gpu", "tests")}), "->", os.path.join(out, "summary.json"))
PY
exit $status
