// Plan construction: the recorded events of the device in the simulator's own order
// (sim::EventCursor, shared with the engine's main loop), with each simulated event inserted
// where the simulator decided it (sim::Result::plan_log).
#include "mhc/replay/plan.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>

#include "mhc/common/error.hpp"
#include "mhc/sim/allocator_compare.hpp"
#include "mhc/sim/event_order.hpp"

namespace mhc::replay {

const char* to_string(Op op) {
    switch (op) {
        case Op::Alloc: return "alloc";
        case Op::Free: return "free";
        case Op::KernelStart: return "kernel_start";
        case Op::KernelEnd: return "kernel_end";
        case Op::SwapOut: return "swap_out";
        case Op::SwapIn: return "swap_in";
        case Op::EvictClean: return "evict_clean";
        case Op::Drop: return "drop";
        case Op::Recompute: return "recompute";
        case Op::Release: return "release";
        case Op::FailedAlloc: return "failed-alloc";
    }
    return "?";
}

namespace {

using EK = trace::EventKind;
using Key = std::pair<sim::Recorded, int32_t>;   // a recorded event: what, and its row

// Streams of the device, numbered in the order of their first kernel.
void number_streams(Plan& plan, const trace::TraceData& t, const std::vector<int32_t>& korder) {
    plan.stream_of.assign(t.kernels.size(), -1);
    std::map<int64_t, int32_t> streams;
    for (int32_t k : korder) {
        auto [it, fresh] = streams.try_emplace(t.kernels.stream[k], static_cast<int32_t>(streams.size()));
        plan.stream_of[static_cast<size_t>(k)] = it->second;
    }
    plan.streams = static_cast<int32_t>(streams.size());
}

// Span of the device's recorded rows.
void set_span(Plan& plan, const trace::TraceData& t, const sim::EventStreams& ev) {
    const auto& A = t.allocations;
    plan.t_begin = INT64_MAX;
    plan.t_end = INT64_MIN;
    for (int32_t k : ev.korder) {
        plan.t_begin = std::min(plan.t_begin, t.kernels.t_start[k]);
        plan.t_end = std::max(plan.t_end, t.kernels.t_end[k]);
    }
    for (int32_t a : ev.alloc_order) {
        plan.t_begin = std::min(plan.t_begin, A.t_alloc[a]);
        plan.t_end = std::max(plan.t_end, A.t_alloc[a]);
        if (A.t_free[a] != trace::kNoTime) plan.t_end = std::max(plan.t_end, A.t_free[a]);
    }
    if (plan.t_begin > plan.t_end) plan.t_begin = plan.t_end = 0;
}

// The simulated out-of-memory, if any, into the plan; the recorded event it happened at.
std::optional<Key> oom_origin(Plan& plan, const trace::TraceData& t, const sim::Result& r) {
    std::optional<Key> origin;
    if (!r.oom.happened) return origin;
    plan.oom = true;
    plan.oom_allocation = r.oom.allocation ? t.allocation_at(r.oom.allocation) : -1;
    plan.oom_kernel = r.oom.kernel ? t.kernel_at(r.oom.kernel) : -1;
    for (size_t i = 0; i < r.events.size(); ++i)
        if (r.events[i].kind == EK::Oom) origin = Key{r.plan_log.origins[i].what, r.plan_log.origins[i].index};
    return origin;
}

// The simulator's decisions (its events, and its swap-out completions) by the recorded event
// they were taken at, before or after its launch, in the simulator's order; emit() appends
// those of one recorded event to the plan as actions.
class Decisions {
public:
    Decisions(const trace::TraceData& t, const sim::Result& r, Plan& plan) : t_(t), r_(r), log_(r.plan_log), plan_(plan) {
        for (size_t i = 0; i < r.events.size(); ++i) {
            const auto& o = log_.origins[i];
            (o.after_launch ? after_ : before_)[{o.what, o.index}].push_back(i);
        }
        for (size_t i = 0; i < log_.releases.size(); ++i) {
            const auto& o = log_.releases[i].origin;
            (o.after_launch ? rel_after_ : rel_before_)[{o.what, o.index}].push_back(i);
        }
    }

    void emit(const Key& key, bool after_launch) {
        const auto* evs = find(after_launch ? after_ : before_, key);
        const auto* rels = find(after_launch ? rel_after_ : rel_before_, key);
        if (evs || rels) emit(evs ? *evs : kNone, rels ? *rels : kNone);
    }

private:
    using ByOrigin = std::map<Key, std::vector<size_t>>;
    static const std::vector<size_t>* find(const ByOrigin& m, const Key& key) {
        auto it = m.find(key);
        return it == m.end() ? nullptr : &it->second;
    }

    // The events of one origin with its releases interleaved: a release recorded when n events
    // existed goes before event n.
    void emit(const std::vector<size_t>& ids, const std::vector<size_t>& rels) {
        bool next_is_prefetch = false;
        size_t ir = 0;
        auto releases_before = [&](size_t n) {
            for (; ir < rels.size() && static_cast<size_t>(log_.releases[rels[ir]].before) <= n; ++ir) {
                Action x;
                x.op = log_.releases[rels[ir]].failed_allocation ? Op::FailedAlloc : Op::Release;
                x.alloc = log_.releases[rels[ir]].alloc;
                plan_.actions.push_back(x);
            }
        };
        for (size_t i : ids) {
            releases_before(i);
            const auto& e = r_.events[i];
            Action x;
            x.alloc = e.allocation ? static_cast<int32_t>(t_.allocation_at(e.allocation)) : -1;
            switch (e.kind) {
                case EK::SwapOut: x.op = Op::SwapOut; break;
                case EK::SwapIn: x.op = Op::SwapIn; x.prefetch = next_is_prefetch; next_is_prefetch = false; break;
                case EK::EvictClean: x.op = Op::EvictClean; break;
                case EK::Drop: x.op = Op::Drop; break;
                case EK::Recompute:
                    x.op = Op::Recompute;
                    x.kernel = e.kernel ? static_cast<int32_t>(t_.kernel_at(e.kernel)) : -1;
                    break;
                case EK::Prefetch: next_is_prefetch = true; continue;
                case EK::Stall: case EK::Oom: continue;   // measured, not executed
            }
            plan_.actions.push_back(x);
        }
        releases_before(SIZE_MAX);
    }

    static inline const std::vector<size_t> kNone;
    const trace::TraceData& t_;
    const sim::Result& r_;
    const sim::PlanLog& log_;
    Plan& plan_;
    ByOrigin before_, after_, rel_before_, rel_after_;
};

}  // namespace

void refuse_streams_past_bound(const trace::TraceData& trace, int32_t device, const std::string& path) {
    std::set<int64_t> streams;
    for (size_t k = 0; k < trace.kernels.size(); ++k)
        if (trace.kernels.device[k] == device) streams.insert(trace.kernels.stream[k]);
    if (streams.size() > static_cast<size_t>(kMaxReplayStreams))
        throw Error(path + ": the kernels of " + (device < 0 ? std::string("the host") : "device " + std::to_string(device)) +
                    " run on " + std::to_string(streams.size()) + " streams; a replay runs each stream on a thread of its own, at most " +
                    std::to_string(kMaxReplayStreams) + " (a GPU runs at most 128 kernels at once)");
}

Plan make_plan(const trace::TraceData& t, const sim::Result& r) {
    if (r.plan_log.origins.size() != r.events.size())
        throw Error("replay needs a run simulated with its events and their origins (record_events on)");
    Plan plan;
    plan.device = r.device;
    plan.capacity = r.capacity;
    plan.allocator = r.config.allocator;
    plan.allocator_conf = r.config.allocator_conf;
    plan.predicted_peak = predicted_arena_peak(r);
    plan.predicted_host_peak = r.host_peak;
    if (plan.allocator == "caching") {   // blocks of a private pool come from its own segments, as simulated
        sim::PrivatePools pools = sim::private_pools(t, plan.device);
        if (pools.pools > 0 && pools.allocations > 0) {
            plan.pool_given_back_at = pools.given_back_at;
            plan.pool_of = std::move(pools.allocation);
        }
    }
    // The recorded event order of the simulator (one definition: sim::event_streams).
    const sim::EventStreams ev = sim::event_streams(t, plan.device);
    number_streams(plan, t, ev.korder);
    set_span(plan, t, ev);
    const std::optional<Key> oom_at = oom_origin(plan, t, r);
    Decisions decisions(t, r, plan);
    // The recorded events in the engine's order, each with the decisions taken before and
    // after it (its prefetch round).
    sim::EventCursor cursor(ev, t);
    for (sim::RecordedEvent e; cursor.next(e);) {
        const Key key{e.what, e.row};
        Action x;
        x.recorded = e.time;
        switch (e.what) {
            case sim::Recorded::KernelEnd: x.op = Op::KernelEnd; x.kernel = e.row; break;
            case sim::Recorded::Free: x.op = Op::Free; x.alloc = e.row; break;
            case sim::Recorded::Allocation: x.op = Op::Alloc; x.alloc = e.row; break;
            case sim::Recorded::KernelStart: x.op = Op::KernelStart; x.kernel = e.row; break;
        }
        decisions.emit(key, false);
        plan.actions.push_back(x);   // an OOM action stays: replay must fail on it too
        if (plan.oom && oom_at && *oom_at == key) break;
        decisions.emit(key, true);
    }
    return plan;
}

Plan on_clock_of(Plan plan, const trace::TraceData& clock) {
    const auto& A = clock.allocations;
    const auto& K = clock.kernels;
    for (Action& x : plan.actions) {
        switch (x.op) {
            case Op::Alloc: x.recorded = A.t_alloc[x.alloc]; break;
            case Op::Free: x.recorded = A.t_free[x.alloc]; break;
            case Op::KernelStart: x.recorded = K.t_start[x.kernel]; break;
            case Op::KernelEnd: x.recorded = K.t_end[x.kernel]; break;
            default: break;
        }
    }
    // The span, as make_plan takes it: the device's kernels and allocations.
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t k = 0; k < K.size(); ++k)
        if (plan.stream_of[k] >= 0) {
            lo = std::min(lo, K.t_start[k]);
            hi = std::max(hi, K.t_end[k]);
        }
    for (size_t a = 0; a < A.size(); ++a)
        if (A.device[a] == plan.device) {
            lo = std::min(lo, A.t_alloc[a]);
            hi = std::max(hi, A.t_alloc[a]);
            if (A.t_free[a] != trace::kNoTime) hi = std::max(hi, A.t_free[a]);
        }
    if (lo <= hi) {
        plan.t_begin = lo;
        plan.t_end = hi;
    }
    return plan;
}

std::string check_plan(const trace::TraceData& t, const Plan& plan) {
    using enum sim::Residency;   // Out: a swap-out in flight (InD2H)
    constexpr sim::Residency Out = InD2H;
    const auto& A = t.allocations;
    const auto& K = t.kernels;
    std::vector<sim::Residency> st(A.size(), NotYet);
    std::vector<uint8_t> host_valid(A.size(), 0);
    std::vector<int32_t> pins(A.size(), 0);
    int64_t resident = 0;   // placed bytes, swap-outs in flight excluded (releasable)
    auto name = [&](int32_t a) { return "allocation " + std::to_string(A.id[a]); };
    auto place = [&](int32_t a, size_t i) -> std::string {
        resident += A.bytes[a];
        if (plan.allocator == "ideal" && resident > plan.capacity && !(plan.oom && i + 1 == plan.actions.size()))
            return "action " + std::to_string(i) + ": " + name(a) + " placed beyond the capacity";
        return "";
    };
    for (size_t i = 0; i < plan.actions.size(); ++i) {
        const Action& x = plan.actions[i];
        const int32_t a = x.alloc;
        std::string at = "action " + std::to_string(i) + " (" + to_string(x.op) + "): ";
        auto operands = [&](auto&& fn) {
            for (int64_t j = K.access_begin[x.kernel]; j < K.access_begin[x.kernel + 1]; ++j)
                if (A.device[t.accesses.allocation[j]] == plan.device) fn(t.accesses.allocation[j], t.accesses.mode[j]);
        };
        switch (x.op) {
            case Op::Alloc:
                if (st[a] != NotYet) return at + name(a) + " allocated twice";
                st[a] = Gpu;
                if (auto e = place(a, i); !e.empty()) return e;
                break;
            case Op::Free:
                if (pins[a] > 0) return at + name(a) + " freed while a running kernel uses it";
                if (st[a] == Gpu || st[a] == Out) resident -= st[a] == Gpu ? A.bytes[a] : 0;
                st[a] = Freed;
                break;
            case Op::KernelStart: {
                std::string bad;
                if (plan.oom && i + 1 == plan.actions.size()) break;   // fails by design
                operands([&](int32_t o, trace::AccessMode mode) {
                    if (st[o] == Out) { st[o] = Gpu; host_valid[o] = 0; resident += A.bytes[o]; }   // cancelled swap-out
                    if (st[o] != Gpu && st[o] != Freed && bad.empty()) bad = at + "operand " + name(o) + " not resident";
                    ++pins[o];
                    if (mode != trace::AccessMode::Read) host_valid[o] = 0;
                });
                if (!bad.empty()) return bad;
                break;
            }
            case Op::KernelEnd:
                operands([&](int32_t o, trace::AccessMode) { --pins[o]; });
                break;
            case Op::SwapOut: case Op::EvictClean: case Op::Drop:
                if (st[a] != Gpu) return at + name(a) + " evicted while not resident";
                if (pins[a] > 0) return at + name(a) + " evicted while a running kernel uses it";
                if (x.op == Op::EvictClean && !host_valid[a]) return at + name(a) + " evicted clean without a valid host copy";
                if (x.op == Op::SwapOut) { st[a] = Out; host_valid[a] = 1; }
                else st[a] = x.op == Op::Drop ? Dropped : Host;
                resident -= A.bytes[a];
                break;
            case Op::SwapIn:
                if (st[a] != Out && st[a] != Host) return at + name(a) + " swapped in without a host copy";
                st[a] = Gpu;
                if (auto e = place(a, i); !e.empty()) return e;
                break;
            case Op::Release:
                if (st[a] != Out) return at + name(a) + " released without a swap-out in flight";
                st[a] = Host;
                break;
            case Op::FailedAlloc:   // changes the allocator model only, never residency
                break;
            case Op::Recompute:
                if (st[a] != Dropped) return at + name(a) + " recomputed but not dropped";
                st[a] = Gpu;
                host_valid[a] = 0;
                if (auto e = place(a, i); !e.empty()) return e;
                break;
        }
    }
    return "";
}

int32_t window_first_kernel(const trace::TraceData& trace_data, int32_t device, int steps) {
    const auto& kernels = trace_data.kernels;
    std::vector<int32_t> seen;
    for (size_t k = 0; k < kernels.size(); ++k)
        if (kernels.device[k] == device && kernels.step[k] >= 0) seen.push_back(kernels.step[k]);
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    if (steps <= 0 || seen.size() <= static_cast<size_t>(steps)) return -1;
    const int32_t first_step = seen[seen.size() - static_cast<size_t>(steps)];
    int32_t first = -1;
    for (size_t k = 0; k < kernels.size(); ++k)
        if (kernels.device[k] == device && kernels.step[k] >= first_step &&
            (first < 0 || kernels.t_start[k] < kernels.t_start[static_cast<size_t>(first)]))
            first = static_cast<int32_t>(k);
    return first;
}

Plan with_window(Plan plan, int32_t first_kernel) {
    for (size_t i = 0; i < plan.actions.size(); ++i)
        if (plan.actions[i].op == Op::KernelStart && plan.actions[i].kernel == first_kernel) {
            plan.window_begin = i;
            plan.window_t = plan.actions[i].recorded;
            return plan;
        }
    throw Error("the replay's window begins at a kernel the plan never starts (dense index " + std::to_string(first_kernel) + ")");
}

bool has_swaps(const Plan& plan) {
    return std::any_of(plan.actions.begin(), plan.actions.end(), [](const Action& action) { return action.op == Op::SwapOut; });
}

}  // namespace mhc::replay
