#pragma once
// Simulations spread over the processes of an MPI job (docs/simulator.md, "MPI"); in one
// process (no MPI, or not under mpirun) they are sim::simulate_coupled and sim::sweep.
#include <cstddef>
#include <functional>
#include <vector>

#include "mhc/sim/coupled.hpp"
#include "mhc/sim/sweep.hpp"

namespace mhc::dist {

// The coupled simulation with the job's ranks spread round-robin over the processes, which
// exchange only the arrival delays at cross-rank events (conservative parallel discrete-event
// simulation). The result is complete on rank 0 (identical to sim::simulate_coupled, wall
// times aside); other processes get their own ranks' results only.
sim::CoupledResult simulate_coupled(const std::vector<sim::RankTrace>& ranks, const sim::JobPlan& plan,
                                    const sim::Config& c);

// The sweep's tasks taken from one counter on rank 0 (MPI one-sided fetch-and-add) by whichever
// process is free, one thread each unless spec.jobs says otherwise; every result gathered on
// rank 0, whose SweepResult is complete (other processes' hold their own tasks only).
sim::SweepResult sweep(const sim::Prepared& p, sim::SweepSpec spec,
                       const std::function<void(size_t, size_t)>& progress = {});

}  // namespace mhc::dist
