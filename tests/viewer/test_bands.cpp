// Band selection per column: every part of the range gets its largest bands, not only the
// earliest steps of a trace whose activations are all the same size.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <set>

#include "mhc/viewer/bands.hpp"
#include "mhc/viewer/data.hpp"

using namespace mhc::viewer;

namespace {

constexpr int64_t MiB = 1 << 20;

void add(AllocationTable& a, int64_t bytes, int64_t t0, int64_t t1) {
    a.id.push_back(static_cast<int64_t>(a.size()) + 1);
    a.bytes.push_back(bytes);
    a.t_alloc.push_back(t0);
    a.t_free.push_back(t1);
    a.label.push_back(0);
    a.device.push_back(0);
    a.category.push_back(mhc::trace::Category::Activation);
}

// The loader's derived columns (load.cpp, finish_allocations) and the live curve.
Curve finish(AllocationTable& a) {
    int64_t t1 = 0;
    for (size_t i = 0; i < a.size(); ++i) t1 = std::max(t1, a.t_free[i] == mhc::trace::kNoTime ? a.t_alloc[i] : a.t_free[i]);
    finish_allocations(a, 0, t1);
    return Curve::from_intervals(a.t_alloc, a.t_free, a.bytes);
}

// Bands drawn in each column, counted from the segments.
std::vector<int> drawn_per_column(const BandLayout& b, int width) {
    std::vector<int> n(static_cast<size_t>(width), 0);
    for (const BandSegment& s : b.segments)
        for (int x = s.x0; x < s.x1; ++x) ++n[static_cast<size_t>(x)];
    return n;
}

}  // namespace

TEST_CASE("bands: equal-sized activations of every step are drawn at full zoom-out") {
    // Six steps of 1 ms, each with 300 nested 16 MiB activations (forward allocates, backward
    // frees in reverse), over 400 MiB of weights alive throughout: 1800 activations, more than
    // the 1024-band budget. Selecting by size alone (ties in allocation order) would spend it
    // all on steps 0-3 and leave steps 4 and 5 to the grey summary.
    AllocationTable a;
    const int64_t step_ns = 1'000'000;
    add(a, 400 * MiB, 0, 6 * step_ns);
    for (int s = 0; s < 6; ++s)
        for (int j = 0; j < 300; ++j)
            add(a, 16 * MiB, s * step_ns + j * 1000, s * step_ns + 900'000 - j * 1000);
    Curve live = finish(a);
    const int W = 600, H = 300;
    BandLayout b;
    layout_bands(a, live, nullptr, {0, 6 * step_ns}, W, H, 1024, b, 64);
    REQUIRE(b.bands.size() <= 1024);
    CHECK(b.bands.size() + b.summarised == a.size());
    // Cap 64 draws 6 x 63 + 1 = 379 bands, within half the budget, so the cap doubles to 128:
    // 6 x 127 + 1 = 763 bands; 256 would overflow 1024.
    CHECK(b.per_column == 128);
    CHECK(b.bands.size() == 763);
    std::vector<int> per_step(6, 0);
    for (uint32_t i : b.bands)
        if (i > 0) ++per_step[static_cast<size_t>((a.t_alloc[i]) / step_ns)];
    for (int s = 0; s < 6; ++s) {
        INFO("step " << s);
        CHECK(per_step[static_cast<size_t>(s)] == 127);   // 128 per column, one of them the weights
    }
    CHECK(std::find(b.bands.begin(), b.bands.end(), 0u) != b.bands.end());
    // Each step's peak column (its middle) holds 128 drawn bands: the weights and 127 activations.
    auto n = drawn_per_column(b, W);
    for (int s = 0; s < 6; ++s) {
        size_t mid = static_cast<size_t>((s * step_ns + 450'000) * W / (6 * step_ns));
        CHECK(n[mid] == 128);
        CHECK(b.drawn_top[mid] == Approx(400.0 * MiB + 127 * 16.0 * MiB));
    }
    // Zoomed into one step, its 301 bands fit the budget: all drawn, no cap.
    layout_bands(a, live, nullptr, {2 * step_ns, 3 * step_ns}, W, H, 1024, b, 64);
    CHECK(b.per_column == 0);
    CHECK(b.bands.size() == 301);
    CHECK(b.summarised == 0);
    // Without the per-column cap the old behaviour comes back: the last steps get nothing.
    layout_bands(a, live, nullptr, {0, 6 * step_ns}, W, H, 1024, b, SIZE_MAX);
    REQUIRE(b.bands.size() == 1024);
    for (uint32_t i : b.bands) CHECK(a.t_alloc[i] < 4 * step_ns);
}

TEST_CASE("bands: drawn iff among the per_column largest of one of its columns (brute force)") {
    std::mt19937_64 rng(11);
    AllocationTable a;
    for (int i = 0; i < 3000; ++i) {
        int64_t t0 = static_cast<int64_t>(rng() % 1'000'000);
        int64_t life = static_cast<int64_t>(rng() % 3 == 0 ? rng() % 400'000 : rng() % 20'000) + 1;
        // Few distinct sizes: many ties, as in real activations.
        add(a, (1 + static_cast<int64_t>(rng() % 6)) * MiB, t0, rng() % 40 == 0 ? mhc::trace::kNoTime : t0 + life);
    }
    Curve live = finish(a);
    int capped = 0, uncapped = 0;
    for (int q = 0; q < 40; ++q) {
        int64_t t0 = static_cast<int64_t>(rng() % 1'100'000);
        int64_t t1 = t0 + 1 + static_cast<int64_t>(q % 2 ? rng() % 600'000 : rng() % 20'000);
        const int W = 200 + static_cast<int>(rng() % 600), H = 2000;
        const size_t start = 1 + rng() % 12, budget = 150;
        BandLayout b;
        layout_bands(a, live, nullptr, {t0, t1}, W, H, budget, b, start);
        CHECK(b.bands.size() <= budget);
        // The cap: none when everything eligible fits, else start x 2^k.
        const size_t K = b.per_column ? b.per_column : SIZE_MAX;
        if (b.per_column) {
            size_t c = start;
            while (c < b.per_column) c *= 2;
            CHECK(c == b.per_column);
        }
        CurveColumns cols;
        prepare_curve(live, {t0, t1}, W, cols);
        const double min_bytes = 0.5 * std::max(cols.y_max, 1.0) / H;
        // Brute force: per column, the first K eligible allocations in by_size order. A column
        // shows the allocations alive at the first instant of its live maximum (Curve::argmax, a
        // search by times: independent of the layout's search by sample indexes).
        const double npc = static_cast<double>(t1 - t0) / W;
        std::set<uint32_t> expect;
        std::vector<size_t> eligible(static_cast<size_t>(W), 0);
        for (int x = 0; x < W; ++x) {
            int64_t c0 = t0 + static_cast<int64_t>(x * npc);
            int64_t c1 = std::max(c0 + 1, t0 + static_cast<int64_t>((x + 1) * npc));
            const int64_t at = live.argmax(c0, c1);
            size_t taken = 0;
            for (size_t r = 0; r < a.size(); ++r) {
                uint32_t i = a.by_size[r];
                if (static_cast<double>(a.bytes[i]) < min_bytes) break;
                if (a.t_alloc[i] <= at && a.t_free[i] > at && a.t_alloc[i] < t1 && a.t_free[i] > t0) {
                    ++eligible[static_cast<size_t>(x)];
                    if (taken++ < K) expect.insert(i);
                }
            }
        }
        std::set<uint32_t> got(b.bands.begin(), b.bands.end());
        if (expect.size() <= budget) CHECK(got == expect);
        else CHECK(got.size() == budget);   // even the first cap overflows: its first `budget`
        if (b.per_column) {
            // Capped because everything eligible did not fit.
            std::set<uint32_t> all;
            for (size_t r = 0; r < a.size(); ++r) {
                uint32_t i = a.by_size[r];
                if (static_cast<double>(a.bytes[i]) >= min_bytes && a.t_alloc[i] < t1 && a.t_free[i] > t0) all.insert(i);
            }
            // (some of them alive at no column's instant: never a band)
            CHECK(all.size() > budget);
            ++capped;
        } else {
            ++uncapped;
        }
        // Every column holds at least min(K, its eligible live allocations) drawn bands.
        auto n = drawn_per_column(b, W);
        size_t short_columns = 0;
        for (size_t x = 0; x < static_cast<size_t>(W); ++x)
            short_columns += static_cast<size_t>(n[x]) < std::min(K, eligible[x]);
        if (expect.size() <= budget) CHECK(short_columns == 0);
        CHECK(b.bands.size() + b.summarised == a.overlapping(t0, t1));
    }
    CHECK(capped > 0);     // both regimes were exercised
    CHECK(uncapped > 0);
}

TEST_CASE("bands: the allocations overlapping a range, listed through the time index, are the brute-force ones") {
    std::mt19937_64 rng(17);
    for (size_t count : {0, 1, 31, 32, 33, 1025, 40000}) {
        AllocationTable table;
        for (size_t i = 0; i < count; ++i) {
            int64_t t0 = static_cast<int64_t>(rng() % 1'000'000);
            // Mostly short lives, some to the end (never freed) and some freed where made.
            int64_t t1 = rng() % 40 == 0 ? mhc::trace::kNoTime : t0 + static_cast<int64_t>(rng() % (rng() % 10 ? 2000 : 400'000));
            add(table, 1 + static_cast<int64_t>(rng() % MiB), t0, t1);
        }
        finish(table);
        for (int query = 0; query < 60; ++query) {
            int64_t t0 = static_cast<int64_t>(rng() % 1'100'000) - 50'000;
            int64_t t1 = t0 + 1 + static_cast<int64_t>(rng() % (query % 3 ? 3000 : 600'000));
            std::vector<uint32_t> got;
            table.list_overlapping(t0, t1, got);
            std::vector<uint32_t> want;
            for (size_t i = 0; i < count; ++i)
                if (table.t_alloc[i] < t1 && table.t_free[i] > t0) want.push_back(static_cast<uint32_t>(i));
            std::sort(got.begin(), got.end());
            REQUIRE(got == want);
            CHECK(table.overlapping(t0, t1) == want.size());
        }
    }
}

TEST_CASE("bands: a zoomed-in layout equals the layout of only the allocations it overlaps") {
    // Zoomed in on a long trace, the selection reads only the overlapping allocations (through
    // the time index); the bands it draws must be those a scan of every allocation would draw:
    // the same as the layout of a table holding only the overlapping ones.
    std::mt19937_64 rng(3);
    AllocationTable table;
    for (int i = 0; i < 60000; ++i) {
        int64_t t0 = static_cast<int64_t>(rng() % 10'000'000);
        int64_t t1 = t0 + 1 + static_cast<int64_t>(rng() % 20'000);   // (never-freed ones: the test above)
        add(table, 4096 + static_cast<int64_t>(rng() % (64 * MiB)), t0, t1);
    }
    Curve live = finish(table);
    int listed_ranges = 0;
    for (int query = 0; query < 12; ++query) {
        int64_t t0 = static_cast<int64_t>(rng() % 9'900'000);
        TimeRange range{t0, t0 + 1000 + static_cast<int64_t>(rng() % 60'000)};
        BandLayout full;
        layout_bands(table, live, nullptr, range, 500, 300, 64, full, 8);
        AllocationTable part;
        for (size_t i = 0; i < table.size(); ++i)
            if (table.t_alloc[i] < range.t1 && table.t_free[i] > range.t0) add(part, table.bytes[i], table.t_alloc[i], table.t_free[i]);
        finish(part);
        BandLayout only;
        layout_bands(part, live, nullptr, range, 500, 300, 64, only, 8);   // the same live bytes: the same threshold
        listed_ranges += part.size() * 8 < table.size();
        REQUIRE(full.bands.size() == only.bands.size());
        for (size_t b = 0; b < full.bands.size(); ++b) {
            CHECK(table.bytes[full.bands[b]] == part.bytes[only.bands[b]]);
            CHECK(table.t_alloc[full.bands[b]] == part.t_alloc[only.bands[b]]);
        }
        CHECK(full.segments.size() == only.segments.size());
        CHECK(full.summarised == only.summarised);
    }
    CHECK(listed_ranges >= 10);   // the index was used (far fewer overlapping than drawable)
}

TEST_CASE("bands: clipped at the recording's end, nothing drawn or hit past it") {
    // A trace of 1000 ns: a 64 MiB allocation alive at its end (never freed) and a 32 MiB one on
    // [100, 600). A run that ends at 2000 ns widens the memory view's range to [0, 2000): on 200
    // columns of 10 ns the recording ends at column 100 (columns_before), and without the clip
    // the never-freed band ran on to column 200, where nothing was recorded.
    AllocationTable table;
    add(table, 64 * MiB, 0, mhc::trace::kNoTime);
    add(table, 32 * MiB, 100, 600);
    Curve live = finish(table);
    BandLayout layout;
    layout_bands(table, live, nullptr, {0, 2000}, 200, 300, 64, layout);
    int past = 0;
    for (const BandSegment& seg : layout.segments) past += seg.x1 > 100;
    REQUIRE(past > 0);   // the unclipped layout draws past the end
    clip_bands(layout, 100);
    REQUIRE(!layout.segments.empty());
    for (const BandSegment& seg : layout.segments) CHECK(seg.x1 <= 100);
    for (const SummarySegment& seg : layout.summaries) CHECK(seg.x1 <= 100);
    CHECK(layout.total.size() == 100);
    CHECK(layout.hit(150, 1.0) == -2);   // a hover past the end finds nothing
    CHECK(layout.hit(50, 1.0) == 0);     // the 64 MiB allocation (index 0) at the bottom before it
    CHECK(layout.peak_col >= 10);        // the peak (96 MiB on [100, 600)) is kept
    CHECK(layout.peak_col < 60);
    clip_bands(layout, 500);   // more columns than the layout has: unchanged
    CHECK(layout.total.size() == 100);
}
