#pragma once
// Helpers of the tests of real public traces and their variants (test_public_*.cpp).
#include <cstdint>
#include <string>

#include "util.hpp"

namespace test {

// `path` imported into `db` in `dir` (a file name; warnings not printed), the trace loaded and
// checked; `result` says what the import said.
mhc::trace::TraceData import_public_path(const TempDir& dir, const std::string& path,
                                         mhc::trace::import::Result& result, const std::string& db = "p.db");
// The same for the public trace `name` (a path under tests/data/public).
mhc::trace::TraceData import_public(const TempDir& dir, const std::string& name, mhc::trace::import::Result& result);

// Whether one of the import's warnings contains `text`.
bool warned(const mhc::trace::import::Result& result, const std::string& text);

// A copy of a public file at `path` changed by the SQL `change` (a variant a test needs).
void public_variant(const std::string& name, const std::string& path, const std::string& change);

// The message with which importing `in` is refused ("" where it is imported).
std::string import_error(const TempDir& dir, const std::string& in);

// The kernels' summed durations in ns.
int64_t kernel_time(const mhc::trace::TraceData& trace);

}  // namespace test
