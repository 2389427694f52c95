#pragma once
// Hand-built traces with known positions, shared by the core tests and the screenshot tests.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "mhc/test/temp.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/store.hpp"

namespace fixture {

using TempPath = mhc::test::TempPath;

constexpr int64_t us = 1000;
constexpr int64_t MiB = 1 << 20;

// Kernel names of three families (GEMM, attention, elementwise), spelled as cuBLAS,
// flash-attention and PyTorch name them.
inline const char* const kAlpha = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn";
inline const char* const kBeta = "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>";
inline const char* const kTiny = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>";

// The known trace, 0..1 ms:
//  stream 7: "alpha" (kAlpha) [100, 300) us, "beta" (kBeta) [500, 700) us (both access "act_big")
//  stream 8: 200 "tiny" (kTiny) kernels of 100 ns every 500 ns from 800 us (fold into one run)
//  copies: H2D [300, 350) us and [750, 790) us; markers: step 0 [0, 1000) us, layer 3 [720, 780) us
//  allocations: "weights" param 400 MiB [0, end); "act_big" activation 1024 MiB [450, 550) us;
//               "ws" workspace 64 MiB [100, 300) us  -> peak 1424 MiB at 450 us
//  runs (when with_runs): #1 "lru@1GiB" and #2 "cost_aware@1GiB" with memory samples and events.
inline void write_known_trace(const std::string& path, bool with_runs = true) {
    using namespace mhc::trace;
    {
        Writer w(path);
        w.set_meta("source", "viewer-test");
        int64_t alpha = w.intern(kAlpha), beta = w.intern(kBeta), tiny = w.intern(kTiny);
        int64_t step = w.intern("step 0"), layer = w.intern("layer 3");
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
        w.add(Copy{2, 0, 3, CopyKind::H2D, 32 * MiB, 750 * us, 790 * us});
        w.add(Marker{1, step, 0, 1000 * us, MarkerKind::Step, 0});
        w.add(Marker{2, layer, 720 * us, 780 * us, MarkerKind::Layer, 3});
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

// A trace as an importer writes it: no categories (every allocation "other"), labels that
// are source frames, and nested NVTX ranges, 0..1 ms:
//  ranges: "forward" [100, 900) us > "layer.0" [150, 450) us > "attention" [200, 300) us,
//          "layer.1" [500, 850) us; one kernel kTiny [100, 900) us on stream 1
//  allocations (all live [0, 1000) us, stacked in id order): 2 x 256 MiB "model.py:41 forward",
//          1 x 512 MiB "optim.py:88 step", 1 x 64 MiB "data.py:12 load"
inline const char* const kFrameA = "model.py:41 forward";
inline const char* const kFrameB = "optim.py:88 step";
inline const char* const kFrameC = "data.py:12 load";
// GPU 0: a 100 MiB block over [0, 600) us and kernels at 100, 200, 300 us; the host's pinned memory:
// 1 GiB over [0, 900) us (nsys and ET imports put pinned buffers on device -1).
inline void write_gpu_and_host_trace(const std::string& path) {
    mhc::trace::Writer writer(path);
    writer.set_meta("source", "viewer-test");
    const int64_t name = writer.intern(kAlpha);
    writer.add(mhc::trace::Allocation{1, 0, 0, 100 * MiB, 0, 600 * us});
    writer.add(mhc::trace::Allocation{2, -1, 0, 1024 * MiB, 0, 900 * us});
    for (int64_t k = 1; k <= 3; ++k) {
        mhc::trace::Kernel kernel;
        kernel.id = k;
        kernel.name = name;
        kernel.t_start = 100 * us * k;
        kernel.t_end = kernel.t_start + 50 * us;
        writer.add(kernel);
    }
    writer.add(mhc::trace::Access{1, 1, mhc::trace::AccessMode::Read});
    writer.add(mhc::trace::Access{2, 2, mhc::trace::AccessMode::Read});
    writer.finish();
}

inline void write_imported_trace(const std::string& path) {
    using namespace mhc::trace;
    Writer w(path);
    w.set_meta("source", "viewer-test-import");
    int64_t a = w.intern(kFrameA), b = w.intern(kFrameB), c = w.intern(kFrameC);
    w.add(Allocation{1, 0, 0, 256 * MiB, 0, 1000 * us, 1, Category::Other, a});
    w.add(Allocation{2, 0, 0, 256 * MiB, 0, 1000 * us, 1, Category::Other, a});
    w.add(Allocation{3, 0, 0, 512 * MiB, 0, 1000 * us, 1, Category::Other, b});
    w.add(Allocation{4, 0, 0, 64 * MiB, 0, 1000 * us, 1, Category::Other, c});
    Kernel k;
    k.id = 1; k.stream = 1; k.step = 0; k.name = w.intern(kTiny); k.t_start = 100 * us; k.t_end = 900 * us;
    w.add(k);
    w.add(Marker{1, w.intern("forward"), 100 * us, 900 * us, MarkerKind::Range, 0});
    w.add(Marker{2, w.intern("layer.0"), 150 * us, 450 * us, MarkerKind::Range, 0});
    w.add(Marker{3, w.intern("attention"), 200 * us, 300 * us, MarkerKind::Range, 0});
    w.add(Marker{4, w.intern("layer.1"), 500 * us, 850 * us, MarkerKind::Range, 0});
    w.finish();
}

// A snapshot-like trace with segments: one 1088 MiB allocation [0, 1000 us) inside a 2 GiB
// segment held from before recording to the end, and an empty 512 MiB segment [200, 600) us.
// Recorded reserved: 2 GiB, 2.5 GiB from 200 to 600 us. The caching model, warm-started from the
// recorded segments, places the allocation in the 2 GiB one and keeps 2 GiB.
inline void write_segments_trace(const std::string& path) {
    using mhc::trace::Allocation;
    using mhc::trace::Category;
    using mhc::trace::Segment;
    mhc::trace::Writer writer(path);
    writer.set_meta("source", "viewer-test-segments");
    writer.add(Allocation{1, 0, 0x1000, 1088 * MiB, 0, 1000 * us, 1, Category::Other, writer.intern(kFrameA)});
    Segment held;
    held.id = 1;
    held.address = 0x1000;
    held.bytes = 2048 * MiB;
    held.t_alloc = 0;
    held.reconstructed = true;
    writer.add(held);
    Segment empty;
    empty.id = 2;
    empty.address = 0x100000000;
    empty.bytes = 512 * MiB;
    empty.t_alloc = 200 * us;
    empty.t_free = 600 * us;
    writer.add(empty);
    writer.finish();
}

// A snapshot's trace with a private pool: two segments held to the end, 2 GiB at 0x1000 from 0 (the
// default pool) and 512 MiB at 0x100000000 from 100 us, which the end state puts in private pool
// (0, 1) (meta snapshot.segment_pools "DEVICE:FIRST,SECOND:ADDRESS:BYTES"). Allocations: 1088 MiB
// in the first [0, 1000) us, 256 MiB [200, 600) us and 128 MiB [300, 400) us in the second.
// With `graph_pool`, a second private pool: a CUDA graph's, (1, 0), whose one segment (256 MiB at
// 0x200000000, held from 150 us) holds allocation 4 (64 MiB, kFrameB, 160..800 us).
inline void write_pools_trace(const std::string& path, bool graph_pool = false) {
    using mhc::trace::Allocation;
    using mhc::trace::Category;
    using mhc::trace::Segment;
    using mhc::trace::Writer;
    {
        Writer writer(path);
        writer.set_meta("source", "viewer-test-pools");
        writer.set_meta("snapshot.segment_pools",
                        std::string("0:0,1:4294967296:536870912") + (graph_pool ? " 0:1,0:8589934592:268435456" : ""));
        if (graph_pool) {
            writer.add(Allocation{4, 0, 0x200000000, 64 * MiB, 160 * us, 800 * us, 1, Category::Other,
                                  writer.intern(kFrameB)});
            Segment graph;
            graph.id = 3;
            graph.address = 0x200000000;
            graph.bytes = 256 * MiB;
            graph.t_alloc = 150 * us;
            writer.add(graph);
        }
        const int64_t frame = writer.intern(kFrameA);
        writer.add(Allocation{1, 0, 0x1000, 1088 * MiB, 0, 1000 * us, 1, Category::Other, frame});
        writer.add(Allocation{2, 0, 0x100000000, 256 * MiB, 200 * us, 600 * us, 1, Category::Other, frame});
        writer.add(Allocation{3, 0, 0x100000000 + 256 * MiB, 128 * MiB, 300 * us, 400 * us, 1, Category::Other, frame});
        Segment shared;
        shared.id = 1;
        shared.address = 0x1000;
        shared.bytes = 2048 * MiB;
        writer.add(shared);
        Segment pooled;
        pooled.id = 2;
        pooled.address = 0x100000000;
        pooled.bytes = 512 * MiB;
        pooled.t_alloc = 100 * us;
        writer.add(pooled);
        writer.finish();
    }
}

}  // namespace fixture
