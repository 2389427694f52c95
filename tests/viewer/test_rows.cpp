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

TEST_CASE("nested ranges go to one row per depth, no row holds two overlapping items") {
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
    // The baseline peak is the simulator's unlimited run under the run's allocator model (a
    // caching model's reserved bytes), not the trace's recorded peak: on a real Kineto trace
    // it read 6.39 GiB beside the memory view's recorded 6.17 GiB under "recorded".
    CHECK(metric_label("baseline_peak_bytes") == "peak memory, no limit (same allocator model)");
    CHECK(format_metric("simulated_makespan_ns", 29.927e9).find(" s") != std::string::npos);
    CHECK(format_metric("simulated_makespan_ns", 29.927e9).find("29.9") == 0);
    CHECK(format_metric("stall_ns", 212e6) == "212.00 ms");
    // Whole numbers of keys without a known unit read whole, not in exponent form.
    CHECK(format_metric("kernels_reached", 13560) == "13560");
    CHECK(format_metric("last_kernel_reached", 2.5e7) == "25000000");
    CHECK(format_metric("forecast_horizon_steps", 1.5) == "1.5");
    CHECK(format_metric("throughput_loss", 0.0412) == "4.12%");
    CHECK(format_metric("peak_reduction", 0.3006) == "30.1%");   // one decimal, as mhc simulate
    CHECK(format_metric("capacity_bytes", -1) == "unlimited");
    CHECK(format_metric("simulated_peak_bytes", 77.05 * 1024 * 1024 * 1024) == "77.05 GiB");
    CHECK(format_metric("drops", 2016) == "2016");
    CHECK(format_metric("oom", 0) == "no");
    CHECK(format_metric("sim_seconds", 1.5) == "1.500 s");
    // An OOM run's stored peak and makespan are where it stopped: the compare table shows "-".
    CHECK(mhc::viewer::finished_run_figure("simulated_peak_bytes"));
    CHECK(mhc::viewer::finished_run_figure("throughput_loss"));
    CHECK_FALSE(mhc::viewer::finished_run_figure("capacity_bytes"));
    CHECK_FALSE(mhc::viewer::finished_run_figure("baseline_peak_bytes"));
    // No label keeps a unit suffix; unknown keys are readable too.
    for (const char* k : {"simulated_makespan_ns", "baseline_peak_bytes", "stall_ns", "sim_seconds", "some_new_ns",
                          "other_bytes"}) {
        std::string l = metric_label(k);
        INFO(k << " -> " << l);
        CHECK(l.find('_') == std::string::npos);
        CHECK(l.find(" ns") == std::string::npos);
    }
    CHECK(metric_label("some_new_ns") == "some new");
    // The bytes moved under the words mhc simulate and sweep print for them, per direction.
    CHECK(metric_label("swap_in_bytes") == "swap-in (H2D)");
    CHECK(metric_label("swap_out_bytes") == "swap-out (D2H)");
    CHECK(metric_label("stall_ns") == "stall time");
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
    BandKeys labels = band_keys(t, BandColoring::Label);
    REQUIRE(labels.count() == 3);   // three frames, no "other labels"
    CHECK(labels.key == std::vector<uint8_t>{0, 0, 1, 2});   // by bytes (A and B 512 MiB: ties by label id)
    CHECK(labels.name[0] == fixture::kFrameA);
    CHECK(labels.color[0] != labels.color[1]);
    // Neighbouring bands of one frame: the same hue, a little lighter or darker.
    uint32_t c0 = band_color(labels, t.allocations, 0), c1 = band_color(labels, t.allocations, 1);
    CHECK(std::abs(red(c0) - red(labels.color[0])) <= 40);
    // Size classes from the trace's own sizes: 64, 256, 256, 512 MiB cut at a fifth of the bytes.
    CHECK(size_bounds(t.allocations) == std::vector<int64_t>{256 * MiB, 512 * MiB});
    BandKeys sizes = band_keys(t, BandColoring::SizeClass);
    CHECK(sizes.name == std::vector<std::string>{"< 256 MiB", "256-512 MiB", ">= 512 MiB"});
    CHECK(sizes.key == std::vector<uint8_t>{1, 1, 2, 0});
    BandLayout b;
    layout_bands(t.allocations, t.live, &labels, {0, 1000 * us}, 800, 400, 1024, b);
    auto legend = band_legend(labels, b);
    REQUIRE(legend.size() == 3);   // everything drawn: no "muted" entry
    CHECK(legend[0].text == std::string(fixture::kFrameA) + ": 512 MiB");
    CHECK(legend[1].text == std::string(fixture::kFrameB) + ": 512 MiB");
    CHECK(legend[2].text == std::string(fixture::kFrameC) + ": 64 MiB");
    // Muted allocations none of which is live at the range's peak: said so, not "..., 0 B".
    BandLayout muted = b;
    muted.summarised = 64;
    muted.peak_summarised_bytes = 0;
    CHECK(band_legend(labels, muted)[0].text == "muted: 64 smaller allocations, none live at the peak");
    muted.peak_summarised_bytes = 282.0 * 1024;
    CHECK(band_legend(labels, muted)[0].text == "muted: 64 smaller allocations, 282 KiB");
    // Size classes as a scale, largest first, whatever bytes each holds at the peak (by bytes, "256-512
    // MiB" came before ">= 512 MiB" and "< 256 MiB" after: a scale out of order).
    BandLayout by_size = b;
    by_size.summarised = 0;
    by_size.peak_key_bytes = {100.0 * MiB, 600.0 * MiB, 512.0 * MiB};
    const auto scale = band_legend(sizes, by_size);
    REQUIRE(scale.size() == 3);
    CHECK(scale[0].text == ">= 512 MiB: 512 MiB");
    CHECK(scale[1].text == "256-512 MiB: 600 MiB");
    CHECK(scale[2].text == "< 256 MiB: 100 MiB");
    by_size.peak_key_bytes[1] = 0;   // a class with nothing live at the peak: left out
    CHECK(band_legend(sizes, by_size).size() == 2);
    CHECK(short_bytes(1536 * MiB) == "1.5 GiB");
    CHECK(short_bytes(int64_t{25690112}) == "24.5 MiB");
    CHECK(short_bytes(1000) == "1000 B");
    (void)c1;
    // Every allocation with its own label: labels do not group, so size classes.
    AllocationTable& a = t.allocations;
    const std::vector<int64_t> labels_before = a.label;
    a.label = {1, 2, 3, 4};
    CHECK(choose_band_coloring(t) == BandColoring::SizeClass);
    // One label holding 90% of the bytes or more colours every band alike (a CUPTI recording:
    // "cuMemAllocAsync (pool)" 555.83 of 556 MiB, "memory:static" the rest): size classes. The
    // frames above: 512 + 512 + 64 MiB of 1088, the largest 47%, keep their colours.
    a.label = labels_before;
    CHECK(choose_band_coloring(t) == BandColoring::Label);
    const std::vector<int64_t> bytes_before = a.bytes;
    a.bytes = {int64_t{1} << 30, int64_t{1} << 30, 64 * MiB, 64 * MiB};   // frame A: 2 GiB of 2.125 (94%)
    a.label = {labels_before[0], labels_before[0], labels_before[2], labels_before[3]};
    CHECK(choose_band_coloring(t) == BandColoring::SizeClass);
    a.bytes = {512 * MiB, 512 * MiB, 64 * MiB, 64 * MiB};   // 1 GiB of 1.125 (89%): still frames
    CHECK(choose_band_coloring(t) == BandColoring::Label);
    a.bytes = bytes_before;
}

TEST_CASE("a label fits its box: whole, cut with '...', or not drawn") {
    // 7 px per character: a 70 px box holds 10 characters.
    CHECK(fit_label("test2", 70, 7) == "test2");
    CHECK(fit_label("test4(double *, unsigned long long)", 70, 7) == "test4(d...");
    CHECK(fit_label("0123456789", 70, 7) == "0123456789");
    CHECK(fit_label("01234567890", 70, 7) == "0123456...");
    // Room for 4 characters: two and the dots would not fit; nothing.
    CHECK(fit_label("abcdefgh", 34, 7).empty());
    CHECK(fit_label("ab...", 35, 7) == "ab...");
    CHECK(fit_label("abcdefgh", 35, 7) == "ab...");
    CHECK(fit_label("anything", 0, 7).empty());
    // UTF-8: characters are counted and never cut in two ("é" is two bytes).
    CHECK(fit_label("éééééé", 42, 7) == "éééééé");
    CHECK(fit_label("ééééééé", 42, 7) == "ééé...");
}

TEST_CASE("a folded box's count is whole or absent, never cut into another number") {
    // 7 px per character. "4744 GEMM" in 5 characters' room was "47...", read as 47 kernels
    // (Kineto's CUDA-graph trace at 1600 px: "47...", "32..." on stream 7).
    CHECK(fit_label("4744 GEMM", 35, 7) == "47...");   // what the box drew
    CHECK(folded_label(4744, "GEMM", 35, 7) == "4744");
    CHECK(folded_label(4744, "GEMM", 63, 7) == "4744 GEMM");
    CHECK(folded_label(4744, "GEMM", 62, 7) == "4744");   // 8 characters: the count alone
    CHECK(folded_label(373, "NCCL/comm", 70, 7) == "373 NCC...");
    CHECK(folded_label(373, "NCCL/comm", 62, 7) == "373");   // "373 N..." would say little
    CHECK(folded_label(4744, "GEMM", 27, 7).empty());        // 3 characters: not even the count
    CHECK(folded_label(12, "", 14, 7) == "12");
    // What is counted, by lane.
    Lane copies;
    copies.kind = LaneKind::Copies;
    CHECK(folded_noun(copies, nullptr) == "copies");
    Lane ranges;
    ranges.kind = LaneKind::Markers;
    ranges.stream = static_cast<int64_t>(mhc::trace::MarkerKind::Range);
    CHECK(folded_noun(ranges, nullptr) == "ranges");
    ranges.stream = static_cast<int64_t>(mhc::trace::MarkerKind::Step);
    CHECK(folded_noun(ranges, nullptr) == "steps");
    Lane kernels;
    CHECK(folded_noun(kernels, "GEMM") == "GEMM");
    // A run of several families: "kernels, mostly GEMM", which gives up "mostly GEMM" before it
    // is cut (at 7 px a character: 27 characters need 189 px; "673000 kernels" 98 px).
    CHECK(folded_noun(kernels, "GEMM", true) == "kernels, mostly GEMM");
    // An execution trace's kernels are its ops (the header and the legend say ops).
    CHECK(folded_noun(kernels, "memory/copy", true, true) == "ops, mostly memory/copy");
    CHECK(folded_noun(kernels, nullptr, false, true) == "ops");
    CHECK(folded_label(673000, "kernels, mostly GEMM", 189, 7) == "673000 kernels, mostly GEMM");
    CHECK(folded_label(673000, "kernels, mostly GEMM", 188, 7) == "673000 kernels");
    CHECK(folded_label(673000, "kernels, mostly GEMM", 98, 7) == "673000 kernels");
    CHECK(folded_label(673000, "kernels, mostly GEMM", 97, 7) == "673000 ker...");
    CHECK(folded_label(673000, "kernels, mostly GEMM", 83, 7) == "673000");
}
