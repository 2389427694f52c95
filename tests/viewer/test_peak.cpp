// What is live at the peak (the statistics view's "At the peak" tab): the allocations alive at the
// recorded curve's first maximum, largest first, whose bytes add up to it.
#include <catch2/catch.hpp>

#include <filesystem>

#include "fixtures.hpp"
#include "mhc/trace/import/import.hpp"
#include "mhc/viewer/data.hpp"
#include "mhc/viewer/stats.hpp"

using fixture::MiB;
using fixture::us;
using mhc::viewer::header_counts;
using mhc::viewer::live_at;
using mhc::viewer::live_at_peak;
using mhc::viewer::load_view_trace;
using mhc::viewer::PeakLive;
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
    for (const auto& file : fs::directory_iterator(fs::path(MHC_PUBLIC_DATASETS) / "torch-snapshot")) {
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
