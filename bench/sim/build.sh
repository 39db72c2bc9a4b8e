#!/usr/bin/env bash
# Builds paro-bench (mpi backend) against SimGrid's SMPI: build-smpi/paro-bench-smpi, run with smpirun.
# Times are simulated (MPI_Wtime). Needs libsimgrid-dev (smpicxx).
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build-smpi
smpicxx -std=c++17 -O2 -include bench/sim/smpi_compat.h -DPARO_HAVE_MPI -DPARO_SIMULATED_CLOCK -Iinclude -Ibench \
  bench/paro_bench.cpp -o build-smpi/paro-bench-smpi
