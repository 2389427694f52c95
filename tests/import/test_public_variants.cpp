// Real public traces of shapes the other importer tests do not cover: Kineto traces of other
// back-ends and profiler modes (MTIA, the CUPTI range profiler, a CPU-only gloo rank, PyTorch
// 1.x category names, a rank pair of one job) and an Nsight Systems 2024.5 export. The
// figures were read from the files with Python's json/gzip/sqlite3 (tests/data/public/SOURCES.md);
// tests/import/public_traces.py checks the same files against their own accounting.
#include <algorithm>
#include <string>
#include <tuple>

#include <catch2/catch.hpp>

#include "mhc/trace/check.hpp"
#include "util.hpp"

namespace imp = mhc::trace::import;
using mhc::trace::TraceData;

namespace {

TraceData import_public(const test::TempDir& dir, const std::string& name, imp::Result& r) {
    imp::Options opt;
    opt.warn = false;
    const std::string out = dir.file("t.db");
    r = imp::import_file(test::pub(name), out, opt);
    TraceData t = mhc::trace::load_trace(out);
    REQUIRE(mhc::trace::check_trace(t).ok());
    return t;
}

bool warned(const imp::Result& r, const std::string& text) {
    return std::any_of(r.warnings.begin(), r.warnings.end(),
                       [&](const std::string& w) { return w.find(text) != std::string::npos; });
}

}  // namespace

TEST_CASE("kineto: an MTIA trace's device events are said to be left out, not dropped in silence",
          "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result r;
    TraceData t = import_public(dir, "kineto/hta-mtia-inference-rank-0.json.gz", r);
    // 16,158 events: 1,313 mtia_ccp_events on the MTIA device's lane (pid 17), 823 mtia_runtime
    // calls, 1,696 user annotations; no kernel, memcpy or memset event.
    CHECK(r.events == 16158);
    CHECK(t.kernels.size() == 0);
    CHECK(t.markers.size() == 1696);
    CHECK(t.meta.at("kineto.unread_events") == "1313 mtia_ccp_events, 823 mtia_runtime");
    CHECK(warned(r, "2136 events of categories mhc does not read were left out (1313 mtia_ccp_events, 823 mtia_runtime)"));
}

TEST_CASE("kineto: CUPTI range-profiler kernels are said to be left out", "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result r;
    TraceData t = import_public(dir, "kineto/hta-cupti-profiler-range.json.gz", r);
    // 77 kernels measured by the range profiler (cuda_profiler_range on GPU 0's lane), no
    // activity-trace kernel: their times are the profiler's replays, not the run's.
    CHECK(t.kernels.size() == 0);
    CHECK(t.meta.at("kineto.unread_events") == "77 cuda_profiler_range");
    CHECK(warned(r, "77 events of categories mhc does not read"));
}

TEST_CASE("kineto: traces whose every event is read carry no unread-events line", "[import][kineto][public]") {
    test::TempDir dir;
    for (const char* name : {"kineto/hta-cuda-event-sync.json.gz", "kineto/hta-triton-example.json.gz",
                             "kineto/hta-inference-rank-1-old-categories.json.gz"}) {
        INFO(name);
        imp::Result r;
        TraceData t = import_public(dir, name, r);
        CHECK(t.meta.count("kineto.unread_events") == 0);
        CHECK(r.warnings.empty());
        // Every kernel linked to its launch: by correlation with a cuda_runtime call, a
        // cuda_driver cuLaunchKernel (Triton), or a PyTorch 1.x 'Runtime' call.
        CHECK(t.meta.at("kineto.kernels_linked_to_launch") == std::to_string(t.kernels.size()));
    }
}

TEST_CASE("kineto: a CPU-only gloo rank and a rank pair of one job keep their job identity",
          "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result r;
    TraceData cpu = import_public(dir, "kineto/hta-cpu-only-gloo-rank-34.pt.trace.json.gz", r);
    CHECK(cpu.kernels.size() == 0);
    CHECK(cpu.meta.at("rank") == "34");
    CHECK(cpu.meta.at("world_size") == "300");
    CHECK(cpu.markers.size() == 11);   // 10 gloo:all_reduce annotations and ProfilerStep#551
    CHECK(std::count(cpu.markers.kind.begin(), cpu.markers.kind.end(), mhc::trace::MarkerKind::Step) == 1);
    // Ranks 0 and 1 of a 128-rank job, two steps each (551 and 552), kernels split evenly.
    for (const auto& [name, rank, kernels] : {std::tuple{"kineto/hta-sampled-rank-0.json.gz", "0", 1154},
                                               std::tuple{"kineto/hta-sampled-rank-1.json.gz", "1", 1104}}) {
        INFO(name);
        TraceData t = import_public(dir, name, r);
        CHECK(t.meta.at("rank") == rank);
        CHECK(t.meta.at("world_size") == "128");
        CHECK(static_cast<int>(t.kernels.size()) == kernels);
        CHECK(std::count(t.kernels.step.begin(), t.kernels.step.end(), 551) == kernels / 2);
        CHECK(std::count(t.kernels.step.begin(), t.kernels.step.end(), 552) == kernels / 2);
    }
}

TEST_CASE("nsys: a 2024.5 export (META_DATA_EXPORT, four A100s, one MPI rank's kernels)", "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result r;
    TraceData t = import_public(dir, "nsys/pipit-perlmutter-cloverleaf-cuda.sqlite", r);
    CHECK(t.kernels.size() == 1312);
    REQUIRE(t.copies.size() == 279);
    CHECK(std::count(t.copies.kind.begin(), t.copies.kind.end(), mhc::trace::CopyKind::H2D) == 254);
    CHECK(std::count(t.copies.kind.begin(), t.copies.kind.end(), mhc::trace::CopyKind::D2H) == 25);
    CHECK(t.meta.at("device_name") == "NVIDIA A100-SXM4-80GB");
    CHECK(t.meta.at("device_memory") == "84990623744");
    // The version table was renamed META_DATA_EXPORT; it was read as "unknown" before.
    CHECK(t.meta.at("nsys.version") == "2024.5.1.113");
    CHECK(t.meta.at("nsys.schema_version") == "3.13.2");
    int64_t kernel_ns = 0;
    for (size_t i = 0; i < t.kernels.size(); ++i) kernel_ns += t.kernels.t_end[i] - t.kernels.t_start[i];
    CHECK(kernel_ns == 294404540);
}
