#pragma once
// MPI (docs/simulator.md, "MPI"): with MHC_WITH_MPI, `mpirun -n P mhc sweep ...` spreads the
// sweep's tasks over the processes and `mpirun -n P mhc simulate --ranks ...` spreads the
// simulated ranks; rank 0 gathers the results, prints and alone writes SQLite. Without MPI
// (or outside mpirun) everything here is the one-process case: size() == 1, is_root().
#include <string>
#include <vector>

#include "mhc/sim/coupled.hpp"
#include "mhc/sim/result.hpp"
#include "mhc/sim/sweep.hpp"

namespace mhc::cli::mpi {

// MPI_Init when this build has MPI and the process was started by mpirun (its environment
// says so); a no-op otherwise. finalize() at exit.
void init(int* argc, char*** argv);
void finalize();
bool enabled();   // built with MPI
int size();       // processes (1 without MPI)
int rank();
inline bool is_root() { return rank() == 0; }

// How every way out of a command ends every process (docs/simulator.md, "MPI"). A process
// that fails outside a parallel phase (where no process waits for another: options, loading,
// planning, printing, storing) reaches the agreement at the end of main() or at the next
// enter_parallel() of the others, whichever they are at: every process learns the failure of
// the lowest-numbered process that failed, rank 0 prints it once, every process exits with its
// code. A process that fails inside a parallel phase prints its own message and ends the job
// (abort_job), since the others may be waiting for it.
struct Outcome {
    int code = 0;
    std::string message;   // the one line to print ("mhc: ..."), empty when printed already
};
// Thrown by enter_parallel() where another process failed before getting there.
struct AgreedFailure {
    Outcome outcome;
};
Outcome agree(const Outcome& mine);   // collective (every process calls it once at its end)
void enter_parallel();                // collective; throws AgreedFailure
void leave_parallel();
bool in_parallel();
[[noreturn]] void abort_job(int code);

// The coupled simulation with the job's ranks spread round-robin over the processes, which
// exchange only the arrival delays at cross-rank events (conservative parallel discrete-event
// simulation). The result is complete on rank 0 (identical to sim::simulate_coupled, wall
// times aside); other processes get their own ranks' results only.
sim::CoupledResult simulate_coupled(const std::vector<sim::RankTrace>& ranks, const sim::JobPlan& plan,
                                    const sim::Config& c);

// The sweep's tasks (the grid's cells, then one bisection per combination) are taken from one
// counter on rank 0 (MPI one-sided fetch-and-add) by whichever process is free, the
// bisections first (the longest). begin_claims() before sim::sweep, with the task count;
// claim() gives this process its next task (>= count: none left); end_claims() after.
void begin_claims(size_t grid, size_t combos);
size_t claim();
void end_claims();
// Sends the results of the tasks this process ran to rank 0, which fills them into `s`.
void gather_sweep(sim::SweepResult& s);

// Every field of a sim::Result, for transport (a static_assert in mpi_job.cpp breaks when a
// field is added to the struct and not here).
std::string pack(const sim::Result& r);
sim::Result unpack(const std::string& bytes);

}  // namespace mhc::cli::mpi
