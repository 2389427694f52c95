#pragma once
// What a setting does to a captured step: the transformed step's peak of live bytes, the
// caching allocator's reserved peak, host bytes and the estimated step time.
#include <cstdint>
#include <string>
#include <vector>

#include "mhc/advise/plan.hpp"
#include "mhc/advise/setting.hpp"
#include "mhc/advise/transforms.hpp"
#include "mhc/sim/link.hpp"

namespace mhc::advise {

struct Memory {
    int64_t peak = 0;       // live bytes on the GPU (the simulator's ideal baseline peak)
    int64_t reserved = 0;   // the caching allocator model's reserved peak at unlimited capacity
};
// The peaks of a trace (a transformed one, or a capture): sim::prepare checks it first, then
// the caching model runs with `allocator_conf` over the trace's recorded settings.
Memory measure(const trace::TraceData& t, const std::string& allocator_conf);
// The same under each of `allocator_confs`: the trace prepared once, the caching model once each.
std::vector<Memory> measure(const trace::TraceData& trace_data, const std::vector<std::string>& allocator_confs);

struct Prediction {
    Memory memory;
    int64_t host_peak = 0;   // host bytes the step holds (offloaded copies, optimizer state)
    int64_t step_time = 0;   // ns, every step of the capture; an estimate (roofline + link model)
    int64_t waits = 0;       // of which the compute stream waited for copies
    int64_t h2d_bytes = 0, d2h_bytes = 0;
    int64_t comm = 0;         // the collectives' time on their streams (comm.hpp), an estimate
    int64_t comm_waits = 0;   // of which compute ops waited for
};

class Evaluator {
public:
    Evaluator(const Base& b, sim::LinkModel link, HostModel host = {});
    const Base& base() const { return b_; }
    const sim::LinkModel& link() const { return link_; }

    Plan plan(const Setting& s) const;   // the transforms applied; throws mhc::Error (bad input)
    // Fast: live bytes per window and the step time, without the caching model.
    struct Quick {
        LiveProfile live;
        int64_t step_time = 0;
    };
    Quick quick(const Setting& s) const;
    Prediction predict(const Setting& s) const;
    // The setting under each of `allocator_confs` (its own `allocator` aside): the step transformed,
    // timed and written once, the caching model run once per allocator setting.
    std::vector<Prediction> predict(const Setting& setting, const std::vector<std::string>& allocator_confs) const;
    // The transformed step as a trace (meta advise.setting holds the setting's JSON).
    trace::TraceData trace(const Setting& s) const;

private:
    const Base& b_;
    sim::LinkModel link_;
    HostModel host_;
};

}  // namespace mhc::advise

namespace mhc::advise {
// Writes a transformed step (Evaluator::trace) as a trace file, atomically; an existing `path`
// is refused unless `force`.
void write_trace(const trace::TraceData& t, const std::string& path, bool force);
}  // namespace mhc::advise
