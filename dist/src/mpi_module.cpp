// libmhc_mpi.so: the MPI calls of mhc (mpi_module.hpp), the only code that links MPI. mhc loads
// it when started by an MPI launcher; the simulations' logic stays in mhc (process_mpi.cpp,
// coupled_mpi.cpp, sweep_mpi.cpp).
#include "mpi_module.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <thread>

namespace {

void wait(MPI_Request& req) {
    for (int done = 0;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) return;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
}

int source(int from) { return from < 0 ? MPI_ANY_SOURCE : from; }

void init(int* argc, char*** argv, int* size, int* rank) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
}

void finalize() { MPI_Finalize(); }

void abort_job(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

void send(const void* data, int count, MPI_Datatype type, int to, int tag) {
    MPI_Request req;
    MPI_Isend(data, count, type, to, tag, MPI_COMM_WORLD, &req);
    wait(req);
}

void recv(void* data, int count, MPI_Datatype type, int from, int tag) {
    MPI_Request req;
    MPI_Irecv(data, count, type, source(from), tag, MPI_COMM_WORLD, &req);
    wait(req);
}

void send_i64(const int64_t* data, int count, int to, int tag) { send(data, count, MPI_INT64_T, to, tag); }
void recv_i64(int64_t* data, int count, int from, int tag) { recv(data, count, MPI_INT64_T, from, tag); }
void send_bytes(const char* data, int count, int to, int tag) { send(data, count, MPI_BYTE, to, tag); }
void recv_bytes(char* data, int count, int from, int tag) { recv(data, count, MPI_BYTE, from, tag); }

int64_t allreduce_min_i64(int64_t mine) {
    int64_t out = 0;
    MPI_Request req;
    MPI_Iallreduce(&mine, &out, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD, &req);
    wait(req);
    return out;
}

int64_t reduce_sum_i64(int64_t mine) {
    int64_t out = 0;
    MPI_Request req;
    MPI_Ireduce(&mine, &out, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD, &req);
    wait(req);
    return out;
}

void bcast(void* data, int count, MPI_Datatype type, int root) {
    MPI_Request req;
    MPI_Ibcast(data, count, type, root, MPI_COMM_WORLD, &req);
    wait(req);
}

void bcast_i64(int64_t* data, int count, int root) { bcast(data, count, MPI_INT64_T, root); }
void bcast_bytes(char* data, int count, int root) { bcast(data, count, MPI_CHAR, root); }

void barrier() {
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    wait(req);
}

struct Counter {
    MPI_Win window = MPI_WIN_NULL;
    int64_t* value = nullptr;
};

void* counter_open() {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    auto* shared = new Counter;
    MPI_Win_allocate(rank == 0 ? sizeof(int64_t) : 0, sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &shared->value,
                     &shared->window);
    if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, shared->window);
        *shared->value = 0;
        MPI_Win_unlock(0, shared->window);
    }
    barrier();
    return shared;
}

int64_t counter_next(void* counter) {
    auto* shared = static_cast<Counter*>(counter);
    const int64_t one = 1;
    int64_t taken = 0;
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, shared->window);
    MPI_Fetch_and_op(&one, &taken, MPI_INT64_T, 0, 0, MPI_SUM, shared->window);
    MPI_Win_unlock(0, shared->window);
    return taken;
}

void counter_close(void* counter) {
    auto* shared = static_cast<Counter*>(counter);
    barrier();
    MPI_Win_free(&shared->window);
    delete shared;
}

const MhcMpiModule kModule{kMhcMpiModuleVersion, init, finalize, abort_job, send_i64, recv_i64, send_bytes,
                           recv_bytes, allreduce_min_i64, reduce_sum_i64, bcast_i64, bcast_bytes, barrier,
                           counter_open, counter_next, counter_close};

}  // namespace

extern "C" __attribute__((visibility("default"))) const MhcMpiModule* mhc_mpi_module() { return &kModule; }
