#!/usr/bin/env bash
# Formats paro's C++ and CUDA sources with .clang-format (clang-format, Debian package clang-format).
#   scripts/format.sh           rewrite the files in place
#   scripts/format.sh --check   list the files that differ and exit 1 (CI)
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files 'include/*.hpp' 'include/*.cuh' 'bench/*.cpp' 'bench/*.hpp' 'bench/*.cu' \
  'examples/*.cpp' 'examples/*.hpp' 'tests/*.cpp' 'tests/*.hpp' 'tests/*.cu' 'python/*.cpp' 'python/*.hpp')
if [ "${1:-}" = "--check" ]; then
  status=0
  for f in "${files[@]}"; do
    if ! clang-format --style=file --dry-run --Werror "$f" >/dev/null 2>&1; then
      echo "format: $f differs from .clang-format (run scripts/format.sh)"
      status=1
    fi
  done
  exit $status
fi
clang-format --style=file -i "${files[@]}"
