#pragma once
// A captured training step as an editable program: the recorded kernels in launch order, the
// allocations placed at kernel boundaries, and what settings add (recomputed kernels, copies
// to and from the host, host work). Settings edit a Plan (transforms.hpp); timing() lays it
// on a clock with a link model, and to_trace() writes it back as a trace the simulator runs.
// docs/simulator.md "Settings" states every rule.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mhc/advise/capture_info.hpp"
#include "mhc/advise/comm.hpp"
#include "mhc/sim/link.hpp"
#include "mhc/trace/columns.hpp"

namespace mhc::advise {

using trace::Phase;

enum class OpKind : uint8_t {
    Kernel,    // a GPU kernel on the compute stream
    CopyH2D,   // a copy on the compute stream (synchronous offload, parameters after a host step)
    CopyD2H,
    HostWork,  // the GPU waits while the host computes (an optimizer step on the host)
    Mark,      // a position without work: a removed kernel, the start and end of the trace
};

struct PlanAccess {
    int32_t alloc = 0;
    trace::AccessMode mode = trace::AccessMode::Read;
};

struct Op {
    OpKind kind = OpKind::Kernel;
    int32_t src = -1;          // the recorded kernel's seq (launch position); -1: made by a setting
    int64_t name = 0;          // string id in Plan::strings
    int64_t duration = 0;      // ns; copies: computed from the link when timed
    int64_t bytes = 0;         // copies: bytes moved
    int64_t gap = 0;           // idle time before it in the recording (host time), kept
    int32_t module = -1, step = -1;
    Phase phase = Phase::Other;
    int32_t anchor = 0;        // the recorded kernel (seq) it belongs to: per-window peaks
    std::vector<PlanAccess> acc;
    std::vector<int32_t> waits;   // async copies (Plan::copies) that must land before it starts
    // The stream it runs on: 0 the compute stream; 1 the all-gathers' (FSDP2's copy-in and
    // all-gather streams), 2 the reductions' (reduce-scatter, all-reduce): a collective starts when
    // it is issued, its stream is free and what it accesses is written, and an op that accesses
    // what it writes waits for it (comm.hpp).
    uint8_t lane = 0;
    int32_t issue_after = -1;   // a lane op: issued when this op ends (-1: when the compute stream reaches it)
};

// A copy on a copy engine, beside the compute stream (streamed offload, gradients to the host).
struct AsyncCopy {
    bool h2d = false;
    int64_t bytes = 0;
    int32_t trigger = -1;      // issued when this op starts (at_start) or ends
    bool at_start = false;
};

// A point of the op sequence: just before an op starts or just after it ends. At one instant
// frees come before allocations (docs/simulator.md, Inputs).
struct Point {
    int32_t op = 0;
    bool at_end = false;
};

struct Alloc {
    int32_t src = -1;          // recorded allocation row, -1: made by a setting
    int64_t bytes = 0;
    int32_t device = 0;        // -1: host memory
    trace::Category category = trace::Category::Workspace;
    int64_t label = 0, stream = 0;
    Point made;                // when it is allocated
    Point freed;               // when it is freed; freed.op == kNoFree: alive at the end
    int64_t made_offset = 0, freed_offset = 0;   // ns from those points (recorded gaps)
    bool removed = false;      // never made (a temporary of a kernel a setting removed)
};

inline constexpr int32_t kNoFree = -1;
// A save a checkpoint hands to the saved-tensor hooks around it, which the capture without the
// checkpoint never made: torch.utils.checkpoint's save of the call's inputs (before its forward;
// unpacked when its recomputation starts) and selective checkpointing's cached outputs under
// respect_saved_tensors_hooks=True (after the op; unpacked where the recomputation replays it).
// The checkpoint transform lists them; an offload around the checkpointed module moves them.
struct HookSave {
    int32_t module = -1, pass = 0;   // the checkpointed module, its pass
    int32_t seq = 0;                 // the op saving it (an input: the call's first op)
    bool output = false;             // packed after `seq` (a cached output), else before it
    int32_t alloc = 0;
    int32_t unpack = -1;             // the op the hook unpacks it before; -1: never (past the early stop)
    Point frame_end;                 // where the checkpoint lets go of what it never unpacked
};

struct Plan {
    std::vector<std::string> strings;   // the trace's strings, then names settings add
    std::vector<Op> ops;                // [0, n): recorded kernels by seq; n: start; n+1: end; then added
    std::vector<Alloc> allocs;          // [0, m): recorded allocations by row; then added
    std::vector<AsyncCopy> copies;
    std::vector<HookSave> hook_saves;   // the checkpoint transform's (offload moves them)
    // Ops added before / after each recorded kernel (by seq), in the order they run.
    std::vector<std::vector<int32_t>> before, after;
    int32_t recorded = 0;               // n

    int32_t begin_op() const { return recorded; }
    int32_t end_op() const { return recorded + 1; }
    // Where added ops sit: the recorded kernel, the side (0 before it, 2 after it), the index.
    std::vector<int32_t> host_seq, host_index;
    std::vector<int8_t> host_side;

    int64_t intern(const std::string& s);
    int32_t add_op(Op op);              // appended to ops, not yet placed
    void insert_before(int32_t seq, int32_t op);   // runs after what was inserted before seq so far
    void insert_after(int32_t seq, int32_t op);
    // `op` right before `placed`: an added op (at its place among those beside the same kernel),
    // or a recorded kernel (as insert_before: after what was inserted before it so far)
    void insert_before_op(int32_t placed, int32_t op);
    // A total order of points (before placement is final): comparable keys.
    int64_t key(Point pt) const;
    Point later(Point a, Point b) const { return key(a) >= key(b) ? a : b; }
    int32_t add_alloc(Alloc a);
    void remove_op(int32_t op);         // becomes a Mark: no work, no accesses
};

// The recorded step and what settings look up in it: built once per trace.
struct Base {
    const trace::TraceData* trace = nullptr;
    CaptureInfo info;
    std::vector<int32_t> korder;        // seq -> kernel row
    std::vector<int32_t> module, step;  // per seq
    std::vector<Phase> phase;           // per seq
    int32_t device = 0;                 // the GPU
    // Per allocation row: its accesses as (seq, mode), by seq.
    std::vector<int64_t> acc_begin;
    std::vector<std::pair<int32_t, trace::AccessMode>> acc;
    std::vector<int32_t> creator;       // seq of the kernel that made it (first write), -1
    // The allocations each seq made (creator): made_list[made_begin[s] .. made_begin[s+1]).
    std::vector<int64_t> made_begin;
    std::vector<int32_t> made_list;
    // The seqs of the ops that saved allocation row a for the backward (saved_tensors), by seq:
    // saved_seq[info.saved_begin[a] .. info.saved_begin[a+1]), with how many packs each made.
    std::vector<int32_t> saved_seq, saved_packs;
    // Per saved_seq entry: 1 when the saving node was let go in the forward, its graph dropped
    // (a result used only `.detach()`ed, as peft DoRA's weight norm of lora_B(lora_A(eye))): a
    // storage the node saved (not a parameter, which FSDP2 frees while saved) was freed before
    // its pass's backward began. No backward unpacks such a save; it still counted as a pack.
    std::vector<uint8_t> saved_dropped;
    std::vector<uint8_t> param_cast;    // made by aten::_to_copy of a parameter (autocast's cache)
    std::vector<int32_t> held_seq;      // per allocation row: info.held_until as a seq, -1
    std::vector<std::pair<int32_t, int32_t>> unpack_seq;   // info.unpacks as (allocation row, seq), sorted
    // (allocation row, saving seq) -> the seq its node first unpacked that save before (info.save_unpacks)
    std::map<std::pair<int32_t, int32_t>, int32_t> save_unpack_seq;
    std::vector<int32_t> steps;         // step numbers present
    // Per step (index into steps): last forward seq (autocast ends), first backward seq, first
    // and last optimizer seq; -1 when absent.
    std::vector<int32_t> fwd_last, bwd_first, opt_first, opt_last;
    std::string optimizer_impl;         // "foreach", "fused" or "" (neither seen)
    // The most forward-then-backward passes in one step (2 and more: gradient accumulation over
    // micro-batches).
    int32_t passes = 1;
    // Per seq: its pass, numbered over the whole capture (a forward and the backward after it;
    // a step with gradient accumulation has one per micro-batch; what follows the last backward,
    // the optimizer, is the last pass's). Per pass: its step index, last forward seq and first
    // backward seq (-1: none). Checkpointing and offloading act per pass.
    std::vector<int32_t> pass;
    std::vector<int32_t> pass_step, pass_fwd_last, pass_bwd_first, pass_bwd_last;
    double hbm_bw = 0;                  // B/s of the capture's GPU (roofline of added kernels)
    int64_t launch_overhead = 2000;     // ns
    CommModel comm;                     // the collectives' time (apply_comm_model)
    bool comm_placed = false;
    std::vector<int32_t> comm_chunks;   // ops apply_comm_model added (DDP's buckets)
    Plan plan;                          // the recorded step, unedited

    int32_t step_index(int32_t step) const;   // position in steps, -1
    // Accesses of allocation row a as a range.
    template <class F> void for_acc(int32_t a, F&& f) const {
        for (int64_t j = acc_begin[static_cast<size_t>(a)]; j < acc_begin[static_cast<size_t>(a) + 1]; ++j)
            f(acc[static_cast<size_t>(j)].first, acc[static_cast<size_t>(j)].second);
    }
    template <class F> void for_savers(int32_t a, F&& f) const {
        for (int64_t j = info.saved_begin[static_cast<size_t>(a)]; j < info.saved_begin[static_cast<size_t>(a) + 1]; ++j)
            f(saved_seq[static_cast<size_t>(j)]);
    }
    template <class F> void for_packs(int32_t a, F&& f) const {   // f(seq, packs)
        for (int64_t j = info.saved_begin[static_cast<size_t>(a)]; j < info.saved_begin[static_cast<size_t>(a) + 1]; ++j)
            f(saved_seq[static_cast<size_t>(j)], saved_packs[static_cast<size_t>(j)]);
    }
    template <class F> void for_made(int32_t s, F&& f) const {
        for (int64_t j = made_begin[static_cast<size_t>(s)]; j < made_begin[static_cast<size_t>(s) + 1]; ++j)
            f(made_list[static_cast<size_t>(j)]);
    }
    bool saved(int32_t a) const { return info.saved_begin[static_cast<size_t>(a) + 1] > info.saved_begin[static_cast<size_t>(a)]; }
    // The savers whose node lives into the backward (saved_dropped is 0), and whether there are any.
    template <class F> void for_kept_savers(int32_t alloc, F&& visit) const {
        for (int64_t j = info.saved_begin[static_cast<size_t>(alloc)]; j < info.saved_begin[static_cast<size_t>(alloc) + 1]; ++j)
            if (saved_dropped[static_cast<size_t>(j)] == 0) visit(saved_seq[static_cast<size_t>(j)]);
    }
    bool kept_saved(int32_t alloc) const {
        bool any = false;
        for_kept_savers(alloc, [&](int32_t) { any = true; });
        return any;
    }
    // The last access of allocation row `alloc` by an op of `phase` in step `step`, -1 if none.
    int32_t last_access(int32_t alloc, Phase phase, int32_t step) const {
        return access_in(alloc, phase, this->step, step, true);
    }
    // The same within one pass (an index into pass_step), and the first such access.
    int32_t last_access_in_pass(int32_t alloc, Phase phase, int32_t pass_index) const {
        return access_in(alloc, phase, pass, pass_index, true);
    }
    int32_t first_access_in_pass(int32_t alloc, Phase phase, int32_t pass_index) const {
        return access_in(alloc, phase, pass, pass_index, false);
    }
    // Where the backward of a pass first unpacks saved allocation row `alloc`: before the
    // recorded kernel that ran next (capture.unpacks), else its first backward access; -1 if none.
    int32_t unpack_in_pass(int32_t alloc, int32_t pass_index) const;
    // A copy of saved allocation row `alloc` that a backward node was handed at its unpack (a
    // checkpoint's recomputed tensor, an offloaded tensor brought back) dies when that node
    // returns: where the captured step freed the saved storage (`freed`, the engine releasing the
    // node's saved variables), less the aten::sum and aten::_to_copy kernels the engine runs
    // after the node's apply (validate_outputs: a bias gradient summed to its shape, a gradient
    // cast to its input's dtype), and not before the pass's last backward read of it.
    // Empty when the pass's backward does not read it or `freed` is not an op of the step.
    std::optional<Point> node_return(int32_t alloc, int32_t pass_index, Point freed) const;
    // Whether autocast's cached cast `cast` (param_cast) outlived its pass's backward: the forward's
    // autocast region ended after the backward (SAM's second backward runs inside it), so its cache
    // held the cast to its recorded free, at the backward's end and after the saving node returned.
    // A checkpoint then keeps the forward's cast until then (its recomputation, on the autograd
    // engine's device thread with a cache of its own, casts again); otherwise the region ended with
    // the forward.
    bool cast_kept_past_backward(int32_t cast) const;
    // The last forward seq of a pass inside the forward's autocast region, whose end frees
    // autocast's cached weight casts: the pass's last forward seq, less the gradient seed
    // (aten::ones_like) that `loss.backward()` makes right before the backward, after the region.
    int32_t autocast_end(int32_t pass_index) const;

private:
    // The first (or last) access of allocation row `alloc` by an op of `phase` whose entry in
    // `group` (each op's step or pass) is `wanted`, -1 if none.
    int32_t access_in(int32_t alloc, Phase phase, const std::vector<int32_t>& group, int32_t wanted, bool last) const;
};

// Builds the Base of a captured trace (load_capture_info reads its capture tables).
Base make_base(const trace::TraceData& t);
Base make_base(const trace::TraceData& t, CaptureInfo info);

// The op sequence in execution order and each op's position in it.
struct Order {
    std::vector<int32_t> seq;
    std::vector<int32_t> pos;   // per op, -1 if not placed
};
Order order_of(const Plan& p);

struct Timing {
    std::vector<int64_t> start, end;            // per op (ns)
    std::vector<int64_t> copy_start, copy_end;  // per async copy
    int64_t makespan = 0;                       // first start to last end
    int64_t waits = 0;                          // time ops waited for copies to land
    int64_t d2h_bytes = 0, h2d_bytes = 0;
    int64_t comm = 0;         // time the collectives' streams were busy
    int64_t comm_waits = 0;   // time compute ops waited for collectives
};
// Lays the plan on a clock: ops run one after another on the compute stream (collectives on
// their own, Op::lane), each after its
// recorded gap and after the copies it waits for; copies queue per direction on `link` (one
// shared queue with one copy engine) and take ceil(latency + bytes / bandwidth) ns, the
// bandwidth times the duplex factor when the other direction is busy at the start.
// With `lanes` false every op runs on the compute stream in launch order (the collectives too, for
// their modelled durations): the clock to_trace writes, on which time order is launch order, so
// the written step's live bytes are the launch-order ones (live_profile) that a capture measures.
Timing timing(const Plan& plan, const Order& order, const sim::LinkModel& link, bool lanes = true);

// Live device bytes: the peak, and the peak during the ops anchored at each recorded kernel
// (index seq; slots n and n+1: before the first and after the last kernel).
struct LiveProfile {
    int64_t peak = 0;
    int64_t host_peak = 0;
    std::vector<int64_t> window;
};
LiveProfile live_profile(const Plan& p, const Order& o, int32_t device);

// The plan as a trace: kernels (with their accesses) at the timed positions, allocations
// renumbered in the order they are made, copies, the recorded meta plus `meta`.
trace::TraceData to_trace(const Plan& p, const Order& o, const Timing& tm, const trace::TraceData& recorded,
                          const std::map<std::string, std::string>& meta);

}  // namespace mhc::advise
