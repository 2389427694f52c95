#pragma once
// `mhc validate`: simulate a trace under each capacity, replay each plan on a backend, and set
// what was predicted beside what was measured. Every pair is stored in the trace file: the
// simulated run, and a replayed run whose base_run is it (written first as "incomplete", so
// an interrupted validation leaves exactly that behind).
#include <functional>
#include <string>
#include <vector>

#include "mhc/trace/runs.hpp"

#include "mhc/replay/replay.hpp"
#include "mhc/replay/retime.hpp"
#include "mhc/sim/config.hpp"
#include "mhc/sim/result.hpp"

namespace mhc::replay {

struct Report;

struct ValidateSpec {
    sim::Config base;                       // policy, prefetch, allocator, link of the machine
    std::vector<sim::Capacity> capacities;  // limited configurations (the baseline is added)
    Options replay;
    bool store = true;
    std::string runs_db;                    // store there instead of the trace (empty: the trace)
    // Called once every replay is done, before anything is stored: a caller prints the
    // results here, so that a store that fails costs no result.
    std::function<void(const Report&)> before_store;
    // Called as the validation goes, one line at a time (no newline): when each replay ends
    // ("mhc: configuration 2/5: replay 1/3 of NAME: makespan ..."), and once a configuration is
    // measured, its lines of the report's table as to_text will print them (the header before
    // the baseline's) and its verdict on the load so far. A
    // validation cut short (a timeout, a signal) has said what it measured; the report at the
    // end is unchanged.
    std::function<void(const std::string&)> progress_line;
    double target_pp = 5;                   // the loss error a configuration must stay within
    std::string link_origin = "given";      // how the link was obtained (printed, in --json)
    std::string time_scale_origin;          // why replay.time_scale is what it is
    // Predict the limited runs on the trace moved onto the baseline replay's clock
    // (retime.hpp), not on the recorded one.
    bool retime = true;
    int repeat = 1;   // replays per configuration (the baseline: 2N - 1); the median makespan's stands for it
    // Stop a configuration's replays early once they agree (repeats_agree): `repeat` (2N - 1)
    // is then the most, not the count.
    bool adaptive_repeat = false;
    double calibration_seconds = 0, calibration_cpu_seconds = 0;   // the caller's measuring the link (a phase)
    // Host backend: the replay's copies emulate base.link (paced to its rates at the replay's
    // chunk size and its duplex factor: kernels::SwapConfig::pace_*), so that the link the
    // prediction uses is the link the replay has. false: copies as fast as the host lets them.
    bool pace = true;
    // The link was measured on this machine by the replay's own engine (--link auto): its
    // latency is the copies' own, honoured without emulation on every backend.
    bool link_measured_here = false;
    // Before the first replay the replays' duration is estimated from the predictions (each
    // configuration's makespan x the time scale x its replays): above this many seconds the
    // validation is refused (0: no limit); above kLongReplaySeconds `warn` is told, in one line.
    double max_replay_seconds = 3600;
    std::function<void(const std::string&)> warn;
    // Replay and measure only the last this many training steps (0: all of them): the steps
    // before run at once to bring each replay to the state its run had (Plan::window_begin).
    int replay_steps = 0;
    // Seconds the validation may take, counted from its start (0: no limit). A replay is not
    // started when its predicted makespan x the time scale, plus the most a replay has cost
    // beyond that so far, would end past it: a configuration's repeats stop there (those done
    // stand for it), and a limited configuration whose first replay would not fit is not run,
    // nor any after it (Report::not_run). The baseline's first replay always runs.
    double time_limit_s = 0;
};

inline constexpr double kLongReplaySeconds = 600;
// A backend that does not emulate the link (cuda, the unpaced host replay) has its copies' own
// per-transfer latency, microseconds; a profile that claims more than this is refused there.
inline constexpr double kMaxNativeLatencyS = 1e-3;
// An error this many times the replays' spread (and beyond the target) is a miss, not noise.
inline constexpr double kMissFactor = 3;

// The link as a trace stretched `scale` times sees it: bandwidths x scale, latencies / scale.
// Replaying at a time scale X and predicting with this link are the same experiment.
sim::LinkModel scaled_link(const sim::LinkModel& link, double scale);
// The link's bandwidths for transfers copied in `chunk`-byte pieces, from a calibrated
// profile's by_chunk rows (interpolated in log size); unchanged without rows.
sim::LinkModel link_at_chunk(const sim::LinkModel& link, int64_t chunk);

// --link auto: the replay machine's link measured under the replay's own conditions (backend,
// chunk size, copy threads, pacing), or taken from the cache when fresh (replay_link); sets
// spec.base.link, spec.link_origin and the seconds the measuring took (a phase of the report).
void measure_replay_link_for(ValidateSpec& spec, bool recalibrate, double max_age_s);
// --time-scale auto: the modelled link's own figures (what mhc simulate --link moves on the
// machine that recorded the trace) against the replay's link at the chunk size its copies move
// (auto_time_scale), floored for a paced host replay (floor_paced_time_scale, which slows
// spec.base.link with it). Sets spec.replay.time_scale and spec.time_scale_origin.
void set_auto_time_scale(ValidateSpec& spec, const sim::LinkModel& modelled);
// Refuses (mhc::Error) a trace with nothing to limit or replay (no allocations), and tells `warn`
// when its timing is order only (kernels replay for their event numbers' nanoseconds).
void check_replayable(const std::string& path, const std::function<void(const std::string&)>& warn);

// How far a configuration's replays are apart: the range of their makespans, without the
// fastest and the slowest when there are 5 or more (a rare hiccup of the host that delays one
// replay by 1-2% is not the spread of the others, which agreed to 0.3% in 7 of 8 baselines).
int64_t makespan_spread(std::vector<int64_t> makespans);

// Where a replay first left its prediction: the first kernel, by predicted start, whose
// measured start differs from the predicted one by more than a threshold (the replays' spread).
struct Divergence {
    bool found = false;
    int64_t kernel = 0;                 // kernel id
    std::string name;
    int64_t predicted_ns = 0, measured_ns = 0, threshold_ns = 0;
};
Divergence first_divergence(const trace::TraceData& t, const std::vector<trace::RunKernelTime>& predicted,
                            const std::vector<trace::RunKernelTime>& measured, int64_t threshold_ns);

// The adaptive repeats' stopping rule. A configuration's replays so far agree when their spread,
// in loss points as the verdict counts it, is within `bound_pp`: the makespans' spread
// (makespan_spread) over the baseline's median makespan, times `loss_factor` (1 for a limited
// configuration, whose baseline part the caller adds as `carried_pp`; 1 + the largest predicted
// loss for the baseline, whose noise every loss carries that many times). Fewer than
// `min_replays` never agree: two replays can agree by chance.
bool repeats_agree(const std::vector<int64_t>& makespans, int64_t baseline_median_ns, double loss_factor, double carried_pp,
                   double bound_pp, size_t min_replays);
// The bounds the adaptive repeats use, as shares of the target: the baseline's part of every
// loss's spread, and a limited configuration's whole spread. Half the target leaves the other
// half to the error; a quarter for the baseline leaves the configurations room of their own.
inline constexpr double kBaselineAgreeShare = 0.25;
inline constexpr double kConfigAgreeShare = 0.5;
inline constexpr size_t kBaselineMinReplays = 3;
inline constexpr size_t kConfigMinReplays = 2;

// What the simulated run predicted for a window that begins at the start of kernel `first_kernel`
// (dense index in `trace`, the trace it simulated; t_begin: the start of the run's span): the
// window's makespan, from that kernel's simulated start to the run's end; the unlimited run's
// (no stall moves it: from the kernel's recorded start to the end of the recorded span); the
// loss between them. What the run had in flight when the window began: transfers and kernels
// that started before and ended after (the replay begins its window with nothing in flight).
struct WindowPrediction {
    bool reached = false;            // the run started that kernel (no OOM before it)
    int64_t start_ns = 0, makespan_ns = 0, baseline_ns = 0;
    int64_t shift_ns = 0;            // how much later than recorded the run began the window
    double loss = 0;
    int64_t transfers_in_flight = 0, kernels_running = 0;
    bool quiescent() const { return reached && transfers_in_flight == 0 && kernels_running == 0; }
};
WindowPrediction predict_window(const trace::TraceData& trace, const sim::Result& run, int32_t first_kernel, int64_t t_begin);

// The real seconds the replays take at least: each configuration's predicted makespan x the
// time scale x its replays (predictions[0] is the baseline, replayed 2N - 1 times with N >= 2
// repeats); page mapping and the host's own overheads come on top.
double estimated_replay_seconds(const std::vector<sim::Result>& predictions, double time_scale, int repeat);
double estimated_replay_seconds(const std::vector<int64_t>& makespans_ns, double time_scale, int repeat);

struct Row {
    std::string name;
    sim::Result predicted;
    Measured measured;
    double measured_loss = 0;       // measured makespan / measured baseline makespan - 1
    double loss_error_pp = 0;       // (measured - predicted) loss, percentage points
    double peak_error = 0;          // (measured - predicted) / predicted peak
    int64_t sim_run = 0, replay_run = 0;
    std::vector<int64_t> makespans;   // of every replay of this configuration (repeats)
    std::vector<double> replay_seconds, map_seconds;   // wall time of each replay and its page mapping
    // How far the repeats are apart, in loss points: makespan_spread / baseline median, plus
    // the baseline's own spread carried into this row's loss; -1 with a single replay.
    double spread_pp = -1;
    Divergence divergence;            // beyond the spread (or the target with one replay)
    // Replayed and measured over a window of the last steps (ValidateSpec::replay_steps): the
    // loss and makespan compared are the window's (peak, traffic and checksums the whole plan's).
    bool windowed = false;
    WindowPrediction window;
    double predicted_loss() const { return windowed ? window.loss : predicted.throughput_loss; }
    int64_t predicted_makespan() const { return windowed ? window.makespan_ns : predicted.simulated_makespan; }
    std::string verdict;              // one line: validated / not validated / inconclusive / ...
    bool repeats_cut = false;         // fewer replays than asked: the next would have ended past --time-limit
    // Stored after every replay (begun first as "incomplete" when storing).
    trace::Run sim_record, replay_record;
};

// CPU load around a validation: the load averages, and the share of all cores that other
// processes used while it ran (/proc/stat busy time minus this process's, over wall x cores).
struct Load {
    double before = -1, after = -1;   // 1-minute load average
    int cores = 0;
    double others_share = -1;         // -1: not measured
    bool loaded() const;              // others used more than a quarter of the cores, or the
                                      // load average before was above half of them
    std::string text() const;
};

struct Report {
    std::string trace;
    Row baseline;
    std::vector<Row> rows;
    sim::LinkModel link;            // the (scaled) link the predictions used
    std::string link_origin;        // how it was obtained
    double time_scale = 1;
    std::string time_scale_origin;  // why this scale (set by the caller: "--time-scale 20", auto: ...)
    bool retimed = false;           // limited runs predicted on the baseline's clock
    bool paced = false;             // the host replay's copies emulated the link (ValidateSpec::pace)
    // This process's peak resident memory over the whole validation, each page counted once (the
    // page pool maps some twice, which ru_maxrss counts twice: detail::ResidentPeak; -1: unknown):
    // a device-independent figure beside the arena's measured peak, which it is not comparable
    // with (it holds the trace, the host arena and the page pool's pages too).
    int64_t process_peak_rss = -1;
    RetimeSummary retime;
    double target_pp = 5;
    int repeat = 1;
    bool adaptive_repeat = false;   // repeat was the most, replays stopped once they agreed
    // The window replayed and measured: from kernel window_kernel (id; -1: the whole trace),
    // and why (the steps asked for, where it begins, or why the whole trace was replayed).
    int64_t window_kernel = -1;
    std::string window_origin;
    Load load;
    double pool_seconds = 0;        // allocating the shared page pool and host arena (once, before the replays)
    double pool_cpu_seconds = 0;    // this process's CPU time meanwhile (all threads)
    // Where the validation's time went, in order: calibration (the caller's), loading and
    // preparing the trace, predicting, the page pool and host arena, the baseline's replays,
    // retiming, the limited configurations' replays (with their predictions and plans). Wall
    // seconds, and this process's CPU seconds (all threads: what a loaded machine does not stretch).
    struct Phase {
        std::string name;
        double seconds = 0, cpu_seconds = 0;
    };
    std::vector<Phase> phases;
    double estimated_seconds = 0;   // the replays' duration estimated before the first (estimated_replay_seconds)
    double time_limit_s = 0;        // ValidateSpec::time_limit_s (0: none)
    std::vector<std::string> not_run;   // configurations not run: they would have ended past it
    std::string store_error;        // set when the runs could not (all) be stored
    bool stored = false;
    bool ok() const;                // no failure, no checksum mismatch
};

Report validate(const std::string& trace_path, const ValidateSpec& spec,
                const std::function<void(const std::string&)>& note = {});
std::string to_text(const Report& r);
// The table's header lines (within 100 columns, as every line of the table).
std::string table_header();
// One configuration's lines of to_text's table (its name, its row of figures, then labelled detail
// lines: a failure, an OOM, swaps, makespan, stalls, the replay's own figures, the transfers' rates);
// each line ends with a newline.
std::string row_text(const Row& row);
// The report as one JSON object (mhc validate --json): per configuration the predicted and
// measured peak, loss, error in points, traffic, checksums, repeats and their spread, the
// verdict; the link used and how it was obtained; the load.
std::string to_json(const Report& r);
// The verdict of a limited configuration against `target_pp` (Row::verdict).
std::string verdict(const Row& row, double target_pp, const Load& load);

// Swap traffic, each way (bytes swapped in, H2D, and out, D2H), is judged as the peak is: a
// replay executes the plan's transfers whole, so one that ran to its end moved exactly the bytes
// the simulator predicted; a difference of more than this many bytes either way fails the
// configuration (docs/validation.md, "What is judged").
inline constexpr int64_t kTrafficToleranceBytes = 0;
// Why a replay's traffic fails against its prediction ("" when within kTrafficToleranceBytes
// both ways, or not judged: a replay or prediction that ran out of memory stopped early).
std::string traffic_mismatch(const sim::Result& predicted, const Measured& measured);

}  // namespace mhc::replay
