#pragma once
// Kernel names as profilers show them for the libraries a PyTorch training run uses
// (cuBLAS, ATen, apex, flash-attention, NCCL), and for the mHC kernels; interned once.
#include <cstdint>

#include "mhc/datasets/config.hpp"
#include "mhc/trace/store.hpp"

namespace mhc::datasets::detail {

struct KernelNames {
    int64_t gemm_fwd, gemm_dgrad, gemm_wgrad, bmm;
    int64_t norm_fwd, norm_bwd_input, norm_bwd_weight;
    int64_t act_fwd, act_bwd;                 // GELU or SiLU*mul
    int64_t dropout, dropout_add, dropout_bwd, add, add_inplace;
    int64_t softmax_fwd, softmax_bwd, rope_fwd, rope_bwd;
    int64_t flash_fwd, flash_bwd_dot, flash_bwd, flash_bwd_convert;
    int64_t embed_fwd, embed_bwd, pos_bwd;
    int64_t xent_fwd, xent_bwd;
    int64_t l2norm, adam;
    int64_t allreduce, reduce_scatter, allgather, sendrecv;
    int64_t hc_coeff, hc_sinkhorn, hc_pre, hc_res, hc_post;
    int64_t hc_coeff_dgrad, hc_coeff_wgrad, hc_sinkhorn_bwd, hc_pre_bwd, hc_res_bwd, hc_post_bwd;
    int64_t hc_expand, hc_expand_bwd, hc_merge, hc_merge_bwd;

    KernelNames(trace::Writer& w, const GeneratorConfig& cfg);
};

}  // namespace mhc::datasets::detail
