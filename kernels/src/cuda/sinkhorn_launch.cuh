#pragma once
// What the host side of the CUDA Sinkhorn (sinkhorn.cu) hands the kernels: the launch's
// arguments and one launch function per kernel. The kernels themselves (sinkhorn_kernels.cuh)
// are instantiated in sinkhorn_{forward,backward}_{plain,log}.cu, one translation unit per
// direction and variant, so that they compile in parallel.
#include <cuda_runtime.h>

#include <cstdint>

#include "sinkhorn_steps.cuh"

namespace mhc::kernels::cuda_impl::sk {

constexpr int kThreads = 256;

struct Args {
    const void* H;
    const void* G;
    void* P;
    void* dH;
    bool h_bf16, out_bf16;
    int64_t t_begin, t_end;  // token range of this launch
    int n, iters;
    float eps, tol;
    bool column_first;
    float* hist;             // backward: [iters * 2n][chunk] floats
    int64_t chunk;
    Stats* stats;
    bool generic;   // n = 4 through the run-time-n kernels (buffers not 16-byte aligned)
};

// Launches the forward (BACKWARD false) or backward kernel, plain or log-domain (LOG), for
// the tokens [a.t_begin, a.t_end) on stream s: n = 4 specialised (unless a.generic), any other n
// at run time.
// Throws mhc::Error when the launch fails.
template <bool LOG, bool BACKWARD>
void launch(const Args& a, cudaStream_t s);

// The fused n = 4 kernels (sinkhorn_fused.cuh): all T tokens in one launch.
constexpr int kFusedForwardThreads = 256;
constexpr int kFusedBackwardThreads = 64;

struct FusedArgs {
    const void* H;
    const void* G;
    void* P;   // backward: may be null
    void* dH;
    bool h_bf16, out_bf16;
    bool vec;   // every buffer 16-byte aligned: vector loads and stores
    bool column_first;
    int64_t T;
    int iters;
    float eps, tol;
    int sms;   // multiprocessors: the grid fills them once
    Stats* stats;
};

// Shared memory of one fused backward block: each thread's 2 x 4 floats per iteration.
inline size_t fused_backward_smem(int iters) {
    return static_cast<size_t>(iters) * 2 * sizeof(float) * 4 * kFusedBackwardThreads;
}

// Records `start` on s just before the kernel (after the host-side set-up), then launches it.
template <bool LOG, bool BACKWARD> void launch_fused(const FusedArgs& a, cudaStream_t s, cudaEvent_t start);

}  // namespace mhc::kernels::cuda_impl::sk
