#pragma once
// Recognising mHC's Sinkhorn kernels in a recorded trace, so that replay can run the real
// kernel (Options::real_sinkhorn) instead of a timed stand-in. A heuristic on the kernel's name
// and the sizes of its operands: traces carry no shapes.
#include <cstdint>
#include <string>
#include <vector>

#include "worker.hpp"

namespace mhc::replay::detail {

struct KernelOperand {
    void* ptr = nullptr;   // where it lives in the replay's device arena
    int64_t bytes = 0;
    bool read = false, write = false;
};

// When `name` contains "sinkhorn" (any case) and the operands fit the kernel's layout
// (forward: the largest read is H, the first write P; backward ("bwd"/"backward"): the
// smallest read G, the largest H, the first read-write dH; each at least tokens x 4 n² bytes),
// fills `job` with on = true. n and iterations come from template arguments "<n, iters>" in
// the name, else mHC's 4 and 20.
void recognise_sinkhorn(const std::string& name, std::vector<KernelOperand> ops, SinkhornJob& job);

}  // namespace mhc::replay::detail
