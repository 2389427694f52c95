#pragma once
// Kernel families: a kernel's name says what kind of work it is (a cuBLAS GEMM, a flash-attention
// kernel, an NCCL collective...). The timeline colours kernels by family, as Nsight Systems and
// Perfetto users read them, so that a folded box still says what dominates it.
#include <cstdint>
#include <string_view>

namespace mhc::viewer {

enum class KernelFamily : uint8_t {
    Gemm,          // cuBLAS / CUTLASS matrix multiplies (xmma, sgemm, s16816gemm, ...)
    Conv,          // cuDNN convolutions (implicit GEMM fprop/dgrad/wgrad)
    Attention,     // flash / fused / memory-efficient attention
    Norm,          // layer norm, RMS norm, batch norm
    Elementwise,   // pointwise: activations, dropout, add, rotary, fill
    Reduce,        // reductions, softmax, pooling, losses
    Comm,          // NCCL / RCCL collectives and send/recv
    Sinkhorn,      // mHC's Sinkhorn-Knopp projection
    HcMix,         // mHC's other stream-mixing kernels (pre/res/post mix, expand, merge)
    Memory,        // memcpy / memset kernels, copies, layout transposes, gathers and scatters
    Optimizer,     // Adam / SGD / multi-tensor-apply (foreach) updates and grad-norm
    Other,
};
inline constexpr int kFamilyCount = 12;

KernelFamily classify_kernel(std::string_view name);
const char* family_name(KernelFamily f);   // "GEMM", "attention", ...

}  // namespace mhc::viewer
