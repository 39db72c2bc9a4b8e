#!/usr/bin/env python3
"""Writes OUTDIR/summary.json for scripts/gpu-check.sh, which calls it after every step.

  gpu_summary.py OUTDIR            the state so far ("finished": false, so "ok" is false)
  gpu_summary.py OUTDIR --final    the verdict: prints it, exits 0 when ok, 1 otherwise

Inputs, all in OUTDIR: plan.txt (the step names in order), steps.tsv (one line per recorded step: name, kind
ran|skipped|not_run, exit code, seconds, limit, reason; tab-separated), NAME.log, nvidia-smi.txt, kernels.json,
tests.json (GoogleTest), busbw_*.json. The format is documented in docs/gpu.md.
"""
import json
import os
import signal
import sys

TAIL_LINES = 20
TAIL_LINE_CHARS = 300  # nvcc and gtest lines can be long; the tail is for a first look, the log has the rest


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_lines(path):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return None


def signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def classify(rc, seconds, limit):
    """A step's status from its exit code under `timeout -k`: 124 is its deadline, 137 its follow-up SIGKILL
    (a SIGKILL before the deadline is someone else's, e.g. the OOM killer), above 128 a signal."""
    if rc == 0:
        return "passed", None
    if rc == 124 or (rc == 137 and seconds >= limit):
        return "timed_out", f"timed out after {limit} s"
    if rc > 128:
        return "crashed", f"crashed ({signal_name(rc - 128)})"
    return "failed", f"failed (exit {rc})"


def steps_of(out):
    plan = read_lines(os.path.join(out, "plan.txt")) or []
    recorded = {}
    for line in read_lines(os.path.join(out, "steps.tsv")) or []:
        name, kind, rc, seconds, limit, reason = line.split("\t", 5)
        if kind == "ran":
            rc, seconds, limit = int(rc), int(seconds), int(limit)
            status, why = classify(rc, seconds, limit)
            step = {"status": status, "exit": rc, "seconds": seconds, "limit": limit}
            if why:
                step["reason"] = why
            tail = read_lines(os.path.join(out, name + ".log"))
            step["log_tail"] = [l[:TAIL_LINE_CHARS] for l in (tail or [])[-TAIL_LINES:]]
        else:
            step = {"status": kind, "reason": reason}
        recorded[name] = step
    return {name: recorded.get(name, {"status": "not_run", "reason": "not reached"}) for name in plan}


def test_counts(out, steps):
    """Counts from GoogleTest's JSON; an "error" instead when the tests ran and left none (a crash, a kill)."""
    if steps.get("tests", {}).get("status") in ("not_run", "skipped"):
        return {}
    report = load_json(os.path.join(out, "tests.json"))
    if not report or "testsuites" not in report:
        return {"error": "paro-tests-gpu wrote no GoogleTest report (tests.json): it crashed, was killed, or failed "
                         "to start; see tests.log"}
    cases = [case for suite in report["testsuites"] for case in suite.get("testsuite", [])]
    failed = [f"{c.get('classname')}.{c.get('name')}" for c in cases if c.get("failures")]
    skipped = sum(1 for c in cases if not c.get("failures") and
                  (c.get("result") in ("SKIPPED", "SUPPRESSED") or c.get("status") == "NOTRUN"))
    return {"total": len(cases), "passed": len(cases) - len(failed) - skipped, "skipped": skipped,
            "failed": len(failed), "failed_names": failed}


def gpu_of(out):
    """Whether a GPU was usable and, when not, why: the kernels bench's answer, else the GPU tests' skip message,
    else nvidia-smi's output."""
    smi = read_lines(os.path.join(out, "nvidia-smi.txt")) or []
    listed = [l for l in smi if l.startswith("GPU ")]
    found = {"gpus_listed": len(listed), "nvidia_smi": listed or smi[-3:]}
    kernels = load_json(os.path.join(out, "kernels.json"))
    if isinstance(kernels, dict) and "gpu" in kernels:
        if kernels["gpu"]:
            return {"gpu": True, "device": kernels.get("device"), **found}
        return {"gpu": False, "gpu_reason": "kernels bench: " + kernels.get("reason", "no GPU"), **found}
    for line in read_lines(os.path.join(out, "tests.log")) or []:
        if line.startswith("no usable GPU"):
            return {"gpu": False, "gpu_reason": "GPU tests: " + line, **found}
    if listed:
        return {"gpu": True, "device": listed[0], **found}
    return {"gpu": False, "gpu_reason": "nvidia-smi -L: " + (" | ".join(smi[-3:]) or "no output"), **found}


def main():
    out, final = sys.argv[1], "--final" in sys.argv[2:]
    steps = steps_of(out)
    tests = test_counts(out, steps)
    reasons = [f"{name} {step['reason']}: see {name}.log" for name, step in steps.items()
               if step["status"] in ("failed", "timed_out", "crashed")]
    if final:
        not_run = {}  # one line per cause, not per step
        for name, step in steps.items():
            if step["status"] == "not_run":
                not_run.setdefault(step["reason"], []).append(name)
        reasons += [f"not run ({why}): {', '.join(names)}" for why, names in not_run.items()]
    if "error" in tests:
        reasons.append("tests: " + tests["error"])
    elif tests.get("failed"):
        reasons.append(f"tests: {tests['failed']} failed: " + ", ".join(tests["failed_names"][:10]))
    elif tests and not tests["total"]:
        reasons.append("tests: the report lists no test")
    gpu = gpu_of(out)
    if os.environ.get("PARO_GPU_CHECK_REQUIRE_GPU") == "1" and not gpu["gpu"]:
        reasons.append("no usable GPU (PARO_GPU_CHECK_REQUIRE_GPU=1): " + gpu["gpu_reason"])
    if not final:
        pending = [name for name, step in steps.items() if step.get("reason") == "not reached"]
        reasons.append("gpu-check has not finished: it is running or was killed, "
                       + (f"in step {pending[0]}" if pending else "after its last step"))
    benchmarks = {n[:-5]: load_json(os.path.join(out, n)) for n in sorted(os.listdir(out))
                  if n.startswith(("busbw_", "kernels")) and n.endswith(".json")}
    summary = {"ok": not reasons, "reasons": reasons, "finished": final, **gpu, "tests": tests, "steps": steps,
               "benchmarks": benchmarks}
    path = os.path.join(out, "summary.json")
    with open(path + ".tmp", "w") as f:  # a reader never sees half a file, even if the check is killed here
        json.dump(summary, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)
    if final:
        counts = ", ".join(f"{k} {tests[k]}" for k in ("total", "passed", "skipped", "failed") if k in tests)
        gpu_text = gpu.get("device") if gpu["gpu"] else "none (" + gpu["gpu_reason"] + ")"
        print(f"gpu-check: {'ok' if summary['ok'] else 'NOT ok'}; GPU: {gpu_text}; tests: {counts or '-'} -> {path}")
        for reason in reasons:
            print("  " + reason)
        sys.exit(0 if summary["ok"] else 1)


if __name__ == "__main__":
    main()
