// GPU Sinkhorn benchmark (n = 4 by default, bf16 in/out): kernel time by CUDA events against
// the device's measured bandwidth (a read+write stand-in over 2 x 1 GiB), forward and
// backward, plain and log-domain. Prints figures and whether the targets are met.
//   bench_sinkhorn_cuda [--tokens 16777216] [--n 4] [--iters 20] [--reps 10]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "mhc/bench/args.hpp"
#include "mhc/kernels/device.hpp"
#include "mhc/kernels/sinkhorn.hpp"
#include "mhc/kernels/standin.hpp"

namespace k = mhc::kernels;

int main(int argc, char** argv) {
    int64_t T = 16 << 20;
    int n = 4, iters = 20, reps = 10;
    const mhc::bench::Args args(argc, argv, "[--tokens N] [--n N] [--iters N] [--reps N]");
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
        else if (a == "--reps") reps = static_cast<int>(next());
        else args.refuse("unknown argument '" + a + "'");
    }
    if (k::cuda_device_count() == 0) {
        std::printf("no CUDA device (built with CUDA: %s): nothing to measure\n", k::built_with_cuda() ? "yes" : "no");
        return 0;
    }
    std::printf("device: %s\n", k::cuda_device_name().c_str());

    // Device bandwidth: best of 5 read+write sweeps over 1 GiB each.
    auto standin = k::make_standin(k::Device::Cuda);
    double bw = 0;
    {
        k::DeviceBuffer r(1ul << 30), w(1ul << 30);
        r.fill_bytes(1);
        for (int i = 0; i < 5; ++i) {
            standin->touch(r.data(), r.size(), w.data(), w.size());
            standin->synchronize();
            bw = std::max(bw, 2.0 * r.size() / standin->last_elapsed_s());
        }
    }
    std::printf("measured device bandwidth (read+write stand-in): %.1f GB/s\n", bw / 1e9);

    const int64_t nn = static_cast<int64_t>(n) * n;
    std::mt19937_64 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<k::bf16> h(T * nn), g(T * nn);
    for (auto& x : h) x = k::float_to_bf16(nd(rng));
    for (auto& x : g) x = k::float_to_bf16(nd(rng));
    k::DeviceBuffer dH(h.size() * 2), dG(g.size() * 2), dP(h.size() * 2), ddH(h.size() * 2);
    dH.upload(h.data(), dH.size());
    dG.upload(g.data(), dG.size());

    auto run = [&](const char* what, bool log, bool backward, double bytes_per_token) {
        k::SinkhornOptions o;
        o.device = k::Device::Cuda;
        o.n = n;
        o.iters = iters;
        o.log_domain = log;
        std::vector<double> t;
        k::SinkhornReport r;
        for (int i = 0; i < reps + 1; ++i) {
            r = backward ? k::sinkhorn_backward(o, T, {dH.data(), k::DType::BF16}, {dG.data(), k::DType::BF16},
                                                {ddH.data(), k::DType::BF16})
                         : k::sinkhorn_forward(o, T, {dH.data(), k::DType::BF16}, {dP.data(), k::DType::BF16});
            if (i > 0) t.push_back(r.seconds);  // the first run warms up
        }
        std::sort(t.begin(), t.end());
        const double med = t[t.size() / 2], gbs = bytes_per_token * T / med;
        std::printf("%-28s median %8.3f ms  %7.1f GB/s  %5.1f%% of device bandwidth  (max row err %.2g)\n", what,
                    med * 1e3, gbs / 1e9, 100 * gbs / bw, r.max_row_err);
        return med;
    };
    std::printf("T=%lld tokens, n=%d, %d iterations, bf16 in/out\n", static_cast<long long>(T), n, iters);
    const double fwd = run("forward", false, false, 4.0 * nn);
    const double bwd = run("backward (H,G->dH)", false, true, 6.0 * nn);
    run("log-domain forward", true, false, 4.0 * nn);
    run("log-domain backward", true, true, 6.0 * nn);
    const double frac = 4.0 * nn * T / fwd / bw;
    std::printf("target forward >= 70%% of device bandwidth: %s (%.1f%%)\n", frac >= 0.7 ? "MET" : "MISSED", 100 * frac);
    std::printf("target backward within 3x of forward: %s (%.2fx)\n", bwd <= 3 * fwd ? "MET" : "MISSED", bwd / fwd);
    return 0;
}
