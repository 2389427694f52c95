#pragma once
// The one interface between mhc and the library that links MPI (libmhc_mpi.so, mpi_module.cpp):
// plain C types only, so that mhc itself needs neither mpi.h nor libmpi. mhc opens the library
// (dlopen) only when it was started by an MPI launcher (process_mpi.cpp, init); a plain `mhc`
// run never loads MPI's libraries.
#include <cstdint>

extern "C" {

// Every call returns once the operation completed, waiting politely (test, then sleep 100 us):
// OpenMPI's blocking calls poll at 100% of a core, which on a machine with fewer free cores than
// processes takes the CPU from the process that is still computing.
struct MhcMpiModule {
    int version;   // kMhcMpiModuleVersion of the build that made the library
    // MPI_Init_thread (funneled), then the world's size and this process's rank
    void (*init)(int* argc, char*** argv, int* size, int* rank);
    void (*finalize)();
    void (*abort_job)(int code);   // MPI_Abort on the world
    // point to point on MPI_COMM_WORLD; from < 0: any source
    void (*send_i64)(const int64_t* data, int count, int to, int tag);
    void (*recv_i64)(int64_t* data, int count, int from, int tag);
    void (*send_bytes)(const char* data, int count, int to, int tag);
    void (*recv_bytes)(char* data, int count, int from, int tag);
    // collectives on MPI_COMM_WORLD
    int64_t (*allreduce_min_i64)(int64_t mine);
    int64_t (*reduce_sum_i64)(int64_t mine);   // the sum on rank 0
    void (*bcast_i64)(int64_t* data, int count, int root);
    void (*bcast_bytes)(char* data, int count, int root);
    void (*barrier)();
    // One int64 counter on rank 0 that every process advances by one-sided fetch-and-add;
    // opening and closing it are collective.
    void* (*counter_open)();
    int64_t (*counter_next)(void* counter);
    void (*counter_close)(void* counter);
};

// The library's one exported function.
const MhcMpiModule* mhc_mpi_module();
}

inline constexpr int kMhcMpiModuleVersion = 1;
