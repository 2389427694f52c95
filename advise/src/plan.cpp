// The Plan: building it from a capture, ordering, timing, live bytes, back to a trace.
#include "mhc/advise/plan.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <unordered_set>

#include "mhc/common/error.hpp"
#include "mhc/sim/event_order.hpp"
#include "mhc/trace/capture_timing.hpp"

namespace mhc::advise {

int64_t Plan::intern(const std::string& text) {
    for (size_t i = strings.size(); i-- > 0;)
        if (strings[i] == text) return static_cast<int64_t>(i);
    strings.push_back(text);
    return static_cast<int64_t>(strings.size() - 1);
}

int32_t Plan::add_op(Op op) {
    ops.push_back(std::move(op));
    return static_cast<int32_t>(ops.size() - 1);
}

int32_t Plan::add_alloc(Alloc alloc) {
    allocs.push_back(alloc);
    return static_cast<int32_t>(allocs.size() - 1);
}

void Plan::insert_before(int32_t seq, int32_t op) {
    auto& placed = before[static_cast<size_t>(seq)];
    placed.push_back(op);
    if (host_seq.size() < ops.size()) { host_seq.resize(ops.size(), -1); host_index.resize(ops.size(), 0); host_side.resize(ops.size(), 1); }
    host_seq[static_cast<size_t>(op)] = seq;
    host_side[static_cast<size_t>(op)] = 0;
    host_index[static_cast<size_t>(op)] = static_cast<int32_t>(placed.size() - 1);
}

void Plan::insert_after(int32_t seq, int32_t op) {
    auto& placed = after[static_cast<size_t>(seq)];
    placed.push_back(op);
    if (host_seq.size() < ops.size()) { host_seq.resize(ops.size(), -1); host_index.resize(ops.size(), 0); host_side.resize(ops.size(), 1); }
    host_seq[static_cast<size_t>(op)] = seq;
    host_side[static_cast<size_t>(op)] = 2;
    host_index[static_cast<size_t>(op)] = static_cast<int32_t>(placed.size() - 1);
}

void Plan::insert_before_op(int32_t placed, int32_t op) {
    if (placed < recorded) {
        insert_before(placed, op);
        return;
    }
    const int32_t seq = host_seq[static_cast<size_t>(placed)];
    const int8_t side = host_side[static_cast<size_t>(placed)];
    const auto index = static_cast<size_t>(host_index[static_cast<size_t>(placed)]);
    auto& list = side == 0 ? before[static_cast<size_t>(seq)] : after[static_cast<size_t>(seq)];
    list.insert(list.begin() + static_cast<std::ptrdiff_t>(index), op);
    if (host_seq.size() < ops.size()) { host_seq.resize(ops.size(), -1); host_index.resize(ops.size(), 0); host_side.resize(ops.size(), 1); }
    for (size_t i = index; i < list.size(); ++i) {
        host_seq[static_cast<size_t>(list[i])] = seq;
        host_side[static_cast<size_t>(list[i])] = side;
        host_index[static_cast<size_t>(list[i])] = static_cast<int32_t>(i);
    }
}

int64_t Plan::key(Point pt) const {
    if (pt.op == kNoFree) return INT64_MAX;
    int64_t seq, side = 1, index = 0;
    if (pt.op < recorded) {
        seq = pt.op;
    } else if (pt.op == begin_op()) {
        seq = -1;
    } else if (pt.op == end_op()) {
        seq = recorded;
    } else {
        size_t op_index = static_cast<size_t>(pt.op);
        if (op_index >= host_seq.size() || host_seq[op_index] < 0)
            throw Error("advise: an op that was never placed (internal)", Error::Kind::Internal);
        seq = host_seq[op_index];
        side = static_cast<uint8_t>(host_side[op_index]);   // 0, 1 or 2: before, the op itself, after
        index = host_index[op_index];
    }
    return (((seq + 1) * 3 + side) * (int64_t(1) << 24) + index) * 2 + (pt.at_end ? 1 : 0);
}

void Plan::remove_op(int32_t op) {
    Op& removed = ops[static_cast<size_t>(op)];
    removed.kind = OpKind::Mark;
    removed.duration = 0;
    removed.gap = 0;
    removed.acc.clear();
    removed.waits.clear();
}

int32_t Base::step_index(int32_t step) const {
    auto it = std::lower_bound(steps.begin(), steps.end(), step);
    return it != steps.end() && *it == step ? static_cast<int32_t>(it - steps.begin()) : -1;
}

int32_t Base::access_in(int32_t alloc, Phase ph, const std::vector<int32_t>& group, int32_t wanted, bool last) const {
    int32_t found = -1;
    for (int64_t j = acc_begin[static_cast<size_t>(alloc)]; j < acc_begin[static_cast<size_t>(alloc) + 1]; ++j) {
        const int32_t seq = acc[static_cast<size_t>(j)].first;
        if (phase[static_cast<size_t>(seq)] != ph || group[static_cast<size_t>(seq)] != wanted) continue;
        found = seq;
        if (!last) break;
    }
    return found;
}

int32_t Base::unpack_in_pass(int32_t alloc, int32_t pass_index) const {
    int32_t found = first_access_in_pass(alloc, Phase::Backward, pass_index);
    auto it = std::lower_bound(unpack_seq.begin(), unpack_seq.end(), std::make_pair(alloc, INT32_MIN));
    for (; it != unpack_seq.end() && it->first == alloc; ++it) {
        const int32_t seq = it->second;
        if (seq < 0 || phase[static_cast<size_t>(seq)] != Phase::Backward ||
            pass[static_cast<size_t>(seq)] != pass_index)
            continue;
        if (found < 0 || seq < found) found = seq;
    }
    return found;
}

int32_t Base::autocast_end(int32_t pass_index) const {
    const int32_t end = pass_fwd_last[static_cast<size_t>(pass_index)];
    if (end > 0 && pass_bwd_first[static_cast<size_t>(pass_index)] == end + 1 &&
        plan.strings[static_cast<size_t>(plan.ops[static_cast<size_t>(end)].name)] == "aten::ones_like" &&
        phase[static_cast<size_t>(end - 1)] == Phase::Forward)
        return end - 1;
    return end;
}

bool Base::cast_kept_past_backward(int32_t cast) const {
    const int32_t made = creator[static_cast<size_t>(cast)];
    if (!param_cast[static_cast<size_t>(cast)] || made < 0) return false;
    const int32_t in_pass = pass[static_cast<size_t>(made)];
    const int32_t last_bwd = pass_bwd_last[static_cast<size_t>(in_pass)];
    const int32_t last_read = last_access_in_pass(cast, Phase::Backward, in_pass);
    const Point recorded = plan.allocs[static_cast<size_t>(cast)].freed;
    const auto returned = node_return(cast, in_pass, recorded);
    return last_bwd >= 0 && last_read >= 0 && returned && plan.key(recorded) >= plan.key(Point{last_bwd, true}) &&
           plan.key(*returned) > plan.key(Point{last_read, true});
}

std::optional<Point> Base::node_return(int32_t alloc, int32_t pass_index, Point freed) const {
    const int32_t lb = last_access_in_pass(alloc, Phase::Backward, pass_index);
    if (lb < 0 || freed.op == kNoFree || freed.op >= static_cast<int32_t>(plan.ops.size())) return std::nullopt;
    int32_t end = freed.at_end ? freed.op : freed.op - 1;
    auto after_apply = [&](int32_t op) {
        const std::string& name = plan.strings[static_cast<size_t>(plan.ops[static_cast<size_t>(op)].name)];
        return name == "aten::sum" || name == "aten::_to_copy";
    };
    while (end > lb && after_apply(end)) --end;
    if (end < lb) return std::nullopt;
    return Point{end, true};
}

namespace {

int32_t gpu_device(const trace::TraceData& trace_data) {
    int32_t device = INT32_MAX;
    for (int32_t kernel_device : trace_data.kernels.device)
        if (kernel_device >= 0) device = std::min(device, kernel_device);
    if (device == INT32_MAX)
        for (int32_t alloc_device : trace_data.allocations.device)
            if (alloc_device >= 0) device = std::min(device, alloc_device);
    return device == INT32_MAX ? 0 : device;
}

// Each allocation's accesses by seq (counting sort), its maker and whether it is autocast's
// cached copy of a parameter (a cast of a trained parameter to as many bytes or fewer).
void index_accesses(Base& base) {
    const trace::TraceData& trace_data = *base.trace;
    const size_t alloc_count = trace_data.allocations.size(), seq_count = base.korder.size();
    base.acc_begin.assign(alloc_count + 1, 0);
    for (size_t s = 0; s < seq_count; ++s) {
        int32_t kernel = base.korder[s];
        for (int64_t j = trace_data.kernels.access_begin[static_cast<size_t>(kernel)];
             j < trace_data.kernels.access_begin[static_cast<size_t>(kernel) + 1]; ++j)
            ++base.acc_begin[static_cast<size_t>(trace_data.accesses.allocation[static_cast<size_t>(j)]) + 1];
    }
    for (size_t i = 1; i <= alloc_count; ++i) base.acc_begin[i] += base.acc_begin[i - 1];
    base.acc.resize(static_cast<size_t>(base.acc_begin[alloc_count]));
    std::vector<int64_t> cur(base.acc_begin.begin(), base.acc_begin.end() - 1);
    for (size_t s = 0; s < seq_count; ++s) {
        int32_t kernel = base.korder[s];
        for (int64_t j = trace_data.kernels.access_begin[static_cast<size_t>(kernel)];
             j < trace_data.kernels.access_begin[static_cast<size_t>(kernel) + 1]; ++j) {
            size_t alloc = static_cast<size_t>(trace_data.accesses.allocation[static_cast<size_t>(j)]);
            base.acc[static_cast<size_t>(cur[alloc]++)] = {static_cast<int32_t>(s),
                                                           trace_data.accesses.mode[static_cast<size_t>(j)]};
        }
    }
    // The maker: the first access, when it writes and the allocation was made just before it
    // (an output); parameters, inputs and buffers made before any kernel have none.
    base.creator.assign(alloc_count, -1);
    base.param_cast.assign(alloc_count, 0);
    for (size_t a = 0; a < alloc_count; ++a) {
        if (base.acc_begin[a] == base.acc_begin[a + 1]) continue;
        auto [s, mode] = base.acc[static_cast<size_t>(base.acc_begin[a])];
        if (mode != trace::AccessMode::Read &&
            trace_data.allocations.t_alloc[a] ==
                trace_data.kernels.t_start[static_cast<size_t>(base.korder[static_cast<size_t>(s)])])
            base.creator[a] = s;
    }
    base.made_begin.assign(seq_count + 1, 0);
    for (size_t a = 0; a < alloc_count; ++a)
        if (base.creator[a] >= 0) ++base.made_begin[static_cast<size_t>(base.creator[a]) + 1];
    for (size_t s = 1; s <= seq_count; ++s) base.made_begin[s] += base.made_begin[s - 1];
    base.made_list.resize(static_cast<size_t>(base.made_begin[seq_count]));
    {
        std::vector<int64_t> next_made(base.made_begin.begin(), base.made_begin.end() - 1);
        for (size_t a = 0; a < alloc_count; ++a)
            if (base.creator[a] >= 0)
                base.made_list[static_cast<size_t>(next_made[static_cast<size_t>(base.creator[a])]++)] =
                    static_cast<int32_t>(a);
    }
    // Parameters that train: those with a gradient ("<name>.grad"); autocast caches the casts of
    // those only (a frozen weight, such as LoRA's base, is cast anew at each use). A trace
    // without gradients says nothing: all count.
    std::unordered_set<std::string> grads;
    for (size_t a = 0; a < alloc_count; ++a)
        if (trace_data.allocations.category[a] == trace::Category::Grad)
            grads.insert(trace_data.str(trace_data.allocations.label[a]));
    // FSDP2's unsharded parameters ("<name> (unsharded)"; "(unsharded, frozen)" without a gradient)
    // have theirs reduce-scattered into one buffer per group (python/mhc_torch/data_parallel.py).
    const std::string unsharded = " (unsharded)";
    auto trains = [&](int32_t param) {
        const std::string& label = trace_data.str(trace_data.allocations.label[static_cast<size_t>(param)]);
        if (label.size() > unsharded.size() &&
            label.compare(label.size() - unsharded.size(), unsharded.size(), unsharded) == 0)
            return true;
        return grads.empty() || grads.count(label + ".grad") > 0;
    };
    for (size_t a = 0; a < alloc_count; ++a) {
        int32_t creator = base.creator[a];
        if (creator < 0 ||
            trace_data.str(trace_data.kernels.name[static_cast<size_t>(base.korder[static_cast<size_t>(creator)])]) !=
                "aten::_to_copy")
            continue;
        int32_t kernel = base.korder[static_cast<size_t>(creator)];
        for (int64_t j = trace_data.kernels.access_begin[static_cast<size_t>(kernel)];
             j < trace_data.kernels.access_begin[static_cast<size_t>(kernel) + 1]; ++j) {
            int32_t src = trace_data.accesses.allocation[static_cast<size_t>(j)];
            // autocast caches a weight's cast to the lower precision only: an upcast (bf16
            // weights to fp32 for LayerNorm, a larger storage) is not kept for the forward
            if (trace_data.accesses.mode[static_cast<size_t>(j)] == trace::AccessMode::Read &&
                trace_data.allocations.category[static_cast<size_t>(src)] == trace::Category::Param &&
                trace_data.allocations.bytes[a] <= trace_data.allocations.bytes[static_cast<size_t>(src)] &&
                trains(src))
                base.param_cast[a] = 1;
        }
    }
}

// Each seq's pass: a new one at the step's first kernel and at a forward kernel after a
// backward one (a recomputation inside the backward is neither).
void index_passes(Base& base) {
    const size_t seqs = base.korder.size();
    base.pass.assign(seqs, 0);
    int32_t cur = -1;
    Phase last = Phase::Other;
    for (size_t s = 0; s < seqs; ++s) {
        const bool new_step = s == 0 || base.step[s] != base.step[s - 1];
        if (new_step || (base.phase[s] == Phase::Forward && last == Phase::Backward)) {
            ++cur;
            base.pass_step.push_back(base.step_index(base.step[s]));
            base.pass_fwd_last.push_back(-1);
            base.pass_bwd_first.push_back(-1);
            base.pass_bwd_last.push_back(-1);
            last = Phase::Other;
        }
        base.pass[s] = cur;
        const auto at = static_cast<int32_t>(s);
        if (base.phase[s] == Phase::Forward) base.pass_fwd_last[static_cast<size_t>(cur)] = at;
        if (base.phase[s] == Phase::Backward && base.pass_bwd_first[static_cast<size_t>(cur)] < 0)
            base.pass_bwd_first[static_cast<size_t>(cur)] = at;
        if (base.phase[s] == Phase::Backward) base.pass_bwd_last[static_cast<size_t>(cur)] = at;
        if (base.phase[s] == Phase::Forward || base.phase[s] == Phase::Backward) last = base.phase[s];
    }
}

void index_steps(Base& base) {
    const size_t seq_count = base.korder.size();
    for (size_t s = 0; s < seq_count; ++s) base.steps.push_back(base.step[s]);
    std::sort(base.steps.begin(), base.steps.end());
    base.steps.erase(std::unique(base.steps.begin(), base.steps.end()), base.steps.end());
    const size_t ns = base.steps.size();
    base.fwd_last.assign(ns, -1);
    base.bwd_first.assign(ns, -1);
    base.opt_first.assign(ns, -1);
    base.opt_last.assign(ns, -1);
    const trace::TraceData& trace_data = *base.trace;
    bool fused = false, foreach_ = false;
    for (size_t s = 0; s < seq_count; ++s) {
        size_t step_row = static_cast<size_t>(base.step_index(base.step[s]));
        if (base.phase[s] == Phase::Forward) base.fwd_last[step_row] = static_cast<int32_t>(s);
        if (base.phase[s] == Phase::Backward && base.bwd_first[step_row] < 0)
            base.bwd_first[step_row] = static_cast<int32_t>(s);
        if (base.phase[s] == Phase::Optimizer) {
            if (base.opt_first[step_row] < 0) base.opt_first[step_row] = static_cast<int32_t>(s);
            base.opt_last[step_row] = static_cast<int32_t>(s);
            const std::string& name = trace_data.str(trace_data.kernels.name[static_cast<size_t>(base.korder[s])]);
            fused |= name.find("_fused_adam") != std::string::npos;
            foreach_ |= name.find("_foreach_") != std::string::npos;
        }
    }
    base.optimizer_impl = fused ? "fused" : foreach_ ? "foreach" : "";
    // Forward-to-backward transitions per step (a recomputation inside the backward is not one).
    std::vector<int32_t> passes(ns, 0);
    Phase last = Phase::Other;
    for (size_t s = 0; s < seq_count; ++s) {
        if (base.phase[s] == Phase::Recompute) continue;
        if (s > 0 && base.step[s] != base.step[s - 1]) last = Phase::Other;
        if (base.phase[s] == Phase::Backward && last == Phase::Forward)
            ++passes[static_cast<size_t>(base.step_index(base.step[s]))];
        last = base.phase[s];
    }
    for (int32_t count : passes) base.passes = std::max(base.passes, count);
    index_passes(base);
}

// Where a recorded allocation is made and freed among the recorded kernels.
void place_allocations(Base& base, const sim::EventStreams& ev) {
    const trace::TraceData& trace_data = *base.trace;
    Plan& plan = base.plan;
    const int32_t recorded = plan.recorded;
    const int64_t t_last = recorded > 0 ? *std::max_element(ev.kend.begin(), ev.kend.end()) : 0;
    // kernels by end time: the last one ending at or before a free
    std::vector<int32_t> by_end = ev.kend_order;
    for (size_t a = 0; a < trace_data.allocations.size(); ++a) {
        Alloc al;
        al.src = static_cast<int32_t>(a);
        al.bytes = trace_data.allocations.bytes[a];
        al.device = trace_data.allocations.device[a];
        al.category = trace_data.allocations.category[a];
        al.label = trace_data.allocations.label[a];
        al.stream = trace_data.allocations.stream[a];
        const int64_t ta = trace_data.allocations.t_alloc[a], tf = trace_data.allocations.t_free[a];
        auto start_seq = std::lower_bound(ev.kstart.begin(), ev.kstart.end(), ta) - ev.kstart.begin();
        if (start_seq < recorded) {
            al.made = {static_cast<int32_t>(start_seq), false};
            al.made_offset = ta - ev.kstart[static_cast<size_t>(start_seq)];
        } else {
            al.made = {plan.end_op(), false};
            al.made_offset = ta - t_last;
        }
        if (tf == trace::kNoTime) {
            al.freed = {kNoFree, false};
        } else {
            auto ended = std::upper_bound(by_end.begin(), by_end.end(), tf, [&](int64_t free_time, int32_t seq) {
                return free_time < ev.kend[static_cast<size_t>(seq)];
            });
            if (ended == by_end.begin()) {
                al.freed = {recorded > 0 ? 0 : plan.end_op(), false};
                al.freed_offset = tf - (recorded > 0 ? ev.kstart[0] : t_last);
            } else {
                int32_t last_ended = *(ended - 1);
                al.freed = {last_ended, true};
                al.freed_offset = tf - ev.kend[static_cast<size_t>(last_ended)];
            }
        }
        plan.allocs.push_back(al);
    }
}

// Base::saved_dropped: a node holds what it saved until the backward releases it, so a saved
// storage freed before its pass's backward began had lost every node that saved it.
void mark_dropped_saves(Base& base) {
    const size_t rows = base.info.saved_begin.size() == base.plan.allocs.size() + 1 ? base.plan.allocs.size() : 0;
    std::vector<uint8_t> dead(base.korder.size(), 0);
    for (size_t row = 0; row < rows; ++row) {
        const Alloc& alloc = base.plan.allocs[row];
        if (alloc.freed.op == kNoFree || alloc.category == trace::Category::Param) continue;
        base.for_savers(static_cast<int32_t>(row), [&](int32_t seq) {
            if (seq < 0) return;
            const int32_t bwd = base.pass_bwd_first[static_cast<size_t>(base.pass[static_cast<size_t>(seq)])];
            if (bwd >= 0 && base.plan.key(alloc.freed) < base.plan.key(Point{bwd, false})) dead[static_cast<size_t>(seq)] = 1;
        });
    }
    base.saved_dropped.assign(base.saved_seq.size(), 0);
    for (size_t j = 0; j < base.saved_seq.size(); ++j)
        base.saved_dropped[j] = base.saved_seq[j] >= 0 && dead[static_cast<size_t>(base.saved_seq[j])];
}

}  // namespace

Base make_base(const trace::TraceData& trace_data) { return make_base(trace_data, load_capture_info(trace_data)); }

Base make_base(const trace::TraceData& trace_data, CaptureInfo info) {
    Base base;
    base.trace = &trace_data;
    base.info = std::move(info);
    base.device = gpu_device(trace_data);
    sim::EventStreams ev = sim::event_streams(trace_data, base.device);
    base.korder = ev.korder;
    const size_t seq_count = base.korder.size();
    base.module.resize(seq_count);
    base.step.resize(seq_count);
    base.phase.resize(seq_count);
    for (size_t s = 0; s < seq_count; ++s) {
        size_t kernel = static_cast<size_t>(base.korder[s]);
        base.module[s] = base.info.kernel_module[kernel];
        base.phase[s] = base.info.kernel_phase[kernel];
        base.step[s] = trace_data.kernels.step[kernel];
    }
    index_accesses(base);
    index_steps(base);
    {
        std::vector<int32_t> seq_of(trace_data.kernels.size(), -1);
        for (size_t s = 0; s < seq_count; ++s) seq_of[static_cast<size_t>(base.korder[s])] = static_cast<int32_t>(s);
        // by kernel row (the capture's launch order, the same as seq for one stream)
        base.saved_seq.resize(base.info.saved_by.size());
        base.saved_packs = base.info.saved_packs;
        for (size_t i = 0; i < base.info.saved_by.size(); ++i)
            base.saved_seq[i] = seq_of[static_cast<size_t>(base.info.saved_by[i])];
        base.held_seq.assign(trace_data.allocations.size(), -1);
        for (size_t a = 0; a < base.info.held_until.size() && a < base.held_seq.size(); ++a)
            if (base.info.held_until[a] >= 0) base.held_seq[a] = seq_of[static_cast<size_t>(base.info.held_until[a])];
        for (auto [a, k] : base.info.unpacks)
            if (seq_of[static_cast<size_t>(k)] >= 0) base.unpack_seq.emplace_back(a, seq_of[static_cast<size_t>(k)]);
        std::sort(base.unpack_seq.begin(), base.unpack_seq.end());
        const auto& order = base.info.pack_order;
        for (size_t r = 0; r < base.info.save_unpacks.size() && r < order.size(); ++r) {
            const int32_t row = base.info.save_unpacks[r];
            const int32_t saver = seq_of[static_cast<size_t>(order[r].second)];
            const int32_t at = row >= 0 ? seq_of[static_cast<size_t>(row)] : -1;
            if (saver < 0 || at < 0) continue;
            auto [it, fresh] = base.save_unpack_seq.emplace(std::make_pair(order[r].first, saver), at);
            if (!fresh) it->second = std::min(it->second, at);
        }
    }
    // Checked (mhc check says it first): "nan", "-1" or "1e300" were cast to int64 unchecked.
    const trace::CaptureTiming timing = trace::capture_timing(trace_data.meta);
    if (!timing.error.empty())
        throw Error(trace_data.path + ": meta " + timing.error + " (capture the step again with mhc-torch capture)");
    base.hbm_bw = timing.hbm_bw;
    base.launch_overhead = timing.launch_overhead_ns;

    Plan& plan = base.plan;
    plan.strings = trace_data.strings;
    plan.recorded = static_cast<int32_t>(seq_count);
    plan.ops.resize(seq_count + 2);
    plan.before.assign(seq_count, {});
    plan.after.assign(seq_count, {});
    int64_t prev_end = seq_count > 0 ? std::min(ev.kstart[0], trace_data.t_begin()) : 0;
    for (size_t s = 0; s < seq_count; ++s) {
        size_t kernel = static_cast<size_t>(base.korder[s]);
        Op& op = plan.ops[s];
        op.kind = OpKind::Kernel;
        op.src = static_cast<int32_t>(s);
        op.name = trace_data.kernels.name[kernel];
        op.duration = ev.kend[s] - ev.kstart[s];
        op.gap = std::max<int64_t>(0, ev.kstart[s] - prev_end);
        prev_end = std::max(prev_end, ev.kend[s]);
        op.module = base.module[s];
        op.step = base.step[s];
        op.phase = base.phase[s];
        op.anchor = static_cast<int32_t>(s);
        for (int64_t j = trace_data.kernels.access_begin[kernel]; j < trace_data.kernels.access_begin[kernel + 1]; ++j)
            op.acc.push_back({trace_data.accesses.allocation[static_cast<size_t>(j)],
                              trace_data.accesses.mode[static_cast<size_t>(j)]});
    }
    plan.ops[seq_count].kind = plan.ops[seq_count + 1].kind = OpKind::Mark;
    plan.ops[seq_count].anchor = static_cast<int32_t>(seq_count);
    plan.ops[seq_count + 1].anchor = static_cast<int32_t>(seq_count + 1);
    place_allocations(base, ev);
    mark_dropped_saves(base);
    apply_comm_model(base, comm_model(trace_data, base.info, ""));
    return base;
}

Order order_of(const Plan& plan) {
    Order order;
    order.pos.assign(plan.ops.size(), -1);
    auto put = [&](int32_t op) {
        order.pos[static_cast<size_t>(op)] = static_cast<int32_t>(order.seq.size());
        order.seq.push_back(op);
    };
    put(plan.begin_op());
    for (int32_t s = 0; s < plan.recorded; ++s) {
        for (int32_t op : plan.before[static_cast<size_t>(s)]) put(op);
        put(s);
        for (int32_t op : plan.after[static_cast<size_t>(s)]) put(op);
    }
    put(plan.end_op());
    return order;
}

namespace {

struct LinkQueues {
    const sim::LinkModel& link;
    int64_t busy[2] = {INT64_MIN, INT64_MIN};   // [0] H2D, [1] D2H: when each queue is free

    // Start and end of a copy issued at t.
    std::pair<int64_t, int64_t> run(bool h2d, int64_t bytes, int64_t issued) {
        const int queue = link.copy_engines >= 2 ? (h2d ? 0 : 1) : 0;
        const int other = 1 - queue;
        int64_t start = std::max(issued, busy[queue]);
        const sim::Direction& direction = h2d ? link.h2d : link.d2h;
        double bw = direction.bandwidth_Bps;
        if (link.copy_engines >= 2 && busy[other] > start) bw *= link.duplex_factor;
        int64_t dur = std::max<int64_t>(
            1, static_cast<int64_t>(std::ceil((direction.latency_s + static_cast<double>(bytes) / bw) * 1e9)));
        busy[queue] = start + dur;
        return {start, start + dur};
    }
};

}  // namespace

Timing timing(const Plan& plan, const Order& order, const sim::LinkModel& link, bool lanes) {
    Timing tm;
    tm.start.assign(plan.ops.size(), 0);
    tm.end.assign(plan.ops.size(), 0);
    tm.copy_start.assign(plan.copies.size(), -1);
    tm.copy_end.assign(plan.copies.size(), -1);
    // copies issued at each op's start / end
    std::vector<std::vector<int32_t>> at_start(plan.ops.size()), at_end(plan.ops.size());
    for (size_t c = 0; c < plan.copies.size(); ++c)
        (plan.copies[c].at_start ? at_start : at_end)[static_cast<size_t>(plan.copies[c].trigger)].push_back(
            static_cast<int32_t>(c));
    LinkQueues queues{link};
    auto issue = [&](const std::vector<int32_t>& cs, int64_t issued) {
        for (int32_t copy : cs) {
            auto [s, e] = queues.run(plan.copies[static_cast<size_t>(copy)].h2d,
                                     plan.copies[static_cast<size_t>(copy)].bytes, issued);
            tm.copy_start[static_cast<size_t>(copy)] = s;
            tm.copy_end[static_cast<size_t>(copy)] = e;
            (plan.copies[static_cast<size_t>(copy)].h2d ? tm.h2d_bytes
                                                        : tm.d2h_bytes) += plan.copies[static_cast<size_t>(copy)].bytes;
        }
    };
    int64_t now = 0;
    bool first = true;
    int64_t t0 = 0, last_end = 0;
    // The collectives' streams (Op::lane): when each is free, and when each allocation's last
    // write on one of them ends (an op that accesses it waits for that).
    int64_t lane_free[3] = {INT64_MIN, INT64_MIN, INT64_MIN};
    std::vector<int64_t> written(plan.allocs.size(), INT64_MIN);
    for (int32_t op : order.seq) {
        const Op& cur = plan.ops[static_cast<size_t>(op)];
        if (lanes && cur.lane != 0 && cur.kind == OpKind::Kernel) {
            int64_t start = cur.issue_after >= 0 ? tm.end[static_cast<size_t>(cur.issue_after)] : now + cur.gap;
            start = std::max(start, lane_free[cur.lane]);
            for (const PlanAccess& access : cur.acc)
                start = std::max(start, written[static_cast<size_t>(access.alloc)]);
            if (first) {
                t0 = start;
                first = false;
            }
            tm.start[static_cast<size_t>(op)] = start;
            tm.end[static_cast<size_t>(op)] = lane_free[cur.lane] = start + cur.duration;
            tm.comm += cur.duration;
            for (const PlanAccess& access : cur.acc)
                if (access.mode != trace::AccessMode::Read)
                    written[static_cast<size_t>(access.alloc)] = start + cur.duration;
            last_end = std::max(last_end, start + cur.duration);
            continue;
        }
        int64_t ready = now + cur.gap;
        issue(at_start[static_cast<size_t>(op)], ready);   // issued when the stream reaches the op
        int64_t waited = ready;
        for (int32_t copy : cur.waits) {
            int64_t copy_end = tm.copy_end[static_cast<size_t>(copy)];
            if (copy_end < 0)
                throw Error("advise: an op waits for a copy issued after it (internal)", Error::Kind::Internal);
            waited = std::max(waited, copy_end);
        }
        tm.waits += waited - ready;
        int64_t after_comm = waited;
        for (const PlanAccess& access : cur.acc)
            after_comm = std::max(after_comm, written[static_cast<size_t>(access.alloc)]);
        tm.comm_waits += after_comm - waited;
        waited = after_comm;
        int64_t start = waited, end = start + cur.duration;
        if (cur.kind == OpKind::CopyH2D || cur.kind == OpKind::CopyD2H) {
            auto [s, e] = queues.run(cur.kind == OpKind::CopyH2D, cur.bytes, waited);
            tm.waits += s - waited;
            start = s;
            end = e;
            (cur.kind == OpKind::CopyH2D ? tm.h2d_bytes : tm.d2h_bytes) += cur.bytes;
        }
        if (first) { t0 = start; first = false; }
        tm.start[static_cast<size_t>(op)] = start;
        tm.end[static_cast<size_t>(op)] = end;
        issue(at_end[static_cast<size_t>(op)], end);
        for (const PlanAccess& access : cur.acc)
            if (access.mode != trace::AccessMode::Read)
                written[static_cast<size_t>(access.alloc)] = std::max(written[static_cast<size_t>(access.alloc)], end);
        now = end;
        last_end = std::max(last_end, end);
    }
    tm.makespan = std::max(now, last_end) - t0;
    return tm;
}

LiveProfile live_profile(const Plan& plan, const Order& order, int32_t device) {
    const size_t nops = plan.ops.size();
    // bytes made / freed at each op's start and end, on the GPU and on the host
    std::vector<int64_t> made_s(nops, 0), made_e(nops, 0), freed_s(nops, 0), freed_e(nops, 0);
    std::vector<int64_t> hmade_s(nops, 0), hmade_e(nops, 0), hfreed_s(nops, 0), hfreed_e(nops, 0);
    for (const Alloc& alloc : plan.allocs) {
        if (alloc.removed) continue;
        const bool gpu = alloc.device == device;
        if (!gpu && alloc.device >= 0) continue;
        size_t made_at = static_cast<size_t>(alloc.made.op);
        (alloc.made.at_end ? (gpu ? made_e : hmade_e) : (gpu ? made_s : hmade_s))[made_at] += alloc.bytes;
        if (alloc.freed.op != kNoFree) {
            size_t freed_at = static_cast<size_t>(alloc.freed.op);
            (alloc.freed.at_end ? (gpu ? freed_e : hfreed_e) : (gpu ? freed_s : hfreed_s))[freed_at] += alloc.bytes;
        }
    }
    LiveProfile lp;
    lp.window.assign(static_cast<size_t>(plan.recorded) + 2, 0);
    int64_t live = 0, host = 0;
    size_t prev = SIZE_MAX;
    for (int32_t op : order.seq) {
        size_t op_index = static_cast<size_t>(op);
        // the boundary between the previous op's end and this op's start: frees, then allocations
        if (prev != SIZE_MAX) { live -= freed_e[prev]; host -= hfreed_e[prev]; }
        live -= freed_s[op_index];
        host -= hfreed_s[op_index];
        if (prev != SIZE_MAX) { live += made_e[prev]; host += hmade_e[prev]; }
        live += made_s[op_index];
        host += hmade_s[op_index];
        size_t window = static_cast<size_t>(plan.ops[op_index].anchor);
        lp.window[window] = std::max(lp.window[window], live);
        lp.peak = std::max(lp.peak, live);
        lp.host_peak = std::max(lp.host_peak, host);
        prev = op_index;
    }
    return lp;
}

namespace {

// When a point of the plan (an op's start or end, and an offset) falls on the plan's clock.
int64_t point_time(const Timing& tm, Point pt, int64_t offset) {
    size_t op = static_cast<size_t>(pt.op);
    return (pt.at_end ? tm.end[op] : tm.start[op]) + offset;
}

// The plan's allocations as the trace's rows, in the order they are made: by time, then (at one
// instant) those made at an op's end before those made at the next op's start, then added ones (a
// copy back from the host, made when autograd unpacks it) before the recorded op's own outputs.
// Returns each allocation's row (its dense index), -1 for one removed.
std::vector<int32_t> write_allocations(const Plan& plan, const Order& order, const Timing& tm, trace::TraceData& out) {
    std::vector<int32_t> idx;
    for (size_t a = 0; a < plan.allocs.size(); ++a)
        if (!plan.allocs[a].removed) idx.push_back(static_cast<int32_t>(a));
    std::vector<int64_t> made(plan.allocs.size()), pos_key(plan.allocs.size());
    for (int32_t alloc : idx) {
        const Alloc& al = plan.allocs[static_cast<size_t>(alloc)];
        made[static_cast<size_t>(alloc)] = point_time(tm, al.made, al.made_offset);
        pos_key[static_cast<size_t>(alloc)] = 4 * static_cast<int64_t>(order.pos[static_cast<size_t>(al.made.op)]) +
                                              (al.made.at_end ? 2 : 0) + (al.src >= 0 ? 1 : 0);
    }
    std::stable_sort(idx.begin(), idx.end(), [&](int32_t lhs, int32_t rhs) {
        if (made[static_cast<size_t>(lhs)] != made[static_cast<size_t>(rhs)])
            return made[static_cast<size_t>(lhs)] < made[static_cast<size_t>(rhs)];
        return pos_key[static_cast<size_t>(lhs)] < pos_key[static_cast<size_t>(rhs)];
    });
    std::vector<int32_t> dense(plan.allocs.size(), -1);
    out.allocations.reserve(idx.size());
    for (int32_t alloc : idx) {
        const Alloc& al = plan.allocs[static_cast<size_t>(alloc)];
        trace::Allocation row;
        row.id = static_cast<int64_t>(out.allocations.size()) + 1;
        row.device = al.device;
        row.bytes = al.bytes;
        row.t_alloc = made[static_cast<size_t>(alloc)];
        row.t_free = al.freed.op == kNoFree ? trace::kNoTime
                                            : std::max(row.t_alloc, point_time(tm, al.freed, al.freed_offset));
        row.stream = al.stream;
        row.category = al.category;
        row.label = al.label;
        dense[static_cast<size_t>(alloc)] = static_cast<int32_t>(out.allocations.size());
        out.allocations.push(row);
    }
    return dense;
}

// A kernel op as a kernel row and its accesses, one per allocation (the modes of several
// accesses to one allocation joined), by row.
void write_kernel(const Plan& plan, const Op& cur, int64_t start, int64_t end, const std::vector<int32_t>& dense,
                  trace::TraceData& out) {
    trace::Kernel kernel;
    kernel.id = static_cast<int64_t>(out.kernels.size()) + 1;
    kernel.name = cur.name;
    kernel.t_start = start;
    kernel.t_end = end;
    kernel.step = cur.step;
    out.kernels.push(kernel);
    std::vector<std::pair<int32_t, trace::AccessMode>> acc;
    for (const PlanAccess& pa : cur.acc) {
        int32_t dense_id = dense[static_cast<size_t>(pa.alloc)];
        if (dense_id < 0)
            throw Error("advise: kernel " + plan.strings[static_cast<size_t>(cur.name)] +
                            " accesses removed allocation " +
                            plan.strings[static_cast<size_t>(plan.allocs[static_cast<size_t>(pa.alloc)].label)] +
                            " (internal)",
                        Error::Kind::Internal);
        auto it = std::find_if(acc.begin(), acc.end(), [&](auto& entry) { return entry.first == dense_id; });
        if (it == acc.end()) acc.emplace_back(dense_id, pa.mode);
        else it->second = static_cast<trace::AccessMode>(static_cast<int>(it->second) | static_cast<int>(pa.mode));
    }
    std::sort(acc.begin(), acc.end());
    for (auto& [d, m] : acc) {
        out.accesses.allocation.push_back(d);
        out.accesses.mode.push_back(m);
    }
    out.kernels.access_begin.push_back(static_cast<int64_t>(out.accesses.allocation.size()));
}

// The ops in order as kernel and copy rows, then the plan's own copies (the offloads' moves);
// returns each step's span (its ops' first start and last end).
std::map<int32_t, std::pair<int64_t, int64_t>> write_ops(const Plan& plan, const Order& order, const Timing& tm,
                                                        const std::vector<int32_t>& dense, trace::TraceData& out) {
    out.kernels.access_begin.push_back(0);
    std::map<int32_t, std::pair<int64_t, int64_t>> step_span;
    for (int32_t op : order.seq) {
        const Op& cur = plan.ops[static_cast<size_t>(op)];
        const int64_t start = tm.start[static_cast<size_t>(op)], end = tm.end[static_cast<size_t>(op)];
        if (cur.step >= 0 && cur.kind != OpKind::Mark) {
            auto it = step_span.emplace(cur.step, std::make_pair(start, end)).first;
            it->second.first = std::min(it->second.first, start);
            it->second.second = std::max(it->second.second, end);
        }
        if (cur.kind == OpKind::CopyH2D || cur.kind == OpKind::CopyD2H) {
            out.copies.push({static_cast<int64_t>(out.copies.size()) + 1, 0, 0,
                             cur.kind == OpKind::CopyH2D ? trace::CopyKind::H2D : trace::CopyKind::D2H, cur.bytes,
                             start, end});
            continue;
        }
        if (cur.kind == OpKind::Kernel) write_kernel(plan, cur, start, end, dense, out);
    }
    for (size_t c = 0; c < plan.copies.size(); ++c)
        out.copies.push({static_cast<int64_t>(out.copies.size()) + 1, 0, plan.copies[c].h2d ? 1 : 2,
                         plan.copies[c].h2d ? trace::CopyKind::H2D : trace::CopyKind::D2H, plan.copies[c].bytes,
                         tm.copy_start[c], tm.copy_end[c]});
    return step_span;
}

// One step marker per step, named "step" (the string added when the trace has none).
void write_step_markers(const std::map<int32_t, std::pair<int64_t, int64_t>>& step_span, trace::TraceData& out) {
    int64_t step_name = -1;
    for (size_t i = 0; i < out.strings.size(); ++i)
        if (out.strings[i] == "step") step_name = static_cast<int64_t>(i);
    if (step_name < 0) {
        out.strings.emplace_back("step");
        step_name = static_cast<int64_t>(out.strings.size() - 1);
    }
    for (auto& [s, span] : step_span)
        out.markers.push({static_cast<int64_t>(out.markers.size()) + 1, step_name, span.first, span.second,
                          trace::MarkerKind::Step, s});
}

}  // namespace

trace::TraceData to_trace(const Plan& plan, const Order& order, const Timing& tm, const trace::TraceData& recorded,
                          const std::map<std::string, std::string>& meta) {
    trace::TraceData out;
    out.path = recorded.path;
    out.meta = recorded.meta;
    for (auto& [k, v] : meta) out.meta[k] = v;
    out.strings = plan.strings;
    const std::vector<int32_t> dense = write_allocations(plan, order, tm, out);
    write_step_markers(write_ops(plan, order, tm, dense, out), out);
    out.allocation_index.build(out.allocations.id);
    out.kernel_index.build(out.kernels.id);
    return out;
}

}  // namespace mhc::advise
