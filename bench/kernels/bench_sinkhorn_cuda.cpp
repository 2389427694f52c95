// GPU Sinkhorn benchmark (n = 4 by default, bf16 in/out): kernel time by CUDA events against
// the device's measured bandwidth (a read+write stand-in over 2 x 1 GiB), forward and
// backward, plain and log-domain, for the fused kernels and the first version's (baseline) in
// the same run. Prints figures, the speed-ups, how far the two kernel sets' outputs differ, and
// whether the targets are met (by the fused kernels).
//   bench_sinkhorn_cuda [--tokens 16777216] [--n 4] [--iters 20] [--reps 10]
//                       [--variant both|fused|baseline] [--threads N] [--inputs-only]
// The inputs are standard normal logits (and gradients) made on all CPU threads, each block of
// values from its own seed, so they do not depend on the thread count (64M tokens in about a
// second on 16 cores; std::mt19937 on one thread took over 45 s). --inputs-only makes them,
// checks their mean, spread and independence from the thread count, and stops (no GPU needed).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "mhc/bench/args.hpp"
#include "mhc/kernels/device.hpp"
#include "mhc/kernels/sinkhorn.hpp"
#include "mhc/kernels/standin.hpp"

namespace k = mhc::kernels;

namespace {

uint64_t splitmix64(uint64_t& state) {
    uint64_t mix = (state += 0x9e3779b97f4a7c15ull);
    mix = (mix ^ (mix >> 30)) * 0xbf58476d1ce4e5b9ull;
    mix = (mix ^ (mix >> 27)) * 0x94d049bb133111ebull;
    return mix ^ (mix >> 31);
}

// Standard normal bf16 values: block b of kBlock values from seed (seed, b), Box-Muller.
constexpr size_t kBlock = 1 << 16;
void fill_normal(std::vector<k::bf16>& vals, uint64_t seed, int threads) {
    const size_t blocks = (vals.size() + kBlock - 1) / kBlock;
    std::vector<std::thread> pool;
    pool.reserve(static_cast<size_t>(threads));
    for (int w = 0; w < threads; ++w)
        pool.emplace_back([&, w] {
            for (size_t b = static_cast<size_t>(w); b < blocks; b += static_cast<size_t>(threads)) {
                uint64_t state = seed * 0x2545f4914f6cdd1dull + b;
                const size_t end = std::min(vals.size(), (b + 1) * kBlock);
                for (size_t i = b * kBlock; i < end; i += 2) {
                    // one 64-bit draw: u1 in (0, 1] and u2 in [0, 1), 24 bits each (the values are bf16)
                    const uint64_t bits = splitmix64(state);
                    const float u1 = (static_cast<float>(bits >> 40) + 1.0f) * 0x1.0p-24f;
                    const float u2 = static_cast<float>((bits >> 16) & 0xffffff) * 0x1.0p-24f;
                    const float radius = std::sqrt(-2.0f * std::log(u1)), angle = 6.2831853f * u2;
                    vals[i] = k::float_to_bf16(radius * std::cos(angle));
                    if (i + 1 < end) vals[i + 1] = k::float_to_bf16(radius * std::sin(angle));
                }
            }
        });
    for (auto& worker : pool) worker.join();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// --inputs-only: the generator's own check. Exit status 1 when it fails.
int check_inputs(int64_t count, int threads) {
    std::vector<k::bf16> made(static_cast<size_t>(count)), again(static_cast<size_t>(count));
    const auto t0 = std::chrono::steady_clock::now();
    fill_normal(made, 1, threads);
    const double secs = seconds_since(t0);
    fill_normal(again, 1, 1);
    const bool same = std::equal(made.begin(), made.end(), again.begin(),
                                 [](k::bf16 lhs, k::bf16 rhs) { return lhs.bits == rhs.bits; });
    double sum = 0, sq = 0;
    for (auto val : made) {
        const double fv = k::bf16_to_float(val);
        sum += fv;
        sq += fv * fv;
    }
    const double mean = sum / count, sd = std::sqrt(sq / count - mean * mean);
    const bool ok = same && std::abs(mean) < 5.0 / std::sqrt(static_cast<double>(count)) + 1e-3 &&
                    std::abs(sd - 1.0) < 0.01;
    std::printf(
        "inputs: %lld normal bf16 values on %d threads in %.3f s: mean %.4f, sd %.4f; same on 1 thread: %s: %s\n",
        static_cast<long long>(count), threads, secs, mean, sd, same ? "yes" : "no", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}

struct BenchOptions {
    int64_t tokens = 16 << 20;
    int n = 4, iters = 20, reps = 10;
    int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::string variant = "both";
    bool inputs_only = false;
    int64_t nn() const { return static_cast<int64_t>(n) * n; }   // values a token
};

BenchOptions read_options(int argc, char** argv) {
    BenchOptions opt;
    const mhc::bench::Args args(
        argc, argv,
        "[--tokens N] [--n N] [--iters N] [--reps N] [--variant both|fused|baseline] [--threads N] [--inputs-only]");
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        size_t w = static_cast<size_t>(i - 1);
        auto next = [&](int64_t min = 1, int64_t max = int64_t{1} << 40) {
            const int64_t value = args.whole(args.value_after(w), a.c_str(), min, max);
            i = static_cast<int>(w) + 1;
            return value;
        };
        if (a == "--tokens") opt.tokens = next();
        else if (a == "--n") opt.n = static_cast<int>(next(k::kSinkhornMinN, k::kSinkhornMaxN));
        else if (a == "--iters") opt.iters = static_cast<int>(next(1, k::kSinkhornMaxIters));
        else if (a == "--reps") opt.reps = static_cast<int>(next(1, 1000));
        else if (a == "--threads") opt.threads = static_cast<int>(next(1, 1024));
        else if (a == "--inputs-only") opt.inputs_only = true;
        else if (a == "--variant") {
            opt.variant = args.value_after(w);
            i = static_cast<int>(w) + 1;
            if (opt.variant != "both" && opt.variant != "fused" && opt.variant != "baseline")
                args.refuse("--variant '" + opt.variant + "': use both, fused or baseline");
        } else args.refuse("unknown argument '" + a + "'");
    }
    return opt;
}

// Device bandwidth: best of 5 read+write sweeps over 1 GiB each.
double measure_bandwidth() {
    auto standin = k::make_standin(k::Device::Cuda);
    double bw = 0;
    k::DeviceBuffer source(1ul << 30), sink(1ul << 30);
    source.fill_bytes(1);
    for (int i = 0; i < 5; ++i) {
        standin->touch(source.data(), source.size(), sink.data(), sink.size());
        standin->synchronize();
        bw = std::max(bw, 2.0 * source.size() / standin->last_elapsed_s());
    }
    return bw;
}

// The kernels' inputs (logits H, gradients G) and outputs (P, dH) on the device.
struct DeviceData {
    k::DeviceBuffer dH, dG, dP, ddH;
};

DeviceData upload_inputs(const BenchOptions& opt) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<k::bf16> logits(static_cast<size_t>(opt.tokens * opt.nn())),
        grads(static_cast<size_t>(opt.tokens * opt.nn()));
    fill_normal(logits, 1, opt.threads);
    fill_normal(grads, 2, opt.threads);
    DeviceData data{k::DeviceBuffer(logits.size() * 2), k::DeviceBuffer(grads.size() * 2),
                    k::DeviceBuffer(logits.size() * 2), k::DeviceBuffer(logits.size() * 2)};
    data.dH.upload(logits.data(), data.dH.size());
    data.dG.upload(grads.data(), data.dG.size());
    std::printf("inputs: %lld tokens made on %d threads and uploaded in %.2f s\n", static_cast<long long>(opt.tokens),
                opt.threads, seconds_since(t0));
    return data;
}

struct Case {
    const char* what;
    bool log, backward;
};

// One kernel timed: the median and least of `reps` runs after a warm-up, printed against the
// device's bandwidth; `out` gets the first tokens' outputs of the last run, to compare the two
// kernel sets. Returns the median in seconds.
double time_kernel(const BenchOptions& opt, DeviceData& data, double bw, const Case& what,
                   k::CudaSinkhornKernels kernels, std::vector<k::bf16>& out) {
    const int64_t tokens = opt.tokens;
    const double bytes_per_token = (what.backward ? 6.0 : 4.0) * opt.nn();
    k::SinkhornOptions options;
    options.device = k::Device::Cuda;
    options.n = opt.n;
    options.iters = opt.iters;
    options.log_domain = what.log;
    options.cuda_kernels = kernels;
    std::vector<double> times;
    k::SinkhornReport report;
    for (int i = 0; i < opt.reps + 1; ++i) {
        report = what.backward
                     ? k::sinkhorn_backward(options, tokens, {data.dH.data(), k::DType::BF16},
                                            {data.dG.data(), k::DType::BF16}, {data.ddH.data(), k::DType::BF16})
                     : k::sinkhorn_forward(options, tokens, {data.dH.data(), k::DType::BF16},
                                           {data.dP.data(), k::DType::BF16});
        if (i > 0) times.push_back(report.seconds);  // the first run warms up
    }
    std::sort(times.begin(), times.end());
    const double med = times[times.size() / 2], gbs = bytes_per_token * tokens / med;
    std::printf(
        "%-9s %-22s median %8.3f ms  min %8.3f ms  %7.1f GB/s  %5.1f%% of device bandwidth  "
        "(max row err %.2g, %s)\n",
        k::to_string(kernels), what.what, med * 1e3, times.front() * 1e3, gbs / 1e9, 100 * gbs / bw,
        report.max_row_err, report.backend.c_str());
    const size_t check_values = static_cast<size_t>(std::min<int64_t>(tokens, 1 << 20) * opt.nn());
    out.assign(check_values, k::bf16{});
    (what.backward ? data.ddH : data.dP).download(out.data(), out.size() * 2);
    return med;
}

// How far the fused kernels' outputs are from the baseline's, and how much faster they ran.
void print_difference(const Case& what, const std::vector<k::bf16>& baseline, const std::vector<k::bf16>& fused,
                      double baseline_med, double fused_med, int64_t nn) {
    double worst = 0, scale = 0;
    for (size_t i = 0; i < fused.size(); ++i) {
        const double was = k::bf16_to_float(baseline[i]), now = k::bf16_to_float(fused[i]);
        worst = std::max(worst, std::abs(was - now));
        scale = std::max(scale, std::abs(was));
    }
    std::printf(
        "          %-22s fused: %.2fx the baseline's speed; outputs of the first %lld tokens differ "
        "by at most %.3g (largest |value| %.3g, bf16 step near it %.3g)\n",
        what.what, baseline_med / fused_med, static_cast<long long>(fused.size() / nn), worst, scale, scale / 128);
}

int run_benchmark(int argc, char** argv) {
    const BenchOptions opt = read_options(argc, argv);
    const int64_t nn = opt.nn(), tokens = opt.tokens;
    if (opt.inputs_only) return check_inputs(tokens * nn, opt.threads);
    if (k::cuda_device_count() == 0) {
        std::printf("no CUDA device (built with CUDA: %s): nothing to measure\n", k::built_with_cuda() ? "yes" : "no");
        return 0;
    }
    std::printf("device: %s\n", k::cuda_device_name().c_str());
    const double bw = measure_bandwidth();
    std::printf("measured device bandwidth (read+write stand-in): %.1f GB/s\n", bw / 1e9);
    DeviceData data = upload_inputs(opt);
    std::printf("T=%lld tokens, n=%d, %d iterations, bf16 in/out, %d timed runs each (CUDA events)\n",
                static_cast<long long>(tokens), opt.n, opt.iters, opt.reps);
    const Case cases[] = {{"forward", false, false},
                          {"backward (H,G->dH)", false, true},
                          {"log-domain forward", true, false},
                          {"log-domain backward", true, true}};
    const bool base = opt.variant != "fused", fused = opt.variant != "baseline";
    double med[2][4] = {};
    for (int c = 0; c < 4; ++c) {
        std::vector<k::bf16> ob, of;
        if (base) med[0][c] = time_kernel(opt, data, bw, cases[c], k::CudaSinkhornKernels::Baseline, ob);
        if (fused) med[1][c] = time_kernel(opt, data, bw, cases[c], k::CudaSinkhornKernels::Fused, of);
        if (base && fused) print_difference(cases[c], ob, of, med[0][c], med[1][c], nn);
    }
    const int judged = fused ? 1 : 0;
    const double fwd = med[judged][0], bwd = med[judged][1];
    const double frac = 4.0 * nn * tokens / fwd / bw;
    std::printf("target forward >= 70%% of device bandwidth (%s): %s (%.1f%%)\n", fused ? "fused" : "baseline",
                frac >= 0.7 ? "MET" : "MISSED", 100 * frac);
    std::printf("target backward within 3x of forward (%s): %s (%.2fx)\n", fused ? "fused" : "baseline",
                bwd <= 3 * fwd ? "MET" : "MISSED", bwd / fwd);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return mhc::bench::guarded("bench_sinkhorn_cuda", [&] { return run_benchmark(argc, argv); });
}
