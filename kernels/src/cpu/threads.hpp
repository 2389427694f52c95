#pragma once
// Splits [0, count) into one contiguous range per worker thread (multiples of `align`) and
// runs fn(worker, begin, end) on std::threads, the calling thread taking the first range.
#include <cstdint>
#include <functional>

namespace mhc::kernels::cpu {

int default_threads();  // hardware threads, at least 1
// Number of workers parallel_for will use for `count` items (small inputs stay on one thread).
int workers_for(int64_t count, int threads, int64_t min_per_thread);
void parallel_for(int64_t count, int workers, int64_t align,
                  const std::function<void(int worker, int64_t begin, int64_t end)>& fn);

}  // namespace mhc::kernels::cpu
