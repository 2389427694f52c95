#pragma once
// The training steps of a parsed Kineto trace (docs/import.md "Steps"), made into ranges of
// KinetoData::ranges with a step number: shared by the Kineto and execution-trace importers.
#include <cstdint>

#include "kineto_parse.hpp"
#include "mhc/trace/import/import.hpp"

namespace mhc::trace::import {

// ProfilerStep#N ranges written with their end only right (torch 2.5 with with_stack=True) begin
// where the one before them ended (kineto_steps.cpp says the rule); said in meta and a warning.
// Called before steps are read from d.ranges; a second call changes nothing.
void mend_profiler_steps(KinetoData& data, Result& result);

// Where no CPU range is a ProfilerStep#N, each process's optimizer-step ranges delimit its steps,
// added as step#k ranges (step 0 from `base`, the trace's first event, or the loop's ranges); else
// the ProfilerStep#N ranges are mended. Meta steps_from says which.
void add_optimizer_steps(KinetoData& data, int64_t base, Result& result);

// Several processes' ranges of one step number (ranks merged into one file) joined into one, from
// the first start to the last end (`skew`: ProcessSteps::skew, said); said in meta kineto.processes.
void merge_process_steps(KinetoData& data, int64_t skew, Result& result);

}  // namespace mhc::trace::import
