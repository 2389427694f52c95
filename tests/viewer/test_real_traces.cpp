// What the viewer showed wrong on the real public traces (tests/data/public), each imported here
// as `mhc import` does: memory summed over devices, made-up times on order-only traces, empty
// tables without a word, and runs that stopped out of memory without saying why.
#include <catch2/catch.hpp>
#include <filesystem>

#include "fixtures.hpp"
#include "mhc/test/paths.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/import/import.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/viewer/axis.hpp"
#include "mhc/viewer/band_colors.hpp"
#include "mhc/viewer/bands.hpp"
#include "mhc/viewer/data.hpp"
#include "mhc/viewer/details.hpp"
#include "mhc/viewer/metrics.hpp"
#include "mhc/viewer/notes.hpp"
#include "mhc/viewer/run_table.hpp"
#include "mhc/viewer/stats.hpp"

using mhc::viewer::empty_table_text;
using mhc::viewer::format_metric;
using mhc::viewer::kNotATime;
using mhc::viewer::load_view_run;
using mhc::viewer::load_view_trace;
using mhc::viewer::memory_device_text;
using mhc::viewer::run_cell;
using mhc::viewer::run_outcome;
using mhc::viewer::RunColumn;
using mhc::viewer::RunRow;
using mhc::viewer::StatsTable;
using mhc::viewer::TimeText;
using mhc::viewer::ViewRun;
using mhc::viewer::ViewTrace;
namespace fs = std::filesystem;
namespace trace = mhc::trace;

namespace {

const fs::path kPublic = mhc::test::public_datasets();

ViewTrace imported(const fs::path& in, const std::string& out_name) {
    fixture::TempPath out(out_name);
    trace::import::Options opt;
    opt.warn = false;
    trace::import::import_file(in.string(), out.path, opt);
    return load_view_trace(out.path);
}

}   // namespace

TEST_CASE("an Nsight Systems export with device and pinned host memory: GPU 0's curve, not their sum") {
    // extra-p's 16-stream export: GPU 0 and the host's pinned buffers each peak at 320,000,000 B
    // (SOURCES.md); the one curve over both drew 600 MiB, a figure of neither.
    ViewTrace view = imported(kPublic / "nsys/extrap-concurrent-16-streams.sqlite", "real-nsys.db");
    CHECK(view.memory_device == 0);
    CHECK(view.live.peak() == 320000000.0);
    REQUIRE(view.memory_devices.size() == 2);
    CHECK(view.memory_devices[0].device == -1);
    CHECK(view.memory_devices[0].peak_bytes == 320000000);
    CHECK(memory_device_text(view) == "GPU 0; not shown: host (peak 305.18 MiB)");
}

TEST_CASE("an order-only snapshot: times are event numbers in every text, no kernels said in a sentence") {
    // FlexGen's out-of-memory snapshot (PyTorch 2.0, no time_us): one instant, 460 blocks.
    ViewTrace view = imported(kPublic / "torch-snapshot/flexgen-oom-snapshot.pickle", "real-flexgen.db");
    REQUIRE(trace::order_only_timing(view.meta.at("timing")));
    const TimeText times{true};
    CHECK(view.time_text().events);
    CHECK(view.time_text().noun == std::string("event"));   // a snapshot's events, not ops
    CHECK(times.at(view.t_begin) == "event #0");
    CHECK(times.span(view.t_end - view.t_begin) == "1 event");   // the header read "1 ns"
    CHECK(times.span(1670900) == "1670900 events");
    CHECK(TimeText{}.span(view.t_end - view.t_begin) == "1 ns");
    CHECK(TimeText{}.at(1500000, 1000) == "1.500 ms");
    CHECK(empty_table_text(view, StatsTable::Kernels, 0) ==
          "no kernels in this trace: a PyTorch memory snapshot records allocations, not kernels (see the Memory view)");
    CHECK(empty_table_text(view, StatsTable::Kernels, 3).empty());
    CHECK(empty_table_text(view, StatsTable::Steps, 0).rfind("no steps in this trace", 0) == 0);
    // A run's loss and makespan on such a trace are no times (mhc simulate leaves them out).
    CHECK(format_metric("simulated_makespan_ns", 1.47e8, true) == kNotATime);
    CHECK(format_metric("throughput_loss", 0.0, true) == kNotATime);
    CHECK(format_metric("simulated_peak_bytes", 8.0 * (1 << 30), true) == "8.00 GiB");
    CHECK(format_metric("simulated_makespan_ns", 1.47e8) == "147.00 ms");
    RunRow row;
    row.makespan = 1.47e8;
    row.loss = 0;
    CHECK(run_cell(row, RunColumn::Makespan, true) == kNotATime);
    CHECK(run_cell(row, RunColumn::Loss, true) == kNotATime);
    CHECK(run_cell(row, RunColumn::Makespan) == "147.00 ms");
}

TEST_CASE("a trace of no kernels and no allocations (MTIA inference): sentences, not empty tables") {
    ViewTrace view = imported(kPublic / "kineto/hta-mtia-inference-rank-0.json.gz", "real-mtia.db");
    REQUIRE(view.kernel_count == 0);
    REQUIRE(view.allocations.size() == 0);
    CHECK(empty_table_text(view, StatsTable::Kernels, 0) == "no kernels in this trace");
    CHECK(
        empty_table_text(view, StatsTable::Allocations, 0).rfind("no allocations in this trace: a timeline only", 0) ==
        0);
    CHECK(view.memory_devices.empty());
}

TEST_CASE("a run that stopped out of memory says where and why, as mhc simulate printed it") {
    fixture::TempPath db("oom-run.db");
    fixture::write_known_trace(db.path, false);
    trace::Run run;
    run.name = "lru+none@70%/pcie4/caching";
    run.status = trace::RunStatus::Oom;
    run.config = {{"oom_where", "allocation 2 (act_big)"},
                  {"oom_why", "needs 1.00 GiB; 400.00 MiB in use, short by 424.00 MiB"}};
    run.metrics = {{"oom", 1}, {"oom_time_ns", 450e3}, {"kernels_reached", 1}};
    run.kernel_times.push_back({1, 100 * fixture::us, 300 * fixture::us});
    trace::add_run(db.path, run);
    trace::Run done;
    done.name = "lru+none@90%/pcie4/caching";
    trace::add_run(db.path, done);
    ViewTrace view = load_view_trace(db.path);
    ViewRun oom = load_view_run(view, 1);
    CHECK(
        run_outcome(oom, TimeText{}) ==
        "out of memory at 450.000 us: allocation 2 (act_big): needs 1.00 GiB; 400.00 MiB in use, short by 424.00 MiB");
    CHECK(run_outcome(oom, TimeText{true}).rfind("out of memory at event #450000: ", 0) == 0);
    CHECK(run_outcome(load_view_run(view, 2), TimeText{}).empty());
}

TEST_CASE("an execution trace alone (order only): a kernel's details pane gives the op's number, not nanoseconds") {
    // param's ResNet ET on one GPU: the k-th op (from 1) at k ns for 1 ns (docs/import.md), so the
    // first op is [1, 2): event #1, one event long (the pane once said "start 0 ns, end 1.000 us").
    ViewTrace view = imported(kPublic / "chakra/param-resnet-1gpu-et-1.0.3.json.gz", "real-et.db");
    REQUIRE(view.order_only());
    const int64_t first = view.kernel_lanes.at(0).ref.at(0);
    mhc::viewer::DetailsPane pane = mhc::viewer::kernel_pane(mhc::viewer::kernel_details(view, nullptr, first),
                                                             nullptr);
    std::string recorded;
    for (const auto& [field, value] : pane.fields)
        if (field == "recorded") recorded = value;
    // An op's number: it has no start and end one apart, nor a duration (they read "start event #1,
    // end event #2 (1 event)", and before that "start 0 ns, end 1.000 us").
    CHECK(recorded == "op #1");
    CHECK(view.time_text().noun == std::string("op"));
}

TEST_CASE("what the import warned of and what the trace lacks are said: notes from meta") {
    // con_kernel's Nsight export: no NVTX table, rows of tables not read, two kernels moved
    // (import.warnings, three lines), allocations without accesses. The window showed none of it.
    ViewTrace view = imported(kPublic / "nsys/con_kernel.sqlite", "real-notes.db");
    auto notes = mhc::viewer::trace_notes(view.meta, static_cast<int64_t>(view.allocations.size()));
    REQUIRE(notes.size() == 4);
    CHECK(notes[0].brief == "accesses none");
    CHECK(notes[1].text == "import: missing tables NVTX_EVENTS (imported without them)");
    CHECK(notes[2].text.rfind("import: rows of tables mhc does not read were left out (GPU_MEMORY_USAGE_EVENTS 219", 0) ==
          0);
    CHECK(notes[3].text.rfind("import: 2 kernels started before the previous kernel on their stream ended", 0) == 0);
    CHECK(mhc::viewer::notes_summary(notes) ==
          "accesses none; import: missing tables NVTX_EVENTS (imported without them) (+2 more)");
    // Each meta value that warns, in its words; control bytes as '?'; nothing for a clean trace.
    std::map<std::string, std::string> meta{{"accesses", "partial"},   {"et.join", "2 threads left out"},
                                            {"timing", "estimated"},   {"complete", "false"},
                                            {"dropped_records", "12"}, {"import.warnings", "first\x1b[31m\nsecond"}};
    notes = mhc::viewer::trace_notes(meta, 0);
    REQUIRE(notes.size() == 6);
    CHECK(notes[0].text == "accesses partial: some kernels' accesses are missing (2 threads left out)");
    CHECK(notes[4].text == "import: first?[31m");
    CHECK(notes[5].text == "import: second");
    CHECK(
        mhc::viewer::notes_summary(notes) ==
        "accesses partial; timing estimated; recording interrupted; 12 records dropped; import: first?[31m (+1 more)");
    CHECK(mhc::viewer::trace_notes({{"accesses", "none"}, {"timing", "exact"}}, 0).empty());   // no memory: no matter
    CHECK(mhc::viewer::trace_notes({{"accesses", "exact"}, {"dropped_records", "0"}}, 10).empty());
}

TEST_CASE("a trace without allocations gives its importer's reason, not Kineto's advice to an nsys user") {
    // nvFuser's 2025.1 export was recorded with GPU memory usage off: the memory view said to
    // profile with profile_memory (a PyTorch option) instead of nsys's --cuda-memory-usage.
    ViewTrace view = imported(kPublic / "nsys/fuser-h200-nsys-2025.1.sqlite", "real-fuser.db");
    REQUIRE(view.allocations.size() == 0);
    CHECK(mhc::viewer::no_allocations_reason(view) ==
          "recorded without GPU memory usage, META_DATA_CAPTURE COLLECT_GPU_MEMORY_USAGE=false: record with nsys "
          "profile --cuda-memory-usage=true");
    CHECK(empty_table_text(view, StatsTable::Allocations, 0) ==
          "no allocations in this trace: a timeline only (" + mhc::viewer::no_allocations_reason(view) + ")");
    view.meta.erase("allocations");   // no reason given: the general sentence
    CHECK(empty_table_text(view, StatsTable::Allocations, 0).find("profile_memory") != std::string::npos);
}

TEST_CASE("an execution trace's CPU ops lie on a host lane, not 'GPU-1'") {
    // Chakra's 1.0.2 sample: 40 ops on device -1 (the host), 110 on GPU 0.
    ViewTrace view = imported(kPublic / "chakra/chakra-1.0.2-et.json.gz", "real-et-host.db");
    std::vector<std::string> titles;
    for (const auto& lane : view.kernel_lanes) titles.push_back(lane.title);
    CHECK(titles == std::vector<std::string>{"host stream 1", "GPU0 stream 1"});
}

TEST_CASE("allocation bands stack to the live bytes, never above them, on real traces") {
    // A column of the memory view's bands stacked every allocation overlapping it, alive together
    // or not: at 1222 columns TraceLens's H100 TimeSformer trace stacked to 1.47 x its 4,490,752,000 B
    // peak and the MI300X normalization test to 1.85 x; the H200 GPT-2 snapshot (datasets/recorded)
    // to 15 GiB under 12.38. Each column now shows its live maximum's instant: the bands alive
    // then, and the summaries' bytes then, add up to the curve's column maximum.
    for (const char* name :
         {"kineto/tracelens-h100-timesformer-k400.json.gz", "kineto/tracelens-mi300x-normalization-layer-test.json.gz",
          "torch-snapshot/stanford-cs336-training-step.pickle"}) {
        INFO(name);
        ViewTrace view = imported(kPublic / name, "real-bands.db");
        const mhc::viewer::TimeRange whole{view.t_begin, view.t_end};
        for (const int width : {1222, 301}) {
            mhc::viewer::CurveColumns cols;
            mhc::viewer::prepare_curve(view.live, whole, width, cols);
            mhc::viewer::BandLayout bands;
            mhc::viewer::layout_bands(view.allocations, view.live, view.keys.get(), whole, width, 280, 1024, bands);
            size_t over = 0;
            for (size_t x = 0; x < static_cast<size_t>(width); ++x)
                over += bands.stack_top[x] > static_cast<double>(cols.max[x]) * (1 + 1e-6) + 4096;
            CHECK(over == 0);
            // The stack reaches the trace's peak (the column holding it) and the axis no higher.
            CHECK(bands.y_max == Approx(view.live.peak()).epsilon(1e-6));
        }
    }
}
