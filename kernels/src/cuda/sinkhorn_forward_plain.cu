// The forward Sinkhorn kernels, plain variant (sinkhorn_kernels.cuh).
#include "sinkhorn_kernels.cuh"

MHC_SINKHORN_INSTANTIATE(false, false);
