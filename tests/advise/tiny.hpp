#pragma once
// Tiny captured steps written by hand: modules, kernels with their module and phase, saved
// tensors, in a real trace file (so the capture tables' reader is exercised too).
#include <cstdint>
#include <string>
#include <vector>

#include "mhc/trace/model.hpp"

namespace advisetest {

inline constexpr int64_t kDur = 10;   // every kernel runs 10 ns, back to back

struct TinyAlloc {
    int64_t bytes;
    mhc::trace::Category category;
    std::string label;
    int made_at = -1;     // made at the start of this kernel; -1: before the trace (t = 0)
    int freed_after = -1; // freed at the end of this kernel; -1: alive at the end
    int32_t device = 0;
};

struct TinyKernel {
    std::string name;
    std::string module;   // "" : outside every module
    mhc::trace::Phase phase;
    std::vector<std::pair<int, char>> acc;   // (allocation index, 'r' | 'w' | 'x' read-write)
    std::vector<int> saves;                  // allocations autograd saved when this op ran
    int step = 0;
    int64_t gap_before = 0;   // idle ns before it (host time): it and what follows move
};

struct TinyTrace {
    std::vector<std::pair<std::string, std::string>> modules;   // (name, type), parents first
    std::vector<TinyAlloc> allocs;
    std::vector<TinyKernel> kernels;
    std::vector<std::pair<std::string, std::string>> meta;

    int alloc(int64_t bytes, mhc::trace::Category c, const std::string& label, int made_at, int freed_after) {
        allocs.push_back({bytes, c, label, made_at, freed_after});
        return static_cast<int>(allocs.size() - 1);
    }
    int kernel(TinyKernel k) {
        kernels.push_back(std::move(k));
        return static_cast<int>(kernels.size() - 1);
    }
    void write(const std::string& path) const;
};

// The two-block model of tests/advise/test_transforms.cpp (its comment works it out).
TinyTrace two_blocks();
// A chain of n blocks, block b saving `saved[b]` bytes (in MiB), for the planner's tests.
TinyTrace chain(const std::vector<int>& saved_mib, bool with_optimizer);
// Blocks of 64 MiB saved each, named `blocks` (numbered or not), that call a module outside
// every block ("Act", as a shared activation instance is) in the middle of their forward.
TinyTrace shared_module_chain(const std::vector<std::string>& blocks);

}  // namespace advisetest
