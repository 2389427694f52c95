#include <catch2/catch.hpp>

#include "mhc/viewer/axis.hpp"

using namespace mhc::viewer;

TEST_CASE("time labels use the unit of the value with the decimals the resolution needs") {
    CHECK(format_time(1'234'567'890, 10'000'000) == "1.23 s");
    CHECK(format_time(1'234'567'890, 1'000) == "1.234568 s");
    CHECK(format_time(5'000'000, 1'000'000) == "5 ms");
    CHECK(format_time(0, 1'000) == "0 us");
    CHECK(format_time(250, 50) == "250 ns");
    CHECK(format_duration(850) == "850 ns");
    CHECK(format_duration(12'345) == "12.3 us");
    CHECK(format_duration(4'561'000) == "4.56 ms");
    CHECK(format_duration(123'000'000'000) == "123 s");
}

TEST_CASE("ticks sit on a 1-2-5 grid, at least min_px apart, with labelled majors") {
    auto ticks = time_ticks({0, 1'000'000}, 1000.f, 12.f);   // 1 ns/px -> 20 ns steps? no: 12 us
    REQUIRE(ticks.size() >= 2);
    int64_t step = ticks[1].t - ticks[0].t;
    CHECK(step == 20'000);          // smallest of 1-2-5 x 10^k >= 12 px x 1000 ns/px
    CHECK(ticks[1].x - ticks[0].x >= 12.f);
    CHECK(ticks[0].major);
    CHECK(ticks[0].label == "0 us");
    for (const Tick& k : ticks) CHECK(k.major == (k.t % 100'000 == 0));
}

TEST_CASE("an order-only trace's axis counts events, not time") {
    // Times of a trace without timestamps are event numbers (event k at k ns): "event #N".
    auto ticks = time_ticks({0, 10'324}, 800.f, 40.f, true);
    REQUIRE(ticks.size() >= 2);
    CHECK(ticks[0].label == "event #0");
    for (const Tick& k : ticks) {
        if (!k.major) continue;
        CHECK(k.label == "event #" + std::to_string(k.t));
        CHECK(k.label.find("us") == std::string::npos);
    }
}

TEST_CASE("zoom keeps the anchor in place; pan and zoom stay inside the trace") {
    TimeRange lim{0, 1'000'000};
    TimeRange r = zoom(lim, 0.5, 250'000, lim);
    CHECK(r.span() == 500'000);
    CHECK(r.t0 == 125'000);   // anchor at 25% of the range stays at 25%
    r = zoom(r, 1e-9, 300'000, lim);
    CHECK(r.span() == kMinSpan);
    r = zoom(r, 1e9, 0, lim);
    CHECK(r.t0 == lim.t0);
    CHECK(r.t1 == lim.t1);
    r = pan({100, 200}, -1000, lim);
    CHECK(r.t0 == 0);
    CHECK(r.t1 == 100);
    r = pan({900'000, 1'000'000}, 5000, lim);
    CHECK(r.t1 == 1'000'000);
}
