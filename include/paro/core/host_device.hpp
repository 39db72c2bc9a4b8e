#pragma once
// PARO_HOST_DEVICE marks the element functions (half conversions, reduction operators) that the CUDA
// kernels share with the host code, so that both apply exactly the same semantics. Empty without nvcc.

#if defined(__CUDACC__)
#define PARO_HOST_DEVICE __host__ __device__
#else
#define PARO_HOST_DEVICE
#endif
