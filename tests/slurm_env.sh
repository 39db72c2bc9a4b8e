#!/bin/sh
# Run under mpirun: gives each rank the variables Slurm would set on a cluster of 2-rank nodes, two nodes
# per leaf switch, all leaves under one top switch, so that one machine exercises Slurm-based discovery.
#   mpirun -np 8 tests/slurm_env.sh build/bin/paro-topo --backend mpi
r=${OMPI_COMM_WORLD_RANK:?slurm_env.sh: run me under Open MPI mpirun}
SLURM_NODEID=$((r / 2))
SLURM_LOCALID=$((r % 2))
SLURM_TOPOLOGY_ADDR="top.leaf$((r / 4)).node$((r / 2))"
SLURM_TOPOLOGY_ADDR_PATTERN="switch.switch.node"
export SLURM_NODEID SLURM_LOCALID SLURM_TOPOLOGY_ADDR SLURM_TOPOLOGY_ADDR_PATTERN
exec "$@"
