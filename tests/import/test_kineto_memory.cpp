// Kineto [memory] events -> allocations (trace/import/src/kineto_memory.hpp), on events in the
// shapes real profilers write:
//  - PyTorch up to about 1.9 (pytorch/kineto's ResNet-50 samples): args "Device Type",
//    "Device Id", "Bytes" only, no address: frees are paired by size;
//  - later ones (HolisticTraceAnalysis, TraceLens traces): "Ev Idx", "Addr", "Bytes",
//    "Total Allocated", "Total Reserved", integer or fractional microsecond `ts`, several
//    events at one `ts`, ROCm's Device Type 6.
// The live curve must be the allocator's own: the running signed sum of Bytes plus what was
// live before, Total Allocated where recorded, an allocation freed at its own instant included.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "mhc/sim/simulate.hpp"
#include "mhc/trace/check.hpp"
#include "util.hpp"

namespace imp = mhc::trace::import;
using mhc::trace::kNoTime;
using mhc::trace::TraceData;

namespace {

constexpr int64_t MiB = 1 << 20;

struct Mem {
    double ts;   // microseconds, as Kineto writes them
    int64_t bytes;
    int64_t addr = -1;    // -1: no Addr (PyTorch <= 1.9)
    int64_t total = -1;   // -1: no Total Allocated
    int device_type = 1, device_id = 0;
};

std::string num(double us) {
    char b[64];
    std::snprintf(b, sizeof b, "%.3f", us);
    return b;
}

// One [memory] event as the profiler writes it (key order and spacing of real files).
std::string event_json(const Mem& m, int64_t ev_idx) {
    std::string args;
    if (m.addr >= 0) args += "\"Ev Idx\": " + std::to_string(ev_idx) + ", ";
    args += "\"Device Type\": " + std::to_string(m.device_type) + ", \"Device Id\": " + std::to_string(m.device_id);
    if (m.addr >= 0) args += ", \"Addr\": " + std::to_string(m.addr);
    args += ", \"Bytes\": " + std::to_string(m.bytes);
    if (m.total >= 0) args += ", \"Total Allocated\": " + std::to_string(m.total) + ", \"Total Reserved\": " + std::to_string(2 * m.total + 2 * MiB);
    return "{\n    \"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\",\n"
           "    \"pid\": 5555, \"tid\": 5555,\n    \"ts\": " + num(m.ts) + ",\n    \"args\": {\n      " + args + "\n    }\n  }";
}

// A Kineto document: a ProfilerStep range around the events, then the events.
std::string trace_json(const std::vector<Mem>& events) {
    std::string s = "{\n  \"schemaVersion\": 1,\n  \"traceEvents\": [\n  {\"ph\": \"X\", \"cat\": \"cpu_op\", "
                    "\"name\": \"ProfilerStep#1\", \"pid\": 5555, \"tid\": 5555, \"ts\": 1.0, \"dur\": 1000000.0}";
    for (size_t i = 0; i < events.size(); ++i) s += ",\n  " + event_json(events[i], static_cast<int64_t>(100 + i));
    return s + "\n]}\n";
}

TraceData import_events(const test::TempDir& dir, const std::vector<Mem>& events, imp::Result* res = nullptr) {
    std::string in = dir.file("t.json"), out = dir.file("t.db");
    test::write_file(in, trace_json(events));
    imp::Options opt;
    opt.warn = false;
    imp::Result r = imp::import_file(in, out, opt);
    if (res) *res = r;
    TraceData t = mhc::trace::load_trace(out);
    REQUIRE(mhc::trace::check_trace(t).ok());
    return t;
}

// Live bytes of `device` just after time t (every event at or before t applied).
int64_t live_at(const TraceData& t, int32_t device, int64_t time) {
    const auto& a = t.allocations;
    int64_t live = 0;
    for (size_t i = 0; i < a.size(); ++i)
        if (a.device[i] == device && a.t_alloc[i] <= time && (a.t_free[i] == kNoTime || a.t_free[i] > time)) live += a.bytes[i];
    return live;
}

int64_t peak(const TraceData& t, int32_t device = 0) { return mhc::trace::live_peak(t, device).bytes; }

// simulate --capacity unlimited --allocator ideal gives the recorded timeline back.
void check_identity(const TraceData& t, int64_t expected_peak) {
    mhc::sim::Config c;
    c.capacity = mhc::sim::parse_capacity("unlimited");
    c.allocator = "ideal";
    c.device = 0;
    mhc::sim::Result r = mhc::sim::simulate(t, c);
    CHECK(r.baseline_peak == expected_peak);
    CHECK(r.simulated_peak == expected_peak);
    CHECK(r.simulated_makespan == r.baseline_makespan);
    CHECK(r.stall_count == 0);
}

}  // namespace

TEST_CASE("kineto without Addr: frees pair by size, the curve is the signed sum of Bytes", "[import][kineto-memory]") {
    test::TempDir dir;
    SECTION("a training-step sawtooth (two steps) imports with its own peak and nothing reconstructed") {
        std::vector<Mem> ev;
        double ts = 10;
        for (int step = 0; step < 2; ++step)
            for (int64_t b : {64 * MiB, 128 * MiB, 64 * MiB, -64 * MiB, -128 * MiB, -64 * MiB}) ev.push_back({ts += 10, b});
        imp::Result r;
        TraceData t = import_events(dir, ev, &r);
        CHECK(t.allocations.size() == 6);
        CHECK(peak(t) == 256 * MiB);
        CHECK(t.meta.at("pairing") == "size");
        CHECK(t.meta.at("pairing.frees_by_size") == "6");
        CHECK(t.meta.at("reconstructed_blocks") == "0");
        // Latest first: the second 64 MiB block is the one freed first (after 10 us, not 30 us).
        CHECK(t.allocations.t_free[2] - t.allocations.t_alloc[2] == 10'000);
        CHECK(t.allocations.t_free[0] - t.allocations.t_alloc[0] == 50'000);
        std::string info = mhc::trace::to_text(mhc::trace::summarize(t, 3));
        CHECK(info.find("frees       paired by size") != std::string::npos);
        check_identity(t, 256 * MiB);
    }
    SECTION("a free of a block from before recording: only what the sum requires is reconstructed") {
        // Running sum: -512, -256, -512, +512, -512 -> 512 MiB were live before the first event.
        std::vector<Mem> ev = {{10, -512 * MiB}, {20, 256 * MiB}, {30, -256 * MiB}, {40, 1024 * MiB}, {50, -1024 * MiB}};
        TraceData t = import_events(dir, ev);
        CHECK(t.meta.at("reconstructed_blocks") == "1");
        CHECK(t.meta.at("kineto.baseline.device0").rfind("536870912 ", 0) == 0);
        CHECK(peak(t) == 1024 * MiB);
        CHECK(live_at(t, 0, 0) == 512 * MiB);
        check_identity(t, 1024 * MiB);
    }
    SECTION("a free that no block of its size explains, while the sum stays >= 0, ends part of a live block") {
        std::vector<Mem> ev = {{10, 300 * MiB}, {20, -100 * MiB}, {30, -200 * MiB}};
        TraceData t = import_events(dir, ev);
        CHECK(t.meta.at("reconstructed_blocks") == "0");
        CHECK(t.meta.at("kineto.frees_split") == "1");
        CHECK(peak(t) == 300 * MiB);
        int64_t t2 = t.allocations.t_alloc[0] + 10'000;
        CHECK(live_at(t, 0, t2) == 200 * MiB);
        CHECK(live_at(t, 0, t2 + 10'000) == 0);
    }
}

TEST_CASE("kineto without Addr, generated: the imported curve equals baseline + running sum at every event",
          "[import][kineto-memory]") {
    test::TempDir dir;
    std::mt19937_64 rng(28);
    int64_t splits = 0, moved = 0;
    for (int round = 0; round < 20; ++round) {
        // Sizes from a few classes (as a network's tensors are), frees of live sizes in any
        // order, and frees of blocks from before recording.
        std::vector<int64_t> live;
        std::vector<Mem> ev;
        double ts = 5;
        for (int i = 0; i < 300; ++i) {
            ts += static_cast<double>(rng() % 3);   // 0, 1 or 2 us apart: a third of the events tie
            int64_t size = int64_t(512) << (rng() % 8);
            int r = static_cast<int>(rng() % 10);
            if (r == 9) {   // a block allocated before recording
                ev.push_back({ts, -size});
            } else if (r < 5 || live.empty()) {
                live.push_back(size);
                ev.push_back({ts, size});
            } else {
                size_t k = rng() % live.size();
                ev.push_back({ts, -live[k]});
                live.erase(live.begin() + static_cast<long>(k));
            }
        }
        TraceData t = import_events(dir, ev);
        splits += std::stoll(t.meta.at("kineto.frees_split"));
        moved += std::stoll(t.meta.at("kineto.memory_events_moved"));
        // Expected: the baseline is the least that keeps the sum >= 0; each event's time is
        // its ts or, at a tie, 1 ns after the previous event.
        int64_t sum = 0, low = 0;
        for (const auto& m : ev) low = std::min(low, sum += m.bytes);
        int64_t base = -low, last = -1, want_peak = base;
        if (base > 0) last = 0;
        sum = 0;
        const int64_t t0 = 1000;   // the ProfilerStep range starts at 1 us
        for (const auto& m : ev) {
            int64_t time = std::max(static_cast<int64_t>(m.ts * 1000 + 0.5) - t0, last + 1);
            last = time;
            sum += m.bytes;
            want_peak = std::max(want_peak, base + sum);
            INFO("round " << round << " at " << time);
            REQUIRE(live_at(t, 0, time) == base + sum);
        }
        CHECK(peak(t) == want_peak);
    }
    CHECK(splits > 0);   // the rounds took every path: frees split over other blocks, ties
    CHECK(moved > 0);
}

TEST_CASE("kineto: an allocation freed at its own instant counts in the peak and is freed", "[import][kineto-memory]") {
    test::TempDir dir;
    // Total Allocated shows 513 MiB at ts 200: the allocator held the block briefly.
    SECTION("with Addr and Total Allocated") {
        std::vector<Mem> ev = {{100, MiB, 0x7000, MiB},
                               {200, 512 * MiB, 0x9000, 513 * MiB},
                               {200, -512 * MiB, 0x9000, MiB},
                               {200, 512 * MiB, 0xb000, 513 * MiB},   // a second one at the same instant
                               {200, -512 * MiB, 0xb000, MiB},
                               {300, -MiB, 0x7000, 0}};
        TraceData t = import_events(dir, ev);
        CHECK(peak(t) == 513 * MiB);
        for (size_t i = 0; i < t.allocations.size(); ++i) {
            REQUIRE(t.allocations.t_free[i] != kNoTime);
            CHECK(t.allocations.t_free[i] > t.allocations.t_alloc[i]);
        }
        CHECK(t.meta.at("kineto.total_allocated.device0") == "agrees at all 6 events");
        CHECK(t.meta.at("kineto.memory_events_moved") == "3");
        check_identity(t, 513 * MiB);
    }
    SECTION("without Addr") {
        std::vector<Mem> ev = {{100, MiB}, {200, 512 * MiB}, {200, -512 * MiB}, {300, -MiB}};
        TraceData t = import_events(dir, ev);
        CHECK(peak(t) == 513 * MiB);
        check_identity(t, 513 * MiB);
    }
}

TEST_CASE("kineto with Total Allocated: the curve follows the file's order at one ts and says where it disagrees",
          "[import][kineto-memory]") {
    test::TempDir dir;
    SECTION("an allocation before a free at the same ts: both live at once, as Total Allocated says") {
        std::vector<Mem> ev = {{50, 256 * MiB, 0x1000, 256 * MiB}, {100, 512 * MiB, 0x3000, 768 * MiB},
                               {100, -256 * MiB, 0x1000, 512 * MiB}, {150, -512 * MiB, 0x3000, 0}};
        TraceData t = import_events(dir, ev);
        CHECK(peak(t) == 768 * MiB);
        CHECK(t.meta.at("pairing") == "address");
        CHECK(t.meta.at("kineto.total_allocated.device0") == "agrees at all 4 events");
        CHECK(t.meta.at("kineto.reserved_peak.device0") == std::to_string(2 * 768 * MiB + 2 * MiB));
    }
    SECTION("bytes live before recording: the baseline from the first event, one unattributed block") {
        std::vector<Mem> ev = {{50, 4 * MiB, 0x1000, 4100 * MiB}, {60, -4 * MiB, 0x1000, 4096 * MiB}};
        TraceData t = import_events(dir, ev);
        CHECK(peak(t) == 4100 * MiB);
        CHECK(t.meta.at("reconstructed_bytes.unattributed") == std::to_string(4096 * MiB));
    }
    SECTION("an event the profiler dropped: one line says where and by how much") {
        // The free of 0x2000 (100 B) is missing: Total Allocated is 100 B lower from then on.
        std::vector<Mem> ev = {{10, 100, 0x1000, 100}, {20, 100, 0x2000, 200}, {40, -100, 0x1000, 0},
                               {50, 300, 0x3000, 300}};
        TraceData t = import_events(dir, ev);
        const std::string& line = t.meta.at("kineto.total_allocated.device0");
        CHECK(line.find("differ from Total Allocated at 2 of 4 [memory] events") != std::string::npos);
        CHECK(line.find("first at traceEvents[3]") != std::string::npos);   // [0] is the ProfilerStep
        CHECK(line.find("100 B imported, 0 B recorded; largest difference 100 B") != std::string::npos);
    }
}

TEST_CASE("kineto: ROCm traces (Device Type 6 = HIP) are GPU memory, on the device of their kernels", "[import][kineto-memory]") {
    test::TempDir dir;
    // As in TraceLens's MI300X traces: [memory] on Device Id 0, kernels on args.device 2 (the
    // runtime's agent number), one GPU.
    std::vector<Mem> ev = {{10, 2 * MiB, 0x1000, 2 * MiB, 6, 0}, {20, -2 * MiB, 0x1000, 0, 6, 0},
                           {30, 64, 0x5000, 64, 0, -1}, {40, -64, 0x5000, 0, 0, -1}};
    std::string json = trace_json(ev);
    json.insert(json.rfind("\n]}"), ",\n  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 2, \"tid\": 7, "
                                    "\"ts\": 12.0, \"dur\": 3.0, \"args\": {\"device\": 2, \"stream\": 7}}");
    std::string in = dir.file("rocm.json"), out = dir.file("rocm.db");
    test::write_file(in, json);
    imp::Options opt;
    opt.warn = false;
    imp::import_file(in, out, opt);
    TraceData t = mhc::trace::load_trace(out);
    CHECK(peak(t, 0) == 2 * MiB);
    CHECK(peak(t, -1) == 64);
    REQUIRE(t.kernels.size() == 1);
    CHECK(t.kernels.device[0] == 0);
    CHECK(t.meta.at("kineto.kernel_device").rfind("2 -> 0", 0) == 0);
}

// A CUDA process numbers kernels (CUPTI's device) and [memory] (c10's Device Id) by the same
// index: kernels on GPU 1 while the only [memory] events are GPU 0's (a tensor moved there, the
// model's work on cuda:1) ran on GPU 1. They were renumbered to 0 as a ROCm trace's agent is.
TEST_CASE("kineto: a CUDA trace's kernels stay on their device when the [memory] events are another GPU's",
          "[import][kineto-memory]") {
    test::TempDir dir;
    std::vector<Mem> ev = {{10, 2 * MiB, 0x1000, 2 * MiB, 1, 0}, {20, -2 * MiB, 0x1000, 0, 1, 0}};
    std::string json = trace_json(ev);
    json.insert(json.rfind("\n]}"),
                ",\n  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 1, \"tid\": 7, "
                "\"ts\": 12.0, \"dur\": 3.0, \"args\": {\"device\": 1, \"stream\": 7}}");
    std::string in = dir.file("cuda.json"), out = dir.file("cuda.db");
    test::write_file(in, json);
    imp::Options opt;
    opt.warn = false;
    imp::import_file(in, out, opt);
    TraceData trace = mhc::trace::load_trace(out);
    CHECK(peak(trace, 0) == 2 * MiB);
    REQUIRE(trace.kernels.size() == 1);
    CHECK(trace.kernels.device[0] == 1);
    CHECK(trace.meta.count("kineto.kernel_device") == 0);
}

TEST_CASE("kineto: one ROCm process driving two GPUs keeps its kernels' agent numbers and says so",
          "[import][kineto-memory]") {
    test::TempDir dir;
    // [memory] on HIP devices 0 and 1, kernels on agents 2 and 3 (two GPUs after one CPU agent,
    // or GPUs 1 and 2 after two): which kernel ran on which memory's GPU the file does not say.
    // A CUDA trace of the same shape (no hip* call, no ROCm key, Device Type 1: a [memory] event of
    // Device Type 6, HIP, is a ROCm build's) says nothing.
    for (bool rocm : {true, false}) {
        INFO((rocm ? "ROCm" : "CUDA"));
        const int type = rocm ? 6 : 1;
        std::vector<Mem> ev = {{10, 2 * MiB, 0x1000, 2 * MiB, type, 0}, {20, 4 * MiB, 0x9000, 4 * MiB, type, 1}};
        std::string json = trace_json(ev);
        if (rocm) json.insert(json.find("\"traceEvents\""), "\"roctracer_version\": 4.1,\n  ");
        for (int agent : {2, 3})
            json.insert(json.rfind("\n]}"),
                        ",\n  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 2, "
                        "\"tid\": 7, \"ts\": 12.0, \"dur\": 3.0, \"args\": {\"device\": " +
                            std::to_string(agent) + ", \"stream\": 7}}");
        std::string in = dir.file("two.json"), out = dir.file(rocm ? "rocm.db" : "cuda.db");
        test::write_file(in, json);
        imp::Options opt;
        opt.warn = false;
        imp::Result result = imp::import_file(in, out, opt);
        TraceData trace = mhc::trace::load_trace(out);
        REQUIRE(trace.kernels.size() == 2);
        CHECK(trace.kernels.device[0] + trace.kernels.device[1] == 5);   // 2 and 3, kept
        if (rocm) {
            CHECK(trace.meta.at("kineto.kernel_device") ==
                  "2, 3 kept: ROCm numbers kernels by the runtime's agent (CPU agents first), not by the process's "
                  "device index, which the file does not tell (no deviceProperties; [memory] on devices 0, 1)");
            CHECK(result.warnings.size() == 1);
        } else {
            CHECK(trace.meta.count("kineto.kernel_device") == 0);
            CHECK(result.warnings.empty());
        }
    }
}

TEST_CASE("kineto: the ResNet-50 trace of PyTorch 1.9 (no Addr) peaks at its running sum of Bytes", "[import][kineto-memory]") {
    // pytorch/kineto's tb_plugin sample; 2,791,636,480 B is the running sum's maximum on GPU 0
    // (tests/import/public_traces.py computes it from the JSON; it was imported at 17.63 GiB).
    test::TempDir dir;
    std::string out = dir.file("t.db");
    imp::Options opt;
    opt.warn = false;
    imp::import_file(test::pub("kineto/tb-plugin-resnet50-worker0.1623143089861.pt.trace.json.gz"), out, opt);
    TraceData t = mhc::trace::load_trace(out);
    CHECK(peak(t, 0) == 2'791'636'480);
    CHECK(t.meta.at("reconstructed_blocks") == "0");
    CHECK(t.meta.at("pairing.frees_by_size") == "6418");
}
