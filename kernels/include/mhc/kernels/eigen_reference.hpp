#pragma once
// The reference Sinkhorn-Knopp forward written with Eigen (Eigen::Map over each token's matrix,
// rowwise/colwise sums), all iterations of a token in cache: plain variant, fp32, CPU, fixed
// iterations. Measured beside the fused kernels by bench_sinkhorn (docs/kernels.md).
#include <cstdint>

#include "mhc/kernels/sinkhorn.hpp"

namespace mhc::kernels {

void sinkhorn_forward_eigen(const SinkhornOptions& opt, int64_t T, const float* H, float* P);

}  // namespace mhc::kernels
