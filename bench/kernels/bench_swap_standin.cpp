// Swap engine and stand-in figures on a backend (host by default, --cuda for the GPU):
// transfer bandwidth by chunk size with and without checksum verification, and the
// accuracy of timed stand-ins. Prints figures; not a test.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "mhc/bench/args.hpp"
#include "mhc/kernels/device.hpp"
#include "mhc/kernels/standin.hpp"
#include "mhc/kernels/swap.hpp"

namespace k = mhc::kernels;
using Clock = std::chrono::steady_clock;

namespace {

double rate(k::SwapEngine& e, k::SwapDir dir, size_t bytes, int count) {
    auto t0 = Clock::now();
    for (int i = 0; i < count; ++i) e.submit(dir, 0, 0, bytes);
    for (const auto& r : e.drain())
        if (!r.ok) std::printf("  checksum mismatch on transfer %llu!\n", static_cast<unsigned long long>(r.id));
    return static_cast<double>(bytes) * count / std::chrono::duration<double>(Clock::now() - t0).count();
}

int run_benchmark(int argc, char** argv) {
    const mhc::bench::Args args(argc, argv, "[--cuda]");
    args.at_most(1);
    if (args.has(0) && args.word(0) != "--cuda") args.refuse("unknown option '" + args.word(0) + "'");
    const k::Device dev = args.has(0) ? k::Device::Cuda : k::Device::Cpu;
    if (dev == k::Device::Cuda && k::cuda_device_count() == 0) {
        std::printf("no CUDA device: nothing to measure\n");
        return 0;
    }
    std::vector<k::SwapPath> paths{k::SwapPath::CopyEngine};
    if (dev == k::Device::Cuda) paths.push_back(k::SwapPath::ZeroCopy);
    for (auto path : paths)
        for (bool verify : {false, true}) {
            k::SwapConfig c;
            c.device_bytes = c.host_bytes = 256 << 20;
            c.chunk_bytes = 4 << 20;
            c.verify = verify;
            c.path = path;
            auto e = k::make_swap_engine(dev, c);
            std::printf("%s, %s, verify %s\n", e->name().c_str(), k::to_string(path), verify ? "on" : "off");
            for (size_t bytes : {64ul << 10, 1ul << 20, 16ul << 20, 128ul << 20}) {
                const int count = static_cast<int>(std::clamp<size_t>((512ul << 20) / bytes, 2, 256));
                double h = rate(*e, k::SwapDir::HostToDevice, bytes, count);
                double d = rate(*e, k::SwapDir::DeviceToHost, bytes, count);
                std::printf("  %8zu KiB: h2d %7.2f GB/s  d2h %7.2f GB/s\n", bytes >> 10, h / 1e9, d / 1e9);
            }
        }

    auto s = k::make_standin(dev);
    std::printf("%s: overhead %.2f us\n", s->name().c_str(), s->overhead_s() * 1e6);
    for (double want : {20e-6, 50e-6, 200e-6, 1e-3, 5e-3}) {
        std::vector<double> got;
        for (int i = 0; i < 21; ++i) {
            s->run_for(want);
            s->synchronize();
            got.push_back(s->last_elapsed_s());
        }
        std::sort(got.begin(), got.end());
        std::printf("  run_for %7.1f us: median %8.2f us (%+.2f%%), min %8.2f, max %8.2f\n", want * 1e6, got[10] * 1e6,
                    100 * (got[10] - want) / want, got.front() * 1e6, got.back() * 1e6);
    }
    if (dev == k::Device::Cpu) {
        std::vector<unsigned char> r(256 << 20, 1), w(256 << 20, 0);
        double best = 1e30;
        for (int i = 0; i < 5; ++i) {
            s->touch(r.data(), r.size(), w.data(), w.size());
            best = std::min(best, s->last_elapsed_s());
        }
        std::printf("  touch 256 MiB read + 256 MiB write: %.2f ms, %.2f GB/s\n", best * 1e3, 2.0 * r.size() / best / 1e9);
    } else {
        k::DeviceBuffer r(1ul << 30), w(1ul << 30);
        r.fill_bytes(1);
        double best = 1e30;
        for (int i = 0; i < 5; ++i) {
            s->touch(r.data(), r.size(), w.data(), w.size());
            s->synchronize();
            best = std::min(best, s->last_elapsed_s());
        }
        std::printf("  touch 1 GiB read + 1 GiB write: %.3f ms, %.1f GB/s\n", best * 1e3, 2.0 * r.size() / best / 1e9);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return mhc::bench::guarded("bench_swap_standin", [&] { return run_benchmark(argc, argv); });
}
