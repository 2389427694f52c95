#include <catch2/catch.hpp>

#include <random>

#include "mhc/viewer/lod.hpp"
#include "mhc/viewer/timeline.hpp"

using namespace mhc::viewer;

namespace {
Lane lane_of(const std::vector<std::pair<int64_t, int64_t>>& iv) {
    Lane l;
    for (size_t i = 0; i < iv.size(); ++i) l.push(iv[i].first, iv[i].second, 0, static_cast<int64_t>(i));
    l.finish();
    return l;
}
// Items overlapping [t0, t1): the reference the folded counts must add up to.
size_t overlapping(const Lane& l, TimeRange r) {
    size_t n = 0;
    for (size_t i = 0; i < l.size(); ++i) n += l.t_end[i] >= r.t0 && l.t_start[i] < r.t1;
    return n;
}
}  // namespace

TEST_CASE("a dense lane at full zoom-out folds into one run holding every item") {
    std::vector<std::pair<int64_t, int64_t>> iv;
    for (int64_t i = 0; i < 100000; ++i) iv.push_back({i * 20, i * 20 + 10});
    Lane l = lane_of(iv);
    auto items = prepare_lane(l, {0, 2'000'000}, 1000.f);
    REQUIRE(items.size() == 1);
    CHECK(items[0].count == 100000);
    CHECK(items[0].first == 0);
    CHECK(items[0].x0 == Approx(0));
    CHECK(items[0].x1 == Approx(1000.f * 1'999'990 / 2'000'000).margin(0.01));
}

TEST_CASE("clusters separated by more than the fold width fold into one run each") {
    // 40 clusters of 100 kernels (10 ns each, 10 ns apart) every 100 us: at 1000 px over
    // 4 ms a cluster is 0.5 px wide and clusters are 25 px apart.
    std::vector<std::pair<int64_t, int64_t>> iv;
    for (int c = 0; c < 40; ++c)
        for (int i = 0; i < 100; ++i) iv.push_back({c * 100'000 + i * 20, c * 100'000 + i * 20 + 10});
    Lane l = lane_of(iv);
    auto items = prepare_lane(l, {0, 4'000'000}, 1000.f);
    REQUIRE(items.size() == 40);
    for (size_t c = 0; c < items.size(); ++c) {
        CHECK(items[c].count == 100);
        CHECK(items[c].first == c * 100);
        CHECK(items[c].x0 == Approx(c * 25.0).margin(1e-3));
        CHECK(items[c].x1 - items[c].x0 == Approx(kFoldPx));   // drawn at the minimum width
    }
}

TEST_CASE("zoomed in far enough every item is drawn alone") {
    std::vector<std::pair<int64_t, int64_t>> iv;
    for (int64_t i = 0; i < 1000; ++i) iv.push_back({i * 100, i * 100 + 60});
    Lane l = lane_of(iv);
    TimeRange r{5'030, 7'030};   // 20 items, each 60 ns = 30 px on 1000 px
    auto items = prepare_lane(l, r, 1000.f);
    REQUIRE(items.size() == overlapping(l, r));
    for (const DrawItem& d : items) CHECK(d.count == 1);
    CHECK(items.front().first == 50);
    CHECK(items.front().x0 == Approx(0));                     // clipped on the left
    CHECK(items[1].x0 == Approx((5'100 - 5'030) / 2.0));
}

TEST_CASE("a wide item among narrow ones is drawn on its own") {
    std::vector<std::pair<int64_t, int64_t>> iv;
    for (int64_t i = 0; i < 50; ++i) iv.push_back({i * 10, i * 10 + 5});
    iv.push_back({500, 600'000});   // 60% of the range
    for (int64_t i = 0; i < 50; ++i) iv.push_back({600'000 + i * 10, 600'000 + i * 10 + 5});
    Lane l = lane_of(iv);
    auto items = prepare_lane(l, {0, 1'000'000}, 1000.f);
    REQUIRE(items.size() == 3);
    CHECK(items[0].count == 50);
    CHECK(items[1].count == 1);
    CHECK(items[1].first == 50);
    CHECK(items[1].x1 == Approx(600.f));
    CHECK(items[2].count == 50);
}

TEST_CASE("random lanes: counts cover the visible items, items are bounded and ordered") {
    std::mt19937_64 rng(7);
    for (int trial = 0; trial < 30; ++trial) {
        std::vector<std::pair<int64_t, int64_t>> iv;
        int64_t t = 0;
        size_t n = 2000 + rng() % 50000;
        for (size_t i = 0; i < n; ++i) {
            t += static_cast<int64_t>(rng() % 1000);                       // gap
            int64_t d = static_cast<int64_t>(rng() % 4 == 0 ? rng() % 200000 : rng() % 500);
            iv.push_back({t, t + d});
            t += d;
        }
        Lane l = lane_of(iv);
        for (int z = 0; z < 10; ++z) {
            int64_t a = static_cast<int64_t>(rng() % static_cast<uint64_t>(t));
            int64_t b = a + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(t - a + 1));
            float width = 100.f + static_cast<float>(rng() % 2000);
            TimeRange r{a, b};
            auto items = prepare_lane(l, r, width);
            size_t sum = 0;
            for (size_t i = 0; i < items.size(); ++i) {
                sum += items[i].count;
                CHECK(items[i].x0 <= items[i].x1);
                CHECK(items[i].x1 <= width);
                if (i > 0) CHECK(items[i].first == items[i - 1].first + items[i - 1].count);
                if (i > 0) CHECK(items[i].x0 >= items[i - 1].x0);
            }
            CHECK(sum == overlapping(l, r));
            CHECK(items.size() <= static_cast<size_t>(width / kFoldPx) + 2);
        }
    }
}

TEST_CASE("overlapping items (nested ranges) are still found from the left edge") {
    // One long range that starts first and ends last, and short ones inside it.
    Lane l = lane_of({{0, 1'000'000}, {10, 20}, {500'000, 500'010}});
    auto items = prepare_lane(l, {400'000, 600'000}, 1000.f);
    REQUIRE(!items.empty());
    CHECK(items[0].first == 0);   // the long range is visible although it starts off-screen
    CHECK(items[0].x0 == Approx(0));
}

TEST_CASE("timeline frames are bounded by tracks x width / fold width") {
    std::vector<Lane> lanes(5);
    std::mt19937_64 rng(3);
    for (Lane& l : lanes) {
        int64_t t = 0;
        for (int i = 0; i < 200000; ++i) {
            int64_t d = static_cast<int64_t>(rng() % 300);
            l.push(t, t + d, 0, i);
            t += d + static_cast<int64_t>(rng() % 300);
        }
        l.finish();
    }
    std::vector<Track> tracks;
    for (const Lane& l : lanes) tracks.push_back({&l, false});
    std::vector<TrackFrame> frame;
    for (int64_t span : {int64_t{60'000'000}, int64_t{1'000'000}, int64_t{10'000}}) {
        prepare_timeline(tracks, {1000, 1000 + span}, 1600.f, frame);
        CHECK(draw_item_count(frame) <= tracks.size() * (1600 / 3 + 2));
        CHECK(draw_item_count(frame) > 0);
    }
}

TEST_CASE("a folded run of kernels says whether it holds more than one family") {
    // 1000 kernels of 10 ns every 20 ns keyed 0 (class 0), and the same keyed by i % 4 == 0 (class
    // 1 every fourth: a quarter of the time). Folded at full zoom-out into one run each: the first
    // all class 0, the second mostly class 0 and mixed.
    Lane one, four;
    for (int64_t i = 0; i < 1000; ++i) {
        one.push(i * 20, i * 20 + 10, 0, i);
        four.push(i * 20, i * 20 + 10, i % 4 == 0 ? 1 : 0, i);
    }
    one.finish();
    four.finish();
    one.classify({0, 1}, 0, 2);
    four.classify({0, 1}, 0, 2);
    auto alone = prepare_lane(one, {0, 20000}, 500.f), mixed = prepare_lane(four, {0, 20000}, 500.f);
    REQUIRE(alone.size() == 1);
    REQUIRE(mixed.size() == 1);
    CHECK(alone[0].cls == 0);
    CHECK(!alone[0].mixed);
    CHECK(mixed[0].cls == 0);   // three quarters of the time
    CHECK(mixed[0].mixed);
    // Zoomed in, each kernel alone: never mixed.
    for (const DrawItem& item : prepare_lane(four, {0, 200}, 500.f)) CHECK(!item.mixed);
}
