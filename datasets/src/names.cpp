#include "names.hpp"

#include <string>

namespace mhc::datasets::detail {

KernelNames::KernelNames(trace::Writer& w, const GeneratorConfig& c) {
    auto I = [&](const std::string& s) { return w.intern(s); };
    const bool hopper = c.gpu.name != "a100";
    const std::string t = c.dtype == DType::BF16 ? "bf16" : c.dtype == DType::FP16 ? "f16" : "tf32";
    const std::string ct = c.dtype == DType::BF16 ? "c10::BFloat16" : c.dtype == DType::FP16 ? "c10::Half" : "float";
    const std::string ft = c.dtype == DType::BF16 ? "cutlass::bfloat16_t" : c.dtype == DType::FP16 ? "cutlass::half_t" : "float";
    const std::string nt = c.dtype == DType::BF16 ? "bf16" : c.dtype == DType::FP16 ? "f16" : "f32";
    auto gemm = [&](const char* layout) {
        if (hopper)
            return "sm90_xmma_gemm_" + t + t + "_" + t + "f32_f32_" + layout +
                   "_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas";
        return "ampere_" + t + "_s16816gemm_" + t + "_256x128_ldg8_f2f_stages_64x3_" + layout;
    };
    gemm_fwd = I(gemm("tn"));
    gemm_dgrad = I(gemm("nn"));
    gemm_wgrad = I(gemm("nt"));
    bmm = I(hopper ? "sm90_xmma_gemm_" + t + t + "_" + t + "f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_batched_kernel__5x_cublas"
                   : "ampere_" + t + "_s16816gemm_" + t + "_128x128_ldg8_f2f_stages_32x5_batched_tn");
    if (c.arch == Arch::Gpt2) {
        norm_fwd = I("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<" + ct + ", float>");
        norm_bwd_input = I("void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<" + ct + ", float>");
        norm_bwd_weight = I("void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel_32x32<" + ct + ", float>");
        act_fwd = I("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl<" + ct + ">, at::detail::Array<char*, 2> >");
        act_bwd = I("void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl<" + ct + ">, at::detail::Array<char*, 3> >");
    } else {
        norm_fwd = I("void cuApplyRMSNorm<" + ct + ", float, " + ct + ">");
        norm_bwd_input = I("void cuComputeGradInputRMS<" + ct + ", float, " + ct + ">");
        norm_bwd_weight = I("void cuComputePartGradGammaRMS<" + ct + ", float, " + ct + ">");
        act_fwd = I("void at::native::vectorized_elementwise_kernel<4, silu_and_mul_kernel<" + ct + ">, at::detail::Array<char*, 2> >");
        act_bwd = I("void at::native::vectorized_elementwise_kernel<4, silu_and_mul_backward_kernel<" + ct + ">, at::detail::Array<char*, 3> >");
    }
    dropout = I("void at::native::(anonymous namespace)::fused_dropout_kernel_vec<" + ct + ", float, unsigned int, 1, 4, bool>");
    dropout_add = I("void at::native::vectorized_elementwise_kernel<4, fused_dropout_add_kernel<" + ct + ">, at::detail::Array<char*, 4> >");
    dropout_bwd = I("void at::native::(anonymous namespace)::masked_scale_kernel<bool, " + ct + ", " + ct + ">");
    add = I("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<" + ct + ">, at::detail::Array<char*, 3> >");
    add_inplace = I("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<" + ct + ">, at::detail::Array<char*, 2> >");
    softmax_fwd = I("void (anonymous namespace)::cunn_SoftMaxForward<8, " + ct + ", float, " + ct + ", (anonymous namespace)::SoftMaxForwardEpilogue>");
    softmax_bwd = I("void (anonymous namespace)::cunn_SoftMaxBackward<8, " + ct + ", float, " + ct + ", (anonymous namespace)::SoftMaxBackwardEpilogue>");
    rope_fwd = I("void apply_rotary_kernel<" + ct + ", false>");
    rope_bwd = I("void apply_rotary_kernel<" + ct + ", true>");
    int64_t hd = c.hidden / c.heads;
    std::string traits = std::to_string(hd) + ", 128, 64, 4, false, false, " + ft;
    flash_fwd = I("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<" + traits + ">, false, true, false, false, true, true, false, false>");
    flash_bwd_dot = I("void flash::flash_bwd_dot_do_o_kernel<true, Flash_bwd_kernel_traits<" + traits + ">>");
    flash_bwd = I("void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<" + traits + ">, false, true, false, false, false, true, false>");
    flash_bwd_convert = I("void flash::flash_bwd_convert_dq_kernel<Flash_bwd_kernel_traits<" + traits + ">>");
    embed_fwd = I("void at::native::(anonymous namespace)::indexSelectLargeIndex<" + ct + ", long, unsigned int, 2, 2, -2, true>");
    embed_bwd = I("void at::native::(anonymous namespace)::embedding_backward_feature_kernel<" + ct + ", float, long>");
    pos_bwd = I("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<" + ct + ", at::native::func_wrapper_t<float, at::native::sum_functor<" + ct + ", float, float>>, unsigned int, float, 4> >");
    xent_fwd = I("cross_entropy_fwd_kernel");
    xent_bwd = I("cross_entropy_bwd_kernel");
    l2norm = I("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::LpNormFunctor<" + ct + ", 2, float>, float*>");
    adam = I("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<5>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 5, (at::native::ADAM_MODE)1, false>>");
    allreduce = I("ncclDevKernel_AllReduce_Sum_" + nt + "_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
    reduce_scatter = I("ncclDevKernel_ReduceScatter_Sum_" + nt + "_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
    allgather = I("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
    sendrecv = I("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)");
    std::string n = std::to_string(c.hc), it = std::to_string(c.sinkhorn_iters);
    hc_coeff = I("mhc_prenorm_gemm_sqrsum_kernel<" + ct + ", " + n + ">");
    hc_sinkhorn = I("mhc_sinkhorn_knopp_fwd_kernel<" + n + ", " + it + ">");
    hc_pre = I("mhc_pre_mix_kernel<" + ct + ", " + n + ">");
    hc_res = I("mhc_res_mix_kernel<" + ct + ", " + n + ">");
    hc_post = I("mhc_post_mix_kernel<" + ct + ", " + n + ">");
    hc_coeff_dgrad = I("mhc_prenorm_gemm_dgrad_kernel<" + ct + ", " + n + ">");
    hc_coeff_wgrad = I("mhc_prenorm_gemm_wgrad_kernel<" + ct + ", " + n + ">");
    hc_sinkhorn_bwd = I("mhc_sinkhorn_knopp_bwd_kernel<" + n + ", " + it + ">");
    hc_pre_bwd = I("mhc_pre_mix_bwd_kernel<" + ct + ", " + n + ">");
    hc_res_bwd = I("mhc_res_mix_bwd_kernel<" + ct + ", " + n + ">");
    hc_post_bwd = I("mhc_post_mix_bwd_kernel<" + ct + ", " + n + ">");
    hc_expand = I("mhc_expand_streams_kernel<" + ct + ", " + n + ">");
    hc_expand_bwd = I("mhc_expand_streams_bwd_kernel<" + ct + ", " + n + ">");
    hc_merge = I("mhc_merge_streams_kernel<" + ct + ", " + n + ">");
    hc_merge_bwd = I("mhc_merge_streams_bwd_kernel<" + ct + ", " + n + ">");
}

}  // namespace mhc::datasets::detail
