#pragma once
// Hand-built traces for the simulator tests, in memory or written to a file.
#include <cstdint>
#include <string>
#include <vector>

#include "mhc/sim/simulate.hpp"
#include "mhc/trace/columns.hpp"

namespace simtest {

inline constexpr int64_t MiB = 1 << 20;
inline constexpr int64_t ms = 1'000'000;

struct Tensor { int64_t bytes, t_alloc, t_free; mhc::trace::Category cat = mhc::trace::Category::Other; };
struct Use { int tensor; char mode; };   // 'r', 'w', 'x' (read-write)
struct K { int64_t start, end; std::vector<Use> uses; int step = -1; int64_t stream = 0; std::string name = "k"; };

mhc::trace::TraceData build(const std::vector<Tensor>& tensors, const std::vector<K>& kernels);
// Writes the same trace to `path` (overwriting) with mhc::trace::Writer.
void write(const std::string& path, const std::vector<Tensor>& tensors, const std::vector<K>& kernels);

// A link where 1 MiB takes exactly 1 ms each way, no latency, no duplex slowdown.
mhc::sim::LinkModel slow_link();
mhc::sim::Config config(const std::string& eviction, int64_t capacity, const std::string& prefetch = "none");

// The allocation ids of the swap-outs of a run, in order.
std::vector<int64_t> swapped_out(const mhc::sim::Result& r);

std::string temp_path(const std::string& name);

// How many kernels of the simulated device the run does not hold at their recorded times (0 for
// an identity run, which must store every kernel, unmoved, at its recorded time).
int64_t kernels_off_recorded_time(const mhc::trace::TraceData& t, const mhc::sim::Result& r);

}  // namespace simtest
