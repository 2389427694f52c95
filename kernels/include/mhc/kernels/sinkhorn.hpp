#pragma once
// Batched Sinkhorn-Knopp the mHC way: T tokens, each an n×n matrix of logits H (row-major,
// tokens contiguous). M0 = exp(H - rowmax(H)); then `iters` iterations, each a row
// normalisation followed by a column normalisation (or the reverse with column_first), with
// eps added to every denominator. With tol > 0 a token stops as soon as its largest
// row/column-sum error is <= tol (iters is then the cap). Arithmetic is fp32 throughout;
// inputs and outputs may be fp32 or bf16.
//
// The log-domain variant normalises log M by logsumexp instead (no eps: it never divides),
// so it survives inputs whose exponentials under- or overflow in fp32.
#include <cstdint>
#include <string>
#include <vector>

#include "mhc/kernels/types.hpp"

namespace mhc::kernels {

inline constexpr int kSinkhornMinN = 2;
inline constexpr int kSinkhornMaxN = 16;
inline constexpr int kSinkhornMaxIters = 100000;

// Which CUDA kernels run (Device::Cuda only). Fused: n = 4 in one pass per call, the backward's
// history in shared memory (other n, and a backward whose history does not fit, run the first
// version's kernels). Baseline: the first version's kernels throughout, kept so that one
// benchmark run measures both. Default: Baseline (the set a GPU has run), or what
// MHC_CUDA_SINKHORN=fused|baseline says.
enum class CudaSinkhornKernels { Default, Fused, Baseline };
const char* to_string(CudaSinkhornKernels kernels);

struct SinkhornOptions {
    int n = 4;
    int iters = 20;            // fixed count, or the cap when tol > 0
    float eps = 1e-6f;         // plain variant only
    float tol = 0.0f;          // 0: run exactly `iters` iterations
    bool column_first = false; // column normalisation first in each iteration
    bool log_domain = false;
    Device device = Device::Cpu;
    int threads = 0;           // CPU worker threads; 0 = all hardware threads
    CudaSinkhornKernels cuda_kernels = CudaSinkhornKernels::Default;
};

// Convergence of one call: the largest |row sum - 1| and |column sum - 1| over the output
// matrices (computed in fp32 from the fp32 result, before any bf16 rounding of the output).
struct SinkhornReport {
    int64_t tokens = 0;
    double max_row_err = 0.0;
    double max_col_err = 0.0;
    int64_t worst_token = -1;  // a token attaining max(max_row_err, max_col_err)
    int iters_max = 0;         // iterations run (== iters unless tol > 0)
    double iters_mean = 0.0;
    std::string backend;       // e.g. "cpu-avx512 x2 threads", "cuda-fused", "cuda-baseline"
    double seconds = 0.0;      // the computation alone: CPU wall time; CUDA kernel time (events)
};

// P = sinkhorn(H). H and P hold T*n*n elements. Throws mhc::Error on bad options or an
// unusable device; never checks the values (see first_nonfinite_token).
SinkhornReport sinkhorn_forward(const SinkhornOptions& opt, int64_t T, ConstTensor H, Tensor P);

// dH = (d sinkhorn / dH)^T G, exact through the iterations (the forward is recomputed, its
// per-step scalings kept). P, when given, receives the forward result as well.
SinkhornReport sinkhorn_backward(const SinkhornOptions& opt, int64_t T, ConstTensor H,
                                 ConstTensor G, Tensor dH, Tensor P = {});

// The straightforward implementation the fused one is measured against: fp32 in place, one
// multi-threaded pass over all T matrices for the exponential and for every normalisation
// (as a chain of array operations would do). Plain variant, CPU only, fixed iterations.
void sinkhorn_forward_naive(const SinkhornOptions& opt, int64_t T, const float* H, float* P);

// First token whose n*n values contain a NaN or an infinity, or -1. CPU memory only.
int64_t first_nonfinite_token(int n, int64_t T, ConstTensor H);

// Validates the options (n range, iters, eps, tol); throws mhc::Error naming the field.
void validate(const SinkhornOptions& opt);

// The CUDA kernels a call with these options runs: `kernels` itself unless Default, then
// MHC_CUDA_SINKHORN (fused or baseline; throws mhc::Error for any other value), else Baseline.
CudaSinkhornKernels resolve_cuda_kernels(CudaSinkhornKernels kernels);

// CPU code paths: the fused kernels are compiled for several instruction sets and the best
// one the machine supports is used ("avx512", "avx2", "generic"). Tests and benchmarks may
// force one; the environment variable MHC_CPU_ISA does the same at start-up.
const char* cpu_isa();
std::vector<std::string> available_cpu_isas();
void set_cpu_isa(const std::string& name);  // throws mhc::Error if unknown or unsupported

}  // namespace mhc::kernels
