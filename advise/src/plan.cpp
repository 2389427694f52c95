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

int64_t Plan::intern(const std::string& s) {
    for (size_t i = strings.size(); i-- > 0;)
        if (strings[i] == s) return static_cast<int64_t>(i);
    strings.push_back(s);
    return static_cast<int64_t>(strings.size() - 1);
}

int32_t Plan::add_op(Op op) {
    ops.push_back(std::move(op));
    return static_cast<int32_t>(ops.size() - 1);
}

int32_t Plan::add_alloc(Alloc a) {
    allocs.push_back(a);
    return static_cast<int32_t>(allocs.size() - 1);
}

void Plan::insert_before(int32_t seq, int32_t op) {
    auto& v = before[static_cast<size_t>(seq)];
    v.push_back(op);
    if (host_seq.size() < ops.size()) { host_seq.resize(ops.size(), -1); host_index.resize(ops.size(), 0); host_side.resize(ops.size(), 1); }
    host_seq[static_cast<size_t>(op)] = seq;
    host_side[static_cast<size_t>(op)] = 0;
    host_index[static_cast<size_t>(op)] = static_cast<int32_t>(v.size() - 1);
}

void Plan::insert_after(int32_t seq, int32_t op) {
    auto& v = after[static_cast<size_t>(seq)];
    v.push_back(op);
    if (host_seq.size() < ops.size()) { host_seq.resize(ops.size(), -1); host_index.resize(ops.size(), 0); host_side.resize(ops.size(), 1); }
    host_seq[static_cast<size_t>(op)] = seq;
    host_side[static_cast<size_t>(op)] = 2;
    host_index[static_cast<size_t>(op)] = static_cast<int32_t>(v.size() - 1);
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
        size_t o = static_cast<size_t>(pt.op);
        if (o >= host_seq.size() || host_seq[o] < 0) throw Error("advise: an op that was never placed (internal)", Error::Kind::Internal);
        seq = host_seq[o];
        side = host_side[o];
        index = host_index[o];
    }
    return (((seq + 1) * 3 + side) * (int64_t(1) << 24) + index) * 2 + (pt.at_end ? 1 : 0);
}

void Plan::remove_op(int32_t op) {
    Op& o = ops[static_cast<size_t>(op)];
    o.kind = OpKind::Mark;
    o.duration = 0;
    o.gap = 0;
    o.acc.clear();
    o.waits.clear();
}

int32_t Base::step_index(int32_t s) const {
    auto it = std::lower_bound(steps.begin(), steps.end(), s);
    return it != steps.end() && *it == s ? static_cast<int32_t>(it - steps.begin()) : -1;
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

int32_t gpu_device(const trace::TraceData& t) {
    int32_t d = INT32_MAX;
    for (int32_t k : t.kernels.device) if (k >= 0) d = std::min(d, k);
    if (d == INT32_MAX)
        for (int32_t a : t.allocations.device) if (a >= 0) d = std::min(d, a);
    return d == INT32_MAX ? 0 : d;
}

// Each allocation's accesses by seq (counting sort), its maker and whether it is autocast's
// cached copy of a parameter (a cast of a trained parameter to as many bytes or fewer).
void index_accesses(Base& b) {
    const trace::TraceData& t = *b.trace;
    const size_t m = t.allocations.size(), n = b.korder.size();
    b.acc_begin.assign(m + 1, 0);
    for (size_t s = 0; s < n; ++s) {
        int32_t k = b.korder[s];
        for (int64_t j = t.kernels.access_begin[static_cast<size_t>(k)]; j < t.kernels.access_begin[static_cast<size_t>(k) + 1]; ++j)
            ++b.acc_begin[static_cast<size_t>(t.accesses.allocation[static_cast<size_t>(j)]) + 1];
    }
    for (size_t i = 1; i <= m; ++i) b.acc_begin[i] += b.acc_begin[i - 1];
    b.acc.resize(static_cast<size_t>(b.acc_begin[m]));
    std::vector<int64_t> cur(b.acc_begin.begin(), b.acc_begin.end() - 1);
    for (size_t s = 0; s < n; ++s) {
        int32_t k = b.korder[s];
        for (int64_t j = t.kernels.access_begin[static_cast<size_t>(k)]; j < t.kernels.access_begin[static_cast<size_t>(k) + 1]; ++j) {
            size_t a = static_cast<size_t>(t.accesses.allocation[static_cast<size_t>(j)]);
            b.acc[static_cast<size_t>(cur[a]++)] = {static_cast<int32_t>(s), t.accesses.mode[static_cast<size_t>(j)]};
        }
    }
    // The maker: the first access, when it writes and the allocation was made just before it
    // (an output); parameters, inputs and buffers made before any kernel have none.
    b.creator.assign(m, -1);
    b.param_cast.assign(m, 0);
    for (size_t a = 0; a < m; ++a) {
        if (b.acc_begin[a] == b.acc_begin[a + 1]) continue;
        auto [s, mode] = b.acc[static_cast<size_t>(b.acc_begin[a])];
        if (mode != trace::AccessMode::Read && t.allocations.t_alloc[a] == t.kernels.t_start[static_cast<size_t>(b.korder[static_cast<size_t>(s)])])
            b.creator[a] = s;
    }
    b.made_begin.assign(n + 1, 0);
    for (size_t a = 0; a < m; ++a)
        if (b.creator[a] >= 0) ++b.made_begin[static_cast<size_t>(b.creator[a]) + 1];
    for (size_t s = 1; s <= n; ++s) b.made_begin[s] += b.made_begin[s - 1];
    b.made_list.resize(static_cast<size_t>(b.made_begin[n]));
    {
        std::vector<int64_t> c(b.made_begin.begin(), b.made_begin.end() - 1);
        for (size_t a = 0; a < m; ++a)
            if (b.creator[a] >= 0) b.made_list[static_cast<size_t>(c[static_cast<size_t>(b.creator[a])]++)] = static_cast<int32_t>(a);
    }
    // Parameters that train: those with a gradient ("<name>.grad"); autocast caches the casts of
    // those only (a frozen weight, such as LoRA's base, is cast anew at each use). A trace
    // without gradients says nothing: all count.
    std::unordered_set<std::string> grads;
    for (size_t a = 0; a < m; ++a)
        if (t.allocations.category[a] == trace::Category::Grad) grads.insert(t.str(t.allocations.label[a]));
    // FSDP2's unsharded parameters ("<name> (unsharded)"; "(unsharded, frozen)" without a gradient)
    // have theirs reduce-scattered into one buffer per group (python/mhc_torch/data_parallel.py).
    const std::string unsharded = " (unsharded)";
    auto trains = [&](int32_t param) {
        const std::string& label = t.str(t.allocations.label[static_cast<size_t>(param)]);
        if (label.size() > unsharded.size() &&
            label.compare(label.size() - unsharded.size(), unsharded.size(), unsharded) == 0)
            return true;
        return grads.empty() || grads.count(label + ".grad") > 0;
    };
    for (size_t a = 0; a < m; ++a) {
        int32_t c = b.creator[a];
        if (c < 0 || t.str(t.kernels.name[static_cast<size_t>(b.korder[static_cast<size_t>(c)])]) != "aten::_to_copy") continue;
        int32_t k = b.korder[static_cast<size_t>(c)];
        for (int64_t j = t.kernels.access_begin[static_cast<size_t>(k)]; j < t.kernels.access_begin[static_cast<size_t>(k) + 1]; ++j) {
            int32_t src = t.accesses.allocation[static_cast<size_t>(j)];
            // autocast caches a weight's cast to the lower precision only: an upcast (bf16
            // weights to fp32 for LayerNorm, a larger storage) is not kept for the forward
            if (t.accesses.mode[static_cast<size_t>(j)] == trace::AccessMode::Read &&
                t.allocations.category[static_cast<size_t>(src)] == trace::Category::Param &&
                t.allocations.bytes[a] <= t.allocations.bytes[static_cast<size_t>(src)] && trains(src))
                b.param_cast[a] = 1;
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
            last = Phase::Other;
        }
        base.pass[s] = cur;
        const auto at = static_cast<int32_t>(s);
        if (base.phase[s] == Phase::Forward) base.pass_fwd_last[static_cast<size_t>(cur)] = at;
        if (base.phase[s] == Phase::Backward && base.pass_bwd_first[static_cast<size_t>(cur)] < 0)
            base.pass_bwd_first[static_cast<size_t>(cur)] = at;
        if (base.phase[s] == Phase::Forward || base.phase[s] == Phase::Backward) last = base.phase[s];
    }
}

void index_steps(Base& b) {
    const size_t n = b.korder.size();
    for (size_t s = 0; s < n; ++s) b.steps.push_back(b.step[s]);
    std::sort(b.steps.begin(), b.steps.end());
    b.steps.erase(std::unique(b.steps.begin(), b.steps.end()), b.steps.end());
    const size_t ns = b.steps.size();
    b.fwd_last.assign(ns, -1);
    b.bwd_first.assign(ns, -1);
    b.opt_first.assign(ns, -1);
    b.opt_last.assign(ns, -1);
    const trace::TraceData& t = *b.trace;
    bool fused = false, foreach_ = false;
    for (size_t s = 0; s < n; ++s) {
        size_t i = static_cast<size_t>(b.step_index(b.step[s]));
        if (b.phase[s] == Phase::Forward) b.fwd_last[i] = static_cast<int32_t>(s);
        if (b.phase[s] == Phase::Backward && b.bwd_first[i] < 0) b.bwd_first[i] = static_cast<int32_t>(s);
        if (b.phase[s] == Phase::Optimizer) {
            if (b.opt_first[i] < 0) b.opt_first[i] = static_cast<int32_t>(s);
            b.opt_last[i] = static_cast<int32_t>(s);
            const std::string& name = t.str(t.kernels.name[static_cast<size_t>(b.korder[s])]);
            fused |= name.find("_fused_adam") != std::string::npos;
            foreach_ |= name.find("_foreach_") != std::string::npos;
        }
    }
    b.optimizer_impl = fused ? "fused" : foreach_ ? "foreach" : "";
    // Forward-to-backward transitions per step (a recomputation inside the backward is not one).
    std::vector<int32_t> passes(ns, 0);
    Phase last = Phase::Other;
    for (size_t s = 0; s < n; ++s) {
        if (b.phase[s] == Phase::Recompute) continue;
        if (s > 0 && b.step[s] != b.step[s - 1]) last = Phase::Other;
        if (b.phase[s] == Phase::Backward && last == Phase::Forward)
            ++passes[static_cast<size_t>(b.step_index(b.step[s]))];
        last = b.phase[s];
    }
    for (int32_t count : passes) b.passes = std::max(b.passes, count);
    index_passes(b);
}

// Where a recorded allocation is made and freed among the recorded kernels.
void place_allocations(Base& b, const sim::EventStreams& ev) {
    const trace::TraceData& t = *b.trace;
    Plan& p = b.plan;
    const int32_t n = p.recorded;
    const int64_t t_last = n > 0 ? *std::max_element(ev.kend.begin(), ev.kend.end()) : 0;
    // kernels by end time: the last one ending at or before a free
    std::vector<int32_t> by_end = ev.kend_order;
    for (size_t a = 0; a < t.allocations.size(); ++a) {
        Alloc al;
        al.src = static_cast<int32_t>(a);
        al.bytes = t.allocations.bytes[a];
        al.device = t.allocations.device[a];
        al.category = t.allocations.category[a];
        al.label = t.allocations.label[a];
        al.stream = t.allocations.stream[a];
        const int64_t ta = t.allocations.t_alloc[a], tf = t.allocations.t_free[a];
        auto s = std::lower_bound(ev.kstart.begin(), ev.kstart.end(), ta) - ev.kstart.begin();
        if (s < n) {
            al.made = {static_cast<int32_t>(s), false};
            al.made_offset = ta - ev.kstart[static_cast<size_t>(s)];
        } else {
            al.made = {p.end_op(), false};
            al.made_offset = ta - t_last;
        }
        if (tf == trace::kNoTime) {
            al.freed = {kNoFree, false};
        } else {
            auto e = std::upper_bound(by_end.begin(), by_end.end(), tf,
                                      [&](int64_t f, int32_t q) { return f < ev.kend[static_cast<size_t>(q)]; });
            if (e == by_end.begin()) {
                al.freed = {n > 0 ? 0 : p.end_op(), false};
                al.freed_offset = tf - (n > 0 ? ev.kstart[0] : t_last);
            } else {
                int32_t q = *(e - 1);
                al.freed = {q, true};
                al.freed_offset = tf - ev.kend[static_cast<size_t>(q)];
            }
        }
        p.allocs.push_back(al);
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

Base make_base(const trace::TraceData& t) { return make_base(t, load_capture_info(t)); }

Base make_base(const trace::TraceData& t, CaptureInfo info) {
    Base b;
    b.trace = &t;
    b.info = std::move(info);
    b.device = gpu_device(t);
    sim::EventStreams ev = sim::event_streams(t, b.device);
    b.korder = ev.korder;
    const size_t n = b.korder.size();
    b.module.resize(n);
    b.step.resize(n);
    b.phase.resize(n);
    for (size_t s = 0; s < n; ++s) {
        size_t k = static_cast<size_t>(b.korder[s]);
        b.module[s] = b.info.kernel_module[k];
        b.phase[s] = b.info.kernel_phase[k];
        b.step[s] = t.kernels.step[k];
    }
    index_accesses(b);
    index_steps(b);
    {
        std::vector<int32_t> seq_of(t.kernels.size(), -1);
        for (size_t s = 0; s < n; ++s) seq_of[static_cast<size_t>(b.korder[s])] = static_cast<int32_t>(s);
        // by kernel row (the capture's launch order, the same as seq for one stream)
        b.saved_seq.resize(b.info.saved_by.size());
        b.saved_packs = b.info.saved_packs;
        for (size_t i = 0; i < b.info.saved_by.size(); ++i) b.saved_seq[i] = seq_of[static_cast<size_t>(b.info.saved_by[i])];
        b.held_seq.assign(t.allocations.size(), -1);
        for (size_t a = 0; a < b.info.held_until.size() && a < b.held_seq.size(); ++a)
            if (b.info.held_until[a] >= 0) b.held_seq[a] = seq_of[static_cast<size_t>(b.info.held_until[a])];
        for (auto [a, k] : b.info.unpacks)
            if (seq_of[static_cast<size_t>(k)] >= 0) b.unpack_seq.emplace_back(a, seq_of[static_cast<size_t>(k)]);
        std::sort(b.unpack_seq.begin(), b.unpack_seq.end());
    }
    // Checked (mhc check says it first): "nan", "-1" or "1e300" were cast to int64 unchecked.
    const trace::CaptureTiming timing = trace::capture_timing(t.meta);
    if (!timing.error.empty())
        throw Error(t.path + ": meta " + timing.error + " (capture the step again with mhc-torch capture)");
    b.hbm_bw = timing.hbm_bw;
    b.launch_overhead = timing.launch_overhead_ns;

    Plan& p = b.plan;
    p.strings = t.strings;
    p.recorded = static_cast<int32_t>(n);
    p.ops.resize(n + 2);
    p.before.assign(n, {});
    p.after.assign(n, {});
    int64_t prev_end = n > 0 ? std::min(ev.kstart[0], t.t_begin()) : 0;
    for (size_t s = 0; s < n; ++s) {
        size_t k = static_cast<size_t>(b.korder[s]);
        Op& o = p.ops[s];
        o.kind = OpKind::Kernel;
        o.src = static_cast<int32_t>(s);
        o.name = t.kernels.name[k];
        o.duration = ev.kend[s] - ev.kstart[s];
        o.gap = std::max<int64_t>(0, ev.kstart[s] - prev_end);
        prev_end = std::max(prev_end, ev.kend[s]);
        o.module = b.module[s];
        o.step = b.step[s];
        o.phase = b.phase[s];
        o.anchor = static_cast<int32_t>(s);
        for (int64_t j = t.kernels.access_begin[k]; j < t.kernels.access_begin[k + 1]; ++j)
            o.acc.push_back({t.accesses.allocation[static_cast<size_t>(j)], t.accesses.mode[static_cast<size_t>(j)]});
    }
    p.ops[n].kind = p.ops[n + 1].kind = OpKind::Mark;
    p.ops[n].anchor = static_cast<int32_t>(n);
    p.ops[n + 1].anchor = static_cast<int32_t>(n + 1);
    place_allocations(b, ev);
    mark_dropped_saves(b);
    apply_comm_model(b, comm_model(t, b.info, ""));
    return b;
}

Order order_of(const Plan& p) {
    Order o;
    o.pos.assign(p.ops.size(), -1);
    auto put = [&](int32_t op) {
        o.pos[static_cast<size_t>(op)] = static_cast<int32_t>(o.seq.size());
        o.seq.push_back(op);
    };
    put(p.begin_op());
    for (int32_t s = 0; s < p.recorded; ++s) {
        for (int32_t op : p.before[static_cast<size_t>(s)]) put(op);
        put(s);
        for (int32_t op : p.after[static_cast<size_t>(s)]) put(op);
    }
    put(p.end_op());
    return o;
}

namespace {

struct LinkQueues {
    const sim::LinkModel& link;
    int64_t busy[2] = {INT64_MIN, INT64_MIN};   // [0] H2D, [1] D2H: when each queue is free

    // Start and end of a copy issued at t.
    std::pair<int64_t, int64_t> run(bool h2d, int64_t bytes, int64_t t) {
        const int q = link.copy_engines >= 2 ? (h2d ? 0 : 1) : 0;
        const int other = 1 - q;
        int64_t start = std::max(t, busy[q]);
        const sim::Direction& d = h2d ? link.h2d : link.d2h;
        double bw = d.bandwidth_Bps;
        if (link.copy_engines >= 2 && busy[other] > start) bw *= link.duplex_factor;
        int64_t dur = std::max<int64_t>(1, static_cast<int64_t>(std::ceil((d.latency_s + static_cast<double>(bytes) / bw) * 1e9)));
        busy[q] = start + dur;
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
    LinkQueues q{link};
    auto issue = [&](const std::vector<int32_t>& cs, int64_t t) {
        for (int32_t c : cs) {
            auto [s, e] = q.run(plan.copies[static_cast<size_t>(c)].h2d, plan.copies[static_cast<size_t>(c)].bytes, t);
            tm.copy_start[static_cast<size_t>(c)] = s;
            tm.copy_end[static_cast<size_t>(c)] = e;
            (plan.copies[static_cast<size_t>(c)].h2d ? tm.h2d_bytes
                                                     : tm.d2h_bytes) += plan.copies[static_cast<size_t>(c)].bytes;
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
        for (int32_t c : cur.waits) {
            int64_t e = tm.copy_end[static_cast<size_t>(c)];
            if (e < 0) throw Error("advise: an op waits for a copy issued after it (internal)", Error::Kind::Internal);
            waited = std::max(waited, e);
        }
        tm.waits += waited - ready;
        int64_t after_comm = waited;
        for (const PlanAccess& access : cur.acc)
            after_comm = std::max(after_comm, written[static_cast<size_t>(access.alloc)]);
        tm.comm_waits += after_comm - waited;
        waited = after_comm;
        int64_t start = waited, end = start + cur.duration;
        if (cur.kind == OpKind::CopyH2D || cur.kind == OpKind::CopyD2H) {
            auto [s, e] = q.run(cur.kind == OpKind::CopyH2D, cur.bytes, waited);
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

LiveProfile live_profile(const Plan& p, const Order& o, int32_t device) {
    const size_t nops = p.ops.size();
    // bytes made / freed at each op's start and end, on the GPU and on the host
    std::vector<int64_t> made_s(nops, 0), made_e(nops, 0), freed_s(nops, 0), freed_e(nops, 0);
    std::vector<int64_t> hmade_s(nops, 0), hmade_e(nops, 0), hfreed_s(nops, 0), hfreed_e(nops, 0);
    for (const Alloc& a : p.allocs) {
        if (a.removed) continue;
        const bool gpu = a.device == device;
        if (!gpu && a.device >= 0) continue;
        size_t m = static_cast<size_t>(a.made.op);
        (a.made.at_end ? (gpu ? made_e : hmade_e) : (gpu ? made_s : hmade_s))[m] += a.bytes;
        if (a.freed.op != kNoFree) {
            size_t f = static_cast<size_t>(a.freed.op);
            (a.freed.at_end ? (gpu ? freed_e : hfreed_e) : (gpu ? freed_s : hfreed_s))[f] += a.bytes;
        }
    }
    LiveProfile lp;
    lp.window.assign(static_cast<size_t>(p.recorded) + 2, 0);
    int64_t live = 0, host = 0;
    size_t prev = SIZE_MAX;
    for (int32_t op : o.seq) {
        size_t i = static_cast<size_t>(op);
        // the boundary between the previous op's end and this op's start: frees, then allocations
        if (prev != SIZE_MAX) { live -= freed_e[prev]; host -= hfreed_e[prev]; }
        live -= freed_s[i];
        host -= hfreed_s[i];
        if (prev != SIZE_MAX) { live += made_e[prev]; host += hmade_e[prev]; }
        live += made_s[i];
        host += hmade_s[i];
        size_t w = static_cast<size_t>(p.ops[i].anchor);
        lp.window[w] = std::max(lp.window[w], live);
        lp.peak = std::max(lp.peak, live);
        lp.host_peak = std::max(lp.host_peak, host);
        prev = i;
    }
    return lp;
}

trace::TraceData to_trace(const Plan& p, const Order& o, const Timing& tm, const trace::TraceData& recorded,
                          const std::map<std::string, std::string>& meta) {
    trace::TraceData t;
    t.path = recorded.path;
    t.meta = recorded.meta;
    for (auto& [k, v] : meta) t.meta[k] = v;
    t.strings = p.strings;
    auto point_time = [&](Point pt, int64_t offset) {
        size_t op = static_cast<size_t>(pt.op);
        return (pt.at_end ? tm.end[op] : tm.start[op]) + offset;
    };
    // Allocations in the order they are made: by time, then (at one instant) those made at an
    // op's end before those made at the next op's start, then added ones (a copy back from the
    // host, made when autograd unpacks it) before the recorded op's own outputs.
    std::vector<int32_t> idx;
    for (size_t a = 0; a < p.allocs.size(); ++a)
        if (!p.allocs[a].removed) idx.push_back(static_cast<int32_t>(a));
    std::vector<int64_t> made(p.allocs.size()), pos_key(p.allocs.size());
    for (int32_t a : idx) {
        const Alloc& al = p.allocs[static_cast<size_t>(a)];
        made[static_cast<size_t>(a)] = point_time(al.made, al.made_offset);
        pos_key[static_cast<size_t>(a)] = 4 * static_cast<int64_t>(o.pos[static_cast<size_t>(al.made.op)]) + (al.made.at_end ? 2 : 0) +
                                          (al.src >= 0 ? 1 : 0);
    }
    std::stable_sort(idx.begin(), idx.end(), [&](int32_t x, int32_t y) {
        if (made[static_cast<size_t>(x)] != made[static_cast<size_t>(y)]) return made[static_cast<size_t>(x)] < made[static_cast<size_t>(y)];
        return pos_key[static_cast<size_t>(x)] < pos_key[static_cast<size_t>(y)];
    });
    std::vector<int32_t> dense(p.allocs.size(), -1);
    t.allocations.reserve(idx.size());
    for (int32_t a : idx) {
        const Alloc& al = p.allocs[static_cast<size_t>(a)];
        trace::Allocation r;
        r.id = static_cast<int64_t>(t.allocations.size()) + 1;
        r.device = al.device;
        r.bytes = al.bytes;
        r.t_alloc = made[static_cast<size_t>(a)];
        r.t_free = al.freed.op == kNoFree ? trace::kNoTime : std::max(r.t_alloc, point_time(al.freed, al.freed_offset));
        r.stream = al.stream;
        r.category = al.category;
        r.label = al.label;
        dense[static_cast<size_t>(a)] = static_cast<int32_t>(t.allocations.size());
        t.allocations.push(r);
    }
    t.kernels.access_begin.push_back(0);
    std::map<int32_t, std::pair<int64_t, int64_t>> step_span;
    for (int32_t op : o.seq) {
        const Op& x = p.ops[static_cast<size_t>(op)];
        const int64_t s = tm.start[static_cast<size_t>(op)], e = tm.end[static_cast<size_t>(op)];
        if (x.step >= 0 && x.kind != OpKind::Mark) {
            auto it = step_span.emplace(x.step, std::make_pair(s, e)).first;
            it->second.first = std::min(it->second.first, s);
            it->second.second = std::max(it->second.second, e);
        }
        if (x.kind == OpKind::CopyH2D || x.kind == OpKind::CopyD2H) {
            t.copies.push({static_cast<int64_t>(t.copies.size()) + 1, 0, 0,
                           x.kind == OpKind::CopyH2D ? trace::CopyKind::H2D : trace::CopyKind::D2H, x.bytes, s, e});
            continue;
        }
        if (x.kind != OpKind::Kernel) continue;
        trace::Kernel k;
        k.id = static_cast<int64_t>(t.kernels.size()) + 1;
        k.name = x.name;
        k.t_start = s;
        k.t_end = e;
        k.step = x.step;
        t.kernels.push(k);
        std::vector<std::pair<int32_t, trace::AccessMode>> acc;
        for (const PlanAccess& pa : x.acc) {
            int32_t d = dense[static_cast<size_t>(pa.alloc)];
            if (d < 0)
                throw Error("advise: kernel " + p.strings[static_cast<size_t>(x.name)] + " accesses removed allocation " +
                                p.strings[static_cast<size_t>(p.allocs[static_cast<size_t>(pa.alloc)].label)] + " (internal)",
                            Error::Kind::Internal);
            auto it = std::find_if(acc.begin(), acc.end(), [&](auto& q) { return q.first == d; });
            if (it == acc.end()) acc.push_back({d, pa.mode});
            else it->second = static_cast<trace::AccessMode>(static_cast<int>(it->second) | static_cast<int>(pa.mode));
        }
        std::sort(acc.begin(), acc.end());
        for (auto& [d, m] : acc) {
            t.accesses.allocation.push_back(d);
            t.accesses.mode.push_back(m);
        }
        t.kernels.access_begin.push_back(static_cast<int64_t>(t.accesses.allocation.size()));
    }
    for (size_t c = 0; c < p.copies.size(); ++c)
        t.copies.push({static_cast<int64_t>(t.copies.size()) + 1, 0, p.copies[c].h2d ? 1 : 2,
                       p.copies[c].h2d ? trace::CopyKind::H2D : trace::CopyKind::D2H, p.copies[c].bytes,
                       tm.copy_start[c], tm.copy_end[c]});
    int64_t step_name = -1;
    for (size_t i = 0; i < t.strings.size(); ++i)
        if (t.strings[i] == "step") step_name = static_cast<int64_t>(i);
    if (step_name < 0) {
        t.strings.push_back("step");
        step_name = static_cast<int64_t>(t.strings.size() - 1);
    }
    for (auto& [s, span] : step_span)
        t.markers.push({static_cast<int64_t>(t.markers.size()) + 1, step_name, span.first, span.second, trace::MarkerKind::Step, s});
    t.allocation_index.build(t.allocations.id);
    t.kernel_index.build(t.kernels.id);
    return t;
}

}  // namespace mhc::advise
