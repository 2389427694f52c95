// Kernel families from real kernel names: those `mhc generate` writes (datasets/src/names.cpp,
// GPT-2 and Llama/mHC presets, bf16) and those in the public Kineto traces
// (tests/data/public/kineto: nccl_data.json.gz, simple_add_trace.json.gz; names cut at
// their argument lists, as the traces spell them).
#include <catch2/catch.hpp>

#include <random>

#include "fixtures.hpp"
#include "mhc/viewer/colors.hpp"
#include "mhc/viewer/data.hpp"
#include "mhc/viewer/families.hpp"
#include "mhc/viewer/lod.hpp"

using namespace mhc::viewer;
using F = KernelFamily;

TEST_CASE("kernel names of the generator's presets fall into their families") {
    const std::pair<const char*, F> names[] = {
        {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas", F::Gemm},
        {"ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_nt", F::Gemm},
        {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_batched_kernel__5x_cublas", F::Gemm},
        {"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>", F::Norm},
        {"void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>", F::Norm},
        {"void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel_32x32<c10::BFloat16, float>", F::Norm},
        {"void cuApplyRMSNorm<c10::BFloat16, float, c10::BFloat16>", F::Norm},
        {"void cuComputeGradInputRMS<c10::BFloat16, float, c10::BFloat16>", F::Norm},
        {"void cuComputePartGradGammaRMS<c10::BFloat16, float, c10::BFloat16>", F::Norm},
        {"void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl<c10::BFloat16>, at::detail::Array<char*, 2> >", F::Elementwise},
        {"void at::native::vectorized_elementwise_kernel<4, silu_and_mul_kernel<c10::BFloat16>, at::detail::Array<char*, 2> >", F::Elementwise},
        {"void at::native::(anonymous namespace)::fused_dropout_kernel_vec<c10::BFloat16, float, unsigned int, 1, 4, bool>", F::Elementwise},
        {"void at::native::(anonymous namespace)::masked_scale_kernel<bool, c10::BFloat16, c10::BFloat16>", F::Elementwise},
        {"void apply_rotary_kernel<c10::BFloat16, true>", F::Elementwise},
        {"void (anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16, (anonymous namespace)::SoftMaxForwardEpilogue>", F::Reduce},
        {"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<float, at::native::sum_functor<c10::BFloat16, float, float>>, unsigned int, float, 4> >", F::Reduce},
        {"cross_entropy_fwd_kernel", F::Reduce},
        {"void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, false, true, false, false, true, true, false, false>", F::Attention},
        {"void flash::flash_bwd_dot_do_o_kernel<true, Flash_bwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>", F::Attention},
        {"void flash::flash_bwd_convert_dq_kernel<Flash_bwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>", F::Attention},
        {"void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>", F::Memory},
        {"void at::native::(anonymous namespace)::embedding_backward_feature_kernel<c10::BFloat16, float, long>", F::Memory},
        {"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::LpNormFunctor<c10::BFloat16, 2, float>, float*>", F::Optimizer},
        {"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<5>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 5, (at::native::ADAM_MODE)1, false>>", F::Optimizer},
        {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", F::Comm},
        {"ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", F::Comm},
        {"ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", F::Comm},
        {"ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", F::Comm},
        {"mhc_sinkhorn_knopp_fwd_kernel<4, 20>", F::Sinkhorn},
        {"mhc_sinkhorn_knopp_bwd_kernel<4, 20>", F::Sinkhorn},
        {"mhc_prenorm_gemm_sqrsum_kernel<c10::BFloat16, 4>", F::Gemm},
        {"mhc_prenorm_gemm_wgrad_kernel<c10::BFloat16, 4>", F::Gemm},
        {"mhc_pre_mix_kernel<c10::BFloat16, 4>", F::HcMix},
        {"mhc_res_mix_bwd_kernel<c10::BFloat16, 4>", F::HcMix},
        {"mhc_post_mix_kernel<c10::BFloat16, 4>", F::HcMix},
        {"mhc_expand_streams_kernel<c10::BFloat16, 4>", F::HcMix},
        {"mhc_merge_streams_bwd_kernel<c10::BFloat16, 4>", F::HcMix},
    };
    for (const auto& [name, family] : names) {
        INFO(name);
        CHECK(family_name(classify_kernel(name)) == std::string(family_name(family)));
    }
}

TEST_CASE("kernel names of the public Kineto traces fall into their families") {
    const std::pair<const char*, F> names[] = {
        {"void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, at:", F::Elementwise},
        {"void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>(cudnn::ops::nchw2nhwc_params_t<float>, float const*, flo", F::Memory},
        {"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<long>, at::detail::Array<char*, 2> >(int, at::native::CUDAFunctorO", F::Elementwise},
        {"void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Sc", F::Elementwise},
        {"void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 32, true, 1>(float, float, float, float, cudnnTensorStruct, float const*, cudnnTensorStruct, f", F::Norm},
        {"void cudnn::bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, 0>(cudnn::bn_fw_tr_1C11_args<float>)", F::Norm},
        {"void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>(cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4::Params)", F::Gemm},
        {"ampere_sgemm_32x32_sliced1x4_tn", F::Gemm},
        {"void cudnn::cnn::reduce_wgrad_nchw_helper<float, float>(void*, void const*, float, int, int)", F::Conv},
        {"_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock22ImplicitGemmMultistageINS_4gemm9GemmShapeILi128ELi128ELi32", F::Conv},
        {"sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_t", F::Conv},
        {"sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32_stage5_warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_infer", F::Conv},
        {"void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688dgrad_optimized_tf32_128x128_16x4_nhwc_unity_stride_align4>(cutlass_tensorop_s1688dgrad_optimiz", F::Conv},
        {"void cutlass_cudnn_train::Kernel<cutlass_tensorop_s1688wgrad_optimized_tf32_256x128_16x3_nhwc_align4>(cutlass_tensorop_s1688wgrad_optimized_tf32_256x1", F::Conv},
        {"cudnn_infer_ampere_scudnn_128x64_relu_xregs_large_nn_v1", F::Conv},
        {"ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", F::Comm},
        {"ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", F::Comm},
        {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, a", F::Elementwise},
        {"void at::native::vectorized_elementwise_kernel<4, at::native::neg_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#7}", F::Elementwise},
        {"void at::native::(anonymous namespace)::max_pool_backward_nchw<float, float>(float const*, long const*, int, long, long, long, int, int, int, int, int", F::Reduce},
        {"void at::native::(anonymous namespace)::CatArrayBatchedCopy_aligned16_contig<at::native::(anonymous namespace)::OpaqueType<4u>, unsigned int, 1, 128, ", F::Memory},
        {"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >(at::nati", F::Reduce},
        {"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous nam", F::Optimizer},
        {"void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, at::native::templates::cuda::uniform_and_transform<float", F::Elementwise},
        {"Memcpy DtoD (Device -> Device)", F::Memory},
        {"Memset (Device)", F::Memory},
        {"void cask_cudnn_infer::computeOffsetsKernel<false, false>(cask_cudnn_infer::ComputeOffsetsParams)", F::Conv},
    };
    for (const auto& [name, family] : names) {
        INFO(name);
        CHECK(family_name(classify_kernel(name)) == std::string(family_name(family)));
    }
}

TEST_CASE("kernel names of Blackwell-era inference and nvFuser traces fall into their families") {
    // tests/data/public: kineto/tracelens-b200-eager.json.gz (MoE inference on a B200: TensorRT-LLM's
    // generated GEMMs and MoE routing, vLLM kernels), nsys/fuser-h200-nsys-2024.6.sqlite, and a few
    // names of other public traces the new rules reach.
    const std::pair<const char*, F> names[] = {
        {"bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_schedP2x1x2x3_biasM_bN_tma_tmaOpt_clmp_swiGlu_dynBatch_sm100f",
         F::Gemm},
        {"bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_schedP2x1x2x3_biasM_bN_tmaOpt_clmp_dynBatch_sm100f",
         F::Gemm},
        {"nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT", F::Gemm},
        {"fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext", F::Attention},
        {"void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long, unsigned int**, unsigned long, unsigned long)",
         F::Comm},
        // Routing (top-k, histogram, offsets) is not a norm although its template says "Renormalize".
        {"void moe::dev::routing::routingIndicesHistogramKernel<moe::dev::routing::routingRenormalize::KernelParams<__nv_bfloat16, __nv_bfloat16, 128, false, true, true> >(moe::dev::routing::routingRenormalize::KernelParams<__nv_bfloat16, __nv_bfloat16, 128, false, true, true>)",
         F::Reduce},
        {"void moe::dev::routing::routingRenormalize::routingIndicesHistogramScoresKernel<moe::dev::routing::routingRenormalize::KernelParams<__nv_bfloat16, __nv_bfloat16, 128, false, true, true> >(moe::dev::routing::routingRenormalize::KernelParams<__nv_bfloat16, __nv_bfloat16, 128, false, true, true>)",
         F::Reduce},
        // Finalize sums each token's experts: no GEMM although its types are cutlass's.
        {"void moe::dev::finalize::finalizeKernelVecLoad<moe::dev::finalize::KernelParams<cutlass::bfloat16_t, cutlass::bfloat16_t, 4, true> >(moe::dev::finalize::KernelParams<cutlass::bfloat16_t, cutlass::bfloat16_t, 4, true>)",
         F::Reduce},
        // Quantization is per element, no attention although an argument is flashinfer's layout.
        {"void tensorrt_llm::kernels::quantize_with_block_size<(tensorrt_llm::BlockScaleQuantizationType)2, __nv_bfloat16, 32, true>(int, int, int, int, __nv_bfloat16 const*, float const*, unsigned int*, unsigned int*, flashinfer::QuantizationSFLayout)",
         F::Elementwise},
        // fbgemm_gpu's quantization (HolisticTraceAnalysis's sampled traces) is no GEMM either.
        {"void fbgemm_gpu::(anonymous namespace)::_compute_FP8_quantize_cuda_kernel<float>(float const*, float const*, int, int, unsigned char*, bool)",
         F::Elementwise},
        // A norm fused with its quantization is a norm (aiter, TraceLens's MI300X SGLang trace).
        {"_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi256ELi16ELb0ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiiiiib",
         F::Norm},
        // A MoE routing memset is a memset (vLLM's MI300X decode graph), its compute a reduction.
        {"_combined_routing_memset", F::Memory},
        {"_combined_routing_compute", F::Reduce},
        {"void vllm::scaled_fp8_quant_kernel_strided<c10::BFloat16, c10::Float8_e4m3fn>(c10::Float8_e4m3fn*, c10::BFloat16 const*, float const*, int, long, long)",
         F::Elementwise},
        {"std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, c10::BFloat16*, c10::BFloat16 const*, float, int, int)",
         F::Norm},
        {"void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, int, long, long, long, int, int, int)",
         F::Elementwise},
        {"_copy_page_indices_kernel", F::Memory},
        // nvFuser: the scheduler's name decides; "none" (scheduled by hand, the H200 export's) says
        // nothing. The other schedulers' names follow nvFuser's naming (SchedulerType's names).
        {"<unnamed>::nvfuser_pointwise_f0_c1_r0_g0(<unnamed>::Tensor<float, (int)2, (int)2>, <unnamed>::Tensor<float, (int)2, (int)2>)",
         F::Elementwise},
        {"<unnamed>::nvfuser_reduction_f0_c1_r0_g0(<unnamed>::Tensor<float, (int)2, (int)2>, <unnamed>::Tensor<float, (int)1, (int)1>)",
         F::Reduce},
        {"<unnamed>::nvfuser_inner_persistent_f0_c1_r0_g0(<unnamed>::Tensor<<unnamed>::__bfloat, (int)2, (int)2>)",
         F::Reduce},
        {"<unnamed>::nvfuser_inner_outer_persistent_f0_c1_r0_g1(<unnamed>::Tensor<<unnamed>::__bfloat, (int)2, (int)2>)",
         F::Reduce},
        {"<unnamed>::nvfuser_outer_persistent_f0_c1_r0_g0(<unnamed>::Tensor<float, (int)2, (int)2>)", F::Reduce},
        {"<unnamed>::nvfuser_transpose_f0_c1_r0_g0(<unnamed>::Tensor<float, (int)2, (int)2>)", F::Memory},
        {"<unnamed>::nvfuser_resize_f0_c1_r0_g0(<unnamed>::Tensor<float, (int)2, (int)2>)", F::Memory},
        {"<unnamed>::nvfuser_matmul_f0_c1_r0_g0(<unnamed>::Tensor<<unnamed>::__half, (int)2, (int)2>, <unnamed>::TensorMap)",
         F::Gemm},
        {"<unnamed>::nvfuser_none_f0_c0_r0_g0(<unnamed>::Tensor<<unnamed>::__half, (int)3, (int)3>, <unnamed>::Tensor<<unnamed>::__half, (int)3, (int)3>, <unnamed>::TensorMap, <unnamed>::TensorMap, <unnamed>::TensorMap, <unnamed>::Tensor<<unnamed>::__half, (int)2, (int)2>)",
         F::Other},
        {"nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NTT", F::Gemm},
    };
    for (const auto& [name, family] : names) {
        INFO(name);
        CHECK(family_name(classify_kernel(name)) == std::string(family_name(family)));
    }
}

TEST_CASE("family colours are distinct and a kernel's colour stays near its family's") {
    for (int a = 0; a < kFamilyCount; ++a)
        for (int b = a + 1; b < kFamilyCount; ++b) {
            uint32_t x = family_color(static_cast<F>(a)), y = family_color(static_cast<F>(b));
            int d = std::abs(red(x) - red(y)) + std::abs(green(x) - green(y)) + std::abs(blue(x) - blue(y));
            INFO(family_name(static_cast<F>(a)) << " vs " << family_name(static_cast<F>(b)));
            CHECK(d >= 60);
        }
    uint32_t g = family_color(F::Gemm), k = kernel_color(fixture::kAlpha);
    CHECK(std::abs(red(g) - red(k)) <= 40);
    CHECK(blue(k) > red(k));   // still blue
}

TEST_CASE("a folded run takes the family with the most time, from block sums or a scan alike") {
    // Keys are families directly; random durations; compare with a brute-force sum.
    std::mt19937_64 rng(7);
    Lane l;
    int64_t t = 0;
    for (int i = 0; i < 5000; ++i) {
        int64_t d = static_cast<int64_t>(rng() % 1000) + 1;
        int32_t key = static_cast<int32_t>(rng() % 4 == 0 ? rng() % kFamilyCount : (i / 700) % kFamilyCount);
        l.push(t, t + d, key, i);
        t += d + static_cast<int64_t>(rng() % 50);
    }
    l.finish();
    std::vector<uint8_t> class_of_key(kFamilyCount);
    for (int f = 0; f < kFamilyCount; ++f) class_of_key[static_cast<size_t>(f)] = static_cast<uint8_t>(f);
    l.classify(class_of_key, static_cast<uint8_t>(F::Other), kFamilyCount);
    for (int q = 0; q < 300; ++q) {
        size_t first = static_cast<size_t>(rng() % l.size());
        size_t count = 1 + static_cast<size_t>(rng() % (l.size() - first));
        std::vector<int64_t> sum(kFamilyCount, 0);
        for (size_t i = first; i < first + count; ++i) sum[static_cast<size_t>(l.key[i])] += l.t_end[i] - l.t_start[i];
        int64_t best = *std::max_element(sum.begin(), sum.end());
        uint8_t got = l.dominant_class(first, count);
        CHECK(sum[got] == best);
    }
    // prepare_lane hands the dominant class to each folded box, and the item's class to a lone item.
    auto items = prepare_lane(l, {0, t}, 400.f);
    REQUIRE(!items.empty());
    for (const DrawItem& d : items) {
        if (d.count == 1) CHECK(d.cls == static_cast<uint8_t>(l.key[d.first]));
        else CHECK(d.cls == l.dominant_class(d.first, d.count));
    }
}

TEST_CASE("the known trace's kernels are classified at load and their lanes carry the families") {
    fixture::TempPath p("known.db");
    fixture::write_known_trace(p.path);
    ViewTrace t = load_view_trace(p.path);
    REQUIRE(t.kernel_lanes.size() == 2);
    CHECK(t.kernel_lanes[0].item_class(0) == static_cast<uint8_t>(F::Gemm));
    CHECK(t.kernel_lanes[0].item_class(1) == static_cast<uint8_t>(F::Attention));
    CHECK(t.kernel_lanes[1].dominant_class(0, 200) == static_cast<uint8_t>(F::Elementwise));
    // Folded at full zoom-out, stream 8's run is elementwise, not a grey count box.
    auto items = prepare_lane(t.kernel_lanes[1], {0, 1000 * fixture::us}, 1000.f);
    REQUIRE(items.size() == 1);
    CHECK(items[0].cls == static_cast<uint8_t>(F::Elementwise));
    CHECK(t.family_ns[static_cast<size_t>(F::Gemm)] == 200 * fixture::us);
    CHECK(t.family_ns[static_cast<size_t>(F::Elementwise)] == 200 * 100);
    // A run's lanes are classified too.
    ViewRun r = load_view_run(t, 1);
    CHECK(r.kernel_lanes[0].item_class(1) == static_cast<uint8_t>(F::Attention));
}
