#pragma once
// Closed-form figures of a generator configuration (docs/datasets.md gives the derivations
// and sources). They are written independently of the generator so that tests can hold the
// generated trace against them.
#include <cstdint>

#include "mhc/datasets/config.hpp"

namespace mhc::datasets {

// Parameters of the whole model (every layer, embeddings, head, mHC mappings).
int64_t parameter_count(const GeneratorConfig& cfg);
// Parameters held by the traced GPU: tensor-parallel rank 0 of pipeline stage 0.
int64_t local_parameter_count(const GeneratorConfig& cfg);

// Bytes the forward pass keeps for the backward pass in local layer `layer` (0-based), for
// one micro-batch: Korthikanti et al. 2022 per-layer terms, extended to SwiGLU, GQA, flash
// attention (softmax statistics instead of s x s matrices), recomputation and mHC.
int64_t activation_bytes_per_layer(const GeneratorConfig& cfg, int layer = 0);
// The part of it that is the residual stream (the LayerNorm inputs for n = 1, the n-stream
// mHC inputs for n > 1): n times larger with n streams.
int64_t residual_bytes_per_layer(const GeneratorConfig& cfg, int layer = 0);
// Korthikanti et al. 2022, eq. for tensor parallelism without sequence parallelism:
// s b h (10 + 24/t + 5 a s / (h t)) bytes (2-byte activations, 1-byte dropout masks).
double korthikanti_bytes_per_layer(double s, double b, double h, double a, double t);

// FLOPs the traced GPU executes per training step (every micro-batch), counting matmuls,
// attention scores (full s x s, as Narayanan et al. 2021) and mHC kernels, recomputation
// included; elementwise kernels, norms and the optimizer are not counted.
double flops_per_step(const GeneratorConfig& cfg);
// The same without recomputation (model FLOPs).
double model_flops_per_step(const GeneratorConfig& cfg);
// The matmul (GEMM) part of flops_per_step: the kernels whose durations come from the
// tensor-core rate.
double gemm_flops_per_step(const GeneratorConfig& cfg);

}  // namespace mhc::datasets
