#pragma once
// Machine figures the kernels are judged against: multi-threaded memcpy bandwidth and the
// fp32 fused-multiply-add peak, both measured here rather than taken from a data sheet.
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace mhcbench {

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Bytes moved (read + write) per second by `threads` threads each memcpy-ing its share.
inline double memcpy_bandwidth(size_t bytes, int threads, int reps) {
    std::vector<char> a(bytes, 1), b(bytes, 2);
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        auto t0 = Clock::now();
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; ++t)
            pool.emplace_back([&, t] {
                size_t lo = bytes * t / threads, hi = bytes * (t + 1) / threads;
                std::memcpy(b.data() + lo, a.data() + lo, hi - lo);
            });
        for (auto& th : pool) th.join();
        best = std::min(best, since(t0));
    }
    return 2.0 * bytes / best;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define MHC_PEAK_TARGET(isa) __attribute__((target(isa), noinline))
#else
#define MHC_PEAK_TARGET(isa) __attribute__((noinline))
#endif

template <int Lanes>
struct Vec {
    typedef float type __attribute__((vector_size(Lanes * 4)));
};

// 12 independent FMA chains (enough to cover latency x throughput) per thread.
#define MHC_PEAK_BODY(L)                                                  \
    using V = Vec<L>::type;                                               \
    V acc[12];                                                            \
    for (int k = 0; k < 12; ++k) acc[k] = V{} + 0.001f * k;               \
    const V m = V{} + 0.9999f, c = V{} + 0.0001f;                         \
    for (long i = 0; i < iters; ++i)                                      \
        for (int k = 0; k < 12; ++k) acc[k] = acc[k] * m + c;             \
    float s = 0;                                                          \
    for (int k = 0; k < 12; ++k)                                          \
        for (int l = 0; l < L; ++l) s += acc[k][l];                       \
    return s;

MHC_PEAK_TARGET("avx512f,fma") inline float fma_chains_512(long iters) { MHC_PEAK_BODY(16) }
MHC_PEAK_TARGET("avx2,fma") inline float fma_chains_256(long iters) { MHC_PEAK_BODY(8) }

// fp32 FLOP/s (an FMA counts 2) with all threads; lanes = 16 (AVX-512) or 8 (AVX2).
inline double fma_peak(int threads, bool avx512) {
    const long iters = 20'000'000;
    volatile float sink = 0;
    auto t0 = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&] { sink = avx512 ? fma_chains_512(iters) : fma_chains_256(iters); });
    for (auto& th : pool) th.join();
    const double secs = since(t0);
    return 2.0 * 12 * (avx512 ? 16 : 8) * static_cast<double>(iters) * threads / secs;
}

}  // namespace mhcbench
