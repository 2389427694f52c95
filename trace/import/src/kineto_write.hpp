#pragma once
// Writing the timeline part of a parsed Kineto trace (kernels, copies, markers); shared by
// the Kineto and execution-trace importers.
#include <functional>
#include <string>

#include "kineto_parse.hpp"
#include "mhc/trace/import/import.hpp"
#include "mhc/trace/import/rows.hpp"

namespace mhc::trace::import {

// What the importer did that the file did not say: kept in meta under `key` and warned, in the same words.
inline void said_and_warned(Result& result, const std::string& key, const std::string& said) {
    result.meta[key] = said;
    result.warnings.push_back(said);
}

// Earliest time of anything kept (ns); rows are written relative to it.
int64_t kineto_base(const KinetoData& d);

// Writes kernels (ids 1..), copies and markers. Sorts d.kernels by start time first.
// on_kernel(index into d.kernels, kernel id) is called after each kernel row (for accesses).
// Fills r.meta with the timeline keys.
void write_kineto_timeline(KinetoData& d, int64_t base, Rows& w, Result& r,
                           const std::function<void(size_t, int64_t)>& on_kernel);

}  // namespace mhc::trace::import
