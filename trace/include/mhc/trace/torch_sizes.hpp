#pragma once
// Sizes of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), stated once
// for the snapshot importer (the block a request got) and the simulator's caching model.
#include <algorithm>
#include <cstdint>

namespace mhc::trace::torch {

inline constexpr int64_t kMinBlock = 512;            // every size is rounded to a multiple of 512
inline constexpr int64_t kSmallSize = 1 << 20;       // requests up to 1 MiB use the small pool
inline constexpr int64_t kSmallBuffer = 2 << 20;     // small pool segments
inline constexpr int64_t kLargeBuffer = 20 << 20;    // requests of 1 - 10 MiB share 20 MiB segments
inline constexpr int64_t kMinLargeAlloc = 10 << 20;
inline constexpr int64_t kRoundLarge = 2 << 20;      // larger segments are rounded to 2 MiB
inline constexpr int kRoundupIntervals = 16;         // roundup_power2_divisions: [1, 2) MiB (and below) ... [32 GiB, ...)

// CUDAAllocatorConfig::roundup_power2_divisions: the interval of `size` (log2(size) - 20, clamped).
inline int roundup_interval(int64_t size) {
    int log = 63 - __builtin_clzll(static_cast<unsigned long long>(std::max<int64_t>(size, 1)));
    return std::clamp(log - 20, 0, kRoundupIntervals - 1);
}

// round_size: what a request of `bytes` becomes, with `divisions` the roundup_power2_divisions
// of its interval (0 or 1: plain rounding to 512 bytes; else roundup_power2_next_division).
inline int64_t round_size(int64_t bytes, int64_t divisions) {
    if (bytes < kMinBlock) return kMinBlock;
    if (divisions > 1 && bytes > kMinBlock * divisions) {
        auto u = static_cast<uint64_t>(bytes);
        if ((u & (u - 1)) == 0) return bytes;
        uint64_t floor2 = uint64_t{1} << (63 - __builtin_clzll(u));
        uint64_t step = floor2 >> (63 - __builtin_clzll(static_cast<unsigned long long>(divisions)));
        if (step == 0) return static_cast<int64_t>(floor2 << 1);
        uint64_t lo = u & ~(step - 1);
        return static_cast<int64_t>(lo == u ? u : lo + step);
    }
    return (bytes + kMinBlock - 1) / kMinBlock * kMinBlock;
}

}  // namespace mhc::trace::torch
