#pragma once
// Writing the timeline part of a parsed Kineto trace (kernels, copies, markers); shared by
// the Kineto and execution-trace importers.
#include <functional>

#include "kineto_parse.hpp"
#include "mhc/trace/import/import.hpp"
#include "mhc/trace/import/rows.hpp"

namespace mhc::trace::import {

// Earliest time of anything kept (ns); rows are written relative to it.
int64_t kineto_base(const KinetoData& d);

// ProfilerStep#N ranges written with their end only right (torch 2.5 with with_stack=True) begin
// where the one before them ended (kineto.cpp says the rule); said in meta and a warning. Called
// before steps are read from d.ranges; a second call changes nothing.
void mend_profiler_steps(KinetoData& data, Result& result);

// Writes kernels (ids 1..), copies and markers. Sorts d.kernels by start time first.
// on_kernel(index into d.kernels, kernel id) is called after each kernel row (for accesses).
// Fills r.meta with the timeline keys.
void write_kineto_timeline(KinetoData& d, int64_t base, Rows& w, Result& r,
                           const std::function<void(size_t, int64_t)>& on_kernel);

}  // namespace mhc::trace::import
