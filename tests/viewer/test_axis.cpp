#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "mhc/viewer/axis.hpp"

using namespace mhc::viewer;

TEST_CASE("time labels use the unit of the value with the decimals the resolution needs") {
    CHECK(format_time(1'234'567'890, 10'000'000) == "1.23 s");
    CHECK(format_time(1'234'567'890, 1'000) == "1.234568 s");
    CHECK(format_time(5'000'000, 1'000'000) == "5 ms");
    CHECK(format_time(0, 1'000) == "0 us");
    CHECK(format_time(250, 50) == "250 ns");
    CHECK(format_duration(850) == "850 ns");
    CHECK(format_duration(12'300) == "12.30 us");   // mhc::format_ns, as mhc prints it
    CHECK(format_duration(4'561'000) == "4.56 ms");
    CHECK(format_duration(123'000'000'000) == "123.000 s");
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

TEST_CASE("an execution trace's axis, ranges and items count ops, never nanoseconds") {
    // An execution trace alone has the order of its ops and no times: op k (from 1) lies on
    // [k, k + 1). Its axis read "event #4359000" for the 4,359th op when ops took 1 us slots, and its
    // tooltips "start event #1, end event #2", "duration 1 event".
    TimeText ops{true, "op"};
    CHECK(ops.at(12) == "op #12");
    CHECK(ops.span(1) == "1 op");
    CHECK(ops.span(14254) == "14254 ops");
    CHECK(ops.interval(12, 13) == "op #12");                  // one op: its number alone
    CHECK(ops.interval(12, 16) == "op #12 .. #15 (4 ops)");   // the last one it covers, not the next
    CHECK(ops.range(1, 14255) == "op #1 .. #14254 (14254 ops)");
    CHECK(ops.axis_title() == "op order");
    for (const Tick& tick : time_ticks({1, 14255}, 800.f, 16.f, true, "op")) {
        if (!tick.major) continue;
        CHECK(tick.label == "op #" + std::to_string(tick.t));
    }
    // A snapshot without time_us numbers its events the same way; a timed trace keeps its times.
    CHECK(TimeText{true}.interval(3, 40) == "event #3 .. #39 (37 events)");
    CHECK(TimeText{true}.axis_title() == "event order");
    CHECK(TimeText{}.interval(1'500'000, 1'600'000, 1000) == "start 1.500 ms, end 1.600 ms (100.00 us)");
    CHECK(TimeText{}.range(0, 2'000'000, 2000) == "0 us .. 2.000 ms (2.00 ms)");
    CHECK(TimeText{}.axis_title().empty());
}

TEST_CASE("a range shorter than one major step still has labels") {
    // param's PT2 execution trace: 4 ops, events #1 to #5 on a 1000 px axis. The step stops at one
    // event (250 px apart) and the majors at ten: the axis had four ticks and no label.
    auto ticks = time_ticks({1, 5}, 1000.f, 40.f, true);
    std::vector<std::string> labels;
    for (const Tick& tick : ticks)
        if (tick.major) labels.push_back(tick.label);
    CHECK(labels == std::vector<std::string>{"event #1", "event #2", "event #3", "event #4", "event #5"});
    // The same with times: 5 ns over 1000 px, every nanosecond labelled; 30 ns over 100 px, every 10 ns.
    labels.clear();
    for (const Tick& tick : time_ticks({1, 5}, 1000.f, 10.f))
        if (tick.major) labels.push_back(tick.label);
    CHECK(labels == std::vector<std::string>{"1 ns", "2 ns", "3 ns", "4 ns", "5 ns"});
    labels.clear();
    for (const Tick& tick : time_ticks({1, 9}, 100.f, 40.f, true))
        if (tick.major) labels.push_back(tick.label);
    CHECK(labels == std::vector<std::string>{"event #5"});   // 12.5 px a step: every 5th
    // Ranges long enough keep the usual majors (every 10th or 5th step).
    for (const Tick& tick : time_ticks({0, 1'000'000}, 1000.f, 12.f)) CHECK(tick.major == (tick.t % 100'000 == 0));
}

TEST_CASE("zoom keeps the anchor in place, pan and zoom stay inside the trace") {
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

TEST_CASE("byte grid lines leave room for their labels on short plots") {
    constexpr double MiB = 1024.0 * 1024.0;
    // A tall plot: the 1-2-5 grid as before (336 MiB: a line every 50 MiB, 6 lines).
    auto tall = byte_ticks(336 * MiB, 300.f, 16.f);
    REQUIRE(tall.size() == 6);
    CHECK(tall.front() == 50 * MiB);
    CHECK(tall.back() == 300 * MiB);
    // The timeline's memory strip in a 1200x420 window is 70 px: 50 MiB steps are 10.4 px apart,
    // less than a 13 px label (six labels drawn over each other). Lines 16 px apart and more:
    // 100 MiB steps (20.8 px); 300 MiB, 7.5 px under the top edge, would put half its label
    // outside the plot.
    auto strip = byte_ticks(336 * MiB, 70.f, 16.f);
    REQUIRE(strip.size() == 2);
    CHECK(strip.front() == 100 * MiB);
    CHECK(strip.back() == 200 * MiB);
    // Every height and scale: 1-2-5 x 1024^k steps, at least min_gap apart, at most 7, inside.
    for (double y_max : {1.0, 3.0, 1000.0, 5e6, 1.1 * 1424 * MiB, 141.4 * 1024 * MiB, 8e15})
        for (float height : {5.f, 15.f, 16.f, 31.f, 40.f, 70.f, 120.f, 400.f, 2000.f}) {
            auto ticks = byte_ticks(y_max, height, 16.f);
            INFO("y_max " << y_max << ", height " << height);
            CHECK(ticks.size() <= 7);
            for (size_t i = 0; i < ticks.size(); ++i) {
                const double px = (ticks[i] - (i ? ticks[i - 1] : 0)) / y_max * height;
                CHECK(px >= 16.0 - 1e-6);
                CHECK((y_max - ticks[i]) / y_max * height >= 8.0 - 1e-6);
            }
            if (height >= 64 && y_max >= 1000) CHECK(!ticks.empty());
            if (height < 16) CHECK(ticks.empty());
        }
}

TEST_CASE("byte labels: one unit and the decimals the step needs") {
    constexpr double MiB = 1024.0 * 1024.0, GiB = 1024.0 * MiB;
    // torch's ResNet-50 profile (2.6 GiB peak, 1.1 x for the plot): a line every 0.5 GiB, which
    // format_bytes wrote "512.00 MiB", "1.00 GiB", "1.50 GiB".
    auto resnet = byte_ticks(1.1 * 2.6 * GiB, 500.f, 16.f);
    CHECK(byte_tick_labels(resnet) == std::vector<std::string>{"0.5 GiB", "1.0 GiB", "1.5 GiB", "2.0 GiB", "2.5 GiB"});
    // 500 MiB steps past 1 GiB stay in MiB ("1.46 GiB" is no line a reader can place).
    auto mib = byte_ticks(1.6 * GiB, 500.f, 16.f);
    CHECK(byte_tick_labels(mib) == std::vector<std::string>{"500 MiB", "1000 MiB", "1500 MiB"});
    CHECK(byte_tick_labels(byte_ticks(141.4 * 1.1 * GiB, 400.f, 16.f)) ==
          std::vector<std::string>{"50 GiB", "100 GiB", "150 GiB"});
    CHECK(byte_tick_labels(byte_ticks(336 * MiB, 70.f, 16.f)) == std::vector<std::string>{"100 MiB", "200 MiB"});
    CHECK(byte_tick_labels(byte_ticks(3.0, 120.f, 16.f)) == std::vector<std::string>{"1 B", "2 B"});
    CHECK(byte_tick_labels({}).empty());
    // Every scale: as many labels as lines, each with a unit and at most one decimal.
    for (double y_max : {1.0, 1000.0, 5e6, 1.1 * 1424 * MiB, 8e15})
        for (float height : {70.f, 400.f, 2000.f}) {
            auto ticks = byte_ticks(y_max, height, 16.f);
            auto labels = byte_tick_labels(ticks);
            REQUIRE(labels.size() == ticks.size());
            for (const std::string& label : labels) {
                INFO(label);
                CHECK(label.find(' ') != std::string::npos);
                const auto dot = label.find('.');
                CHECK((dot == std::string::npos || label.find(' ') - dot == 2));
            }
        }
}

TEST_CASE("zoom to a selected kernel or allocation: it fills the view with a tenth of its length either side") {
    const TimeRange limits{0, 1'000'000};
    const TimeRange kernel = focus_range(500'000, 600'000, limits);   // 100 us: 120 us around it
    CHECK(kernel.t0 == 490'000);
    CHECK(kernel.t1 == 610'000);
    const TimeRange tiny = focus_range(800'000, 800'010, limits);   // 10 ns: the deepest zoom, 100 ns
    CHECK(tiny.span() == kMinSpan);
    CHECK(tiny.t0 <= 800'000);
    CHECK(tiny.t1 >= 800'010);
    const TimeRange edge = focus_range(0, 1'000'000, limits);   // the whole trace: kept within it
    CHECK(edge.t0 == 0);
    CHECK(edge.t1 == 1'000'000);
    const TimeRange start = focus_range(0, 100'000, limits);   // at the start: moved inside
    CHECK(start.t0 == 0);
    CHECK(start.span() == 120'000);
}
