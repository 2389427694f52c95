#pragma once
// Bounds every importer keeps on hostile input (docs/import.md, "Limits"). Errors built here
// name the file, as every importer error does.
#include <cstdint>
#include <string>

namespace mhc::trace::import {

// JSON arrays/objects and pickle containers/MARKs nested deeper than this are refused:
// rapidjson's reader recurses once per level (30,000 levels overflowed the stack), and no
// trace format nests more than about ten.
constexpr int kMaxNesting = 1000;

// Sizes and times an importer accepts. One allocation or copy of more than 2^50 bytes
// (1 PiB) is not a real GPU event; times within +-2^62 ns keep every sum and difference of
// two times (and time + duration) inside int64.
constexpr int64_t kMaxBytes = INT64_C(1) << 50;
constexpr int64_t kMaxTime = INT64_C(1) << 62;

// "nested deeper than 1000 levels" (where(file, ...) is added by the caller).
std::string nesting_message();
// "expands past 4 GiB; raise with --max-input-size"
std::string expansion_message(uint64_t limit);
// 4 GiB, 512 MiB, 1000 bytes.
std::string human_bytes(uint64_t n);

}  // namespace mhc::trace::import
