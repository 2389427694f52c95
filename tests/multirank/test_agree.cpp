// The agreement that ends every process of an MPI job (mhc/dist/process.hpp): run under mpirun
// with 2 or more processes. A process that fails before a parallel phase reaches agree() while
// the others are at enter_parallel(): they learn its failure instead of waiting for it.
#include <cstdio>
#include <cstdlib>

#include "mhc/dist/process.hpp"

namespace mpi = mhc::dist;

#define EXPECT(c)                                                                              \
    do {                                                                                       \
        if (!(c)) {                                                                            \
            std::fprintf(stderr, "FAIL (process %d) %s:%d: %s\n", mpi::rank(), __FILE__, __LINE__, #c); \
            std::exit(1);                                                                      \
        }                                                                                      \
    } while (0)

int main(int argc, char** argv) {
    mpi::init(&argc, &argv);
    const int P = mpi::size(), me = mpi::rank();
    EXPECT(P >= 2);

    // Nobody fails: the phase is entered and left, the end agrees on success.
    mpi::enter_parallel();
    EXPECT(mpi::in_parallel());
    mpi::leave_parallel();
    EXPECT(!mpi::in_parallel());

    // The last process fails before the phase (a file it alone cannot read, say): the
    // others, at enter_parallel(), get its code and line; it gets the same from agree().
    mpi::Outcome got;
    if (me == P - 1) {
        got = mpi::agree({2, "mhc: only the last process failed"});
    } else {
        try {
            mpi::enter_parallel();
            EXPECT(!"enter_parallel() did not learn of the failure");
        } catch (const mpi::AgreedFailure& f) {
            got = f.outcome;
        }
        EXPECT(!mpi::in_parallel());
    }
    EXPECT(got.code == 2);
    EXPECT(got.message == "mhc: only the last process failed");

    // Several end with a non-zero status (process 0 after printing its own line, process 1
    // with a line to print): the lowest-numbered one's status is everyone's.
    mpi::Outcome mine = me == 0 ? mpi::Outcome{3, ""} : me == 1 ? mpi::Outcome{2, "mhc: process 1"} : mpi::Outcome{};
    mpi::Outcome end = mpi::agree(mine);
    EXPECT(end.code == 3);
    EXPECT(end.message.empty());
    // All succeed: 0 everywhere.
    EXPECT(mpi::agree({}).code == 0);
    mpi::finalize();
    if (me == 0) std::printf("ok (%d processes)\n", P);
    return 0;
}
