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
    // Under a capacity (measure's `capacity` > 0; 0: none was given, and these say nothing): the
    // caching model run with the capacity as the GPU's limit, PyTorch's free-and-retry on a failed
    // cudaMalloc included (sim::caching_under_limit; docs/advise.md "What fits").
    int64_t capacity = 0;
    bool fits = true;          // no request failed there: the step runs at that capacity
    int64_t reserved_at = 0;   // the reserved peak there (the unlimited one when that is within it)
    int64_t retries = 0;       // requests served only after cached memory was given back
    // What running there costs beyond the run without a limit (RetryCost): full releases (each a
    // device synchronisation), segments given back (cudaFree or unmapped pages, by a release or by
    // garbage collection) and segments made beyond those the step makes without a limit, with
    // their bytes; and the time all that is estimated to take, added to the step's (ns).
    int64_t releases = 0, segments_freed = 0, bytes_freed = 0, segments_remade = 0, bytes_remade = 0;
    int64_t retry_cost = 0;
    // The same for a steady step, the one a user runs thousands of (docs/advise.md "What running at
    // the capacity costs"): the counts of the capture's steps after its first (`steady_steps` of them:
    // a release the first step's layout needs alone is paid once, not every step); with one step (or
    // none marked) the captured step's counts, since the capture cannot tell a first step from a
    // steady one. Either way every segment (or page) given back is made again (segments_remade at
    // least segments_freed, bytes likewise): a steady step ends with the reserved bytes it began with,
    // where the walk without a limit, still growing, maps or cudaMallocs as much in the capture.
    // `steady_cost` is a steady step's cost times the capture's steps (comparable with the step
    // time, which is the capture's); the search ranks by it.
    int64_t steps = 0, steady_steps = 0;
    int64_t steady_releases = 0, steady_segments_freed = 0, steady_bytes_freed = 0, steady_segments_remade = 0,
            steady_bytes_remade = 0;
    int64_t steady_cost = 0;
};

// The time PyTorch's allocator spends when a step runs only by giving cached memory back
// (docs/advise.md "What running at the capacity costs"): per full release a device
// synchronisation, per cudaMalloc or cudaFree (or map or unmap of pages) a call, and per byte
// they cover the driver's work on the pages. Constants, not measurements: the trace holds no
// runtime-API timings.
struct RetryCost {
    int64_t sync_ns = 50'000;       // release_cached_blocks: synchronize_and_free_events, then the frees
    int64_t call_ns = 50'000;       // one cudaMalloc or cudaFree (map or unmap)
    int64_t ns_per_gib = 500'000;   // the pages: 0.5 ms per GiB made or given back
    int64_t of(const Memory& memory) const;         // the whole capture's counts
    int64_t per_step(const Memory& memory) const;   // a steady step's (Memory::steady_*), per step
};
// The peaks of a trace (a transformed one, or a capture): sim::prepare checks it first, then
// the caching model runs with `allocator_conf` over the trace's recorded settings; with a
// `capacity`, also whether it runs under that limit (only when its unlimited reserved peak exceeds
// it: otherwise no cudaMalloc fails and it does).
Memory measure(const trace::TraceData& trace_data, const std::string& allocator_conf, int64_t capacity = 0,
               const RetryCost& cost = {});
// The same under each of `allocator_confs`: the trace prepared once, the caching model once each
// (twice where the capacity is below the unlimited reserved peak).
std::vector<Memory> measure(const trace::TraceData& trace_data, const std::vector<std::string>& allocator_confs,
                            int64_t capacity = 0, const RetryCost& cost = {});
// Whether `memory` fits `capacity`: run under it when measured so (memory.capacity == capacity), else its
// unlimited reserved peak within it.
bool fits(const Memory& memory, int64_t capacity);

struct Prediction {
    Memory memory;
    int64_t host_peak = 0;   // host bytes the step holds (offloaded copies, optimizer state)
    int64_t step_time = 0;   // ns, every step of the capture; an estimate (roofline + link model)
    int64_t waits = 0;       // of which the compute stream waited for copies
    int64_t h2d_bytes = 0, d2h_bytes = 0;
    int64_t comm = 0;         // the collectives' time on their streams (comm.hpp), an estimate
    int64_t comm_waits = 0;   // of which compute ops waited for
};
// The step's time at the capacity: its estimated time and what giving cached memory back there
// costs in steady steps (Memory::steady_cost; 0 without a capacity). The search ranks by it.
inline int64_t time_at_capacity(const Prediction& prediction) {
    return prediction.step_time + prediction.memory.steady_cost;
}
// The same with the capture's own cost (Memory::retry_cost): the steps as captured, the first's included.
inline int64_t time_as_captured(const Prediction& prediction) {
    return prediction.step_time + prediction.memory.retry_cost;
}

class Evaluator {
public:
    Evaluator(const Base& b, sim::LinkModel link, HostModel host = {});
    Evaluator(const Evaluator&) = default;
    Evaluator(Evaluator&&) = default;
    Evaluator& operator=(const Evaluator&) = delete;
    Evaluator& operator=(Evaluator&&) = delete;
    virtual ~Evaluator() = default;
    const Base& base() const { return b_; }
    const sim::LinkModel& link() const { return link_; }

    // The transforms applied; throws mhc::Error (bad input). Everything below starts from it;
    // virtual so that tests/advise can break one setting's step as a faulty transform would.
    virtual Plan plan(const Setting& setting) const;
    // Fast: live bytes per window and the step time, without the caching model.
    struct Quick {
        LiveProfile live;
        int64_t step_time = 0;
    };
    Quick quick(const Setting& s) const;
    // `capacity` > 0: also whether it runs with that limit (Memory::fits).
    Prediction predict(const Setting& setting, int64_t capacity = 0) const;
    // The setting under each of `allocator_confs` (its own `allocator` aside): the step transformed,
    // timed and written once, the caching model run once per allocator setting.
    std::vector<Prediction> predict(const Setting& setting, const std::vector<std::string>& allocator_confs,
                                    int64_t capacity = 0) const;
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
