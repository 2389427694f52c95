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

}  // namespace mhc::trace::limits
