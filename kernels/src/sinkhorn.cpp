// Public Sinkhorn entry points: validation, then the CPU kernels (split across threads) or
// the CUDA ones.
#include "mhc/kernels/sinkhorn.hpp"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "cpu/cpu_sinkhorn.hpp"
#include "cpu/threads.hpp"
#include "cuda_backend.hpp"
#include "mhc/common/environment.hpp"
#include "mhc/common/error.hpp"
#include "mhc/kernels/device.hpp"

namespace mhc::kernels {

const char* to_string(Device d) { return d == Device::Cpu ? "cpu" : "cuda"; }
const char* to_string(DType t) { return t == DType::F32 ? "f32" : "bf16"; }

const char* to_string(CudaSinkhornKernels kernels) {
    return kernels == CudaSinkhornKernels::Fused      ? "fused"
           : kernels == CudaSinkhornKernels::Baseline ? "baseline"
                                                      : "default";
}

CudaSinkhornKernels resolve_cuda_kernels(CudaSinkhornKernels kernels) {
    if (kernels != CudaSinkhornKernels::Default) return kernels;
    const char* env = std::getenv("MHC_CUDA_SINKHORN");
    // The first version's kernels are the ones a GPU has run and checked (an H200, 2026-12-04);
    // the fused ones become the default once the GPU tests pass with them (docs/kernels.md).
    if (!env || !*env) return CudaSinkhornKernels::Baseline;
    const std::string value = env;
    if (value == "fused") return CudaSinkhornKernels::Fused;
    if (value == "baseline") return CudaSinkhornKernels::Baseline;
    throw Error(env_refusal("MHC_CUDA_SINKHORN", value, "use fused or baseline"));
}

void validate(const SinkhornOptions& o) {
    if (o.n < kSinkhornMinN || o.n > kSinkhornMaxN)
        throw Error("n = " + std::to_string(o.n) + " is outside " + std::to_string(kSinkhornMinN) + ".." +
                    std::to_string(kSinkhornMaxN));
    if (o.iters < 1 || o.iters > kSinkhornMaxIters)
        throw Error("iters = " + std::to_string(o.iters) + " is outside 1.." + std::to_string(kSinkhornMaxIters));
    if (!(o.eps >= 0.0f) || !std::isfinite(o.eps))
        throw Error("eps must be a finite number >= 0");
    if (!o.log_domain && o.eps == 0.0f)
        throw Error("eps must be > 0 for the plain variant (it guards every division)");
    if (!(o.tol >= 0.0f) || !std::isfinite(o.tol)) throw Error("tol must be a finite number >= 0");
    if (o.threads < 0) throw Error("threads must be >= 0");
}

namespace cpu {

void merge(RangeStats& into, const RangeStats& from) {
    into.max_row = std::max(into.max_row, from.max_row);
    into.max_col = std::max(into.max_col, from.max_col);
    if (from.worst_err > into.worst_err) {
        into.worst_err = from.worst_err;
        into.worst_token = from.worst_token;
    }
    into.iter_sum += from.iter_sum;
    into.iter_max = std::max(into.iter_max, from.iter_max);
}

int64_t scratch_floats(const SinkhornOptions& o, bool backward) {
    return backward ? 2 * static_cast<int64_t>(o.iters + 1) * o.n * W : 0;
}

namespace {

struct AlignedFree {
    void operator()(float* p) const { ::operator delete[](p, std::align_val_t{64}); }
};

SinkhornReport run(const SinkhornOptions& o, int64_t T, bool backward, const Job& proto) {
    const IsaTable& t = isa();
    RangeFn fn = o.log_domain ? (backward ? t.log_backward : t.log_forward)
                              : (backward ? t.backward : t.forward);
    const int workers = workers_for(T, o.threads, 4096);
    const int64_t per = scratch_floats(o, backward);
    std::unique_ptr<float[], AlignedFree> scratch;
    if (per > 0)
        scratch.reset(static_cast<float*>(::operator new[](sizeof(float) * per * workers, std::align_val_t{64})));
    std::vector<RangeStats> stats(workers);
    const auto t0 = std::chrono::steady_clock::now();
    parallel_for(T, workers, W, [&](int w, int64_t b, int64_t e) {
        Job job = proto;
        job.scratch = scratch ? scratch.get() + per * w : nullptr;
        fn(job, b, e, stats[w]);
    });
    const auto t1 = std::chrono::steady_clock::now();
    RangeStats all;
    for (const auto& s : stats) merge(all, s);
    SinkhornReport r;
    r.seconds = std::chrono::duration<double>(t1 - t0).count();
    r.tokens = T;
    r.max_row_err = all.max_row;
    r.max_col_err = all.max_col;
    r.worst_token = all.worst_token;
    r.iters_max = all.iter_max;
    r.iters_mean = T ? static_cast<double>(all.iter_sum) / T : 0.0;
    r.backend = std::string("cpu-") + t.name + " x" + std::to_string(workers) + " threads";
    return r;
}

}  // namespace
}  // namespace cpu

namespace {
void check_args(const SinkhornOptions& o, int64_t T, std::initializer_list<const void*> ptrs) {
    validate(o);
    if (T < 0) throw Error("token count must be >= 0");
    if (T > 0)
        for (const void* p : ptrs)
            if (!p) throw Error("null buffer passed to a Sinkhorn kernel", Error::Kind::Internal);
}
}  // namespace

SinkhornReport sinkhorn_forward(const SinkhornOptions& o, int64_t T, ConstTensor H, Tensor P) {
    check_args(o, T, {H.data, P.data});
    if (o.device == Device::Cuda) {
        require_device(Device::Cuda);
        SinkhornOptions oc = o;
        oc.cuda_kernels = resolve_cuda_kernels(o.cuda_kernels);
        return cuda_impl::sinkhorn_forward(oc, T, H, P);
    }
    cpu::Job job{o, H, {}, P, {}, nullptr};
    return cpu::run(o, T, false, job);
}

SinkhornReport sinkhorn_backward(const SinkhornOptions& o, int64_t T, ConstTensor H, ConstTensor G,
                                 Tensor dH, Tensor P) {
    check_args(o, T, {H.data, G.data, dH.data});
    if (o.device == Device::Cuda) {
        require_device(Device::Cuda);
        SinkhornOptions oc = o;
        oc.cuda_kernels = resolve_cuda_kernels(o.cuda_kernels);
        return cuda_impl::sinkhorn_backward(oc, T, H, G, dH, P);
    }
    cpu::Job job{o, H, G, P, dH, nullptr};
    return cpu::run(o, T, true, job);
}

int64_t first_nonfinite_token(int n, int64_t T, ConstTensor H) {
    const int64_t nn = static_cast<int64_t>(n) * n;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t k = 0; k < nn; ++k) {
            float v = H.dtype == DType::F32 ? static_cast<const float*>(H.data)[t * nn + k]
                                            : bf16_to_float(static_cast<const bf16*>(H.data)[t * nn + k]);
            if (!std::isfinite(v)) return t;
        }
    return -1;
}

}  // namespace mhc::kernels
