// Training steps where a trace marks none of its own: from the optimizer's step annotations.
//
// A PyTorch optimizer's step() runs inside record_function("Optimizer.step#<Class>.step") (PyTorch
// 1.8 on), which every profiler that records user ranges keeps: the snapshot's
// external_annotations, Kineto's user_annotation (cpu_op before about PyTorch 1.10), NVTX under
// emit_nvtx (", op_id = N" and more appended), the execution trace's nodes. A training loop calls
// it once a step, so where the trace has no ProfilerStep#N, step k is taken to end where the k-th
// optimizer step ends and to begin where the one before it ended (step 0 at the trace's start);
// what follows the last optimizer step is in no step. Each reader says in meta `steps_from` where
// its steps came from (docs/import.md, "Steps").
//
// Two refinements (2026-12-05): where the ranges of one name repeat with a period of 2 to 4 (a GAN's
// two Adam optimizers, param groups split over two AdamW: their durations alternate, or they step
// back to back with nothing between), a step is one period of them; where the loop calls
// `Optimizer.zero_grad#<Class>.zero_grad` (or fetches its batch, "enumerate(DataLoader)#...") first
// in every step, step 0 begins that far before the one leading it rather than at the trace's start
// (setup: loading the model, building the data).
//
// (2026-12-05, later) Durations that take turns are not enough where the reader knows what each
// range runs (`NamedSpan::work`: Kineto's ops and runtime calls inside it on its thread, Nsight
// Systems' runtime calls inside it on its thread, the execution trace's nodes below it): where every class of the period runs the same work (the same
// median), the ranges are one optimizer stepping unevenly (a host stall, a sync or a checkpoint every
// other step), a step each, and meta and a warning say so; two optimizers of one class step different
// parameters, so their work differs. Gaps that take turns (stepping back to back) still make a period.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mhc/trace/import/import.hpp"

namespace mhc::trace::import {

// N of a range named "ProfilerStep#N" (followed by nothing or by ", ..." as NVTX appends), none
// for any other name.
std::optional<int32_t> profiler_step_number(std::string_view name);

// Whether a range is an optimizer's step: "Optimizer.step#<Class>.step", with anything after it.
bool is_optimizer_step(std::string_view name);

// Whether a range is an optimizer's zero_grad: "Optimizer.zero_grad#<Class>.zero_grad", anything after.
bool is_optimizer_zero_grad(std::string_view name);

// Whether a range is one a training loop's body runs once a step near its start: an optimizer's
// zero_grad, or the DataLoader's next batch ("enumerate(DataLoader)#<Iter>.__next__").
bool is_loop_range(std::string_view name);

struct NamedSpan {
    std::string name;
    int64_t t_start = 0, t_end = 0;
    // What the range runs: Kineto: the CPU ops, annotations and runtime calls of its thread that
    // begin within it (itself included); Nsight Systems: the runtime calls of its thread that begin
    // within it; an execution trace: its node and the nodes below it. -1: not known (snapshots, an
    // NVTX range without a thread); a snapshot: the bytes its allocations inside it requested
    // (since 2026-12-05, fifth): durations alone then show a period.
    int64_t work = -1;
    // The tensors it reads (an execution trace: the storage ids of its nodes' inputs, sorted, each
    // once); empty: not known. One optimizer steps the same parameters every time, two optimizers
    // of one class each their own, whatever their durations and work (two identical models).
    std::vector<int64_t> inputs;
    // A loop range's thread: the sorted starts of its ops and calls and what each is (Kineto: an
    // op's name id, one value for every runtime call), none where not known. Step 0 then begins no
    // later than the ops before it that repeat, in order, those leading it in a later step: a first
    // iteration slower than the later ones before its zero_grad is not cut.
    const std::vector<int64_t>* thread_starts = nullptr;
    const std::vector<uint32_t>* thread_names = nullptr;
};

struct StepSpan {
    int32_t step = 0;
    int64_t t_start = 0, t_end = 0;
};

struct OptimizerSteps {
    std::vector<StepSpan> steps;      // in time order, numbered from 0
    int64_t nested = 0;               // optimizer-step ranges inside another (a wrapper's): not steps
    std::vector<std::string> names;   // the distinct optimizer-step names, as first seen
    std::string anchor;               // the name whose ranges begin the steps (the most frequent)
    int32_t period = 1;               // the anchor's ranges a step holds (2 to 4 where they repeat so)
    int32_t phase = 0;                // the anchor's range (by index) that begins the first full period
    std::string period_by;            // what showed the period: "durations" or "gaps"
    std::string first_from;           // the loop range (name) step 0 begins at; empty: the trace's start
    // Where the anchor's durations take turns with this period (2 to 4) but every class runs the same
    // work: one optimizer stepping unevenly, read as a step per range (0: not so), and that work.
    int32_t uneven_period = 0;
    int64_t uneven_work = 0;
    std::string work_unit = "ops and calls";   // what NamedSpan::work counts, for meta and warnings
    // Whether the anchor's ranges' tensors were known (NamedSpan::inputs) and so decided the period.
    bool by_inputs = false;
    // Every range's tensors were known (an execution trace's), though none of the periods fitted:
    // too few ranges to tell (2 of each class at least), or tensors that take no turns.
    bool inputs_known = false;
    // Meta `steps_optimizers`: how many optimizers the anchor's ranges were taken to be, and from
    // what (their tensors), or that one was assumed where nothing in the trace tells two optimizers
    // of one class stepping the same work with the same durations from one.
    std::string optimizers_said() const;
    // The words of meta `steps_from`: where the steps came from and how they were cut.
    std::string said() const;
    // A warning where several optimizers step (Shampoo and an EMA's, a GAN's two): the steps are
    // cut at the most frequent one's ranges, every period-th of them where they take turns. Empty
    // otherwise.
    // Also where step 0 begins at the trace's start and lasts over 3 times the median later step
    // (it holds the setup too).
    std::string warning() const;
    std::string turns_warning() const;   // the part on several optimizers or a period
    std::string uneven_warning() const;   // the part on one optimizer stepping unevenly
};

// The steps that the optimizer-step ranges among `ranges` delimit (any order; zero_grad ranges
// place step 0's start, other names are ignored); step 0 begins at `t_first` unless zero_grad
// ranges lead every step. No steps where there is no optimizer-step range.
// `work_unit` names what NamedSpan::work counts ("ops and calls"; a snapshot's "bytes allocated").
// A work of 0 in every class says nothing (fused optimizers allocate nothing): durations decide.
OptimizerSteps optimizer_steps(const std::vector<NamedSpan>& ranges, int64_t t_first,
                               const std::string& work_unit = "ops and calls");

// The step a time falls in (-1 before the first or after the last); steps sorted by start.
int32_t step_at(const std::vector<StepSpan>& steps, int64_t time);

// What the meta line of several processes' steps joined adds (Kineto's kineto.processes, nsys's
// nsys.step_processes): how far apart (`skew`, ns) the ranges of one step begin, and that each
// marker spans them all while a kernel keeps its own process's step.
std::string joined_steps_said(int64_t skew);

// Kernels launched before recording began (docs/import.md, "Steps"), one rule for Kineto and Nsight
// Systems: CUPTI and roctracer number a process's runtime and driver calls in the order they are
// made, and the profiler keeps the GPU activity that runs in its window whenever it was launched, so
// a kernel whose call the file lacks, of a correlation id below every call the file holds of its
// process, was launched before the recording began: in no step. Counted for meta
// `<format>.kernels_launched_before_recording`.
class LaunchedBeforeRecording {
public:
    // Whether a kernel without a call in the file, of id `correlation`, was launched before
    // recording: `first_call` is its process's lowest call id (0 where the file holds no call of
    // it: not known). `step_of_start`: the step its start falls in, said.
    bool take(int64_t correlation, int64_t first_call, int32_t step_of_start);
    void say(Result& result, const std::string& key) const;

private:
    int64_t count_ = 0, lowest_ = 0, highest_ = 0;   // how many, their ids
    std::map<int32_t, int64_t> by_start_;             // the step their start fell in -> how many
};

// The meta value `steps_from` of a trace whose steps are ProfilerStep#N ranges.
inline constexpr const char* kStepsFromProfiler = "ProfilerStep#N ranges (the profiler's step markers)";

}   // namespace mhc::trace::import
