#!/usr/bin/env bash
# Installs every Debian package paro's build, tests and benchmarks use (ccache: the test command's object
# cache; fortunes: paro-train's text;
# libsimgrid-dev: smpicxx and smpirun for the simulated scale study, bench/sim; clang and libclang-rt-dev:
# libFuzzer, scripts/fuzz.sh).
# Idempotent: packages already present are skipped, so a second run costs one `dpkg-query` and no network.
set -euo pipefail

packages=(
  cmake g++ make ninja-build pkg-config ccache
  libgtest-dev libgmock-dev libbenchmark-dev googletest
  libopenmpi-dev openmpi-bin
  libcli11-dev nlohmann-json3-dev
  librandom123-dev libopenblas-dev libucx-dev
  libsimgrid-dev
  python3-matplotlib clang-format clang libclang-rt-dev
  fortunes
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "install-deps: all ${#packages[@]} packages present"
fi

# The CUDA toolkit and NCCL are not Debian packages here: preinstalled under /usr/local/cuda, or absent
# (then the CUDA stage is skipped). googletest: its sources, which scripts/gpu-prepare.sh copies.
if PATH="/usr/local/cuda/bin:$PATH" command -v nvcc >/dev/null; then
  echo "install-deps: nvcc found ($(PATH="/usr/local/cuda/bin:$PATH" nvcc --version | tail -1))"
else
  echo "install-deps: no nvcc; the CUDA stage will be skipped"
fi
