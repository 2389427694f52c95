// Which host effects slow the replay's copies: checksums (replay verifies every transfer), and
// what runs on the cores beside the copy threads (nothing, stand-ins that sleep out their
// duration as replay's do, stand-ins that spin it). Each row: replay::measure_replay_link, the
// function `mhc validate --link auto` calibrates with, median and range of its repeats.
// Usage: bench_replay_link [repeats=5] [chunk MiB=2]
// Results: docs/validation.md ("Host effects"), with the load average printed here.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "mhc/bench/args.hpp"
#include "mhc/common/units.hpp"
#include "mhc/replay/calibrate.hpp"

using namespace mhc;

namespace {

int run_benchmark(int argc, char** argv) {
    const bench::Args args(argc, argv, "[REPEATS] [CHUNK_MIB]");
    args.at_most(2);
    const int repeats = static_cast<int>(args.count(0, "REPEATS", 5, 1, 1000));
    const size_t chunk = static_cast<size_t>(args.count(1, "CHUNK_MIB", 2, 1, 4096)) << 20;
    double l0[3] = {};
    getloadavg(l0, 3);
    std::printf("load average before: %.2f %.2f %.2f; chunk %s; %d repeats each\n", l0[0], l0[1], l0[2],
                format_bytes(static_cast<int64_t>(chunk)).c_str(), repeats);
    std::printf("| checksums | beside the copies | h2d median (range) | d2h median (range) | both at once / alone |\n");
    std::printf("| --- | --- | --- | --- | --- |\n");
    for (bool verify : {false, true})
        for (auto c : {replay::Competition::None, replay::Competition::Sleeping, replay::Competition::Spinning}) {
            replay::CalibrationSpec s;
            s.chunk_bytes = chunk;
            s.verify = verify;
            s.competition = c;
            s.repeats = repeats;
            replay::LinkCalibration r = replay::measure_replay_link(s);
            std::printf("| %s | %s | %s (%s-%s) | %s (%s-%s) | %.2f |\n", verify ? "on" : "off", replay::to_string(c),
                        format_rate(r.link.h2d.bandwidth_Bps).c_str(), format_rate(r.h2d_lo).c_str(),
                        format_rate(r.h2d_hi).c_str(), format_rate(r.link.d2h.bandwidth_Bps).c_str(),
                        format_rate(r.d2h_lo).c_str(), format_rate(r.d2h_hi).c_str(), r.link.duplex_factor);
            std::fflush(stdout);
        }
    double l1[3] = {};
    getloadavg(l1, 3);
    std::printf("load average after: %.2f %.2f %.2f\n", l1[0], l1[1], l1[2]);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return mhc::bench::guarded("bench_replay_link", [&] { return run_benchmark(argc, argv); });
}
