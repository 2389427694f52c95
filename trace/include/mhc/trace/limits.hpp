#pragma once
// The value ranges a trace may hold (docs/trace-format.md, "Value ranges"). They keep every sum
// and difference of times and sizes the toolkit computes inside int64: two times differ by at
// most 2^63 - 2, and all live bytes together stay below 2^62 because all allocations together do.
#include <cstdint>

namespace mhc::trace::limits {

inline constexpr int64_t kMaxAbsTime = int64_t{1} << 62;     // |t| <= 2^62 ns (146 years)
inline constexpr int64_t kMaxBytes = int64_t{1} << 56;       // one allocation or copy <= 64 PiB
inline constexpr int64_t kMaxTotalBytes = int64_t{1} << 62;  // all allocations of a trace together
inline constexpr int64_t kMinDevice = -1;                    // -1: host
inline constexpr int64_t kMaxDevice = INT32_MAX;
// |stream| <= 2^60: CUDA's stream ids and cudaStream_t handles (user-space pointers, below 2^48)
// fit many times over; the caching allocator model numbers its private pools' lanes below -2^61
// (sim/include/mhc/sim/allocator.hpp), which a stream of -2^63 met (mhc simulate: a segfault).
inline constexpr int64_t kMaxAbsStream = int64_t{1} << 60;

}  // namespace mhc::trace::limits
