// An order-only trace's run read as ops and link time (run_times.hpp): its clock gives each op 1 ns
// and its transfers and stalls the link's nanoseconds, so its numbers are neither times nor op numbers.
#include <catch2/catch.hpp>

#include "mhc/viewer/details.hpp"
#include "mhc/viewer/find.hpp"
#include "mhc/viewer/run_times.hpp"

using mhc::trace::EventKind;
using mhc::viewer::describe_events;
using mhc::viewer::KernelMatch;
using mhc::viewer::next_match;
using mhc::viewer::range_for_match;
using mhc::viewer::RunTimes;
using mhc::viewer::TimeRange;

namespace {

// Ops 1..4 recorded at 1..4 (op k on [k, k + 1)); the run reaches op 1 at 1, op 2 at 2, then stalls
// 2 ms (2,000,000 ns of link time) before op 3 at 2,000,003 and op 4 at 2,000,004.
RunTimes four_ops() {
    RunTimes times;
    times.recorded.events = true;
    times.recorded.noun = "op";
    times.order_only = true;
    times.ops = {{1, 1}, {2, 2}, {2000003, 3}, {2000004, 4}};
    return times;
}

}   // namespace

TEST_CASE("run times: an order-only trace's run reads as the op reached and the link time since") {
    const RunTimes times = four_ops();
    CHECK(times.op_before(0) == -1);
    CHECK(times.op_before(2) == 2);
    CHECK(times.op_before(2000002) == 2);
    CHECK(times.op_before(2000003) == 3);
    CHECK(times.at(2) == "op #2");
    CHECK(times.at(3) == "op #2 + 1 ns");
    CHECK(times.at(1000002) == "op #2 + 1.00 ms");
    CHECK(times.at(0) == "the run's start + 0 ns");
    CHECK(times.span(2000000) == "2.00 ms of link time");
    // The stall: before, "op #3 .. #2000002 (2000000 ops)" on a trace of 4 ops.
    CHECK(times.interval(3, 2000003) == "op #2 + 1 ns .. op #3 (2.00 ms of link time)");
    // The policy's decisions say where they lie by op, their length in link time (they read "2.00 ms,
    // 1.00 ms before", distances on a clock that is no time).
    const mhc::trace::RunEvent stall{EventKind::Stall, 3, 2000003, 7, 3, 0};
    CHECK(describe_events({stall}, 2000003, true, &times) == "waited for room 2.00 ms of link time, at op #2 + 1 ns");
    const mhc::trace::RunEvent out{EventKind::SwapOut, 2000004, 2001004, 7, 0, 1 << 20};
    CHECK(describe_events({out}, 2000003, false, &times) == "swapped out 1.00 us of link time of 1.00 MiB, at op #4");
    // A timed trace's run keeps its times.
    RunTimes timed;
    CHECK(timed.at(1500000, 1000) == "1.500 ms");
    CHECK(timed.span(2000000) == "2.00 ms");
    CHECK(describe_events({stall}, 3000003, true, &timed) == "waited for room 2.00 ms, 1.00 ms before");
}

TEST_CASE("find: the next match by start, wrapping, and the range that shows it") {
    const std::vector<KernelMatch> matches{{100, 200, 7}, {300, 310, 3}, {300, 400, 9}, {900, 950, 1}};
    CHECK(next_match(matches, 0, 0) == 0);   // none selected: the first from the range's start
    CHECK(next_match(matches, 0, 250) == 1);
    CHECK(next_match(matches, 0, 1000) == 0);      // past the last: the first again
    CHECK(next_match(matches, 3, 0) == 2);         // after kernel 3 (ties by id)
    CHECK(next_match(matches, 1, 0) == 0);         // after the last: the first
    CHECK(next_match(matches, 7, 0, true) == 3);   // before the first: the last
    CHECK(next_match({}, 0, 0) == -1);
    // Inside and wide enough: kept; too narrow: 20 times its length around it; outside: centred.
    const TimeRange whole{0, 10000};
    CHECK(range_for_match(matches[0], {0, 1000}, whole).t0 == 0);
    const TimeRange narrow = range_for_match(matches[1], {0, 100000}, {0, 100000});
    CHECK(narrow.span() == 200);
    CHECK(narrow.t0 == 305 - 100);   // its middle (305) less half the span
    const TimeRange moved = range_for_match(matches[3], {0, 500}, whole);
    CHECK(moved.span() == 500);
    CHECK(moved.t0 <= 900);
    CHECK(moved.t1 >= 950);
}
