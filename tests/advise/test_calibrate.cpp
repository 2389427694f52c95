// Kernel times scaled to a measured step (calibrate.hpp), on the tiny captured steps of
// test_transforms.cpp, whose kernels take 10 ns each, with the numbers worked out by hand.
#include <catch2/catch.hpp>

#include "fixture.hpp"
#include "mhc/advise/calibrate.hpp"
#include "mhc/advise/evaluate.hpp"
#include "mhc/common/error.hpp"
#include "mhc/test/temp.hpp"
#include "mhc/trace/check.hpp"
#include "tiny.hpp"

using mhc::advise::calibrate_compute;
using mhc::advise::Calibration;
using mhc::advise::last_step_time;
using mhc::advise::Prediction;
using advisetest::Fixture;
using advisetest::unit_link;

namespace {

const char* kStreamed =
    R"({"offload": {"mode": "streamed", "modules": ["M.blocks.0"], "min_bytes": 500, "max_fwd_stash": 1, "prefetch": 0}})";

}  // namespace

TEST_CASE("the last step: from the end of the step before it", "[advise][calibrate]") {
    // chain of 3 blocks with an optimizer: step 0 runs 15 kernels (its optimizer makes the
    // state), step 1 13: 150 and 130 ns. two_blocks has one step: all of it, 70 ns.
    Fixture chain(advisetest::chain({1, 1, 1}, true));
    CHECK(last_step_time(chain.base, unit_link()) == 130);
    Fixture two_blocks(advisetest::two_blocks());
    CHECK(last_step_time(two_blocks.base, unit_link()) == 70);
}

TEST_CASE("kernels scaled to the measured step, copies not", "[advise][calibrate]") {
    Fixture fix(advisetest::two_blocks());
    const Prediction before = fix.predict(kStreamed);
    const int64_t ckpt_before = fix.predict(R"({"checkpoint": {"modules": ["M.blocks.0"]}})").step_time;
    // Uncalibrated (test_transforms.cpp): the D2H of a0 runs [20, 1020], the H2D is issued as the
    // stream reaches k6 (60): [60, 1060], k6 [1060, 1070].
    CHECK(before.step_time == 1070);

    const Calibration cal = calibrate_compute(fix.base, unit_link(), 140);
    CHECK(cal.factor == Approx(2.0));
    CHECK(cal.estimated_step == 70);
    CHECK(cal.calibrated_step == 140);
    CHECK(cal.measured_step == 140);
    CHECK(fix.predict("{}").step_time == 140);
    // Kernels of 20 ns: a0's D2H issued at k1's end (40): [40, 1040]; the H2D at k6's start
    // (120): [120, 1120]; k6 [1120, 1140]. Against the slower compute the loss halves:
    // 1070/70 - 1 = +1429%, 1140/140 - 1 = +714%.
    const Prediction after = fix.predict(kStreamed);
    CHECK(after.step_time == 1140);
    CHECK(after.waits == 1120 - 120);
    // A recompute scales with the kernels: the same loss.
    CHECK(fix.predict(R"({"checkpoint": {"modules": ["M.blocks.0"]}})").step_time == 2 * ckpt_before);
    // Sync copies stay on the compute stream at the link's speed: 140 + 1000 + 1000.
    CHECK(fix.predict(R"({"offload": {"mode": "sync", "modules": ["M.blocks.0"], "min_bytes": 500}})").step_time == 2140);
}

TEST_CASE("a measured step no scaling reaches is bad input", "[advise][calibrate]") {
    Fixture fix(advisetest::two_blocks());
    // At most 100x either way: 7000 ns is 100x, 7100 ns is not, nor 0.5x / 100 of 70 ns.
    CHECK(calibrate_compute(fix.base, unit_link(), 7000).factor == Approx(100.0));
    Fixture other(advisetest::two_blocks());
    CHECK_THROWS_AS(calibrate_compute(other.base, unit_link(), 7100), mhc::Error);
    CHECK_THROWS_AS(calibrate_compute(other.base, unit_link(), 0), mhc::Error);
    // refused, the base is left as it was
    CHECK(last_step_time(other.base, unit_link()) == 70);
}

TEST_CASE("a step with two steps is calibrated on its last", "[advise][calibrate]") {
    Fixture fix(advisetest::chain({1, 1, 1}, true));
    const Calibration cal = calibrate_compute(fix.base, unit_link(), 325);
    CHECK(cal.factor == Approx(2.5));
    CHECK(cal.calibrated_step == 325);
    CHECK(fix.predict("{}").step_time == (15 + 13) * 25);
}
