#!/usr/bin/env bash
# scripts/gpu-check.sh on an already built CUDA tree, where no GPU is needed: a clean run is ok and complete;
# steps failed, hung and crashed on purpose (PARO_GPU_CHECK_FAIL) are reported as such, with a nonzero exit.
#   tests/gpu_check_test.sh BUILD_DIR    # configured as gpu-check.sh does (-DPARO_WITH_UCX=OFF, MPI OFF)
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: tests/gpu_check_test.sh BUILD_DIR" >&2; exit 2; }
cd "$(dirname "$0")/.." || exit 2
export PARO_GPU_BUILD=$1 PARO_GPU_MPI=OFF PARO_JOBS=${PARO_JOBS:-2}
unset PARO_GPU_CHECK_FAIL PARO_GPU_CHECK_REQUIRE_GPU
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The torch step would build the PyTorch package where a torch environment exists: scripts/test-torch.sh
# builds and tests it in its own stage, so here it is skipped.
export PARO_TORCH_VENV=$tmp/no-torch
failed=0

case_() {  # case_ NAME 'PYTHON ASSERTS' [VAR=VALUE...]: gpu-check.sh with the variables; the asserts see the
  local name=$1 asserts=$2 rc  # summary as s, its steps' statuses as st and the exit code as rc
  shift 2
  env "$@" scripts/gpu-check.sh "$tmp/$name" >"$tmp/$name.out" 2>&1
  rc=$?
  if python3 - "$tmp/$name/summary.json" "$rc" "$asserts" <<'PY'; then
import json, sys
s, rc = json.load(open(sys.argv[1])), int(sys.argv[2])
st = {name: step["status"] for name, step in s["steps"].items()}
plan = ["configure", "build", "kernels", "tests", "torch", "busbw_all_reduce", "busbw_all_gather",
        "busbw_reduce_scatter", "busbw_separate", "busbw_nccl"]
assert list(st) == plan, st
assert s["finished"] is True and isinstance(s["gpu"], bool) and (s["gpu"] or s["gpu_reason"]), s
assert s["ok"] == (rc == 0) == (not s["reasons"]), (s["ok"], rc, s["reasons"])
for name, step in s["steps"].items():
    assert step["status"] in ("passed", "failed", "timed_out", "crashed", "not_run", "skipped"), step
    if step["status"] in ("skipped", "not_run"):
        assert step["reason"], (name, step)
    else:
        assert {"exit", "seconds", "limit", "log_tail"} <= step.keys(), (name, step)
exec(sys.argv[3])
PY
    echo "gpu_check_test: $name: passed"
  else
    echo "gpu_check_test: $name: FAILED (exit $rc); its output and summary:"
    cat "$tmp/$name.out" "$tmp/$name/summary.json"
    failed=1
  fi
}

# Without a GPU everything passes or skips, with a reason; with one the benchmarks run too.
case_ clean '
assert rc == 0 and s["ok"], s["reasons"]
assert all(st[n] == "passed" for n in ("configure", "build", "kernels", "tests")), st
t = s["tests"]
assert t["total"] > 0 and t["failed"] == 0 and t["total"] == t["passed"] + t["skipped"] + t["failed"], t
assert st["torch"] in ("passed", "skipped"), st
if not s["gpu"]:
    assert all(st[n] == "skipped" for n in plan[5:]), st'

case_ kernels_fails '
assert rc != 0 and st["kernels"] == "failed" and s["steps"]["kernels"]["exit"] == 3, s["steps"]["kernels"]
assert any(r.startswith("kernels failed") for r in s["reasons"]), s["reasons"]
assert st["tests"] == "passed" and s["tests"]["total"] > 0, s["tests"]' PARO_GPU_CHECK_FAIL=kernels

case_ hang_and_crash '
assert rc != 0 and st["kernels"] == "timed_out" and s["steps"]["kernels"]["limit"] == 2, s["steps"]["kernels"]
assert st["tests"] == "crashed" and "SIGSEGV" in s["steps"]["tests"]["reason"], s["steps"]["tests"]
assert "error" in s["tests"] and any("tests.json" in r for r in s["reasons"]), s' \
  PARO_GPU_CHECK_FAIL=kernels:hang,tests:crash PARO_GPU_TIMEOUT_KERNELS=2

case_ build_fails '
assert rc != 0 and st["build"] == "failed" and s["tests"] == {}, s
assert all(st[n] == "not_run" and "build" in s["steps"][n]["reason"] for n in plan[2:]), s["steps"]' \
  PARO_GPU_CHECK_FAIL=build

exit $failed
