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

// What the command line asks for.
struct BenchOptions {
    int64_t tokens = 4 << 20;
    int n = 4, iters = 20, threads = 0, reps = 3;
    bool naive = true;
};

BenchOptions read_options(int argc, char** argv) {
    BenchOptions options;
    const mhc::bench::Args args(argc, argv, "[--tokens N] [--n N] [--iters N] [--threads N] [--reps N] [--no-naive]");
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        size_t w = static_cast<size_t>(i - 1);
        auto next = [&](int64_t min = 1) {
            int64_t v = args.whole(args.value_after(w), a.c_str(), min, int64_t(1) << 40);
            i = static_cast<int>(w) + 1;
            return v;
        };
        if (a == "--tokens") options.tokens = next();
        else if (a == "--n") options.n = static_cast<int>(next());
        else if (a == "--iters") options.iters = static_cast<int>(next());
        else if (a == "--threads") options.threads = static_cast<int>(next(0));
        else if (a == "--reps") options.reps = static_cast<int>(next());
        else if (a == "--no-naive") options.naive = false;
        else { args.refuse("unknown argument '" + a + "'"); }
    }
    if (options.threads <= 0) options.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return options;
}

// The machine's memcpy bandwidth and FMA peak, measured and printed with the problem's size.
Figures measure_machine(const BenchOptions& options) {
    const bool avx512 = std::string(k::cpu_isa()) == "avx512";
    Figures f;
    f.bw = memcpy_bandwidth(256 << 20, options.threads, 5);
    f.peak = fma_peak(options.threads, avx512);
    std::printf("machine: %d threads, memcpy %.2f GB/s (read+write), fp32 FMA peak %.1f GFLOP/s (%s)\n",
                options.threads, f.bw / 1e9, f.peak / 1e9, avx512 ? "AVX-512" : "AVX2");
    std::printf("problem: T=%lld tokens, n=%d, %d iterations; fused kernels use the %s code path\n",
                static_cast<long long>(options.tokens), options.n, options.iters, k::cpu_isa());
    return f;
}

// The tensors every kernel reads and writes: random inputs (seed 1), outputs the kernels fill.
struct Tensors {
    std::vector<float> H, P, G, dH;
    std::vector<k::bf16> Hb, Pb;
};

Tensors make_tensors(int64_t tokens, int64_t nn) {
    Tensors tensors;
    std::mt19937_64 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    tensors.H.resize(tokens * nn);
    tensors.P.resize(tokens * nn);
    tensors.G.resize(tokens * nn);
    tensors.dH.resize(tokens * nn);
    for (auto& value : tensors.H) value = nd(rng);
    for (auto& value : tensors.G) value = nd(rng);
    tensors.Hb.resize(tokens * nn);
    tensors.Pb.resize(tokens * nn);
    for (int64_t i = 0; i < tokens * nn; ++i) tensors.Hb[i] = k::float_to_bf16(tensors.H[i]);
    return tensors;
}

// One run's problem and what it is judged against; `best` is the fastest of the repetitions.
struct Bench {
    const BenchOptions& options;
    const Figures& figures;
    k::SinkhornOptions kernel;
    int64_t nn;
    double flops;
    template <class Fn> double best(Fn&& fn) const {
        double b = 1e30;
        for (int r = 0; r < options.reps; ++r) b = std::min(b, fn());
        return b;
    }
    void report(const char* what, double secs, double bytes_per_token, double flops_per_token) const {
        ::report(what, secs, options.tokens, bytes_per_token, flops_per_token, figures);
    }
};

// The fastest fused forward f32, in wall and CPU time (the others are compared against it).
struct FusedTimes {
    double wall = 0, cpu = 1e30;
};

// The fused kernels: forward f32 and bf16, backward, log-domain forward (which leaves its output in P).
FusedTimes time_fused(const Bench& bench, Tensors& tensors) {
    const int64_t tokens = bench.options.tokens;
    const k::SinkhornOptions& options = bench.kernel;
    const int64_t nn = bench.nn;
    const double fl = bench.flops;
    FusedTimes fused;
    fused.wall = bench.best([&] {
        const double c0 = cpu_seconds();
        const double wall =
            k::sinkhorn_forward(options, tokens, k::view(tensors.H.data()), k::view(tensors.P.data())).seconds;
        fused.cpu = std::min(fused.cpu, cpu_seconds() - c0);
        return wall;
    });
    bench.report("fused forward f32->f32", fused.wall, 8.0 * nn, fl);
    bench.report("fused forward bf16->bf16", bench.best([&] {
        return k::sinkhorn_forward(options, tokens, k::view(tensors.Hb.data()), k::view(tensors.Pb.data())).seconds;
    }),
                 4.0 * nn, fl);
    bench.report("fused backward f32 (H,G->dH)", bench.best([&] {
        return k::sinkhorn_backward(options, tokens, k::view(tensors.H.data()), k::view(tensors.G.data()),
                                    k::view(tensors.dH.data()))
            .seconds;
    }),
                 12.0 * nn, 3 * fl);
    k::SinkhornOptions lo = options;
    lo.log_domain = true;
    bench.report("fused log-domain forward f32", bench.best([&] {
        return k::sinkhorn_forward(lo, tokens, k::view(tensors.H.data()), k::view(tensors.P.data())).seconds;
    }),
                 8.0 * nn, fl);
    return fused;
}

double max_difference(const std::vector<float>& lhs, const std::vector<float>& rhs) {
    double diff = 0;
    for (size_t i = 0; i < lhs.size(); ++i) diff = std::max(diff, static_cast<double>(std::abs(lhs[i] - rhs[i])));
    return diff;
}

// The Eigen reference (per-token Eigen::Map, all iterations in cache), f32 -> f32.
void compare_eigen(const Bench& bench, const Tensors& tensors, const FusedTimes& fused) {
    const int64_t tokens = bench.options.tokens;
    std::vector<float> Pe(tokens * bench.nn, 0.0f);
    double eigen_cpu = 1e30;
    const double eigen = bench.best([&] {
        const double c0 = cpu_seconds();
        auto t0 = Clock::now();
        k::sinkhorn_forward_eigen(bench.kernel, tokens, tensors.H.data(), Pe.data());
        const double wall = since(t0);
        eigen_cpu = std::min(eigen_cpu, cpu_seconds() - c0);
        return wall;
    });
    bench.report("Eigen reference forward f32", eigen, 8.0 * bench.nn, bench.flops);
    std::printf(
        "  Eigen is %.1fx slower than fused in wall time, %.1fx in CPU time "
        "(%.3f s vs %.3f s CPU; max |difference| %.2g)\n",
        eigen / fused.wall, eigen_cpu / fused.cpu, eigen_cpu, fused.cpu, max_difference(Pe, tensors.P));
}

// The straightforward baseline, run once: it reads and writes the whole tensor once per
// normalisation (plus the exp pass).
void compare_naive(const Bench& bench, const Tensors& tensors, const FusedTimes& fused) {
    const int64_t tokens = bench.options.tokens, nn = bench.nn;
    const int iters = bench.options.iters;
    std::vector<float> Pn(tokens * nn, 0.0f);
    const double c0 = cpu_seconds();
    auto t0 = Clock::now();
    k::sinkhorn_forward_naive(bench.kernel, tokens, tensors.H.data(), Pn.data());
    const double secs = since(t0), naive_cpu = cpu_seconds() - c0;
    bench.report("straightforward forward f32", secs, 8.0 * nn, bench.flops);
    std::printf("  baseline memory traffic: %.1f GB in %d passes = %.2f GB/s (%.0f%% of memcpy)\n",
                8.0 * nn * tokens * (2 * iters + 1) / 1e9, 2 * iters + 1,
                8.0 * nn * tokens * (2 * iters + 1) / secs / 1e9,
                100 * 8.0 * nn * tokens * (2 * iters + 1) / secs / bench.figures.bw);
    std::printf(
        "speed-up of fused over straightforward: %.1fx in wall time, %.1fx in CPU time "
        "(%.2f s vs %.3f s; max |difference| %.2g)\n",
        secs / fused.wall, naive_cpu / fused.cpu, naive_cpu, fused.cpu, max_difference(Pn, tensors.P));
}

int run_benchmark(int argc, char** argv) {
    const BenchOptions options = read_options(argc, argv);
    const int64_t nn = static_cast<int64_t>(options.n) * options.n;
    const Figures figures = measure_machine(options);
    Tensors tensors = make_tensors(options.tokens, nn);
    k::SinkhornOptions kernel;
    kernel.n = options.n;
    kernel.iters = options.iters;
    kernel.threads = options.threads;
    const Bench bench{options, figures, kernel, nn, flops_plain(options.n, options.iters)};
    const FusedTimes fused = time_fused(bench, tensors);
    compare_eigen(bench, tensors, fused);
    if (options.naive) compare_naive(bench, tensors, fused);
    return 0;
}

}   // namespace

int main(int argc, char** argv) {
    return mhc::bench::guarded("bench_sinkhorn", [&] { return run_benchmark(argc, argv); });
}
