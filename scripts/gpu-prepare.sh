#!/usr/bin/env bash
# Fills third_party/ (ignored by git) with what scripts/gpu-check.sh needs on a GPU machine that has no
# package manager access: GoogleTest's sources (Debian's googletest package, /usr/src/googletest) and the
# header-only CLI11, nlohmann-json and Random123 (SEPARATE's generator, which the GPU tests need). Copy third_party/ along with the tree to the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f /usr/src/googletest/CMakeLists.txt ] || { echo "gpu-prepare: /usr/src/googletest missing (apt-get install googletest)" >&2; exit 1; }
rm -rf third_party/googletest third_party/include
mkdir -p third_party/include
cp -r /usr/src/googletest third_party/googletest
cp -r /usr/include/CLI /usr/include/nlohmann third_party/include/
if [ -f /usr/include/Random123/philox.h ]; then
  cp -r /usr/include/Random123 third_party/include/
else
  echo "gpu-prepare: /usr/include/Random123 missing (apt-get install librandom123-dev): the GPU SEPARATE tests will not be built" >&2
fi
echo "gpu-prepare: third_party/ filled ($(du -sh third_party | cut -f1))"
echo 'gpu-prepare: copy third_party/ along with the tree to an offline GPU machine; run scripts/gpu-check.sh there'
