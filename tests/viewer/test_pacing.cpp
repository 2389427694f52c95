// When the window draws: after input a few frames settle, then it waits; something animating
// keeps it drawing. And the frame-time figures the status bar shows.
#include <catch2/catch.hpp>

#include "mhc/viewer/pacing.hpp"

using namespace mhc::viewer;

TEST_CASE("an idle window waits, input and animation draw at once, then settle") {
    FramePacer p;
    // Start: the first frames settle, then the loop waits.
    for (int i = 0; i < FramePacer::kSettleFrames; ++i) CHECK(p.next_wait(false, false) == 0);
    CHECK(p.next_wait(false, false) == FramePacer::kIdleWait);
    CHECK(p.next_wait(false, false) == FramePacer::kIdleWait);
    // Input: drawn at once, and for kSettleFrames more frames without input.
    CHECK(p.next_wait(true, false) == 0);
    for (int i = 0; i < FramePacer::kSettleFrames; ++i) CHECK(p.next_wait(false, false) == 0);
    CHECK(p.next_wait(false, false) == FramePacer::kIdleWait);
    // Animating (a load, a run in flight, a key held): never waits, whatever the input.
    for (int i = 0; i < 100; ++i) CHECK(p.next_wait(false, true) == 0);
    for (int i = 0; i < FramePacer::kSettleFrames; ++i) CHECK(p.next_wait(false, false) == 0);
    CHECK(p.next_wait(false, false) > 0);
}

TEST_CASE("frame times: last, mean and worst over the window") {
    FrameStats s(4);
    CHECK(s.mean() == 0);
    for (double ms : {1.0, 2.0, 3.0, 10.0}) s.add(ms);
    CHECK(s.last() == 10.0);
    CHECK(s.mean() == Approx(4.0));
    CHECK(s.worst() == 10.0);
    s.add(2.0);   // replaces the oldest (1.0)
    CHECK(s.count() == 4);
    CHECK(s.mean() == Approx(17.0 / 4));
    s.add(1.0);
    s.add(1.0);
    s.add(1.0);   // the 10 ms frame has left the window
    CHECK(s.worst() == 2.0);
}
