#pragma once
// Internal interface of the CPU Sinkhorn kernels. The fused kernels work on blocks of W
// tokens in structure-of-arrays layout (value k of lane l at blk[k][l]) so that every inner
// loop runs across W independent tokens and vectorises. forward.cpp, backward.cpp and
// log_domain.cpp are compiled once per instruction set (namespace generic/avx2/avx512) and
// the best one the machine supports is picked at run time (dispatch.cpp).
#include <cstdint>

#include "mhc/kernels/sinkhorn.hpp"

namespace mhc::kernels::cpu {

inline constexpr int W = 32;  // tokens per block: two AVX-512 registers of floats (ILP)

struct Job {
    SinkhornOptions opt;
    ConstTensor H, G;  // G only for backward
    Tensor P, dH;      // P may be null in backward
    float* scratch;    // per-thread: scratch_floats(opt) floats, 64-byte aligned
};

// Convergence figures of a token range; plain data (no inline members) because the per-ISA
// translation units must not share out-of-line code with each other.
struct RangeStats {
    double max_row = 0, max_col = 0;
    double worst_err = -1;
    int64_t worst_token = -1;
    int64_t iter_sum = 0;
    int iter_max = 0;
};
void merge(RangeStats& into, const RangeStats& from);

// Floats of scratch one thread needs (the backward keeps per-step scaling vectors).
int64_t scratch_floats(const SinkhornOptions& opt, bool backward);

using RangeFn = void (*)(const Job&, int64_t t0, int64_t t1, RangeStats&);
struct IsaTable {
    const char* name;
    RangeFn forward, backward, log_forward, log_backward;
};

#define MHC_DECLARE_ISA(ns)                                      \
    namespace ns {                                               \
    void forward(const Job&, int64_t, int64_t, RangeStats&);     \
    void backward(const Job&, int64_t, int64_t, RangeStats&);    \
    void log_forward(const Job&, int64_t, int64_t, RangeStats&); \
    void log_backward(const Job&, int64_t, int64_t, RangeStats&); \
    }
MHC_DECLARE_ISA(generic)
MHC_DECLARE_ISA(avx2)
MHC_DECLARE_ISA(avx512)
#undef MHC_DECLARE_ISA

const IsaTable& isa();

}  // namespace mhc::kernels::cpu
