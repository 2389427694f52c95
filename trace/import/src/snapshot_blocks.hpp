#pragma once
// The block each allocation of a PyTorch memory snapshot got (docs/import.md, "Requested and
// block bytes"). A snapshot's alloc/free events carry the size the program requested
// (CUDACachingAllocator.cpp records orig_size / requested_size); the allocator's own
// accounting (torch.cuda.memory_allocated, max_memory_allocated) counts the block, which is
// the request rounded (round_size), or, in the large pool without expandable segments, the
// whole free block it was placed in when the allocator did not split it (should_split: the
// rest was 1 MiB or less, or the request was at least max_split_size). That free block is
// found from the trace itself: it runs from the allocation's address to the next block alive
// then in its segment, or the segment's end.
#include <array>
#include <cstdint>
#include <vector>

#include "mhc/trace/model.hpp"
#include "mhc/trace/torch_sizes.hpp"

namespace mhc::trace::import {

// The recorded allocator settings that decide a block's size.
struct BlockRules {
    bool expandable = false;
    bool expandable_said = false;   // allocator_settings named it (PyTorch >= 2.4)
    int64_t max_split_size = INT64_MAX;
    std::array<int64_t, torch::kRoundupIntervals> divisions{};   // roundup_power2_divisions per interval
    int64_t rounded(int64_t requested) const {
        return torch::round_size(requested, divisions[static_cast<size_t>(torch::roundup_interval(requested))]);
    }
};

struct BlockReport {
    int64_t split = 0;              // large-pool blocks the allocator split: the rounded request
    int64_t whole = 0;              // given whole: the free block it was placed in
    int64_t without_segment = 0;    // in no recorded segment: the rounded request
    int64_t no_room = 0;            // the free room at the address is smaller than the request (inconsistent)
};

// Sets `bytes` of every allocation `infer[i]` (its `requested_bytes` known) to its block, in the
// order of docs/trace-format.md "Events at one instant", with the `segments` of its device
// (rows as written). Allocations not inferred keep their bytes and bound the free room.
BlockReport infer_block_sizes(std::vector<Allocation>& allocs, const std::vector<bool>& infer,
                              const std::vector<Segment>& segments, const BlockRules& rules);

}  // namespace mhc::trace::import
