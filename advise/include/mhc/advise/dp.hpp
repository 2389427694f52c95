#pragma once
// The planner's search: a dynamic program over the model's blocks (docs/advise.md "Search").
//
// The separable model. A training step's live bytes are looked at in windows: each block's
// forward and backward ops, and the ops between blocks (embedding, head, loss, optimizer).
// Changing block j (checkpointing it, offloading its saved tensors) changes the peak of its own
// windows, and shifts the live bytes of every window where j is "held" (its forward done, its
// backward not yet) by a constant: df in forward windows, db in backward ones. In block k's
// windows the blocks held are 0..k-1; between blocks, the first m. So with choices c:
//   peak = max over k of  max(wf_k(c_k) + sum_{j<k} df_j(c_j),  wb_k(c_k) + sum_{j<k} db_j(c_j)),
//          and over m of  max(gap_f[m] + sum_{j<m} df_j(c_j),  gap_b[m] + sum_{j<m} db_j(c_j)),
//   time = sum over k of time_k(c_k).
// solve() finds the choices of least time whose peak is at most the capacity: a DP over blocks
// whose state is the pair of held sums, keeping the states no other beats in both sums and time
// (a Pareto set), sums compared in quanta of `quantum` bytes. It is exact for this model up to
// one quantum per sum; brute_force() enumerates every combination (the tests' reference).
#include <cstdint>
#include <vector>

namespace mhc::advise {

struct BlockOption {
    int64_t wf = 0, wb = 0;   // peak of the block's own forward / backward windows (INT64_MIN: none)
    int64_t df = 0, db = 0;   // change of the bytes later windows see while the block is held
    int64_t time = 0;         // ns added to the step
};

struct SeparableModel {
    std::vector<std::vector<BlockOption>> blocks;   // per block, per choice (choice 0: unchanged)
    // Peaks of the windows outside every block while the first m blocks are held, m = 0..n
    // (INT64_MIN: no such window).
    std::vector<int64_t> gap_f, gap_b;
};

struct DpResult {
    bool feasible = false;
    std::vector<int> choice;
    int64_t time = 0;
    int64_t peak = 0;
    int64_t states = 0;   // largest Pareto set kept (for the report)
};

int64_t model_peak(const SeparableModel& m, const std::vector<int>& choice);
int64_t model_time(const SeparableModel& m, const std::vector<int>& choice);
// `allowed[c]`: whether choice c may be used (empty: all).
DpResult solve(const SeparableModel& m, int64_t capacity, const std::vector<uint8_t>& allowed = {},
               int64_t quantum = int64_t(1) << 20);
DpResult brute_force(const SeparableModel& m, int64_t capacity, const std::vector<uint8_t>& allowed = {});

}  // namespace mhc::advise
