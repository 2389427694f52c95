#pragma once
// The host optimizer's gradients when a sparse one (nn.Embedding(sparse=True)'s) is accumulated
// over several passes (sparse_grads.cpp).
#include <cstdint>
#include <vector>

#include "mhc/advise/transforms.hpp"

namespace mhc::advise {

// Under gradient accumulation a capture records a sparse gradient as a new pair of allocations
// (indices, values) in each pass: the sparse add concatenates the pass's entries onto the
// gradient accumulated so far (python/mhc_torch/fake_mode.py), and the pair before dies there.
// With the optimizer on the host (python/mhc_torch/optimizers.py) each pass's own entries go
// down instead, and the host adds them to its copy (a concatenation as well): per pass, the device
// holds that pass's entries until its hook copies them, and the host holds the copy so far, the
// pass's copy and the new concatenation at once. `pair` is the step's last pair (the one its
// optimizer reads); host_bytes sizes a device tensor's host copy. Returns false, doing nothing,
// where the step made no pair before it (one pass, or a dense gradient). Else it places every
// pair, adds the copies the host step waits for, and lists in free_at_host the host copy that
// lives until the host step is done.
bool move_accumulated_sparse(const Base& base, Plan& plan, size_t si, const std::vector<int32_t>& pair, Op& host,
                             std::vector<int32_t>& free_at_host, int64_t (*host_bytes)(const Base&, int64_t));

}   // namespace mhc::advise
