// CPU Sinkhorn benchmark: fused kernels vs the Eigen reference and the straightforward
// baseline, against the machine's memcpy bandwidth and fp32 FMA peak. Prints figures; not a test.
//   bench_sinkhorn [--tokens 4194304] [--n 4] [--iters 20] [--threads 0] [--reps 3] [--no-naive]
#include <time.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mhc/bench/args.hpp"
#include "mhc/kernels/eigen_reference.hpp"
#include "mhc/kernels/sinkhorn.hpp"
#include "peak.hpp"

namespace k = mhc::kernels;
using namespace mhcbench;

namespace {

// CPU time of the whole process: on a shared machine the wall time of a compute-bound
// kernel stretches with the other load while its CPU time does not, so speed-ups are
// reported both ways.
double cpu_seconds() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct Figures {
    double bw = 0, peak = 0;
};

// Operation counts per token (documented in docs/kernels.md). One normalisation of an n x n
// matrix: n(n-1) adds for the sums, n adds of eps, n divisions, n^2 multiplies.
double flops_plain(int n, int iters) { return 2.0 * iters * (n * (n - 1) + 2 * n + n * n); }

void report(const char* what, double secs, int64_t T, double bytes_per_token, double flops_per_token,
            const Figures& f) {
    const double gbs = bytes_per_token * T / secs, gfl = flops_per_token * T / secs;
    std::printf("%-34s %9.2f ms %8.1f Mtok/s %7.2f GB/s (%5.1f%% of memcpy) %7.1f GFLOP/s (%4.1f%% of FMA peak)\n",
                what, secs * 1e3, T / secs / 1e6, gbs / 1e9, 100 * gbs / f.bw, gfl / 1e9, 100 * gfl / f.peak);
}

}  // namespace

int main(int argc, char** argv) {
    int64_t T = 4 << 20;
    int n = 4, iters = 20, threads = 0, reps = 3;
    bool naive = true;
    const mhc::bench::Args args(argc, argv, "[--tokens N] [--n N] [--iters N] [--threads N] [--reps N] [--no-naive]");
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        size_t w = static_cast<size_t>(i - 1);
        auto next = [&](int64_t min = 1) {
            int64_t v = args.whole(args.value_after(w), a.c_str(), min, int64_t(1) << 40);
            i = static_cast<int>(w) + 1;
            return v;
        };
        if (a == "--tokens") T = next();
        else if (a == "--n") n = static_cast<int>(next());
        else if (a == "--iters") iters = static_cast<int>(next());
        else if (a == "--threads") threads = static_cast<int>(next(0));
        else if (a == "--reps") reps = static_cast<int>(next());
        else if (a == "--no-naive") naive = false;
        else {
            args.refuse("unknown argument '" + a + "'");
        }
    }
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const int64_t nn = static_cast<int64_t>(n) * n;
    const bool avx512 = std::string(k::cpu_isa()) == "avx512";

    Figures f;
    f.bw = memcpy_bandwidth(256 << 20, threads, 5);
    f.peak = fma_peak(threads, avx512);
    std::printf("machine: %d threads, memcpy %.2f GB/s (read+write), fp32 FMA peak %.1f GFLOP/s (%s)\n", threads,
                f.bw / 1e9, f.peak / 1e9, avx512 ? "AVX-512" : "AVX2");
    std::printf("problem: T=%lld tokens, n=%d, %d iterations; fused kernels use the %s code path\n",
                static_cast<long long>(T), n, iters, k::cpu_isa());

    std::mt19937_64 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> H(T * nn), P(T * nn), G(T * nn), dH(T * nn);
    for (auto& x : H) x = nd(rng);
    for (auto& x : G) x = nd(rng);
    std::vector<k::bf16> Hb(T * nn), Pb(T * nn);
    for (int64_t i = 0; i < T * nn; ++i) Hb[i] = k::float_to_bf16(H[i]);

    k::SinkhornOptions o;
    o.n = n;
    o.iters = iters;
    o.threads = threads;
    const double fl = flops_plain(n, iters);
    auto best = [&](auto&& fn) {
        double b = 1e30;
        for (int r = 0; r < reps; ++r) b = std::min(b, fn());
        return b;
    };
    double fused_cpu = 1e30;
    double fused = best([&] {
        const double c0 = cpu_seconds();
        const double w = k::sinkhorn_forward(o, T, k::view(H.data()), k::view(P.data())).seconds;
        fused_cpu = std::min(fused_cpu, cpu_seconds() - c0);
        return w;
    });
    report("fused forward f32->f32", fused, T, 8.0 * nn, fl, f);
    report("fused forward bf16->bf16",
           best([&] { return k::sinkhorn_forward(o, T, k::view(Hb.data()), k::view(Pb.data())).seconds; }), T,
           4.0 * nn, fl, f);
    report("fused backward f32 (H,G->dH)",
           best([&] {
               return k::sinkhorn_backward(o, T, k::view(H.data()), k::view(G.data()), k::view(dH.data())).seconds;
           }),
           T, 12.0 * nn, 3 * fl, f);
    k::SinkhornOptions lo = o;
    lo.log_domain = true;
    report("fused log-domain forward f32",
           best([&] { return k::sinkhorn_forward(lo, T, k::view(H.data()), k::view(P.data())).seconds; }), T, 8.0 * nn,
           fl, f);
    {
        // The Eigen reference (per-token Eigen::Map, all iterations in cache), f32 -> f32.
        std::vector<float> Pe(T * nn, 0.0f);
        double eigen_cpu = 1e30;
        const double eigen = best([&] {
            const double c0 = cpu_seconds();
            auto t0 = Clock::now();
            k::sinkhorn_forward_eigen(o, T, H.data(), Pe.data());
            const double w = since(t0);
            eigen_cpu = std::min(eigen_cpu, cpu_seconds() - c0);
            return w;
        });
        report("Eigen reference forward f32", eigen, T, 8.0 * nn, fl, f);
        double diff = 0;
        for (int64_t i = 0; i < T * nn; ++i) diff = std::max(diff, double(std::abs(Pe[i] - P[i])));
        std::printf("  Eigen is %.1fx slower than fused in wall time, %.1fx in CPU time "
                    "(%.3f s vs %.3f s CPU; max |difference| %.2g)\n",
                    eigen / fused, eigen_cpu / fused_cpu, eigen_cpu, fused_cpu, diff);
    }
    if (naive) {
        std::vector<float> Pn(T * nn, 0.0f);
        const double c0 = cpu_seconds();
        auto t0 = Clock::now();
        k::sinkhorn_forward_naive(o, T, H.data(), Pn.data());
        const double secs = since(t0), naive_cpu = cpu_seconds() - c0;
        // The baseline reads and writes the whole tensor once per normalisation (plus the exp pass).
        report("straightforward forward f32", secs, T, 8.0 * nn, fl, f);
        std::printf("  baseline memory traffic: %.1f GB in %d passes = %.2f GB/s (%.0f%% of memcpy)\n",
                    8.0 * nn * T * (2 * iters + 1) / 1e9, 2 * iters + 1, 8.0 * nn * T * (2 * iters + 1) / secs / 1e9,
                    100 * 8.0 * nn * T * (2 * iters + 1) / secs / f.bw);
        double diff = 0;
        for (int64_t i = 0; i < T * nn; ++i) diff = std::max(diff, double(std::abs(Pn[i] - P[i])));
        std::printf("speed-up of fused over straightforward: %.1fx in wall time, %.1fx in CPU time "
                    "(%.2f s vs %.3f s; max |difference| %.2g)\n",
                    secs / fused, naive_cpu / fused_cpu, naive_cpu, fused_cpu, diff);
    }
    return 0;
}
