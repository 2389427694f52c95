#pragma once
// Coupled multi-rank simulation (docs/simulator.md, "Coupled ranks"): every rank's trace is
// simulated under one configuration, and the ranks are coupled at their cross-rank events
// (NCCL collectives and send/receive pairs, identified as docs/trace-format.md "Multi-rank
// traces" says): a collective ends no earlier than its last participant reaches it, a
// receive no earlier than its send, so that one rank's stalls delay the others.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mhc/sim/simulate.hpp"

namespace mhc::sim {

// One rank of the job: its trace file (loaded by the caller) prepared for simulation.
struct RankTrace {
    std::string path;
    const trace::TraceData* trace = nullptr;
    std::shared_ptr<const Prepared> prepared;
};

enum class CrossRole : uint8_t { Collective, Send, Recv, SendRecv };

// A cross-rank event of one rank: an NCCL kernel, its communicator and its position there.
struct CrossEvent {
    int32_t seq = -1;       // kernel position in the rank's start order
    int32_t row = -1;       // kernel row in the rank's TraceData
    int32_t comm = -1;      // index into JobPlan::comm_names
    int32_t order = -1;     // 0-based position among the rank's kernels on that communicator
    std::string op;         // "AllReduce", "SendRecv", ...
    CrossRole role = CrossRole::Collective;
};

// What a rank's event waits for: another rank's event, and how much earlier than the last
// participant that rank reached it in the recording (its delays up to that are absorbed).
struct CrossWait {
    int32_t rank = -1, event = -1;
    int64_t slack = 0;
};

struct JobPlan {
    std::vector<int> global_rank;               // per input rank (meta "rank", else the position)
    std::vector<int64_t> origin;                // per rank: meta time_origin_ns, else 0
    std::vector<int64_t> t_begin, t_end;        // per rank: recorded span of the simulated device
    std::vector<std::string> comm_names;
    std::vector<std::vector<CrossEvent>> events;              // per rank, in start order
    std::vector<std::vector<int32_t>> gate_of;                // per rank, per seq: event or -1
    std::vector<std::vector<std::vector<CrossWait>>> waits;   // per rank, per event
    size_t cross_events() const;
};

// Identifies the cross-rank events of every rank and matches them per communicator. Throws
// mhc::Error (bad input) with one line naming the file, rank and collective when the ranks'
// collectives do not match (counts, operations, send/receive roles, members), when a
// communicator names a rank that is not given, or when the recorded order deadlocks.
JobPlan plan_job(const std::vector<RankTrace>& ranks);

// A rank's simulation that can stop at its cross-rank events (engine.hpp, Engine::advance).
class RankRunner {
public:
    static constexpr int64_t kNoArrival = INT64_MIN;
    virtual ~RankRunner() = default;
    virtual int32_t advance() = 0;          // -1: ended; g: paused at the end of event g
    virtual void release(int64_t delay) = 0;
    virtual int64_t arrival(int32_t g) const = 0;
    virtual void halt() = 0;
    virtual bool oom() const = 0;
    virtual Result finish() = 0;            // the rank's result (call once, after it ended)
};
std::unique_ptr<RankRunner> make_runner(const Prepared& p, const Config& c, const JobPlan& plan, int rank);

// The coupling delay of rank r's event g: the largest (arrival delay - slack) among what it
// waits for; INT64_MIN when it waits for nothing. arrival(rank, event) gives the delays.
int64_t coupling_delay(const JobPlan& plan, int r, int32_t g,
                       const std::function<int64_t(int32_t, int32_t)>& arrival);

// Drives the runners of `local` ranks (a subset of the job; all of them in one process) to
// their end. Arrivals of other ranks come through `remote`: called when every local rank is
// blocked, it must deliver at least one arrival or halt (set through the callbacks) or
// return false (nothing can come: a deadlock, a logic error). publish(rank, event, delay):
// a local arrival, for the other processes; halted(rank): a local rank ran out of memory.
struct Exchange {
    std::function<void(int32_t, int32_t, int64_t)> publish;
    std::function<void(int32_t)> halted;
    // Blocks for remote news; calls set_arrival(rank, event, delay) / set_halted(rank).
    std::function<bool(const std::function<void(int32_t, int32_t, int64_t)>& set_arrival,
                       const std::function<void(int32_t)>& set_halted)> remote;
};
// What drive() saw besides the results: the times a rank stopped at a cross-rank event, and
// per rank (all of them, local or not) whether it ended before reaching every one of its
// cross-rank events (out of memory, or stopped waiting for a rank that was); a remote rank's
// news may still be on its way when drive() returns (Exchange: the MPI transport drains it).
struct DriveStats {
    int64_t pauses = 0;
    std::vector<uint8_t> halted;
};
// configs: one per rank (the same for all in `mhc simulate --ranks`; answers of docs/results.md
// limit one stage only).
std::vector<Result> drive(const JobPlan& plan, const std::vector<RankTrace>& ranks, const std::vector<Config>& configs,
                          const std::vector<int>& local, const Exchange& x, DriveStats* stats = nullptr);

struct CoupledResult {
    std::vector<Result> ranks;          // input order
    std::vector<int> global_rank;
    std::vector<std::string> paths;
    int64_t job_baseline_makespan = 0, job_simulated_makespan = 0;
    double job_loss = 0;
    int64_t job_peak = 0, job_baseline_peak = 0;
    // input index of the rank with the most own stall time, -1 when none stalls (ties, here and
    // for `last` and `oom`: the lowest global rank)
    int limiting = -1;
    int last = -1;                      // input index of the rank that finishes last
    // input index of the rank out of memory (several: the first on the shared clock), -1 none
    int oom = -1;
    // per rank: 1 when it stopped early waiting (directly or through others) for a rank out of
    // memory; its figures are those of the part it ran
    std::vector<uint8_t> stopped;
    size_t cross_events = 0;            // cross-rank kernels over all ranks (not matched operations)
    int64_t events = 0;                 // recorded events simulated (rows) over all ranks
    int64_t pauses = 0;                 // times a rank stopped at a cross-rank event
    double seconds = 0;
};

// Job-level figures from the per-rank results (any process may compute them); halted: per
// rank, DriveStats::halted (empty: none).
CoupledResult summarize(const JobPlan& plan, const std::vector<RankTrace>& ranks, std::vector<Result> results,
                        const std::vector<uint8_t>& halted = {});
// Every rank in this process.
CoupledResult simulate_coupled(const std::vector<RankTrace>& ranks, const JobPlan& plan, const Config& c);
CoupledResult simulate_coupled(const std::vector<RankTrace>& ranks, const JobPlan& plan, const std::vector<Config>& configs);

std::string to_text(const CoupledResult& r, int width = 0);   // within `width` columns, 0: no limit
std::string to_json(const CoupledResult& r);

}  // namespace mhc::sim
