#pragma once
// A grid of runs (policies x prefetchers x capacities x links) on a thread pool sharing
// one prepared trace, and the smallest capacity each policy needs to stay within a
// throughput-loss budget, found by bisection.
#include <functional>
#include <string>
#include <vector>

#include "mhc/sim/result_fields.hpp"
#include "mhc/sim/simulate.hpp"

namespace mhc::sim {

class TaskSource;

struct SweepSpec {
    Config base;                                  // everything the grid does not vary
    std::vector<std::string> policies{"lru", "belady"};
    std::vector<std::string> prefetchers{"none"};
    std::vector<Capacity> capacities;
    std::vector<LinkModel> links;
    double budget = 0.03;                         // throughput loss
    int jobs = 0;                                 // 0: all cores
    int bisect_steps = 8;                         // capacity resolution 1/2^steps of the peak
    bool bisect = true;
    // When set, workers take their tasks from it (a source shared by the processes of an MPI
    // job, dist/) in place of this process's own counter; the tasks it does not hand out here
    // are left empty.
    TaskSource* tasks = nullptr;
};

// A sweep's tasks: the grid's cells (0..grid-1, in grid order), then one bisection per
// policy x prefetch x link (grid..grid+bisections-1). Workers take them in the order of at():
// the bisections first, since they take the longest.
struct SweepTasks {
    size_t grid = 0, bisections = 0;
    size_t count() const { return grid + bisections; }
    bool is_bisection(size_t task) const { return task >= grid; }
    size_t at(size_t position) const { return position < bisections ? grid + position : position - bisections; }
};
SweepTasks sweep_tasks(const SweepSpec& spec);

// Where a sweep's workers get their next task: a position in SweepTasks::at order, >= count()
// when none is left. Called from the worker threads.
class TaskSource {
public:
    virtual ~TaskSource() = default;
    virtual size_t next() = 0;
};

struct BisectAnswer {
    std::string policy, prefetch, link;
    bool found = false;
    double fraction = 0;      // smallest fraction of the baseline peak within the budget
    Result result;            // the run at that capacity
};
MHC_FIELDS(BisectAnswer, policy, prefetch, link, found, fraction, result)

struct SweepResult {
    std::vector<Result> grid;             // in grid order: policy, prefetch, capacity, link
    std::vector<BisectAnswer> answers;    // one per policy x prefetch x link
    double budget = 0;                    // the loss budget the answers were bisected for
    size_t simulations = 0;               // runs simulated: the grid plus every bisection probe
    double seconds = 0;
};

// The pool under sweep: task(i) for i in [0, n) on `jobs` threads (0: all
// cores), each thread taking the next index; the first exception is rethrown.
void parallel_for_each(size_t n, int jobs, const std::function<void(size_t)>& task);

SweepResult sweep(const Prepared& p, const SweepSpec& spec,
                  const std::function<void(size_t, size_t)>& progress = {});
// The runs a sweep stores, their rows moved out of `result` (a sweep holds every run once, not twice):
// the grid in its order, then each answer with a saving, named "bisect:NAME" with the budget as
// given (`budget_text`) in its configuration. An answer at 100% ("no saving") is the unlimited
// run again: not among them.
std::vector<trace::Run> take_runs(SweepResult& result, const std::string& budget_text);
// The grid and the answers as text within `width` columns (0: no limit; mhc::table_width()): a
// narrower terminal gets the grid's figures in blocks under one another, the runs' names in each.
std::string to_text(const SweepResult& s, int64_t baseline_peak, int width = 0);
// Policies that read the future of the trace (belady, lookahead:K): bounds, not deployable.
bool is_oracle(const std::string& eviction, const std::string& prefetch);

}  // namespace mhc::sim
