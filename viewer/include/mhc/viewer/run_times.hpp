#pragma once
// A run's times in words. A run of a trace with times reads them as the trace does (TimeText). A
// run of an order-only trace (meta timing: a snapshot without time_us, an execution trace alone)
// lies on a clock of 1 ns per op (or event) plus the nanoseconds the link model gives its transfers
// and the stalls they cause: its numbers are neither the program's time nor op numbers (a stall
// read "op #809 .. #5736477 (5735669 ops)" on param's ResNet ET of 7752 ops, and the policy's
// decisions "24.0 ms before"). So a time reads as the op the run started last by then and the link
// time since ("op #808 + 5.74 ms"), and a length as link time ("5.74 ms of link time").
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mhc/viewer/axis.hpp"

namespace mhc::viewer {

struct ViewTrace;
struct ViewRun;

struct RunTimes {
    TimeText recorded;         // the trace's times in words
    bool order_only = false;   // the trace's timing is order only
    // Order only: each kernel the run reached, (run start, recorded start), by run start.
    std::vector<std::pair<int64_t, int64_t>> ops;

    // The recorded start of the op the run started last at or before `at` (-1: none yet).
    int64_t op_before(int64_t at) const;
    // "1.5000 ms" (as the trace reads), or order only "op #808 + 5.74 ms" ("op #808" at its start;
    // "the run's start + 2.00 ms" before its first op).
    std::string at(int64_t time, int64_t resolution_ns = 1) const;
    // "2.30 ms", or order only "2.30 ms of link time".
    std::string span(int64_t ns) const;
    // [t0, t1) as at() reads its ends, and its length: "op #808 + 1 ns .. op #808 + 5.74 ms (5.74 ms of
    // link time)"; with times, as TimeText::interval.
    std::string interval(int64_t t0, int64_t t1) const;
};

// The run's times as `view` reads them (the order-only map from its kernel lanes).
RunTimes run_times(const ViewTrace& view, const ViewRun& run);

}   // namespace mhc::viewer
