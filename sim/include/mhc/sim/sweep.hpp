#pragma once
// A grid of runs (policies x prefetchers x capacities x links) on a thread pool sharing
// one prepared trace, and the smallest capacity each policy needs to stay within a
// throughput-loss budget, found by bisection.
#include <functional>
#include <string>
#include <vector>

#include "mhc/sim/simulate.hpp"

namespace mhc::sim {

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
    // When set, only the tasks (grid cells 0..G-1, then one bisection per policy x prefetch
    // x link) for which it is true run here; the others are left empty (MPI: cli/mpi_job.hpp).
    std::function<bool(size_t)> mine;
    // When set, workers take their tasks from it (a counter shared by the MPI processes) in
    // place of the local next index; a value >= the task count ends the worker.
    std::function<size_t()> claim;
};

struct BisectAnswer {
    std::string policy, prefetch, link;
    bool found = false;
    double fraction = 0;      // smallest fraction of the baseline peak within the budget
    Result result;            // the run at that capacity
};

struct SweepResult {
    std::vector<Result> grid;             // in grid order: policy, prefetch, capacity, link
    std::vector<BisectAnswer> answers;    // one per policy x prefetch x link
    double budget = 0;                    // the loss budget the answers were bisected for
    size_t simulations = 0;               // runs simulated: the grid plus every bisection probe
    double seconds = 0;
};

// Runs `fn(config)` for every config on `jobs` threads (0: hardware concurrency); results
// in input order. `progress(done, total)` is called from worker threads under a lock.
std::vector<Result> run_all(const Prepared& p, const std::vector<Config>& configs, int jobs,
                            const std::function<void(size_t, size_t)>& progress = {});

// The pool under run_all and sweep: task(i) for i in [0, n) on `jobs` threads (0: all
// cores), each thread taking the next index; the first exception is rethrown.
void parallel_for_each(size_t n, int jobs, const std::function<void(size_t)>& task);

SweepResult sweep(const Prepared& p, const SweepSpec& spec,
                  const std::function<void(size_t, size_t)>& progress = {});
std::string to_text(const SweepResult& s, int64_t baseline_peak);
// Policies that read the future of the trace (belady, lookahead:K): bounds, not deployable.
bool is_oracle(const std::string& eviction, const std::string& prefetch);

}  // namespace mhc::sim
