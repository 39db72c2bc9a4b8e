// paro_torch._C built with CUDA (setup.py, PARO_TORCH_CUDA=1): the same unit as module.cpp, compiled by nvcc
// because the nccl transport includes paro's reduce kernels.
#include "module.cpp"
