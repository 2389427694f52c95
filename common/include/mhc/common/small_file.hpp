#pragma once
// The files users write by hand and mhc reads whole (a link profile, an advise setting, mhc-view's
// kernel family rules) are a few KiB. A trace or an image given by mistake, or a sparse file of
// terabytes, was read whole into memory before its first byte was looked at: now it is refused
// by its size.
#include <cstdint>
#include <string>

namespace mhc {

inline constexpr uint64_t kMaxSmallFileBytes = 16ull << 20;

// The bytes of the regular file `path` (the caller has refused what is no regular file): throws
// mhc::Error "PATH: more than 16.00 MiB, larger than a WHAT is (...)" past `limit`, or "PATH:
// cannot read the WHAT: REASON".
std::string read_small_file(const std::string& path, const std::string& what, uint64_t limit = kMaxSmallFileBytes);

}   // namespace mhc
