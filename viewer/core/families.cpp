// Kernel-name families. PyTorch op names (execution traces without Kineto name their "kernels"
// aten::add, aten::empty_strided, ...) are looked up whole; every other name goes through ordered
// substring rules on the lower-cased name. Order matters: "ncclDevKernel_ReduceScatter" is
// communication before it is a reduction, a cuDNN implicit GEMM is a convolution before it is a
// GEMM, "LpNormFunctor" inside multi_tensor_apply is the optimizer's grad norm, not a layer norm,
// and a Triton kernel's kind (pointwise, reduction, template) decides before the ops in its name.
#include "mhc/viewer/families.hpp"

#include <array>
#include <filesystem>
#include <sstream>
#include <string>

#include "mhc/common/error.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/common/small_file.hpp"
#include "mhc/trace/comm_kernels.hpp"

namespace mhc::viewer {

namespace {

using F = KernelFamily;

struct Rule {
    F family;
    std::array<const char*, 10> needles;   // any of them (nullptr ends the list)
};

// clang-format off
constexpr Rule kRules[] = {
    {F::Comm, {"allreduce", "all_reduce", "allgather", "all_gather", "reducescatter",
               "reduce_scatter", "alltoall", "sendrecv"}},
    // Collectives outside NCCL: vLLM's and SGLang's custom all-reduce (cross_device_reduce_1stage),
    // NVSHMEM and DeepEP's expert dispatch/combine, NVLink SHARP (multimem) reductions.
    {F::Comm, {"cross_device_reduce", "nvshmem", "deep_ep", "multimem"}},
    // Quantization (TensorRT-LLM's quantize_with_block_size, vLLM's scaled_fp8_quant, fbgemm_gpu's
    // FP8 quantize): a scale and a cast per element, before "flash" (TensorRT-LLM's arguments name
    // flashinfer's layouts) and "gemm" (fbgemm); a norm fused with its quantization is a norm.
    {F::Norm, {"rmsnorm", "rms_norm", "layernorm", "layer_norm"}},
    {F::Elementwise, {"quantize_", "_quant_kernel", "dequantize_"}},
    {F::Sinkhorn, {"sinkhorn"}},
    {F::HcMix, {"mhc_pre_mix", "mhc_res_mix", "mhc_post_mix", "mhc_expand", "mhc_merge"}},
    // vLLM's KV-cache writes (reshape_and_cache_flash_kernel, concat_and_cache_mla_kernel) copy
    // keys and values into their blocks: a copy, though named after the attention backend.
    {F::Memory, {"reshape_and_cache", "concat_and_cache"}},
    {F::Attention, {"flash", "fmha", "attention", "attn", "sdpa", "mem_eff"}},
    // Triton (torch.compile): triton_poi_* pointwise, triton_red_* / triton_per_* reductions,
    // triton_tem_* templates (matmul, conv).
    {F::Gemm, {"triton_tem"}},
    {F::Reduce, {"triton_red", "triton_per"}},
    {F::Elementwise, {"triton_"}},
    // nvFuser names a kernel after the scheduler that made it (nvfuser_pointwise_f0_c1_r0_g0):
    // pointwise, reduction, inner/outer persistent (normalizations and softmax held on chip),
    // transpose, matmul, resize (slices, pads, concatenations). "none" is a fusion scheduled by
    // hand: nothing to go by.
    {F::Elementwise, {"nvfuser_pointwise"}},
    {F::Reduce, {"nvfuser_reduction", "nvfuser_inner_", "nvfuser_outer_"}},
    {F::Memory, {"nvfuser_transpose", "nvfuser_resize"}},
    {F::Gemm, {"nvfuser_matmul"}},
    {F::Optimizer, {"adam", "sgd", "momentum", "multi_tensor_apply", "optimizer"}},
    {F::Memory, {"memcpy", "memset", "copy", "nchwtonhwc", "nhwctonchw", "transpose", "indexselect",
                 "index_select", "gather", "scatter"}},
    // A rotary position embedding (vLLM's rotary_embedding_kernel) is arithmetic per element, no lookup.
    {F::Elementwise, {"rotary"}},
    {F::Memory, {"embedding", "detach", "as_strided"}},
    // Mixture-of-experts routing (TensorRT-LLM's moe::dev::routing::routingIndices*Kernel: top-k
    // experts, their histogram and offsets; its routingRenormalize is no norm) and finalize (each
    // token's weighted sum over its experts' outputs, templated on cutlass types), before "norm"
    // and "cutlass"; a routing memset stays a memset.
    {F::Reduce, {"routing", "moe::dev::finalize", "moe_align", "moe_sum"}},
    // cuDNN: implicit-GEMM and winograd kernels, the legacy engines (dgrad_engine, wgrad_alg0_engine,
    // dgrad2d_alg1_1, implicit_convolve_sgemm) and their helpers; CUTLASS's and xmma's fprop/dgrad/wgrad;
    // MIOpen's naive, assembly (miopenSp3AsmConv, MIOpenCvD3x3) and implicit-GEMM convolutions; Composable Kernel's grouped convolutions (DeviceGroupedConvFwd...).
    // A GEMM of a linear layer's data or weight gradient (gemm_wgrad, wgrad_gemm) is no convolution's.
    {F::Conv, {"convolution", "conv1d", "conv2d", "conv3d", "implicit_gemm", "fprop", "scudnn", "winograd"}},
    {F::Gemm, {"gemm_wgrad", "gemm_dgrad", "wgrad_gemm", "dgrad_gemm"}},
    {F::Conv, {"dgrad", "wgrad"}},
    {F::Conv, {"convolve", "conv_", "convfwd", "convbwd", "im2col", "col2im", "miopensp", "miopenconv", "miopencv",
               "cask_cudnn"}},
    // cuDNN's FFT convolutions: the input and filter to the frequency domain (fft2d_r2c_16x16,
    // fft1d_r2c_32), their product summed over channels, back (fft2d_c2r_64x64), the filter flipped
    // for the data gradient (their complex GEMMs stay GEMMs, their transposes copies; cuFFT's own
    // kernels, regular_fft/vector_fft, are not named so); MIOpen's igemm_fwd_gtc, igemm_wrw_gtc.
    {F::Conv, {"fft1d_", "fft2d_", "fft3d_", "flip_filter", "pointwise_mult_and_sum_complex", "igemm_"}},
    // BLAS level 1 and matrix add (cuBLAS/rocBLAS scal_kernel, axpy_kernel, geam), before "cublas".
    {F::Elementwise, {"scal_kernel", "axpy", "geam"}},
    {F::Gemm, {"gemm", "gemv", "matmul", "cublas", "cutlass", "xmma", "dot_kernel", "splitkreduce", "nvjet", "cijk_"}},
    // cuBLASLt's epilogue kernels (bias, activation after a GEMM), MAGMA's GEMMs, TensorRT-LLM's
    // generated batched GEMMs (bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16x256..., the MoE experts'
    // grouped GEMMs on Blackwell), vLLM's Triton fused_moe_kernel.
    {F::Gemm, {"epilogue::impl", "magma_", "bmm_", "fused_moe_kernel"}},
    // Random-number kernels ("normal", "distribution") before "norm".
    {F::Elementwise, {"distribution", "normal_kernel", "philox", "curand"}},
    // Group norm's moments and fused parameters (PyTorch group_norm_kernel.cu).
    {F::Norm, {"norm", "rms<", "rms_", "_rms", "gammabeta", "bn_fw", "bn_bw", "welford", "rowwisemoments",
               "internalgradients"}},
    {F::Norm, {"fusedparams"}},
    {F::Reduce, {"softmax", "reduce", "cross_entropy", "nll_loss", "pool", "argmax", "topk", "cumsum",
                 "sum_kernel", "mean"}},
    {F::Reduce, {"mse_", "loss", "argmin", "criterion"}},
    // Sorts and prefix sums (CUB's DeviceRadixSortOnesweepKernel and DeviceScanKernel, rocPRIM's
    // scans, searchsorted): the embedding backward's and MoE routing's ordering of indices;
    // Triton MoE routing's row sums of its expert bit matrix (_sum_bitmatrix_rows).
    {F::Reduce, {"sort", "scan", "histogram", "bitmatrix"}},
    {F::Elementwise, {"elementwise", "functor", "unrolled", "dropout", "masked_scale", "fill",
                      "rotary", "gelu", "silu", "relu"}},
    // cuDNN's scalePackedTensor scales a tensor by beta between convolution passes; MIOpen's
    // SubTensorOpWithScalar1d / SubTensorOpWithCastTensor1d set, scale or cast a (sub)tensor.
    {F::Elementwise, {"tanh", "sigmoid", "pointwise", "activation", "clamp", "where_kernel", "threshold",
                      "scalepackedtensor", "subtensorop"}},
    // Index arithmetic and lookups (fbgemm's linearize_index_kernel and bounds_check_indices_kernel,
    // PyTorch's indexing_backward_kernel), a KV cache written (SGLang's store_kvcache, vLLM's
    // reshape_and_cache above), last so that a named operation decides first.
    {F::Memory, {"index", "indices", "kvcache", "kv_cache", "and_cache"}},
    // The libraries themselves, for a kernel no rule above names: cuDNN's are its convolution
    // engines (its norms, pools, activations and softmax matched above), the BLAS libraries' GEMMs.
    {F::Conv, {"cudnn"}},
    {F::Gemm, {"rocblas", "hipblas", "tensile"}},
};

// PyTorch op names (after "aten::", without an in-place "_"), for traces whose kernels are ops.
struct AtenOp {
    const char* op;
    F family;
};
constexpr AtenOp kAtenOps[] = {
    {"mm", F::Gemm}, {"addmm", F::Gemm}, {"bmm", F::Gemm}, {"baddbmm", F::Gemm}, {"matmul", F::Gemm},
    {"linear", F::Gemm}, {"addmv", F::Gemm}, {"dot", F::Gemm},
    {"convolution", F::Conv}, {"_convolution", F::Conv}, {"cudnn_convolution", F::Conv},
    {"add", F::Elementwise}, {"sub", F::Elementwise}, {"mul", F::Elementwise}, {"div", F::Elementwise},
    {"fill", F::Elementwise}, {"zero", F::Elementwise}, {"uniform", F::Elementwise}, {"normal", F::Elementwise},
    {"pow", F::Elementwise}, {"exp", F::Elementwise}, {"sqrt", F::Elementwise}, {"rsqrt", F::Elementwise},
    {"neg", F::Elementwise}, {"abs", F::Elementwise}, {"addcmul", F::Elementwise}, {"addcdiv", F::Elementwise},
    {"lerp", F::Elementwise}, {"where", F::Elementwise}, {"ones_like", F::Elementwise}, {"zeros_like", F::Elementwise},
    {"empty", F::Memory}, {"empty_strided", F::Memory}, {"empty_like", F::Memory}, {"to", F::Memory},
    {"_to_copy", F::Memory}, {"copy", F::Memory}, {"clone", F::Memory}, {"contiguous", F::Memory},
    {"view", F::Memory}, {"_unsafe_view", F::Memory}, {"reshape", F::Memory}, {"as_strided", F::Memory},
    {"t", F::Memory}, {"transpose", F::Memory}, {"permute", F::Memory}, {"expand", F::Memory},
    {"unsqueeze", F::Memory}, {"squeeze", F::Memory}, {"slice", F::Memory}, {"select", F::Memory},
    {"cat", F::Memory}, {"stack", F::Memory}, {"split", F::Memory}, {"chunk", F::Memory},
    {"detach", F::Memory}, {"lift_fresh", F::Memory}, {"is_same_size", F::Memory}, {"set", F::Memory},
    // Bookkeeping without arithmetic (dtype promotion, aliases, stream and pinning queries),
    // and .item()'s copy to the host.
    {"result_type", F::Memory}, {"_reshape_alias", F::Memory}, {"resize", F::Memory}, {"record_stream", F::Memory},
    {"is_pinned", F::Memory}, {"resolve_conj", F::Memory}, {"resolve_neg", F::Memory},
    {"_local_scalar_dense", F::Memory}, {"log", F::Elementwise}, {"remainder", F::Elementwise},
    {"sum", F::Reduce}, {"mean", F::Reduce}, {"max", F::Reduce}, {"min", F::Reduce}, {"amax", F::Reduce},
    {"norm", F::Reduce}, {"_foreach_norm", F::Optimizer},
};
// clang-format on

std::string lower(std::string_view s) {
    std::string low(s);
    for (char& c : low)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return low;
}

bool aten_op_family(const std::string& op, F& out) {
    if (op.rfind("_foreach_", 0) == 0) {
        out = F::Optimizer;
        return true;
    }   // _foreach_lerp_, _foreach_mul_
    for (const AtenOp& a : kAtenOps)
        if (op == a.op) { out = a.family; return true; }
    return false;
}

// "aten::empty_strided" -> "empty_strided"; "aten::fill_" -> "fill"; overloads ("add.Tensor") cut.
// An autograd node ("AddBackward0", "autograd::engine::evaluate_function: MmBackward0") is its
// op's gradient: the op's family, but an expand's gradient sums over the broadcast dimensions.
bool aten_family(const std::string& low, F& out) {
    if (low.rfind("aten::", 0) == 0) {
        std::string op = low.substr(6);
        if (auto cut = op.find_first_of(".( "); cut != std::string::npos) op.resize(cut);
        if (op.size() > 1 && op.back() == '_') op.pop_back();
        return aten_op_family(op, out);
    }
    size_t at = low.rfind("backward");
    if (at == std::string::npos || at == 0 || low.find_first_not_of("0123456789", at + 8) != std::string::npos)
        return false;
    size_t from = low.find_last_of(" :", at);
    std::string op = low.substr(from == std::string::npos ? 0 : from + 1,
                                at - (from == std::string::npos ? 0 : from + 1));
    if (op == "expand") {
        out = F::Reduce;
        return true;
    }
    return !op.empty() && aten_op_family(op, out);
}

constexpr const char* kNames[kFamilyCount] = {"GEMM", "conv", "attention", "norm", "elementwise", "reduce/softmax",
                                              "NCCL/comm", "Sinkhorn", "mHC mix", "memory/copy", "optimizer", "other"};
constexpr const char* kKeys[kFamilyCount] = {"gemm", "conv", "attention", "norm", "elementwise", "reduce",
                                             "comm", "sinkhorn", "mix", "memory", "optimizer", "other"};

std::string trim(const std::string& s) {
    size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
    return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

}  // namespace

KernelFamily classify_kernel(std::string_view name) {
    if (trace::is_comm_kernel(name)) return F::Comm;   // NCCL/RCCL first, as the first rule
    std::string low = lower(name);
    F aten;
    if (aten_family(low, aten)) return aten;
    for (const Rule& r : kRules)
        for (const char* n : r.needles) {
            if (!n) break;
            if (low.find(n) != std::string::npos) return r.family;
        }
    return F::Other;
}

const char* family_name(KernelFamily f) {
    auto i = static_cast<int>(f);
    return (i >= 0 && i < kFamilyCount) ? kNames[i] : "other";
}

const char* family_key(KernelFamily f) {
    auto i = static_cast<int>(f);
    return (i >= 0 && i < kFamilyCount) ? kKeys[i] : "other";
}

bool parse_family(std::string_view text, KernelFamily& out) {
    std::string low = lower(text);
    for (int i = 0; i < kFamilyCount; ++i)
        if (low == kKeys[i] || low == lower(kNames[i])) { out = static_cast<F>(i); return true; }
    return false;
}

void FamilyRules::add(KernelFamily family, std::string needle) { rules_.push_back({family, lower(needle)}); }

void FamilyRules::load_file(const std::string& path) {
    // A named pipe waited for a writer and /dev/zero was read without end (mhc-view hung before its
    // window); a folder read as an empty file of no rules: refused as mhc refuses its inputs.
    refuse_special_file(path);
    if (!std::filesystem::exists(path)) throw Error(path + ": cannot read the kernel family rules (no such file or not readable)");
    std::istringstream in(read_small_file(path, "file of kernel family rules"));
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        std::string s = trim(line);
        if (s.empty() || s[0] == '#') continue;
        size_t sp = s.find_first_of(" \t");
        std::string fam = s.substr(0, sp), needle = sp == std::string::npos ? "" : trim(s.substr(sp));
        KernelFamily f;
        std::string where = path + ":" + std::to_string(n) + ": ";
        if (!parse_family(fam, f)) {
            std::string keys;
            for (const char* k : kKeys) keys += (keys.empty() ? "" : ", ") + std::string(k);
            throw Error(where + "unknown family '" + fam + "' (one of " + keys + ")");
        }
        if (needle.empty()) throw Error(where + "a rule is FAMILY NEEDLE: no text to look for after '" + fam + "'");
        add(f, needle);
    }
}

KernelFamily FamilyRules::classify(std::string_view name) const {
    if (!rules_.empty()) {
        std::string low = lower(name);
        for (const Rule& r : rules_)
            if (low.find(r.needle) != std::string::npos) return r.family;
    }
    return classify_kernel(name);
}

}  // namespace mhc::viewer
