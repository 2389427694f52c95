#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "fixtures.hpp"
#include "mhc/common/error.hpp"
#include "mhc/test/paths.hpp"
#include "mhc/trace/cache.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/summary.hpp"
#include "mhc/viewer/band_colors.hpp"
#include "mhc/viewer/bands.hpp"
#include "mhc/viewer/data.hpp"
#include "mhc/viewer/stats.hpp"
#include "mhc/viewer/timeline.hpp"

using namespace mhc::viewer;
using fixture::MiB;
using fixture::us;

TEST_CASE("the known trace loads into lanes, steps, allocations and a live curve") {
    fixture::TempPath p("known.db");
    fixture::write_known_trace(p.path);
    ViewTrace t = load_view_trace(p.path);
    REQUIRE(t.kernel_lanes.size() == 2);
    CHECK(t.kernel_lanes[0].stream == 7);
    CHECK(t.kernel_lanes[0].size() == 2);
    CHECK(t.kernel_lanes[1].size() == 200);
    CHECK(t.kernel_lanes[0].title == "stream 7");
    CHECK(t.copy_lanes.size() == 1);
    CHECK(t.copy_lanes[0].title == "copies H2D");
    REQUIRE(t.steps.size() == 1);
    CHECK(t.steps[0].t1 == 1000 * us);
    CHECK(t.kernel_count == 202);
    CHECK(t.access_count == 4);
    CHECK(t.t_begin == 0);
    CHECK(t.t_end == 1000 * us);
    // The live-bytes peak agrees with the trace library's own summary.
    mhc::trace::TraceData full = mhc::trace::load_trace(p.path);
    mhc::trace::LivePeak lp = mhc::trace::live_peak(full, 0);
    CHECK(t.live.peak() == static_cast<double>(lp.bytes));
    CHECK(t.live.peak_time() == lp.time);
    CHECK(t.live.peak() == static_cast<double>(1424 * MiB));
    // Largest first.
    CHECK(t.allocations.id[t.allocations.by_size[0]] == 2);
}

TEST_CASE("accesses are read on demand and highlight the kernels that touched an allocation") {
    fixture::TempPath p("known.db");
    fixture::write_known_trace(p.path);
    ViewTrace t = load_view_trace(p.path);
    CHECK(access_count_of(t, 1) == 2);
    auto hits = accesses_of(t, 1);
    REQUIRE(hits.size() == 2);
    CHECK(hits[0].kernel == 1);
    CHECK(hits[1].kernel == 2);
    auto lanes = highlight_lanes(t, nullptr, hits);
    REQUIRE(lanes.size() == 1);
    CHECK(lanes[0].t_start == std::vector<int64_t>{100 * us, 500 * us});
    // With a run, the highlights follow the run's kernel times.
    ViewRun run = load_view_run(t, 1);
    auto shifted = highlight_lanes(t, &run, hits);
    REQUIRE(shifted.size() == 1);
    CHECK(shifted[0].t_start == std::vector<int64_t>{100 * us, 550 * us});
}

TEST_CASE("runs load with their kernel times, event lanes, memory and capacity") {
    fixture::TempPath p("known.db");
    fixture::write_known_trace(p.path);
    ViewTrace t = load_view_trace(p.path);
    ViewRun r = load_view_run(t, 2);
    CHECK(r.info.name == "cost_aware@1GiB");
    CHECK(r.label() == "#2 cost_aware@1GiB");
    CHECK(r.capacity == 1024 * MiB);
    REQUIRE(r.kernel_lanes.size() == 2);
    CHECK(r.kernel_lanes[0].t_start[1] == 510 * us);
    REQUIRE(r.event_lanes.size() == 3);   // swap_out, swap_in, stall
    CHECK(r.event_lanes[0].title == "swap-out");   // mhc simulate's word, not the stored kind
    CHECK(r.memory.peak() == static_cast<double>(900 * MiB));
    CHECK(r.memory.peak_time() == 450 * us);
    CHECK(r.metrics.at("stall_ns") == 10e3);
    // The run's tracks replace the recorded kernels and add one per event kind.
    auto tracks = timeline_tracks(t, &r);
    CHECK(tracks.size() == 2 + 2 + 1 + 3);   // step and layer markers, 2 streams, H2D copies, 3 event kinds
    CHECK(tracks[2].lane == &r.kernel_lanes[0]);
}

TEST_CASE("bad input: a missing file, a foreign file, an unknown run") {
    CHECK_THROWS_AS(load_view_trace("/nonexistent/trace.db"), mhc::Error);
    fixture::TempPath junk("junk.db");
    { std::ofstream(junk.path) << "not a database at all, not even close to one\n"; }
    CHECK_THROWS_AS(load_view_trace(junk.path), mhc::Error);
    fixture::TempPath p("known.db");
    fixture::write_known_trace(p.path, false);
    ViewTrace t = load_view_trace(p.path);
    try {
        load_view_run(t, 42);
        FAIL("no throw");
    } catch (const mhc::Error& e) {
        CHECK(std::string(e.what()).find("42") != std::string::npos);
        CHECK(std::string(e.what()).find(p.path) != std::string::npos);
    }
}

TEST_CASE("active-memory bands: largest drawn, stacked in allocation order, rest summarised") {
    fixture::TempPath p("known.db");
    fixture::write_known_trace(p.path, false);
    ViewTrace t = load_view_trace(p.path);
    BandLayout b;
    BandKeys keys = band_keys(t, BandColoring::Category);
    layout_bands(t.allocations, t.live, &keys, {0, 1000 * us}, 1000, 400, 2, b);
    // Two bands allowed: act_big (1024 MiB) and weights (400 MiB); ws (64 MiB) summarised.
    REQUIRE(b.bands.size() == 2);
    CHECK(t.allocations.id[b.bands[0]] == 1);   // weights first: a parameter, at the bottom
    CHECK(t.allocations.id[b.bands[1]] == 2);
    CHECK(b.summarised == 1);
    // At 500 us act_big sits on top of weights.
    CHECK(b.hit(500, 100.0 * MiB) == 0);                 // allocation index of weights
    CHECK(b.hit(500, 900.0 * MiB) == 1);                 // act_big
    int64_t summary = -1;
    CHECK(b.hit(200, 420.0 * MiB, &summary) == -1);      // ws, summarised by bytes in its key's band
    REQUIRE(summary >= 0);
    CHECK(b.summaries[static_cast<size_t>(summary)].key == static_cast<uint8_t>(mhc::trace::Category::Workspace));
    CHECK(b.summaries[static_cast<size_t>(summary)].y1 - b.summaries[static_cast<size_t>(summary)].y0 == 64.0 * MiB);
    CHECK(b.hit(800, 420.0 * MiB) == -2);                // nothing there
    // The legend's figures at the peak (1424 MiB at 450 us): weights and act_big, nothing summarised.
    CHECK(b.peak_key_bytes[static_cast<size_t>(mhc::trace::Category::Param)] == 400.0 * MiB);
    CHECK(b.peak_key_bytes[static_cast<size_t>(mhc::trace::Category::Activation)] == 1024.0 * MiB);
    CHECK(b.peak_summarised_bytes == 0);
    CHECK(b.drawn_top[500] == 1424.0 * MiB);
    CHECK(b.total[200] == 464.0 * MiB);
    for (size_t x = 0; x < b.total.size(); ++x) CHECK(b.drawn_top[x] <= b.total[x]);
    // Segments are merged: weights is one rectangle across the whole width.
    size_t weights_segments = 0;
    for (const BandSegment& s : b.segments) weights_segments += s.band == 0;
    CHECK(weights_segments == 1);
    // Stats over the same trace.
    auto cats = category_stats(t);
    CHECK(cats[static_cast<size_t>(mhc::trace::Category::Activation)].bytes == 1024 * MiB);
    auto steps = step_stats(t);
    REQUIRE(steps.size() == 1);
    CHECK(steps[0].peak == 1424.0 * MiB);
    auto kt = kernel_table(t, "", KernelSort::Total, false);
    REQUIRE(kt.size() == 3);
    CHECK(t.str(t.kernel_stats[kt[0]].name) == fixture::kAlpha);   // 200 us, ties with beta; stable: alpha first
    CHECK(t.str(t.kernel_stats[kt[2]].name) == fixture::kTiny);    // 200 x 100 ns = 20 us
    auto filtered = kernel_table(t, "FLASH", KernelSort::Name, true);   // case-insensitive
    REQUIRE(filtered.size() == 1);
    auto at = allocation_table(t, "", AllocSort::Bytes, false, 10);
    REQUIRE(at.size() == 3);
    CHECK(t.allocations.id[at[0]] == 2);
    auto by_label = allocation_table(t, "w", AllocSort::Label, true, 10);
    REQUIRE(by_label.size() == 2);   // "weights", "ws"
    CHECK(t.str(t.allocations.label[by_label[0]]) == "weights");
}

TEST_CASE("statistics: the step table sorts by any column, equal keys in their order") {
    std::vector<StepStat> steps{{0, 0, 100, 5.0}, {1, 100, 400, 9.0}, {2, 400, 500, 5.0}, {3, 500, 700, 1.0}};
    auto steps_of = [](const std::vector<StepStat>& table) {
        std::vector<int32_t> order;
        order.reserve(table.size());
        for (const StepStat& row : table) order.push_back(row.step);
        return order;
    };
    sort_steps(steps, StepSort::Time, false);   // 300, 200, 100, 100
    CHECK(steps_of(steps) == std::vector<int32_t>{1, 3, 0, 2});
    sort_steps(steps, StepSort::Peak, true);    // 1, 5, 5, 9: steps 0 and 2 tie and keep their order
    CHECK(steps_of(steps) == std::vector<int32_t>{3, 0, 2, 1});
    sort_steps(steps, StepSort::Start, false);
    CHECK(steps_of(steps) == std::vector<int32_t>{3, 2, 1, 0});
    sort_steps(steps, StepSort::Step, true);
    CHECK(steps_of(steps) == std::vector<int32_t>{0, 1, 2, 3});
}

TEST_CASE("memory is one device's: the GPU with the largest peak, never the sum with the host's or another GPU's") {
    // GPU 0: two 100 MiB blocks alive together (peak 200 MiB); GPU 1: one of 300 MiB; the host's
    // pinned memory: one of 1 GiB, the largest, which `auto` must not pick (mhc simulate's rule).
    // The sum of all three, drawn before as one "live bytes" curve, was 1624 MiB: nobody's memory.
    namespace trace = mhc::trace;
    fixture::TempPath db("devices.db"), cached("devices-cached.db");
    {
        trace::Writer writer(db.path);
        writer.set_meta("source", "viewer-test");
        const int64_t name = writer.intern(fixture::kAlpha);
        writer.add(trace::Allocation{1, 0, 0, 100 * MiB, 0, 500 * us});
        writer.add(trace::Allocation{2, 0, 0, 100 * MiB, 100 * us, 600 * us});
        writer.add(trace::Allocation{3, 1, 0, 300 * MiB, 200 * us, 700 * us});
        writer.add(trace::Allocation{4, -1, 0, 1024 * MiB, 0, 900 * us});
        for (int64_t k = 1; k <= 3; ++k) {
            trace::Kernel kernel;
            kernel.id = k;
            kernel.device = k == 3 ? 1 : 0;
            kernel.name = name;
            kernel.t_start = 100 * us * k;
            kernel.t_end = kernel.t_start + 50 * us;
            writer.add(kernel);
        }
        writer.add(trace::Access{1, 1, trace::AccessMode::Read});
        writer.add(trace::Access{2, 4, trace::AccessMode::Read});
        writer.add(trace::Access{3, 3, trace::AccessMode::Write});
        writer.add(trace::Access{3, 4, trace::AccessMode::Read});
        writer.finish();
    }
    ViewTrace view = load_view_trace(db.path);
    CHECK(view.memory_device == 1);
    CHECK(view.live.peak() == static_cast<double>(300 * MiB));
    REQUIRE(view.allocations.size() == 1);
    CHECK(view.allocations.id[0] == 3);
    REQUIRE(view.memory_devices.size() == 3);
    CHECK(view.memory_devices[0].device == -1);
    CHECK(view.memory_devices[0].peak_bytes == 1024 * MiB);
    CHECK(view.memory_devices[1].allocations == 2);
    CHECK(view.memory_devices[1].peak_bytes == 200 * MiB);
    CHECK(view.memory_devices[2].peak_bytes == 300 * MiB);
    CHECK(memory_device_text(view) == "GPU 1; not shown: host (peak 1.00 GiB), GPU 0 (peak 200.00 MiB)");
    CHECK(access_count_of(view, 3) == 1);
    // Kernels on two devices: every lane names its GPU.
    REQUIRE(view.kernel_lanes.size() == 2);
    CHECK(view.kernel_lanes[0].title == "GPU0 stream 0");

    LoadOptions host;
    host.device = -1;
    ViewTrace host_view = load_view_trace(db.path, host);
    CHECK(host_view.memory_device == -1);
    CHECK(host_view.live.peak() == static_cast<double>(1024 * MiB));
    CHECK(access_count_of(host_view, 4) == 2);
    CHECK(memory_device_text(host_view) == "host; not shown: GPU 0 (peak 200.00 MiB), GPU 1 (peak 300.00 MiB)");

    LoadOptions missing;
    missing.device = 5;
    CHECK_THROWS_WITH(load_view_trace(db.path, missing),
                      Catch::Contains("no allocations on GPU 5 (allocations on: host, GPU 0, GPU 1)"));

    // From the cache, whose accesses name allocations by their place in the whole table.
    std::filesystem::copy_file(db.path, cached.path);
    trace::TraceData full = trace::load_trace(cached.path);
    trace::CacheWriter cw;
    trace::cache_columns(full, cw);
    REQUIRE(trace::write_cache(cached.path, full.fingerprint, full.change_counter, {{trace::kTraceCacheKey, &cw}}));
    ViewTrace cached_view = load_view_trace(cached.path);
    REQUIRE(cached_view.access_index);
    CHECK(cached_view.access_index->from_cache);
    CHECK(access_count_of(cached_view, 3) == 1);
    REQUIRE(accesses_of(cached_view, 3).size() == 1);
    CHECK(accesses_of(cached_view, 3)[0].kernel == 3);
    ViewTrace ch = load_view_trace(cached.path, host);
    CHECK(access_count_of(ch, 4) == 2);
}

TEST_CASE("one GPU other than GPU 0 is named on its lanes") {
    namespace trace = mhc::trace;
    fixture::TempPath db("gpu2.db");
    {
        trace::Writer writer(db.path);
        writer.set_meta("source", "viewer-test");
        trace::Kernel kernel;
        kernel.id = 1;
        kernel.device = 2;
        kernel.stream = 7;
        kernel.name = writer.intern(fixture::kAlpha);
        kernel.t_end = 10 * us;
        writer.add(kernel);
        writer.finish();
    }
    ViewTrace view = load_view_trace(db.path);
    REQUIRE(view.kernel_lanes.size() == 1);
    CHECK(view.kernel_lanes[0].title == "GPU2 stream 7");
    CHECK(view.allocations.size() == 0);
    CHECK(view.memory_devices.empty());
    CHECK(memory_device_text(view).empty());   // GPU 0 alone (no allocations): the titles read as before
}

TEST_CASE("a file that is no mhc trace is refused with the import that reads it") {
    CHECK(with_import_hint("k.json: not an mhc trace (not an SQLite database)", "k.json") ==
          "k.json: not an mhc trace (not an SQLite database); a profiler's file (Kineto JSON, Nsight Systems SQLite "
          "export, PyTorch memory snapshot, execution trace) is viewed after `mhc import k.json -o TRACE.db`");
    CHECK(with_import_hint("nope.db: no such file", "nope.db") == "nope.db: no such file");
    // The refusal itself, from the loader: a Nsight Systems export is an SQLite file without a meta table.
    const std::string nsys = std::string(mhc::test::public_datasets()) + "/nsys/con_kernel.sqlite";
    try {
        load_view_trace(nsys);
        FAIL("loaded an Nsight Systems export as a trace");
    } catch (const mhc::Error& e) {
        const std::string said = with_import_hint(e.what(), nsys);
        CHECK(said.find("without a meta table") != std::string::npos);
        CHECK(said.find("`mhc import " + nsys + " -o TRACE.db`") != std::string::npos);
    }
}
