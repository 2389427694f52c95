#pragma once
// Hand-built traces with known positions, shared by the core tests and the screenshot tests.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "mhc/trace/runs.hpp"
#include "mhc/trace/store.hpp"

namespace fixture {

struct TempPath {
    std::string path;
    explicit TempPath(const std::string& name) {
        static std::atomic<int> n{0};
        path = (std::filesystem::temp_directory_path() /
                ("mhc-viewer-test-" + std::to_string(getpid()) + "-" + std::to_string(n++) + "-" + name))
                   .string();
    }
    ~TempPath() {
        std::error_code ec;
        std::filesystem::remove(path, ec);
    }
};

constexpr int64_t us = 1000;
constexpr int64_t MiB = 1 << 20;

// The known trace, 0..1 ms:
//  stream 7: "alpha" [100, 300) us, "beta" [500, 700) us (both access "act_big")
//  stream 8: 200 "tiny" kernels of 100 ns every 500 ns from 800 us (fold into one run)
//  copies: H2D [300, 350) us; markers: step 0 [0, 1000) us
//  allocations: "weights" param 400 MiB [0, end); "act_big" activation 1024 MiB [450, 550) us;
//               "ws" workspace 64 MiB [100, 300) us  -> peak 1424 MiB at 450 us
//  runs (when with_runs): #1 "lru@1GiB" and #2 "cost_aware@1GiB" with memory samples and events.
inline void write_known_trace(const std::string& path, bool with_runs = true) {
    using namespace mhc::trace;
    {
        Writer w(path);
        w.set_meta("source", "viewer-test");
        int64_t alpha = w.intern("alpha"), beta = w.intern("beta"), tiny = w.intern("tiny");
        int64_t step = w.intern("step 0");
        Allocation weights{1, 0, 0, 400 * MiB, 0, kNoTime, 7, Category::Param, w.intern("weights")};
        Allocation act{2, 0, 0, 1024 * MiB, 450 * us, 550 * us, 7, Category::Activation, w.intern("act_big")};
        Allocation ws{3, 0, 0, 64 * MiB, 100 * us, 300 * us, 7, Category::Workspace, w.intern("ws")};
        w.add(weights); w.add(act); w.add(ws);
        int64_t id = 1;
        Kernel k;
        k.stream = 7; k.step = 0;
        k.id = id++; k.name = alpha; k.t_start = 100 * us; k.t_end = 300 * us; w.add(k);
        k.id = id++; k.name = beta; k.t_start = 500 * us; k.t_end = 700 * us; w.add(k);
        k.stream = 8; k.name = tiny;
        for (int i = 0; i < 200; ++i) {
            k.id = id++; k.t_start = 800 * us + i * 500; k.t_end = k.t_start + 100; w.add(k);
        }
        w.add(Access{1, 1, AccessMode::Read});
        w.add(Access{1, 3, AccessMode::Write});
        w.add(Access{2, 1, AccessMode::Read});
        w.add(Access{2, 2, AccessMode::Write});
        w.add(Copy{1, 0, 3, CopyKind::H2D, 64 * MiB, 300 * us, 350 * us});
        w.add(Marker{1, step, 0, 1000 * us, MarkerKind::Step, 0});
        w.finish();
    }
    if (!with_runs) return;
    for (int r = 0; r < 2; ++r) {
        Run run;
        run.name = r == 0 ? "lru@1GiB" : "cost_aware@1GiB";
        run.config = {{"policy", r == 0 ? "lru" : "cost_aware"}, {"capacity_bytes", std::to_string(1024 * MiB)}};
        run.metrics = {{"peak_bytes", r == 0 ? 1000.0 * MiB : 900.0 * MiB}, {"stall_ns", r == 0 ? 50e3 : 10e3}};
        int64_t shift = r == 0 ? 50 * us : 10 * us;
        run.kernel_times.push_back({1, 100 * us, 300 * us});
        run.kernel_times.push_back({2, 500 * us + shift, 700 * us + shift});
        for (int i = 0; i < 200; ++i) {
            int64_t s = 800 * us + shift + i * 500;
            run.kernel_times.push_back({3 + i, s, s + 100});
        }
        run.events.push_back({EventKind::SwapOut, 400 * us, 440 * us, 1, 0, 400 * MiB});
        run.events.push_back({EventKind::Stall, 500 * us, 500 * us + shift, 0, 2, 0});
        run.events.push_back({EventKind::SwapIn, 500 * us, 500 * us + shift, 1, 2, 400 * MiB});
        int64_t peak = r == 0 ? 1000 * MiB : 900 * MiB;
        run.memory = {{0, 400 * MiB, 0}, {100 * us, 464 * MiB, 0}, {300 * us, 400 * MiB, 0},
                      {440 * us, 0, 400 * MiB}, {450 * us, peak, 400 * MiB}, {600 * us, 400 * MiB, 0}};
        add_run(path, run);
    }
}

}  // namespace fixture
