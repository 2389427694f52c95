// A run's clock (RunClock): recorded marker and copy times placed among the run's kernels.
#include <catch2/catch.hpp>

#include <random>

#include "fixtures.hpp"
#include "mhc/viewer/clock.hpp"
#include "mhc/viewer/data.hpp"
#include "mhc/viewer/timeline.hpp"

using namespace mhc::viewer;
using fixture::us;

TEST_CASE("the run clock: identity before the first kernel, the preceding kernel's shift after it") {
    RunClock c;
    CHECK(c.map(123) == 123);   // no kernels: recorded times
    c.add(100, 100);   // kernel A: not moved
    c.add(500, 550);   // kernel B: +50
    c.add(800, 900);   // kernel C: +100
    c.finish();
    CHECK(c.map(0) == 0);
    CHECK(c.map(99) == 99);
    CHECK(c.map(100) == 100);
    CHECK(c.map(499) == 499);   // between A and B: A's shift
    CHECK(c.map(500) == 550);   // starts with B: starts with B in the run
    CHECK(c.map(700) == 750);
    CHECK(c.map(800) == 900);
    CHECK(c.map(5000) == 5100);   // after the last kernel: its shift
}

TEST_CASE("the run clock: kernels starting together take the largest shift, ends never precede starts") {
    RunClock c;
    c.add(200, 230);   // +30
    c.add(200, 260);   // +60 (another stream, same recorded start)
    c.add(300, 300);   // back to +0: a later kernel ran on time
    c.finish();
    CHECK(c.map(250) == 310);
    // A range [250, 300] maps to [310, 300]: its end is clamped to its start.
    Lane l;
    l.kind = LaneKind::Markers;
    l.push(250, 300, 0, 1);
    l.push(100, 150, 0, 2);
    l.finish();
    Lane m = c.map_lane(l);
    REQUIRE(m.size() == 2);
    CHECK(m.t_start[0] == 100);   // sorted again by start
    CHECK(m.t_end[0] == 150);
    CHECK(m.t_start[1] == 310);
    CHECK(m.t_end[1] == 310);
    CHECK(m.ref[1] == 1);
}

TEST_CASE("the run clock equals a brute-force 'last kernel starting at or before t' on random runs") {
    std::mt19937_64 rng(11);
    for (int trial = 0; trial < 20; ++trial) {
        std::vector<std::pair<int64_t, int64_t>> k;   // (recorded start, run start)
        RunClock c;
        int64_t shift = 0;
        for (int i = 0; i < 500; ++i) {
            int64_t s = static_cast<int64_t>(rng() % 100000);
            if (rng() % 10 == 0) shift += static_cast<int64_t>(rng() % 1000);   // a stall: shifts grow in steps
            int64_t d = rng() % 7 == 0 ? static_cast<int64_t>(rng() % 500) : shift;   // some streams shift less
            k.push_back({s, s + d});
            c.add(s, s + d);
        }
        c.finish();
        for (int q = 0; q < 300; ++q) {
            int64_t t = static_cast<int64_t>(rng() % 110000) - 5000;
            int64_t best_s = INT64_MIN, best_d = 0;
            for (const auto& [s, r] : k)
                if (s <= t && (s > best_s || (s == best_s && r - s > best_d))) { best_s = s; best_d = r - s; }
            CHECK(c.map(t) == (best_s == INT64_MIN ? t : t + best_d));
        }
    }
}

TEST_CASE("a selected run draws the trace's markers and copies on its clock") {
    fixture::TempPath p("known.db");
    fixture::write_known_trace(p.path);
    ViewTrace t = load_view_trace(p.path);
    ViewRun r = load_view_run(t, 1);   // beta and the tiny kernels +50 us
    REQUIRE(r.marker_lanes.size() == t.marker_lanes.size());
    REQUIRE(r.copy_lanes.size() == t.copy_lanes.size());
    const Lane* layer = nullptr;
    const Lane* step = nullptr;
    for (const Lane& l : r.marker_lanes) {
        if (l.stream == static_cast<int64_t>(mhc::trace::MarkerKind::Layer)) layer = &l;
        if (l.stream == static_cast<int64_t>(mhc::trace::MarkerKind::Step)) step = &l;
    }
    REQUIRE(layer);
    REQUIRE(step);
    // layer 3 [720, 780) us follows beta (recorded 500 us, +50 us).
    CHECK(layer->t_start[0] == 770 * us);
    CHECK(layer->t_end[0] == 830 * us);
    // step 0 starts before every kernel (unchanged) and ends after the last tiny kernel (+50 us).
    CHECK(step->t_start[0] == 0);
    CHECK(step->t_end[0] == 1050 * us);
    // Copies: [300, 350) us follows alpha (on time); [750, 790) us follows beta (+50 us).
    REQUIRE(r.copy_lanes[0].size() == 2);
    CHECK(r.copy_lanes[0].t_start[0] == 300 * us);
    CHECK(r.copy_lanes[0].t_start[1] == 800 * us);
    CHECK(r.copy_lanes[0].t_end[1] == 840 * us);
    // The run's span covers the moved step marker, and the timeline takes the run's lanes.
    CHECK(r.t_end == 1050 * us);
    auto tracks = timeline_tracks(t, &r);
    CHECK(tracks[0].lane == &r.marker_lanes[0]);
    CHECK(tracks[0].from_run);
    // Without a run: the recorded lanes.
    CHECK(timeline_tracks(t, nullptr)[0].lane == &t.marker_lanes[0]);
}
