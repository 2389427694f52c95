// A profile written from a measurement (`mhc calibrate`, the replay's self-calibration) is
// always accepted by the commands that read it: sim::write_link_profile clamps what a noisy
// measurement can produce into the reader's bounds, says so in the file, and reads the file
// back before it takes its name.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "mhc/common/error.hpp"
#include "mhc/sim/config.hpp"
#include "mhc/sim/link.hpp"

using namespace mhc;
namespace fs = std::filesystem;

namespace {

// What calibrate measures on a noisy host: both directions "faster" than one.
sim::LinkModel measured(double duplex) {
    sim::LinkModel l;
    l.name = "host memcpy (test)";
    l.h2d = {6.2e9, 3e-6};
    l.d2h = {5.9e9, 4e-6};
    l.copy_engines = 2;
    l.duplex_factor = duplex;
    l.source = "test";
    l.by_chunk = {{4096, 1.1e9, 1.0e9, 1.2e9, 1.1e9}, {2 << 20, 6.2e9, 5.9e9, 7.0e9, 6.5e9}};
    return l;
}

std::string temp(const std::string& name) {
    fs::path dir = fs::temp_directory_path() / "mhc_link_profile_tests";
    fs::create_directories(dir);
    fs::remove(dir / name);
    return (dir / name).string();
}

// Accepted where it is used: the simulator's reader and the configuration check that simulate
// and validate both run.
void accepted(const std::string& path) {
    sim::Config c;
    c.link = sim::link_from_spec(path);
    REQUIRE_NOTHROW(sim::validate(c));
}

}  // namespace

TEST_CASE("a profile written by calibrate is always accepted by validate and simulate", "[link][profile]") {
    SECTION("a duplex factor measured above 1 is clamped to 1, with a note in the file") {
        std::string p = temp("duplex.json");
        auto notes = sim::write_link_profile(p, measured(1.14));
        REQUIRE(notes.size() == 1);
        CHECK(notes[0].find("duplex factor measured 1.14") != std::string::npos);
        CHECK(notes[0].find("clamped to 1") != std::string::npos);
        accepted(p);
        sim::LinkModel back = sim::link_from_spec(p);
        CHECK(back.duplex_factor == 1.0);
        CHECK(back.notes == notes);
        // Everything else survives the round trip, the both-directions rows included.
        CHECK(back.h2d.bandwidth_Bps == 6.2e9);
        CHECK(back.d2h.latency_s == 4e-6);
        REQUIRE(back.by_chunk.size() == 2);
        CHECK(back.by_chunk[1].bytes == (2 << 20));
        CHECK(back.by_chunk[1].both_d2h_Bps == 6.5e9);
        CHECK(back.source == "test");
    }
    SECTION("a factor in range is written as measured, without notes") {
        std::string p = temp("ok.json");
        CHECK(sim::write_link_profile(p, measured(0.92)).empty());
        CHECK(sim::link_from_spec(p).duplex_factor == 0.92);
        CHECK(sim::link_from_spec(p).notes.empty());
    }
    SECTION("every figure a measurement can get wrong still gives a profile that loads") {
        const double nan = std::numeric_limits<double>::quiet_NaN();
        for (double duplex : {0.0, -1.0, nan, 1e9, 0.01}) {
            sim::LinkModel l = measured(duplex);
            l.h2d.bandwidth_Bps = 1e18;   // a clock too coarse for the transfer
            l.d2h.latency_s = -2e-6;      // a tiny transfer's time minus its bytes at full rate
            l.by_chunk[0].both_h2d_Bps = 1e20;
            std::string p = temp("bad.json");
            auto notes = sim::write_link_profile(p, l);
            CHECK(notes.size() >= 4);
            accepted(p);
            auto back = sim::link_from_spec(p);
            CHECK(back.duplex_factor >= 0.05);
            CHECK(back.duplex_factor <= 1.0);
            CHECK(back.h2d.bandwidth_Bps == sim::kMaxBandwidthBps);
            CHECK(back.d2h.latency_s == 0);
        }
    }
    SECTION("a rate not measured is left out, a row of none too; the reader refuses such a row") {
        sim::LinkModel link = measured(0.92);
        link.by_chunk[0] = {4096, 0, 1.0e9, 0, 0};   // D2H alone measured
        link.by_chunk.push_back({8 << 20, 0, 0, 0, 0});   // nothing measured
        std::string path = temp("unmeasured.json");
        sim::write_link_profile(path, link);
        accepted(path);
        const auto back = sim::link_from_spec(path);
        REQUIRE(back.by_chunk.size() == 2);
        CHECK(back.by_chunk[0].h2d_Bps == 0);
        CHECK(back.by_chunk[0].d2h_Bps == 1.0e9);
        std::ofstream(path) << R"({"name": "x", "h2d": {"bandwidth_Bps": 1e9, "latency_s": 0},
            "d2h": {"bandwidth_Bps": 1e9, "latency_s": 0}, "copy_engines": 2, "duplex_factor": 1,
            "by_chunk": [{"bytes": 4096, "h2d_Bps": 1e9}, {"bytes": 8192, "h2d_Bps": 0, "d2h_Bps": -0.0}]})";
        CHECK_THROWS_WITH(sim::link_from_spec(path), Catch::Contains("field 'by_chunk[1]': no rate measured"));
    }
    SECTION("the reader refuses what the writer never writes (the bounds are the reader's)") {
        std::string p = temp("hand.json");
        std::ofstream(p) << R"({"name": "x", "h2d": {"bandwidth_Bps": 1e9, "latency_s": 0},
            "d2h": {"bandwidth_Bps": 1e9, "latency_s": 0}, "copy_engines": 2, "duplex_factor": 1.14})";
        CHECK_THROWS_WITH(sim::link_from_spec(p), Catch::Contains("duplex_factor") && Catch::Contains("(0, 1]"));
    }
}
