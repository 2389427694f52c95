#pragma once
// The processes of an MPI job (docs/simulator.md, "MPI"): with MHC_WITH_MPI, `mpirun -n P mhc
// sweep ...` spreads the sweep's tasks over the processes and `mpirun -n P mhc simulate --ranks
// ...` spreads the simulated ranks; rank 0 gathers the results, prints and alone writes SQLite.
// Without MPI (or outside mpirun) everything here is the one-process case: size() == 1,
// is_root().
#include <string>

namespace mhc::dist {

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

}  // namespace mhc::dist
