#pragma once
// Small in-memory traces for tests and benchmarks (no file): the trace generator proper
// lives in datasets/. Each returns a TraceData ready for prepare() (indices, CSR built).
#include <cstdint>

#include "mhc/trace/columns.hpp"

namespace mhc::sim::synthetic {

// `tensors` persistent allocations of `bytes` each, alive for the whole trace, and
// `kernels` back-to-back kernels of 1 us on one stream, each reading `per_kernel` tensors
// drawn uniformly (read-only): the setting of Belady's theorem.
trace::TraceData random_reads(uint64_t seed, int tensors, int kernels, int per_kernel,
                              int64_t bytes = 1 << 20);

// A transformer-like training trace: `steps` steps of `layers` forward kernels (each
// allocating an activation) then `layers` backward kernels (reading and freeing them),
// persistent weights, an optimizer kernel per step, and `streams` streams. About
// rows_target rows in all (allocations + kernels + accesses).
trace::TraceData training(uint64_t seed, int64_t rows_target, int layers = 32, int streams = 1);

// Builds indices and the CSR access arrays of a TraceData filled row by row:
// `kernel_of_access` holds the kernel index of each access (accesses.allocation/mode filled).
void finalize(trace::TraceData& t, const std::vector<int32_t>& kernel_of_access);

}  // namespace mhc::sim::synthetic
