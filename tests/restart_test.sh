#!/usr/bin/env bash
# Training state survives a restart (docs/paro-dp.md, "Checkpoints"): paro-train killed by SIGKILL mid-run and
# resumed from its latest checkpoint ends with bitwise the parameters of a run that was never killed.
#   restart_test.sh threads PARO_TRAIN             same strategy; another strategy (--verify's exact sums); another
#                                                  rank count (8 -> 4: the loaded parameters are the saved ones);
#                                                  SEPARATE's error feedback; SEPARATE on other ranks refused
#   restart_test.sh mpi PARO_TRAIN MPIRUN ARGS...  4 processes; rank 1 killed: mpirun ends the job naming rank 1
set -uo pipefail
mode=$1 train=$2
shift 2
launcher=("$@")
work=$(mktemp -d /tmp/paro-restart.XXXXXX)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1
failures=0
common=(--steps 12 --log-every 0 --accum 2)
if [ "$mode" = mpi ]; then common+=(--backend mpi --emulate nodes=2,ranks=2); fi

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# final_hash LOG: the fingerprint of the trainable parameters at the end of the run
final_hash() { sed -n 's/^  [NIG]\{3\} trainable parameters fnv1a-64 \([0-9a-f]*\)$/\1/p' "$1" | tail -1; }
# train NAME ARGS...: runs paro-train into $work/NAME.log, returns its exit status
train() {
  local name=$1
  shift
  "${launcher[@]}" "$train" "${common[@]}" "$@" >"$work/$name.log" 2>&1
}
# killed_then_resumed NAME KILL_RANK FIRST_ARGS -- RESUME_ARGS: a run killed as step 10 begins (checkpoints every 4
# steps: the latest is step 8), then resumed; the killed run's exit status is left in $killed_status
killed_then_resumed() {
  local name=$1 rank=$2 first=() rest=()
  shift 2
  while [ "$1" != -- ]; do first+=("$1"); shift; done
  shift
  rest=("$@")
  train "$name-killed" "${first[@]}" --checkpoint-dir "$work/$name" --checkpoint-every 4 --kill-at-step 10 \
    --kill-rank "$rank" 2>/dev/null  # bash's own "Killed" line
  killed_status=$?
  [ $killed_status -ne 0 ] || fail "$name: the killed run exited 0"
  grep -q "checkpoint: step 8 in" "$work/$name-killed.log" || fail "$name: no checkpoint at step 8"
  grep -q "checkpoint: step 12" "$work/$name-killed.log" && fail "$name: the killed run reached step 12"
  [ "$(cat "$work/$name/latest")" = step-00000008 ] || fail "$name: latest is not step 8"
  train "$name-resumed" "${rest[@]}" --checkpoint-dir "$work/$name" --resume ||
    fail "$name: the resumed run failed: $(tail -3 "$work/$name-resumed.log")"
  grep -q "resumed: step 8 from" "$work/$name-resumed.log" || fail "$name: did not resume from step 8"
}
check_same() {  # NAME EXPECTED ACTUAL
  if [ -n "$2" ] && [ "$2" = "$3" ]; then
    echo "ok: $1: $3"
  else
    fail "$1: fingerprint '$3', uninterrupted '$2'"
  fi
}

if [ "$mode" = mpi ]; then
  train uninterrupted --strategy NIG || fail "uninterrupted run: $(tail -3 "$work/uninterrupted.log")"
  killed_then_resumed same 1 --strategy NIG -- --strategy NIG
  # Open MPI names the process that died and its signal in the first lines of its report.
  grep -Eq "rank 1 .*(signal 9|Killed)|(signal 9|Killed).*rank 1" "$work/same-killed.log" ||
    fail "mpirun did not name the killed rank 1: $(head -20 "$work/same-killed.log")"
  check_same "NIG on 4 processes, rank 1 killed at step 10, resumed" "$(final_hash "$work/uninterrupted.log")" \
    "$(final_hash "$work/same-resumed.log")"
else
  train uninterrupted --strategy NIG || fail "uninterrupted run: $(tail -3 "$work/uninterrupted.log")"
  killed_then_resumed same 0 --strategy NIG -- --strategy NIG
  [ "$killed_status" = 137 ] || fail "the killed run exited $killed_status, not 137 (SIGKILL)"
  check_same "NIG killed at step 10, resumed" "$(final_hash "$work/uninterrupted.log")" \
    "$(final_hash "$work/same-resumed.log")"

  # --verify puts gradients on a grid where every strategy's sums are exact: any strategy may resume.
  train verify --strategy NIG --verify || fail "verify run: $(tail -3 "$work/verify.log")"
  killed_then_resumed strategy 0 --strategy NIG --verify -- --strategy IIG --verify
  check_same "NIG killed at step 10, resumed as IIG" "$(final_hash "$work/verify.log")" \
    "$(final_hash "$work/strategy-resumed.log")"

  # 8 ranks in 2 groups of 4, resumed on 4 in 2 groups of 2: the parameters loaded are those saved.
  killed_then_resumed ranks 0 --strategy IIG -- --strategy NIG -t 4
  saved=$(sed -n 's/.*checkpoint: step 8 in .*fnv1a-64 \([0-9a-f]*\))$/\1/p' "$work/ranks-killed.log")
  loaded=$(sed -n 's/.*resumed: step 8 from .* on 8 ranks) (trainable parameters fnv1a-64 \([0-9a-f]*\))$/\1/p' \
    "$work/ranks-resumed.log")
  check_same "IIG on 8 ranks saved at step 8, loaded as NIG on 4" "$saved" "$loaded"

  separate=(--strategy NNN --compress separate --ratio 8 --min-elements 1024)
  train separate "${separate[@]}" || fail "SEPARATE run: $(tail -3 "$work/separate.log")"
  killed_then_resumed sep 0 "${separate[@]}" -- "${separate[@]}"
  check_same "NNN with SEPARATE killed at step 10, resumed" "$(final_hash "$work/separate.log")" \
    "$(final_hash "$work/sep-resumed.log")"
  if train sep-ranks "${separate[@]}" -t 4 --checkpoint-dir "$work/sep" --resume; then
    fail "SEPARATE resumed on 4 ranks from a checkpoint of 8"
  fi
  grep -q "SEPARATE's error feedback is per rank; the checkpoint has 8 ranks, this run 4" "$work/sep-ranks.log" ||
    fail "SEPARATE on other ranks: $(tail -2 "$work/sep-ranks.log")"
  # Refused: SEPARATE's checkpoint resumed uncompressed, an empty folder, a checkpoint at or past --steps.
  refused() {  # NAME EXPECTED ARGS...
    local name=$1 expected=$2
    shift 2
    if train "$name" "$@"; then fail "$name: was not refused"; fi
    grep -qF "$expected" "$work/$name.log" || fail "$name: $(tail -2 "$work/$name.log")"
  }
  refused sep-plain "the checkpoint was trained with --compress separate; resume with the same" --strategy NNN \
    --checkpoint-dir "$work/sep" --resume
  refused empty "holds no complete checkpoint" --checkpoint-dir "$work/empty" --resume
  refused done "the checkpoint is at step 12; --steps 12 leaves nothing to run" --strategy NIG \
    --checkpoint-dir "$work/same" --resume
fi
if ((failures)); then
  echo "restart: $failures failed; logs:"
  for f in "$work"/*.log; do echo "--- $f"; tail -5 "$f"; done
  exit 1
fi
echo "restart: every resumed run matches"
