// Kernel-name families by ordered substring rules on the lower-cased name. Order matters:
// "ncclDevKernel_ReduceScatter" is communication before it is a reduction, a cuDNN implicit
// GEMM is a convolution before it is a GEMM, "LpNormFunctor" inside multi_tensor_apply is the
// optimizer's grad norm, not a layer norm.
#include "mhc/viewer/families.hpp"

#include <array>
#include <string>

#include "mhc/trace/comm_kernels.hpp"

namespace mhc::viewer {

namespace {

struct Rule {
    KernelFamily family;
    std::array<const char*, 10> needles;   // any of them (nullptr ends the list)
};

// clang-format off
constexpr Rule kRules[] = {
    {KernelFamily::Comm, {"allreduce", "all_reduce", "allgather", "all_gather", "reducescatter", "reduce_scatter",
                          "alltoall", "sendrecv"}},
    {KernelFamily::Sinkhorn, {"sinkhorn"}},
    {KernelFamily::HcMix, {"mhc_pre_mix", "mhc_res_mix", "mhc_post_mix", "mhc_expand", "mhc_merge"}},
    {KernelFamily::Attention, {"flash", "fmha", "attention", "attn", "sdpa", "mem_eff"}},
    {KernelFamily::Optimizer, {"adam", "sgd", "momentum", "multi_tensor_apply", "optimizer"}},
    {KernelFamily::Memory, {"memcpy", "memset", "copy", "nchwtonhwc", "nhwctonchw", "transpose", "indexselect",
                            "index_select", "gather", "scatter"}},
    {KernelFamily::Memory, {"embedding"}},
    {KernelFamily::Conv, {"convolution", "conv1d", "conv2d", "conv3d", "implicit_gemm", "fprop", "scudnn", "wgrad_nchw", "dgrad_optimized",
                          "winograd"}},
    {KernelFamily::Conv, {"wgrad_optimized", "conv_"}},
    {KernelFamily::Gemm, {"gemm", "gemv", "matmul", "cublas", "cutlass", "xmma", "dot_kernel"}},
    // Random-number kernels ("normal", "distribution") before "norm".
    {KernelFamily::Elementwise, {"distribution", "normal_kernel", "philox", "curand"}},
    {KernelFamily::Norm, {"norm", "rms<", "rms_", "_rms", "gammabeta", "bn_fw", "bn_bw", "welford"}},
    {KernelFamily::Reduce, {"softmax", "reduce", "cross_entropy", "nll_loss", "pool", "argmax", "topk", "cumsum",
                            "sum_kernel", "mean"}},
    {KernelFamily::Elementwise, {"elementwise", "functor", "unrolled", "dropout", "masked_scale", "fill",
                                 "rotary", "gelu", "silu", "relu"}},
    {KernelFamily::Elementwise, {"tanh", "sigmoid", "pointwise", "activation", "clamp", "where_kernel"}},
};
// clang-format on

}  // namespace

KernelFamily classify_kernel(std::string_view name) {
    if (trace::is_comm_kernel(name)) return KernelFamily::Comm;   // NCCL/RCCL first, as the first rule
    std::string low(name);
    for (char& c : low)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    for (const Rule& r : kRules)
        for (const char* n : r.needles) {
            if (!n) break;
            if (low.find(n) != std::string::npos) return r.family;
        }
    return KernelFamily::Other;
}

const char* family_name(KernelFamily f) {
    static constexpr const char* k[kFamilyCount] = {"GEMM", "conv", "attention", "norm", "elementwise", "reduce/softmax",
                                                    "NCCL/comm", "Sinkhorn", "mHC mix", "memory/copy", "optimizer", "other"};
    auto i = static_cast<int>(f);
    return (i >= 0 && i < kFamilyCount) ? k[i] : "other";
}

}  // namespace mhc::viewer
