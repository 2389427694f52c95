#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "mhc/trace/model.hpp"
#include "mhc/viewer/curve.hpp"

using namespace mhc::viewer;

namespace {
// Reference: min/max of the step function over [a, b) straight from its definition.
Curve::MinMax brute(const std::vector<int64_t>& t, const std::vector<double>& v, int64_t a, int64_t b) {
    double cur = 0;
    for (size_t i = 0; i < t.size() && t[i] <= a; ++i) cur = v[i];
    Curve::MinMax m{cur, cur};
    for (size_t i = 0; i < t.size(); ++i)
        if (t[i] > a && t[i] < b) { m.min = std::min(m.min, v[i]); m.max = std::max(m.max, v[i]); }
    return m;
}
}  // namespace

TEST_CASE("pyramid min/max over any range equals the brute-force scan") {
    std::mt19937_64 rng(11);
    for (int trial = 0; trial < 20; ++trial) {
        size_t n = 1 + rng() % 3000;
        std::vector<int64_t> t;
        std::vector<double> v;
        int64_t x = static_cast<int64_t>(rng() % 100);
        for (size_t i = 0; i < n; ++i) {
            x += 1 + static_cast<int64_t>(rng() % 50);
            t.push_back(x);
            v.push_back(static_cast<double>(rng() % 100000));
        }
        Curve c;
        c.assign(t, v);
        for (int q = 0; q < 300; ++q) {
            int64_t a = static_cast<int64_t>(rng() % static_cast<uint64_t>(x + 100));
            int64_t b = a + 1 + static_cast<int64_t>(rng() % 2000);
            Curve::MinMax got = c.range(a, b), want = brute(t, v, a, b);
            REQUIRE(got.min == want.min);
            REQUIRE(got.max == want.max);
        }
    }
}

TEST_CASE("live bytes from intervals: frees before allocations at the same time") {
    using mhc::trace::kNoTime;
    // [0,10) 5 B, [10,20) 7 B (reuses the time of the first free), [5, end) 3 B
    Curve c = Curve::from_intervals({0, 10, 5}, {10, 20, kNoTime}, {5, 7, 3});
    CHECK(c.value_at(-1) == 0);
    CHECK(c.value_at(0) == 5);
    CHECK(c.value_at(5) == 8);
    CHECK(c.value_at(10) == 10);   // 8 - 5 + 7, never 15
    CHECK(c.value_at(25) == 3);
    CHECK(c.peak() == 10);
    CHECK(c.peak_time() == 10);
    CHECK(c.argmax(0, 30) == 10);
}

TEST_CASE("live bytes from intervals: a block alive only at one instant is drawn for 1 ns and peaks") {
    using mhc::trace::kNoTime;
    // 4 B over [0, end); 100 B allocated and freed at 10 (trace-format.md, "Events at one
    // instant"); 6 B from 20 with a 50 B block made and freed at 20 after it; and 30 B made
    // and freed at 30 followed by a 1 B allocation at 31.
    Curve c = Curve::from_intervals({0, 10, 20, 20, 30, 31}, {kNoTime, 10, kNoTime, 20, 30, kNoTime},
                                    {4, 100, 6, 50, 30, 1});
    CHECK(c.value_at(9) == 4);
    CHECK(c.value_at(10) == 104);   // for 1 ns at the height it reached
    CHECK(c.value_at(11) == 4);     // then freed: before, it was never freed (15 ... 115 B)
    CHECK(c.value_at(20) == 60);    // made while the 6 B block was alive
    CHECK(c.value_at(21) == 10);
    CHECK(c.value_at(30) == 40);    // the next instant is 1 ns later: it sets the value after it
    CHECK(c.value_at(31) == 11);
    CHECK(c.peak() == 104);
    CHECK(c.peak_time() == 10);
}

TEST_CASE("the peak lands in the column that holds its time") {
    // A plateau of 100 B with one 1 us spike of 500 B at t = 637 us, over 1 ms on 800 px.
    Curve c = Curve::from_intervals({0, 637'000}, {1'000'000, 638'000}, {100, 400});
    CurveColumns cols;
    prepare_curve(c, {0, 1'000'000}, 800, cols);
    CHECK(cols.y_max == 500);
    CHECK(cols.peak_col == 509);   // floor(637 / 1000 * 800)
    CHECK(cols.max[509] == 500);
    CHECK(cols.max[300] == 100);
    CHECK(cols.min[509] == 100);   // the column also holds the plateau
    // A spike narrower than a column still shows at full zoom-out.
    Curve narrow = Curve::from_intervals({0, 500'000}, {1'000'000'000, 500'001}, {10, 990});
    prepare_curve(narrow, {0, 1'000'000'000}, 1000, cols);
    CHECK(cols.y_max == 1000);
    CHECK(cols.peak_col == 0);
}

#include "mhc/viewer/bands.hpp"
#include "mhc/viewer/data.hpp"

TEST_CASE("bands: drawn + summarised = allocations overlapping the range, bands bounded") {
    std::mt19937_64 rng(5);
    AllocationTable a;
    for (int i = 0; i < 5000; ++i) {
        int64_t t0 = static_cast<int64_t>(rng() % 1'000'000);
        int64_t life = static_cast<int64_t>(rng() % 4 == 0 ? rng() % 500'000 : rng() % 5'000);
        a.id.push_back(i + 1);
        a.bytes.push_back(1 + static_cast<int64_t>(rng() % (1 << 20)) * static_cast<int64_t>(1 + rng() % 3 * 100));
        a.t_alloc.push_back(t0);
        a.t_free.push_back(rng() % 50 == 0 ? mhc::trace::kNoTime : t0 + life);
        a.label.push_back(0);
        a.device.push_back(0);
        a.category.push_back(mhc::trace::Category::Activation);
    }
    // The loader's derived columns.
    finish_allocations(a, 0, 1'200'000);
    Curve live = Curve::from_intervals(a.t_alloc, a.t_free, a.bytes);
    for (int q = 0; q < 50; ++q) {
        int64_t t0 = static_cast<int64_t>(rng() % 1'200'000);
        int64_t t1 = t0 + 1 + static_cast<int64_t>(rng() % 300'000);
        size_t brute = 0;
        for (size_t i = 0; i < a.size(); ++i) brute += a.t_alloc[i] < t1 && a.t_free[i] > t0;
        REQUIRE(a.overlapping(t0, t1) == brute);
        BandLayout b;
        layout_bands(a, live, nullptr, {t0, t1}, 800, 300, 64, b);
        CHECK(b.bands.size() + b.summarised == brute);
        CHECK(b.bands.size() <= 64);
        CHECK(b.segments.size() <= 64 * 800);
        // Drawn bands are the largest visible ones: none summarised is larger than a drawn one
        // unless the band budget ran out.
        if (!b.bands.empty() && b.bands.size() < 64) {
            int64_t smallest = INT64_MAX;
            for (uint32_t i : b.bands) smallest = std::min(smallest, a.bytes[i]);
            CHECK(static_cast<double>(smallest) >= 0.5 * b.y_max / 300 - 1e-9);
        }
    }
}

TEST_CASE("step series: values at increasing times with a galloping hint equal a binary search") {
    std::mt19937_64 rng(11);
    StepSeries s;
    int64_t t = 100;
    for (int i = 0; i < 20000; ++i) {
        t += static_cast<int64_t>(rng() % 3);   // repeats: the later sample replaces the earlier
        s.push(t, static_cast<double>(rng() % 1000));
    }
    CHECK(s.value_at(0) == 0.0);
    for (int run = 0; run < 20; ++run) {
        size_t hint = 0;
        int64_t q = static_cast<int64_t>(rng() % 200);
        while (q < t + 50) {
            REQUIRE(s.value_at(q, hint) == s.value_at(q));
            q += static_cast<int64_t>(rng() % (run < 10 ? 7 : 3000));   // small and large strides
        }
    }
}

TEST_CASE("curve columns: the galloping sweep gives each column the brute-force min and max") {
    // prepare_curve searches each column's bounds onward from the previous column's; the result
    // must equal the step function's min/max over each column's [a, b), at any zoom (columns
    // narrower than a sample, wider than many, starting before the first sample).
    std::mt19937_64 rng(23);
    for (int trial = 0; trial < 12; ++trial) {
        size_t samples = 1 + rng() % 2000;
        std::vector<int64_t> times;
        std::vector<double> values;
        int64_t last = static_cast<int64_t>(rng() % 100);
        for (size_t i = 0; i < samples; ++i) {
            last += 1 + static_cast<int64_t>(rng() % (trial % 2 ? 5 : 400));
            times.push_back(last);
            values.push_back(static_cast<double>(rng() % 100000));
        }
        Curve curve;
        curve.assign(times, values);
        for (int query = 0; query < 10; ++query) {
            int64_t start = static_cast<int64_t>(rng() % static_cast<uint64_t>(last + 100)) - 50;
            TimeRange range{start, start + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(last + 1))};
            const int width = 1 + static_cast<int>(rng() % 700);
            CurveColumns cols;
            prepare_curve(curve, range, width, cols);
            REQUIRE(cols.max.size() == static_cast<size_t>(width));
            const double per = static_cast<double>(range.span()) / width;
            for (int col = 0; col < width; ++col) {
                int64_t c0 = range.t0 + static_cast<int64_t>(col * per), c1 = range.t0 + static_cast<int64_t>((col + 1) * per);
                if (c1 <= c0) c1 = c0 + 1;
                Curve::MinMax want = brute(times, values, c0, c1);
                REQUIRE(cols.min[static_cast<size_t>(col)] == static_cast<float>(want.min));
                REQUIRE(cols.max[static_cast<size_t>(col)] == static_cast<float>(want.max));
            }
        }
    }
}

TEST_CASE("bands: the caller's curve columns give the same layout as the bands' own") {
    std::mt19937_64 rng(9);
    AllocationTable table;
    for (int i = 0; i < 2000; ++i) {
        int64_t t0 = static_cast<int64_t>(rng() % 1'000'000);
        table.id.push_back(i + 1);
        table.bytes.push_back(1 + static_cast<int64_t>(rng() % (1 << 24)));
        table.t_alloc.push_back(t0);
        table.t_free.push_back(t0 + 1 + static_cast<int64_t>(rng() % 50'000));
        table.label.push_back(0);
        table.device.push_back(0);
        table.category.push_back(mhc::trace::Category::Activation);
    }
    finish_allocations(table, 0, 1'100'000);
    Curve live = Curve::from_intervals(table.t_alloc, table.t_free, table.bytes);
    for (TimeRange range : {TimeRange{0, 1'100'000}, TimeRange{400'000, 420'000}}) {
        CurveColumns cols;
        prepare_curve(live, range, 640, cols);
        BandLayout own, given;
        layout_bands(table, live, nullptr, range, 640, 300, 64, own);
        layout_bands(table, live, nullptr, range, 640, 300, 64, given, kBandsPerColumn, &cols);
        CHECK(given.total == own.total);
        CHECK(given.y_max == own.y_max);
        CHECK(given.peak_col == own.peak_col);
        CHECK(given.bands == own.bands);
        CHECK(given.segments.size() == own.segments.size());
        // Columns of another width are not used: the bands make their own.
        CurveColumns narrow;
        prepare_curve(live, range, 320, narrow);
        BandLayout other;
        layout_bands(table, live, nullptr, range, 640, 300, 64, other, kBandsPerColumn, &narrow);
        CHECK(other.total == own.total);
    }
}

TEST_CASE("argmax_index: the first index of the maximum over any index range, as a scan finds it") {
    // The memory view's bands show each column at its live maximum's instant: found through the
    // pyramid, against a linear scan on random curves with many ties.
    std::mt19937_64 rng(5);
    for (int round = 0; round < 20; ++round) {
        const size_t count = 1 + rng() % 3000;
        std::vector<int64_t> times(count);
        std::vector<double> values(count);
        for (size_t i = 0; i < count; ++i) {
            times[i] = static_cast<int64_t>(i) * 10;
            values[i] = static_cast<double>(rng() % 50);
        }
        mhc::viewer::Curve curve;
        curve.assign(times, values);
        for (int q = 0; q < 300; ++q) {
            size_t lo = rng() % count, hi = rng() % count;
            if (lo > hi) std::swap(lo, hi);
            size_t want = lo;
            for (size_t i = lo; i <= hi; ++i)
                if (values[i] > values[want]) want = i;
            INFO(count << " [" << lo << ", " << hi << "]");
            REQUIRE(curve.argmax_index(lo, hi) == want);
        }
    }
}
