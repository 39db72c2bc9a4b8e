#!/bin/sh
# Runs a command and checks both its exit status and its output (stdout and stderr together), which
# ctest's PASS_REGULAR_EXPRESSION alone cannot (it ignores the status):
#   expect_output.sh STATUS PATTERN... -- COMMAND ARGS...
# STATUS: a number, or "nonzero"; every PATTERN (grep -E) must match some line of the output.
status=$1
shift
patterns=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  patterns="$patterns
$1"
  shift
done
[ "$1" = "--" ] || { echo "expect_output.sh: no -- before the command" >&2; exit 2; }
shift
output=$("$@" 2>&1)
got=$?
printf '%s\n' "$output"
failed=0
if [ "$status" = nonzero ]; then
  [ "$got" -ne 0 ] || { echo "expect_output.sh: exit status 0, expected non-zero"; failed=1; }
elif [ "$got" -ne "$status" ]; then
  echo "expect_output.sh: exit status $got, expected $status"
  failed=1
fi
echo "$patterns" | while IFS= read -r pattern; do
  [ -z "$pattern" ] && continue
  printf '%s\n' "$output" | grep -Eq -- "$pattern" || { echo "expect_output.sh: no line matches '$pattern'"; exit 1; }
done || failed=1
exit $failed
