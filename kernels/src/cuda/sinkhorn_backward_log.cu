// The backward Sinkhorn kernels, log-domain variant (sinkhorn_kernels.cuh).
#include "sinkhorn_kernels.cuh"

MHC_SINKHORN_INSTANTIATE(true, true);
