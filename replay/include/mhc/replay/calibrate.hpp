#pragma once
// The link a replay actually gets (docs/validation.md, "Self-calibration"). `mhc calibrate`
// measures copies on an idle engine without checksums at their best chunk size; a replay
// copies in its own chunk size, checksums every transfer, and its copy threads share the
// cores with the compute stand-ins and the control thread. On a 2-core host that halved the
// rate (3 GB/s measured in replay against a 6 GB/s calibration). measure_replay_link measures
// under the replay's conditions; replay_link caches the result per machine and configuration.
#include <cstddef>
#include <functional>
#include <string>

#include "mhc/replay/replay.hpp"
#include "mhc/sim/link.hpp"

namespace mhc::replay {

// What runs on the cores while the copies are measured.
enum class Competition {
    None,       // the copy threads alone (what `mhc calibrate` measures)
    Sleeping,   // a stand-in worker as replay runs one: touch a few MiB of pages, then wait
                // (sleep, spin the last 150 us), over and over; plus a control thread that
                // sleeps until just before each timed action and spins the rest
    Spinning,   // the same worker spinning its whole duration (a stand-in that never sleeps)
};
const char* to_string(Competition c);

struct CalibrationSpec {
    Backend backend = Backend::Host;
    size_t chunk_bytes = 2 << 20;   // the replay's chunk size
    int copy_threads = 1;           // per direction
    bool verify = true;             // replay checksums every transfer
    Competition competition = Competition::Sleeping;
    // Host backend: the link a paced replay emulates (kernels::SwapConfig::pace_*): both
    // directions at kPaceShare of the slowest both-directions-at-once rate the repeats saw,
    // duplex factor 1, so the host keeps that pace even in its slow moments. Unpaced: the
    // medians, and the duplex factor as measured.
    bool paced = true;
    int repeats = 5;                // each measurement; the median is kept, the range reported
    size_t transfer_bytes = 16 << 20;   // one transfer (chunked by the engine)
    size_t bytes_per_measure = 128 << 20;
};

// The share of the slowest measured rate a paced link runs at. The replay's copies compete
// with stand-ins touching GiBs and with each other more than the calibration's do: at 0.85 up
// to 165 transfers of a llama2-7b replay were late (18 ms, +15 points at 50%); at 0.6 at most
// 1.2 ms and every error within 3.7 points (docs/results.md, "Validate defaults and speed"). The price is a larger
// time scale (x17-35 instead of x11-13), so longer replays.
inline constexpr double kPaceShare = 0.6;

struct LinkCalibration {
    sim::LinkModel link;             // paced: the emulated link; else h2d/d2h medians, duplex both at once / alone; one by_chunk row
    double h2d_lo = 0, h2d_hi = 0, d2h_lo = 0, d2h_hi = 0;   // range over the repeats (one direction)
    double both_lo = 0;              // the slowest direction's rate with both at once, slowest repeat
    int repeats = 0;
    double load_average = -1;        // when measured
    std::string origin;              // how it was obtained, in words
    std::string cache_path;          // where it is cached ("" if not)
};

// Measures now (about a second on the host). Throws mhc::Error when the backend is unusable.
LinkCalibration measure_replay_link(const CalibrationSpec& spec);

// The cache file for `spec` on this machine: mhc::user_cache_dir() ($XDG_CACHE_HOME/mhc, else
// ~/.cache/mhc, else /tmp/mhc-<uid>) / replay-link-<backend>-<host>-<cores>c-<chunk>-<threads>t[-paced].json;
// "" when there is no such folder (the calibration is measured, not cached).
std::string calibration_cache_path(const CalibrationSpec& spec);

// The cached calibration when it exists, loads, is younger than max_age_s and was measured at
// about the current load (load_changed); otherwise (or
// with `recalibrate`) measures with `measure` (default measure_replay_link), writes the cache
// (sim::write_link_profile: clamped, atomic, read back) and returns it. One process measures at
// a time (a lock beside the cache), so parallel validations do not measure each other. A cache
// that does not load is measured again (and says so in `origin`).
LinkCalibration replay_link(const CalibrationSpec& spec, bool recalibrate, double max_age_s,
                            const std::function<LinkCalibration(const CalibrationSpec&)>& measure = {});

// Whether a calibration taken at load average `then` is wrong for `now` on `cores` cores: the
// two differ by more than a quarter of the cores (at least 0.5). Unknown loads (< 0): no.
bool load_changed(double then, double now, int cores);

// The time scale at which the replay's compute/transfer ratio is the modelled link's: the
// modelled link's bandwidth over the measured one (both directions' mean), kept in [1, 1000].
// `why` says so in words.
double auto_time_scale(const sim::LinkModel& modelled, const sim::LinkModel& measured, std::string* why = nullptr);

// The least automatic time scale of a paced host replay. Below it the host's fixed costs per
// action (thread wake-ups, clock reads, page mapping) are a visible share of the stand-ins, and a
// pace near the host's own copy rate leaves it little room: on an idle 2-core VM whose copies ran
// at 10 GB/s (auto x4.4) the validation slices (bench/replay/validate_slices.sh, 2026-12-02) had
// 2 of 7 rows validated, at x10 4 of 7, at x17 with the pace slowed to match all 7 (errors
// +0.1 to +4.2 pp, spreads under 2.8 pp, most rows stopping after 2 replays).
inline constexpr double kMinPacedTimeScale = 17;

// `--time-scale auto` on a paced link: a scale below kMinPacedTimeScale is raised to it and the
// paced link (both directions, every chunk size) slowed by the same factor, so that the replay's
// compute/transfer ratio stays the modelled link's. Returns the scale; `why` gets a sentence
// appended when the link was slowed.
double floor_paced_time_scale(double scale, sim::LinkModel& paced, std::string* why = nullptr);

}  // namespace mhc::replay
