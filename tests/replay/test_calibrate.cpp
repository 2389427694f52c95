// Self-calibration's logic with injected measurements (nothing here depends on how fast this
// machine copies): the cache per machine and configuration, staleness, --recalibrate, a
// broken cache, clamping, and the automatic time scale.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "mhc/replay/calibrate.hpp"
#include "mhc/sim/link.hpp"

using namespace mhc;
namespace fs = std::filesystem;

namespace {

struct CacheDir {
    fs::path dir = fs::temp_directory_path() / "mhc_calibrate_tests";
    CacheDir() {
        fs::remove_all(dir);
        fs::create_directories(dir);
        setenv("XDG_CACHE_HOME", dir.c_str(), 1);
    }
    ~CacheDir() { unsetenv("XDG_CACHE_HOME"); }
};

replay::LinkCalibration fake(double h2d, double d2h, double duplex) {
    replay::LinkCalibration c;
    c.link.name = "fake replay link";
    c.link.h2d = {h2d, 5e-6};
    c.link.d2h = {d2h, 5e-6};
    c.link.duplex_factor = duplex;
    c.link.nccl_share = c.link.memcpy_share = 0;
    c.link.by_chunk = {{2 << 20, h2d, d2h, h2d * duplex, d2h * duplex}};
    c.link.source = "test";
    return c;
}

}  // namespace

TEST_CASE("self-calibration is cached per machine and measured again when stale or asked", "[replay][calibrate]") {
    CacheDir cache;
    replay::CalibrationSpec spec;
    int measured = 0;
    double h2d = 3e9;
    auto measure = [&](const replay::CalibrationSpec&) {
        ++measured;
        return fake(h2d, 2.5e9, 0.8);
    };
    const std::string path = replay::calibration_cache_path(spec);
    CHECK(path.rfind((cache.dir / "mhc").string(), 0) == 0);   // under $XDG_CACHE_HOME/mhc
    CHECK(path.find("2097152") != std::string::npos);          // the chunk size is part of the key

    auto a = replay::replay_link(spec, false, 3600, measure);
    CHECK(measured == 1);
    CHECK(a.origin.find("measured now (no cached calibration)") == 0);
    CHECK(a.cache_path == path);
    CHECK(fs::exists(path));
    CHECK(a.link.h2d.bandwidth_Bps == 3e9);

    h2d = 9e9;   // a second measurement would differ: the cache is what is read
    auto b = replay::replay_link(spec, false, 3600, measure);
    CHECK(measured == 1);
    CHECK(b.origin.find("cached ") == 0);
    CHECK(b.link.h2d.bandwidth_Bps == 3e9);
    CHECK(b.link.duplex_factor == 0.8);

    auto c = replay::replay_link(spec, true, 3600, measure);   // --recalibrate
    CHECK(measured == 2);
    CHECK(c.origin.find("--recalibrate") != std::string::npos);
    CHECK(c.link.h2d.bandwidth_Bps == 9e9);

    // Stale: older than the maximum age.
    fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::hours(48));
    auto d = replay::replay_link(spec, false, 24 * 3600, measure);
    CHECK(measured == 3);
    CHECK(d.origin.find("48.0 h old") != std::string::npos);

    // --calibration-max-age none: no age is stale (a year-old cache is read).
    fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::hours(24 * 365));
    auto never = replay::replay_link(spec, false, std::numeric_limits<double>::infinity(), measure);
    CHECK(measured == 3);
    CHECK(never.origin.find("cached ") == 0);

    // Another configuration (copy threads) has its own entry.
    replay::CalibrationSpec two = spec;
    two.copy_threads = 2;
    CHECK(replay::calibration_cache_path(two) != path);
    replay::replay_link(two, false, 3600, measure);
    CHECK(measured == 4);
}

TEST_CASE("a broken cache is measured again, and a measured duplex factor above 1 is clamped", "[replay][calibrate]") {
    CacheDir cache;
    replay::CalibrationSpec spec;
    const std::string path = replay::calibration_cache_path(spec);
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << "{ not json";
    int measured = 0;
    auto cal = replay::replay_link(spec, false, 3600, [&](const replay::CalibrationSpec&) {
        ++measured;
        return fake(4e9, 4e9, 1.2);   // both directions "faster" than one: noise
    });
    CHECK(measured == 1);
    CHECK(cal.origin.find("does not load") != std::string::npos);
    CHECK(cal.link.duplex_factor == 1.0);
    REQUIRE(cal.link.notes.size() == 1);
    CHECK(cal.link.notes[0].find("duplex factor measured 1.2") != std::string::npos);
    CHECK(sim::link_from_spec(path).duplex_factor == 1.0);   // the cache loads where --link would
}

TEST_CASE("a cached calibration taken at another load is measured again", "[replay][calibrate]") {
    // The rule on hand numbers (the cache applies it with the real load average).
    CHECK(!replay::load_changed(0.8, 1.1, 2));    // within 0.5 on 2 cores
    CHECK(replay::load_changed(9.5, 3.3, 2));     // a 7B run measured so: cached at 9.5, run at 3.3
    CHECK(replay::load_changed(0.5, 1.2, 2));
    CHECK(!replay::load_changed(4.0, 5.5, 8));    // 8 cores: up to 2 apart
    CHECK(replay::load_changed(4.0, 6.5, 8));
    CHECK(!replay::load_changed(-1, 9.0, 2));     // unknown: the age decides
    // The load is stored with the profile and read back.
    CacheDir cache;
    replay::CalibrationSpec spec;
    auto cal = replay::replay_link(spec, false, 3600, [](const replay::CalibrationSpec&) {
        auto c = fake(3e9, 3e9, 0.9);
        c.link.measured_load_average = -1;
        return c;
    });
    CHECK(sim::link_from_spec(cal.cache_path).measured_load_average == -1);
    sim::LinkModel l = cal.link;
    l.measured_load_average = 0.75;
    sim::write_link_profile(cal.cache_path, l);
    CHECK(sim::link_from_spec(cal.cache_path).measured_load_average == 0.75);
}

TEST_CASE("the automatic time scale makes the replay's compute/transfer ratio the modelled link's", "[replay][calibrate]") {
    sim::LinkModel pcie4 = sim::link_from_spec("pcie4");   // 25 GB/s each way
    sim::LinkModel host = fake(5e9, 7.5e9, 0.9).link;      // mean 6.25 GB/s
    std::string why;
    CHECK(replay::auto_time_scale(pcie4, host, &why) == Approx(4.0));
    CHECK(why.find("pcie4") != std::string::npos);
    CHECK(why.find("x4 slower") != std::string::npos);
    // Scaled by it, the replay's link is the modelled link's bandwidth.
    // A host faster than the modelled link: not below 1 (kernels would be shorter than recorded).
    sim::LinkModel fast = fake(100e9, 100e9, 1).link;
    CHECK(replay::auto_time_scale(pcie4, fast, &why) == 1.0);
    CHECK(why.find("not matched") != std::string::npos);
    // Clamped, it says what runs (the H200's line said "kernels and gaps run x0.525 slower ... the
    // share they would on pcie4", neither of which held at x1): 25 / 100 GB/s asks x0.25, kept at
    // x1, so transfers take 0.25 x the share of the step they would on pcie4.
    CHECK(why.find("slower") == std::string::npos);
    CHECK(why.find("the ratio asks x0.25, kept in [1, 1000] at x1, so transfers take 0.25 x the share of the step they would "
                   "on pcie4 (the ratio is not matched: the prediction is for this replay's link at x1)") != std::string::npos);
}

TEST_CASE("a paced replay's automatic time scale is at least the floor, its link slowed to keep the ratio", "[replay][calibrate]") {
    sim::LinkModel pcie4 = sim::link_from_spec("pcie4");   // 25 GB/s each way
    sim::LinkModel host = fake(5e9, 7.5e9, 0.9).link;      // mean 6.25 GB/s: x4
    host.by_chunk = {{2 << 20, 5e9, 7.5e9, 4e9, 6e9}};
    std::string why;
    double scale = replay::auto_time_scale(pcie4, host, &why);
    REQUIRE(scale == Approx(4.0));
    scale = replay::floor_paced_time_scale(scale, host, &why);
    CHECK(scale == replay::kMinPacedTimeScale);
    CHECK(host.h2d.bandwidth_Bps == Approx(5e9 * 4 / replay::kMinPacedTimeScale));
    CHECK(host.d2h.bandwidth_Bps == Approx(7.5e9 * 4 / replay::kMinPacedTimeScale));
    CHECK(host.by_chunk.at(0).both_d2h_Bps == Approx(6e9 * 4 / replay::kMinPacedTimeScale));
    // The slowed link at the floor moves what pcie4 moves: the modelled ratio is kept.
    CHECK(replay::auto_time_scale(pcie4, host) == Approx(replay::kMinPacedTimeScale));
    CHECK(why.find("raised to x17") != std::string::npos);
    // At or above the floor nothing changes.
    sim::LinkModel slow = fake(1e9, 1e9, 1).link;
    std::string why2;
    CHECK(replay::floor_paced_time_scale(replay::auto_time_scale(pcie4, slow), slow, &why2) == Approx(25.0));
    CHECK(slow.h2d.bandwidth_Bps == 1e9);
    CHECK(why2.empty());
}

#include "mhc/replay/validate.hpp"

TEST_CASE("a verdict is a validation only when the error and the spread of repeats are within the target",
          "[replay][verdict]") {
    replay::Load idle;
    idle.cores = 2;
    idle.before = 0.3;
    idle.others_share = 0.05;
    replay::Row r;
    r.makespans = {100, 102, 101};
    r.loss_error_pp = -3.2;
    r.spread_pp = 2.0;
    CHECK(replay::verdict(r, 5, idle).rfind("validated: error -3.20 pp <= target 5.0 pp (3 replays spread 2.00 pp)", 0) == 0);
    r.loss_error_pp = 5.5;   // beyond the target, within 3 spreads
    CHECK(replay::verdict(r, 5, idle).rfind("not validated: error +5.50 pp > target 5.0 pp", 0) == 0);
    // Replays further apart than the target: no point estimate is a validation, good or bad.
    r.loss_error_pp = 0.4;
    r.spread_pp = 6.1;
    CHECK(replay::verdict(r, 5, idle).rfind("inconclusive: the 3 replays spread 6.10 pp, more than the 5.0 pp target", 0) == 0);
    r.loss_error_pp = 18.0;   // < 3 x 6.1: still within what the noise could make
    CHECK(replay::verdict(r, 5, idle).rfind("inconclusive: ", 0) == 0);
    // An error several times the spread is a miss, whatever the spread: gpt2-small (4 layers,
    // 2 steps, seed 3) at 70% predicted 459.83% and measured 540.43% with a 9-point spread. The
    // verdict names the first kernel that started further from its prediction than the spread.
    r.loss_error_pp = 80.6;
    r.spread_pp = 9.0;
    r.divergence = {true, 81, "ampere_sgemm_128x64_nn", 4'100'000, 5'020'000, 310'000};
    const std::string miss = replay::verdict(r, 5, idle);
    CHECK(miss.rfind("missed: error +80.60 pp, beyond the 5.0 pp target and 9.0 x the 9.00 pp the 3 replays spread", 0) == 0);
    CHECK_THAT(miss, Catch::Contains("diverged first at kernel 81 (ampere_sgemm_128x64_nn): started 4.10 ms predicted, "
                                     "5.02 ms measured (+920.00 us, more than 310.00 us)"));
    r.spread_pp = 2.0;
    r.loss_error_pp = -7.5;   // 3.75 x the spread, below the prediction
    CHECK(replay::verdict(r, 5, idle).rfind("missed: error -7.50 pp", 0) == 0);
    r.divergence = {};
    CHECK_THAT(replay::verdict(r, 5, idle), Catch::Contains("no kernel started further from its predicted time"));
    // One replay: its noise is unknown, and the verdict says so.
    r.loss_error_pp = 0.4;
    r.makespans = {100};
    r.spread_pp = -1;
    CHECK(replay::verdict(r, 5, idle).rfind("within target, unconfirmed", 0) == 0);
    // Failures and OOMs before any number.
    r.measured.status = mhc::trace::RunStatus::Failed;
    r.measured.failure = "checksum";
    CHECK(replay::verdict(r, 5, idle).rfind("FAILED: checksum", 0) == 0);
    r.measured.status = mhc::trace::RunStatus::Oom;
    r.measured.oom = true;
    r.predicted.oom.happened = true;
    CHECK(replay::verdict(r, 5, idle).rfind("agrees: out of memory", 0) == 0);
    // A loaded machine is said in every verdict.
    replay::Load busy = idle;
    busy.others_share = 0.6;
    CHECK(busy.loaded());
    CHECK(!idle.loaded());
    CHECK(replay::verdict(r, 5, busy).find("the machine was loaded (load average") != std::string::npos);
    replay::Load before = idle;
    before.others_share = -1;
    before.before = 1.5;   // above half of the 2 cores before it started
    CHECK(before.loaded());
    // A load average left by work that ended before the run (or made by the run's own threads)
    // is not a loaded machine when the other processes' share was measured.
    replay::Load leftover = idle;
    leftover.before = 1.5;
    leftover.others_share = 0.0;
    CHECK(!leftover.loaded());
}

TEST_CASE("the first divergence is the first kernel, by predicted start, beyond the threshold", "[replay][verdict]") {
    trace::TraceData t;
    t.strings = {"", "gemm", "softmax"};
    for (int64_t id : {1, 2, 3, 4}) {
        trace::Kernel k;
        k.id = id * 10;
        k.name = id % 2 ? 1 : 2;
        k.t_start = id * 100;
        k.t_end = id * 100 + 50;
        t.kernels.push(k);
    }
    t.kernel_index.build(t.kernels.id);
    // Predicted in start order 10, 20, 30, 40 (listed out of order); measured: 10 +5, 20 -30,
    // 30 +40, 40 never ran. Threshold 20: kernel 20 (softmax) is the first beyond it.
    std::vector<trace::RunKernelTime> predicted{{30, 300, 350}, {10, 100, 150}, {40, 400, 450}, {20, 200, 250}};
    std::vector<trace::RunKernelTime> measured{{10, 105, 155}, {20, 170, 220}, {30, 340, 390}};
    auto d = replay::first_divergence(t, predicted, measured, 20);
    REQUIRE(d.found);
    CHECK(d.kernel == 20);
    CHECK(d.name == "softmax");
    CHECK(d.predicted_ns == 200);
    CHECK(d.measured_ns == 170);
    CHECK(d.threshold_ns == 20);
    CHECK(replay::first_divergence(t, predicted, measured, 35).kernel == 30);
    CHECK_FALSE(replay::first_divergence(t, predicted, measured, 40).found);   // differences of at most the threshold
}
