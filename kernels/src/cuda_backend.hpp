#pragma once
// Entry points of the CUDA implementation (src/cuda/*.cu), or of stubs that throw when the
// library is built without CUDA (src/no_cuda.cpp). Pointers are device-accessible memory.
#include "mhc/kernels/sinkhorn.hpp"

namespace mhc::kernels::cuda_impl {

SinkhornReport sinkhorn_forward(const SinkhornOptions& opt, int64_t T, ConstTensor H, Tensor P);
SinkhornReport sinkhorn_backward(const SinkhornOptions& opt, int64_t T, ConstTensor H, ConstTensor G,
                                 Tensor dH, Tensor P);

}  // namespace mhc::kernels::cuda_impl
