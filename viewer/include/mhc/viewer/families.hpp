#pragma once
// Kernel families: a kernel's name says what kind of work it is (a cuBLAS GEMM, a flash-attention
// kernel, an NCCL collective...). The timeline colours kernels by family, as Nsight Systems and
// Perfetto users read them, so that a folded box still says what dominates it.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mhc::viewer {

enum class KernelFamily : uint8_t {
    Gemm,          // cuBLAS / cuBLASLt / CUTLASS / rocBLAS matrix multiplies (xmma, sgemm, nvjet, Cijk,
                   // TensorRT-LLM bmm_..., ...)
    Conv,          // cuDNN / MIOpen convolutions (implicit GEMM fprop/dgrad/wgrad, winograd, engines)
    Attention,     // flash / fused / memory-efficient attention
    Norm,          // layer norm, RMS norm, batch norm, group norm
    Elementwise,   // pointwise: activations, dropout, add, rotary, fill, random numbers, quantization,
                   // Triton and nvFuser pointwise
    Reduce,        // reductions, softmax, pooling, losses, Triton and nvFuser reductions, MoE routing
    Comm,          // NCCL / RCCL collectives and send/recv
    Sinkhorn,      // mHC's Sinkhorn-Knopp projection
    HcMix,         // mHC's other stream-mixing kernels (pre/res/post mix, expand, merge)
    Memory,        // memcpy / memset kernels, copies, layout transposes, gathers and scatters, tensor
                   // creation and views (an execution trace's aten::empty, as_strided, detach...)
    Optimizer,     // Adam / SGD / multi-tensor-apply (foreach) updates and grad-norm
    Other,
};
inline constexpr int kFamilyCount = 12;

// The built-in rules (families.cpp): PyTorch's aten op names first, then ordered substring rules
// on the lower-cased name.
KernelFamily classify_kernel(std::string_view name);
const char* family_name(KernelFamily f);   // "GEMM", "attention", ... (the legend's words)
const char* family_key(KernelFamily f);    // "gemm", "attention", ... (the rules file's words)
// A family from its key or its legend name, case-insensitive; false when it is neither.
bool parse_family(std::string_view text, KernelFamily& out);

// The user's rules before the built-in ones: "a name containing NEEDLE is FAMILY", checked in the
// order added, case-insensitive. A kernel no user rule matches gets the built-in family.
class FamilyRules {
public:
    void add(KernelFamily family, std::string needle);
    // Reads a rules file (docs/viewer.md, "Kernel families"): one rule per line, `FAMILY NEEDLE`
    // (the needle is the rest of the line, trimmed); `#` starts a comment line; blank lines are
    // skipped. Throws mhc::Error "FILE:LINE: ..." on an unknown family or a rule without a needle.
    void load_file(const std::string& path);
    KernelFamily classify(std::string_view name) const;
    size_t size() const { return rules_.size(); }

private:
    struct Rule {
        KernelFamily family;
        std::string needle;   // lower case
    };
    std::vector<Rule> rules_;
};

}  // namespace mhc::viewer
