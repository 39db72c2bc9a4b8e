#!/usr/bin/env bash
# Builds and tests the PyTorch package (python/, docs/pytorch.md) on a fresh machine:
#   1. the Debian packages paro needs (scripts/install-deps.sh) and a virtual environment with torch, numpy,
#      pytest and expecttest (torch's own tests import it): $PARO_TORCH_VENV, by default
#      ~/.cache/paro/venv-torch, made once and reused by every checkout on the machine (PyPI's torch is the
#      CUDA build, about 3 GB with its nvidia-* wheels; it runs on CPU without a GPU);
#   2. the sdist (`python -m build --sdist --no-isolation python/`, carrying paro's headers) installed with
#      `pip install --no-build-isolation` from a folder outside the repository, as a user installs it (the
#      extension compiles against that torch; where nvcc is found, with the CUDA path too: PARO_TORCH_CUDA=1,
#      nvcc compiling the same unit, so that it cannot rot);
#   3. from a copy of python/tests outside the repository: pytest (1-8 local processes: every method against gloo, every algorithm, errors, a killed
#      process, DDP / SEPARATE hook / FSDP training, paro_torch.dp's 14 strategies against DDP), a selection of torch's own distributed tests with
#      BACKEND=paro (python/tests/torch_suite.py; PARO_TORCH_SUITE=full for the whole allow-list), and the
#      backend under mpirun (python/tests/mpi_smoke.py).
# PARO_TORCH_TESTS adds pytest arguments (e.g. "-k ddp"); PARO_TORCH_STAGES picks from "pytest suite mpi"
# (all three by default); PARO_TORCH_CUDA=0|1 overrides the nvcc rule. Exit status: 0 when everything passed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=${PARO_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/paro/venv-torch}

./scripts/install-deps.sh
if ! "$venv/bin/python" -c 'import torch, numpy, pytest, pytest_timeout, expecttest, build' 2>/dev/null; then
  echo "test-torch: installing torch, numpy, pytest, build into $venv (once per machine; about 3 GB)"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --progress-bar off torch numpy pytest pytest-timeout expecttest build
fi
py="$venv/bin/python"
"$py" -c 'import torch; print("test-torch: torch", torch.__version__)'

start=$SECONDS
PATH="/usr/local/cuda/bin:$PATH"  # the CUDA toolkit's usual place, where it is installed
export PARO_TORCH_CUDA=${PARO_TORCH_CUDA:-$(command -v nvcc >/dev/null && echo 1 || echo 0)}
# The sdist, installed and tested where the repository is out of sight: it must carry all it needs.
outside=$(mktemp -d "${TMPDIR:-/tmp}/paro-torch-test.XXXXXX")
trap 'rm -rf "$outside"' EXIT
"$py" -m build --sdist --no-isolation --outdir "$outside/dist" "$root/python" >"$outside/sdist.log" 2>&1 ||
  { cat "$outside/sdist.log"; exit 1; }
sdist=$(echo "$outside"/dist/paro_torch-*.tar.gz)
tar -tzf "$sdist" >"$outside/sdist.files"  # (grep -q on a pipe would cut tar off, and pipefail fail it)
grep -q '/include/paro/paro.hpp$' "$outside/sdist.files" || { echo "test-torch: $sdist lacks paro's headers"; exit 1; }
(cd "$outside" && "$py" -m pip install --quiet --no-build-isolation --no-deps --force-reinstall "$sdist")
echo "test-torch: built $(basename "$sdist") and installed it (PARO_TORCH_CUDA=$PARO_TORCH_CUDA) in $((SECONDS - start)) s"
stages=" ${PARO_TORCH_STAGES:-pytest suite mpi} "

cp -r "$root/python/tests" "$outside/tests"
cd "$outside/tests"
"$py" -c 'import paro_torch, sys; sys.exit(0 if "/site-packages/" in paro_torch.__file__ else
  "test-torch: paro_torch imported from " + paro_torch.__file__ + ", not the installed sdist")'
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
if [[ $stages == *" pytest "* ]]; then
  # shellcheck disable=SC2086  # PARO_TORCH_TESTS is a list of pytest arguments
  "$py" -m pytest -q -rs --timeout=900 -p no:cacheprovider . ${PARO_TORCH_TESTS:-}
fi
if [[ $stages == *" suite "* ]]; then "$py" torch_suite.py; fi
if [[ $stages == *" mpi "* ]]; then
  mpirun_flags=(--oversubscribe -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS)
  [ "$(id -u)" -ne 0 ] || mpirun_flags+=(--allow-run-as-root)
  mpirun "${mpirun_flags[@]}" -np 3 "$py" mpi_smoke.py
fi
echo "test-torch: done, every stage passed (stages:${stages% })"
