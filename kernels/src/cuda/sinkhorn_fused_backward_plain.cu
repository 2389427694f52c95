// The fused n = 4 Sinkhorn kernels, backward, plain variant (sinkhorn_fused.cuh).
#include "sinkhorn_fused.cuh"

MHC_SINKHORN_FUSED_INSTANTIATE(false, true);
