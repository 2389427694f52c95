#pragma once
// Helpers of the tests of real public traces and their variants (test_public_*.cpp).
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include <catch2/catch.hpp>

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

// The public file `name` changed by the SQL `change` (public_variant), imported as import_public_path does.
mhc::trace::TraceData import_variant(const TempDir& dir, const std::string& name, const std::string& change,
                                     mhc::trace::import::Result& result);

// Whether the public trace `name`, imported as it is, holds no meta line `key` (a variant's line
// is the variant's own).
bool unsaid(const TempDir& dir, const std::string& name, const std::string& key);

// The message with which importing `in` is refused ("" where it is imported).
std::string import_error(const TempDir& dir, const std::string& in);
// The same for the public file `name` changed by the SQL `change`.
std::string variant_error(const TempDir& dir, const std::string& name, const std::string& change);

// Kernels per step (step -1: in none).
using Steps = std::map<int32_t, int64_t>;
Steps kernels_per_step(const mhc::trace::TraceData& trace);

// Whether every value of a column is `value`.
template <typename Column, typename Value> bool all_are(const Column& column, Value value) {
    return std::all_of(column.begin(), column.end(), [&](const auto& v) { return v == value; });
}

// The kernels' summed durations in ns.
int64_t kernel_time(const mhc::trace::TraceData& trace);

}  // namespace test

// A step's kernels as a failed comparison of Steps prints them.
template <> struct Catch::StringMaker<std::pair<const int32_t, int64_t>> {
    static std::string convert(const std::pair<const int32_t, int64_t>& step) {
        return "step " + std::to_string(step.first) + ": " + std::to_string(step.second);
    }
};
