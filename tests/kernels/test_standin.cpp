// Host stand-ins: sanity of durations (never short, ordered), and the buffers they touch.
// Not a timed test: only lower bounds and generous upper bounds are checked.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <vector>

#include "mhc/kernels/standin.hpp"

namespace k = mhc::kernels;

TEST_CASE("kernels: host run_for never returns early and grows with the request", "[kernels][standin]") {
    auto s = k::make_standin(k::Device::Cpu);
    CHECK(s->overhead_s() >= 0);
    CHECK(s->overhead_s() < 1e-4);
    std::vector<double> medians;
    for (double want : {20e-6, 200e-6, 2e-3}) {
        std::vector<double> got;
        for (int i = 0; i < 7; ++i) {
            auto t0 = std::chrono::steady_clock::now();
            s->run_for(want);
            double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            CHECK(wall >= want - s->overhead_s() - 1e-7);
            CHECK(s->last_elapsed_s() <= wall + 1e-7);
            got.push_back(wall);
        }
        std::sort(got.begin(), got.end());
        medians.push_back(got[3]);
        CHECK(got[3] < want + 0.05);  // generous: the machine may be loaded
    }
    CHECK(std::is_sorted(medians.begin(), medians.end()));
    auto t0 = std::chrono::steady_clock::now();
    k::host_wait_for(1e-3);
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::microseconds(1000));
}

TEST_CASE("kernels: host touch reads and writes the given buffers", "[kernels][standin]") {
    auto s = k::make_standin(k::Device::Cpu, 2);
    std::vector<unsigned char> r(3 << 20, 0x11), w(5 << 20 | 123, 0);
    s->touch(r.data(), r.size(), w.data(), w.size());
    CHECK(std::all_of(w.begin(), w.end(), [](unsigned char c) { return c == 0x3c; }));
    CHECK(std::all_of(r.begin(), r.end(), [](unsigned char c) { return c == 0x11; }));
    CHECK(s->last_elapsed_s() > 0);
    std::fill(w.begin(), w.end(), 0);
    s->touch(nullptr, 0, w.data(), 1000);
    CHECK(w[999] == 0x3c);
    CHECK(w[1000] == 0);
    s->touch(r.data(), r.size(), nullptr, 0);
}
