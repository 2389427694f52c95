// What is live at the peak (the statistics view's "At the peak" tab): the allocations alive at the
// recorded curve's first maximum, largest first, whose bytes add up to it.
#include <catch2/catch.hpp>

#include <filesystem>

#include "fixtures.hpp"
#include "mhc/test/paths.hpp"
#include "mhc/trace/import/import.hpp"
#include "mhc/viewer/data.hpp"
#include "mhc/viewer/stats.hpp"

using fixture::MiB;
using fixture::us;
using mhc::viewer::header_counts;
using mhc::viewer::live_at;
using mhc::viewer::live_at_peak;
using mhc::viewer::live_at_run_peak;
using mhc::viewer::load_view_run;
using mhc::viewer::load_view_trace;
using mhc::viewer::PeakLive;
using mhc::viewer::Residence;
using mhc::viewer::RunPeakLive;
using mhc::viewer::ViewTrace;
namespace fs = std::filesystem;

TEST_CASE("live at the peak of the known trace: act_big and weights, 1424 MiB at 450 us") {
    // fixtures.hpp: "weights" 400 MiB [0, end), "act_big" 1024 MiB [450, 550) us, "ws" 64 MiB
    // [100, 300) us. The peak is 400 + 1024 = 1424 MiB from 450 us; ws was freed at 300 us.
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path, false);
    const ViewTrace view = load_view_trace(db.path);
    const PeakLive peak = live_at_peak(view);
    CHECK(peak.time == 450 * us);
    CHECK(peak.bytes == 1424.0 * MiB);
    REQUIRE(peak.rows.size() == 2);
    CHECK(view.str(view.allocations.label[peak.rows[0]]) == "act_big");   // largest first
    CHECK(view.str(view.allocations.label[peak.rows[1]]) == "weights");
    // At an allocation's free it is no longer live; at its allocation it is.
    CHECK(live_at(view.allocations, 550 * us).size() == 1);
    CHECK(live_at(view.allocations, 100 * us).size() == 2);   // weights and ws
    CHECK(live_at(view.allocations, 300 * us).size() == 1);   // ws freed at 300 us
}

TEST_CASE("live at the peak of the public PyTorch snapshots: their bytes add up to the curve's peak") {
    // Snapshots free and allocate at the same microsecond; the rows listed must be exactly the
    // curve's (t_alloc <= t < t_free), whatever the order of events at the peak's time.
    int checked = 0;
    for (const auto& file : fs::directory_iterator(fs::path(mhc::test::public_datasets()) / "torch-snapshot")) {
        INFO(file.path().filename().string());
        fixture::TempPath db("peak.db");
        mhc::trace::import::Options opt;
        opt.warn = false;
        mhc::trace::import::import_file(file.path().string(), db.path, opt);
        const ViewTrace view = load_view_trace(db.path);
        if (view.allocations.size() == 0) continue;
        const PeakLive peak = live_at_peak(view);
        double sum = 0;
        for (uint32_t row : peak.rows) sum += static_cast<double>(view.allocations.bytes[row]);
        CHECK(sum == peak.bytes);
        CHECK(peak.bytes == view.live.peak());
        for (size_t k = 1; k < peak.rows.size(); ++k)
            CHECK(view.allocations.bytes[peak.rows[k - 1]] >= view.allocations.bytes[peak.rows[k]]);
        ++checked;
    }
    CHECK(checked >= 8);
}

TEST_CASE("the header's counts: one of a thing in the singular") {
    // The known trace: 202 kernels, 3 allocations, 2 copies; a generated trace with one simulated
    // run read "4 copies, 1 runs".
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path, false);
    ViewTrace view = load_view_trace(db.path);
    CHECK(header_counts(view, 2, false, "") == "202 kernels, 3 allocations, 2 copies, 2 runs");
    CHECK(header_counts(view, 1, false, " on GPU 0") == "202 kernels, 3 allocations on GPU 0, 2 copies, 1 run");
    view.kernel_count = 1;
    view.copy_count = 1;
    CHECK(header_counts(view, 0, true, "") == "1 op, 3 allocations, 1 copy, 0 runs");
}

TEST_CASE("live at a run's peak: what is on the device, on the host and dropped, on the run's clock") {
    // The known trace (no runs) and a run at 1 GiB made by hand, consistent with its events:
    //  weights (400 MiB, [0, end)) swapped out [400, 440) us, swapped back in [600, 640) us;
    //  ws (64 MiB, [100, 300) us) dropped at 250 us and recomputed [280, 290) us;
    //  kernel 2 (recorded [500, 700) us) stalls 50 us, so act_big (1024 MiB, recorded [450, 550) us)
    //  lives [450, 600) us on the run's clock (its free follows kernel 2's start: 550 + 50).
    // Device bytes: 400 MiB, 464 from 100 us, 400 from 250 us (ws dropped), 464 from 280 us, 400 from
    // 300 us, 0 from 440 us, 1024 from 450 us (the peak), 0 from 600 us, 400 from 600 us (swap-in).
    // At the peak (450 us): act_big on the device (1024 MiB), weights on the host (400 MiB); ws freed.
    fixture::TempPath db("runpeak.db");
    fixture::write_known_trace(db.path, false);
    using mhc::trace::EventKind;
    mhc::trace::Run run;
    run.name = "by hand@1GiB";
    run.config = {{"capacity_bytes", std::to_string(1024 * MiB)}};
    run.kernel_times.push_back({1, 100 * us, 300 * us});
    run.kernel_times.push_back({2, 550 * us, 750 * us});
    for (int i = 0; i < 200; ++i) run.kernel_times.push_back({3 + i, 850 * us + i * 500, 850 * us + i * 500 + 100});
    run.events.push_back({EventKind::Drop, 250 * us, 250 * us, 3, 0, 64 * MiB});
    run.events.push_back({EventKind::Recompute, 280 * us, 290 * us, 3, 1, 64 * MiB});
    run.events.push_back({EventKind::SwapOut, 400 * us, 440 * us, 1, 0, 400 * MiB});
    run.events.push_back({EventKind::Stall, 500 * us, 550 * us, 0, 2, 0});
    run.events.push_back({EventKind::SwapIn, 600 * us, 640 * us, 1, 0, 400 * MiB});
    run.memory = {{0, 400 * MiB, 0},
                  {100 * us, 464 * MiB, 0},
                  {250 * us, 400 * MiB, 0},
                  {280 * us, 464 * MiB, 0},
                  {300 * us, 400 * MiB, 0},
                  {440 * us, 0, 400 * MiB},
                  {450 * us, 1024 * MiB, 400 * MiB},
                  {600 * us, 400 * MiB, 400 * MiB},
                  {640 * us, 400 * MiB, 0}};
    const int64_t id = mhc::trace::add_run(db.path, run);
    const ViewTrace view = load_view_trace(db.path);
    const auto shown = load_view_run(view, id);
    const RunPeakLive peak = live_at_run_peak(view, shown);
    REQUIRE(peak.has_peak);
    CHECK(peak.time == 450 * us);
    CHECK(peak.bytes == 1024.0 * MiB);
    CHECK(peak.host_bytes == 400.0 * MiB);
    // The kernel the run started last by 450 us is kernel 1 (run 100 us; kernel 2 starts at 550 us),
    // recorded at 100 us: where an order-only trace's tab places the peak (its run's times are not
    // op numbers: param's ResNet ET's peak read "op #49494549" of 681 ops).
    CHECK(peak.recorded_time == 100 * us);
    CHECK(peak.on_device == 1024 * MiB);
    CHECK(peak.on_host == 400 * MiB);
    CHECK(peak.dropped == 0);
    REQUIRE(peak.rows.size() == 2);
    CHECK(view.str(view.allocations.label[peak.rows[0].row]) == "act_big");
    CHECK(peak.rows[0].where == Residence::Device);
    CHECK(peak.rows[0].t_alloc == 450 * us);
    CHECK(peak.rows[0].t_free == 600 * us);   // on the run's clock: recorded 550 us + kernel 2's 50 us
    CHECK(view.str(view.allocations.label[peak.rows[1].row]) == "weights");
    CHECK(peak.rows[1].where == Residence::Host);
    REQUIRE(peak.rows[1].before >= 0);
    REQUIRE(peak.rows[1].after >= 0);
    CHECK(shown.events[static_cast<size_t>(peak.rows[1].before)].kind == EventKind::SwapOut);
    CHECK(shown.events[static_cast<size_t>(peak.rows[1].after)].kind == EventKind::SwapIn);
    CHECK(peak.placement_known);
    // Stored without its events (--no-events) but counting a swap-out: where each row was is not
    // known, and said so rather than read "device" for all.
    run.events.clear();
    run.metrics["swap_outs"] = 1;
    const auto bare = load_view_run(view, mhc::trace::add_run(db.path, run));
    const RunPeakLive unknown = live_at_run_peak(view, bare);
    CHECK(!unknown.placement_known);
    CHECK(unknown.moves == 1);
    CHECK(unknown.rows.size() == 2);
    run.metrics["swap_outs"] = 0;   // a run that moved nothing: all on the device, known
    CHECK(live_at_run_peak(view, load_view_run(view, mhc::trace::add_run(db.path, run))).placement_known);
    // During the swap-out (420 us) weights still hold the device; the recording's peak is not the run's.
    CHECK(live_at_peak(view).bytes == 1424.0 * MiB);
}
