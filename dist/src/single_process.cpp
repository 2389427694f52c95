// A build without MPI: one process, which runs everything itself (process.hpp, run.hpp).
#include <cstdlib>

#include "mhc/dist/process.hpp"
#include "mhc/dist/run.hpp"

namespace mhc::dist {

void init(int*, char***) {}
void finalize() {}
bool enabled() { return false; }
int size() { return 1; }
int rank() { return 0; }
Outcome agree(const Outcome& mine) { return mine; }
void enter_parallel() {}
void leave_parallel() {}
bool in_parallel() { return false; }
void abort_job(int code) { std::_Exit(code); }

sim::CoupledResult simulate_coupled(const std::vector<sim::RankTrace>& ranks, const sim::JobPlan& plan,
                                    const sim::Config& c) {
    return sim::simulate_coupled(ranks, plan, c);
}

sim::SweepResult sweep(const sim::Prepared& p, sim::SweepSpec spec, const std::function<void(size_t, size_t)>& progress) {
    return sim::sweep(p, spec, progress);
}

}  // namespace mhc::dist
