// Overlapping items on rows of their own (split_rows), row heights that fill the window
// (track_heights), the compare table's metric names and units, the memory view's colouring.
#include <catch2/catch.hpp>

#include <random>

#include "fixtures.hpp"
#include "mhc/viewer/band_colors.hpp"
#include "mhc/viewer/colors.hpp"
#include "mhc/viewer/data.hpp"
#include "mhc/viewer/metrics.hpp"
#include "mhc/viewer/timeline.hpp"

using namespace mhc::viewer;
using fixture::MiB;
using fixture::us;

TEST_CASE("nested ranges go to one row per depth; no row holds two overlapping items") {
    fixture::TempPath p("imported.db");
    fixture::write_imported_trace(p.path);
    ViewTrace t = load_view_trace(p.path);
    // forward > layer.0 > attention, and layer.1 inside forward: three rows.
    REQUIRE(t.marker_lanes.size() == 3);
    CHECK(t.marker_lanes[0].row == 0);
    CHECK(t.marker_lanes[0].title == "range markers");
    CHECK(t.marker_lanes[1].title.empty());
    CHECK(t.marker_lanes[0].size() == 1);   // forward
    CHECK(t.marker_lanes[1].size() == 2);   // layer.0, layer.1
    CHECK(t.marker_lanes[2].size() == 1);   // attention
    CHECK(t.str(t.marker_lanes[2].key[0]) == "attention");

    // Random intervals: rows never overlap inside, every item lands once, and an item goes
    // below a row only when that row is busy at its start.
    std::mt19937_64 rng(3);
    Lane l;
    for (int i = 0; i < 2000; ++i) {
        int64_t s = static_cast<int64_t>(rng() % 100000);
        l.push(s, s + static_cast<int64_t>(rng() % 3000), 0, i);
    }
    l.finish();
    auto rows = split_rows(l, 100);
    size_t n = 0;
    for (const Lane& r : rows) {
        n += r.size();
        for (size_t i = 1; i < r.size(); ++i) CHECK(r.t_start[i] >= r.t_end[i - 1]);
    }
    CHECK(n == l.size());
    // A lane without overlaps stays one row; a cap folds the rest into the last row.
    Lane flat;
    for (int i = 0; i < 10; ++i) flat.push(i * 10, i * 10 + 10, 0, i);
    flat.finish();
    CHECK(split_rows(flat, 6).size() == 1);
    CHECK(split_rows(l, 2).size() == 2);
}

TEST_CASE("row heights fill the height available, markers and sub-rows stay compact") {
    Lane m, k1, k2, sub;
    m.kind = LaneKind::Markers;
    k1.kind = k2.kind = LaneKind::Kernels;
    sub.kind = LaneKind::Copies;
    sub.row = 1;
    std::vector<Track> tracks{{&m, false}, {&k1, false}, {&k2, false}, {&sub, false}};
    auto h = track_heights(tracks, 150.f);
    CHECK(h[0] == 16.f);
    CHECK(h[3] == 16.f);
    CHECK(h[1] == Approx((150.f - 32.f - 4 * 2.f) / 2));   // 55 px each: the window is used
    CHECK(h[2] == h[1]);
    CHECK(track_heights(tracks, 2000.f)[1] == 64.f);        // at most max_row
    CHECK(track_heights(tracks, 30.f)[1] == 20.f);          // at least min_row (scrolls)
}

TEST_CASE("metrics read with human names in the unit of their key") {
    CHECK(metric_label("simulated_makespan_ns") == "makespan, simulated");
    CHECK(format_metric("simulated_makespan_ns", 29.927e9).find(" s") != std::string::npos);
    CHECK(format_metric("simulated_makespan_ns", 29.927e9).find("29.9") == 0);
    CHECK(format_metric("stall_ns", 212e6) == "212 ms");
    CHECK(format_metric("throughput_loss", 0.0412) == "4.12 %");
    CHECK(format_metric("capacity_bytes", -1) == "unlimited");
    CHECK(format_metric("simulated_peak_bytes", 77.05 * 1024 * 1024 * 1024) == "77.05 GiB");
    CHECK(format_metric("drops", 2016) == "2016");
    CHECK(format_metric("oom", 0) == "no");
    CHECK(format_metric("sim_seconds", 1.5) == "1.50 s");
    // No label keeps a unit suffix; unknown keys are readable too.
    for (const char* k : {"simulated_makespan_ns", "baseline_peak_bytes", "stall_ns", "sim_seconds", "some_new_ns",
                          "other_bytes"}) {
        std::string l = metric_label(k);
        INFO(k << " -> " << l);
        CHECK(l.find('_') == std::string::npos);
        CHECK(l.find(" ns") == std::string::npos);
    }
    CHECK(metric_label("some_new_ns") == "some new");
    auto order = metric_order({"zeta", "stall_ns", "throughput_loss", "alpha"});
    CHECK(order == std::vector<std::string>{"throughput_loss", "stall_ns", "alpha", "zeta"});
}

TEST_CASE("bands: category colours on generated traces, source frames on imported ones") {
    // The summary band is not "other"'s grey any more, nor any category's colour.
    for (int c = 0; c < mhc::trace::kCategoryCount; ++c) {
        uint32_t x = category_color(static_cast<mhc::trace::Category>(c));
        CHECK(std::abs(red(x) - red(kSummary)) + std::abs(green(x) - green(kSummary)) + std::abs(blue(x) - blue(kSummary)) >= 60);
    }
    fixture::TempPath known("known.db");
    fixture::write_known_trace(known.path);
    ViewTrace k = load_view_trace(known.path);
    CHECK(choose_band_coloring(k) == BandColoring::Category);

    fixture::TempPath imp("imported.db");
    fixture::write_imported_trace(imp.path);
    ViewTrace t = load_view_trace(imp.path);
    CHECK(choose_band_coloring(t) == BandColoring::Label);
    CHECK(band_color(t, 0, BandColoring::Label) == band_color(t, 1, BandColoring::Label));   // one frame
    CHECK(band_color(t, 0, BandColoring::Label) != band_color(t, 2, BandColoring::Label));
    CHECK(band_color(t, 2, BandColoring::SizeClass) == size_class_color(3));   // 512 MiB
    BandLayout b;
    layout_bands(t.allocations, t.live, {0, 1000 * us}, 800, 400, 1024, b);
    auto legend = band_legend(t, b, BandColoring::Label);
    REQUIRE(legend.size() == 3);
    CHECK(legend[0].text == fixture::kFrameA);   // 512 MiB in two bands; ties broken by label id
    CHECK(legend[2].text == fixture::kFrameC);
    // Every allocation with its own label: labels do not group, so size classes.
    AllocationTable& a = t.allocations;
    a.label = {1, 2, 3, 4};
    CHECK(choose_band_coloring(t) == BandColoring::SizeClass);
}
