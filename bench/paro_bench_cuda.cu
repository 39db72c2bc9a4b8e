// paro-bench-cuda: paro_bench.cpp compiled by nvcc, so that it can drive the CUDA backends (--backend
// nccl, --device cuda). A wrapper rather than LANGUAGE CUDA on paro_bench.cpp, whose properties would
// then change for the host paro-bench too.
#include "paro_bench.cpp"
