#pragma once
// The training steps of a parsed Kineto trace (docs/import.md "Steps"), made into ranges of
// KinetoData::ranges with a step number: shared by the Kineto and execution-trace importers.
#include <cstdint>
#include <map>
#include <utility>

#include "kineto_parse.hpp"
#include "steps.hpp"
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

// The step of each kernel: the step its launch fell in among its launching process's own ranges.
// A kernel whose launch the file lacks is its GPU lane's process's (the process that launched the
// lane's other kernels): with a correlation id below every call the file holds of that process it
// was launched before recording began (CUPTI and roctracer number calls in order; the GPU ran
// behind and the profiler kept it), so it is in no step of the file; else (its call lost) in that
// process's step its start falls in. Before 2026-12-07 both took the step their start fell in, of
// the joined ranges: the first step of a trace held the tail of the step before it (TraceLens's H100
// Qwen trace: 430 of ProfilerStep#6's kernels launched before recording). Said in meta
// kineto.kernels_launched_before_recording.
class KernelSteps {
public:
    KernelSteps(const KinetoData& data, const ProcessSteps& own, const StepRanges& joined)
        : data_(data), own_(own), joined_(joined) {}
    // `call`: the kernel's launch (KinetoData::launch_of), nullptr where the file has none.
    int32_t of(const KKernel& kernel, const KLaunch* call);
    void say(Result& result) const { before_.say(result, "kineto.kernels_launched_before_recording"); }

private:
    int64_t lane_owner(const KKernel& kernel);   // -1: not known
    const KinetoData& data_;
    const ProcessSteps& own_;
    const StepRanges& joined_;
    bool lanes_learnt_ = false;
    std::map<std::pair<int64_t, int32_t>, int64_t> owner_;   // (pid, device) -> process, or -1
    LaunchedBeforeRecording before_;
};

}  // namespace mhc::trace::import
