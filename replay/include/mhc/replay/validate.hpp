#pragma once
// `mhc validate`: simulate a trace under each capacity, replay each plan on a backend, and set
// what was predicted beside what was measured. Every pair is stored in the trace file: the
// simulated run, and a replayed run whose base_run is it (written first as "incomplete", so
// an interrupted validation leaves exactly that behind).
#include <functional>
#include <string>
#include <vector>

#include "mhc/replay/replay.hpp"
#include "mhc/replay/retime.hpp"
#include "mhc/sim/config.hpp"
#include "mhc/sim/result.hpp"

namespace mhc::replay {

struct ValidateSpec {
    sim::Config base;                       // policy, prefetch, allocator, link of the machine
    std::vector<sim::Capacity> capacities;  // limited configurations (the baseline is added)
    Options replay;
    bool store = true;
    // Predict the limited runs on the trace moved onto the baseline replay's clock
    // (retime.hpp), not on the recorded one.
    bool retime = true;
    int repeat = 1;   // replays per configuration; the median makespan's stands for it
};

// The link as a trace stretched `scale` times sees it: bandwidths x scale, latencies / scale.
// Replaying at a time scale X and predicting with this link are the same experiment.
sim::LinkModel scaled_link(const sim::LinkModel& link, double scale);
// The link's bandwidths for transfers copied in `chunk`-byte pieces, from a calibrated
// profile's by_chunk rows (interpolated in log size); unchanged without rows.
sim::LinkModel link_at_chunk(const sim::LinkModel& link, int64_t chunk);

struct Row {
    std::string name;
    sim::Result predicted;
    Measured measured;
    double measured_loss = 0;       // measured makespan / measured baseline makespan - 1
    double loss_error_pp = 0;       // (measured - predicted) loss, percentage points
    double peak_error = 0;          // (measured - predicted) / predicted peak
    int64_t sim_run = 0, replay_run = 0;
    std::vector<int64_t> makespans;   // of every replay of this configuration (repeats)
};

struct Report {
    std::string trace;
    Row baseline;
    std::vector<Row> rows;
    sim::LinkModel link;            // the (scaled) link the predictions used
    bool retimed = false;           // limited runs predicted on the baseline's clock
    RetimeSummary retime;
    bool ok() const;                // no failure, no checksum mismatch
};

Report validate(const std::string& trace_path, const ValidateSpec& spec,
                const std::function<void(const std::string&)>& note = {});
std::string to_text(const Report& r);

}  // namespace mhc::replay
