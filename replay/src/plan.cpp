// Plan construction: the recorded events of the device merged in the simulator's order
// (docs/simulator.md: at one instant kernel ends, frees, allocations, kernel starts), with
// each simulated event inserted where the simulator decided it (Result::event_origin).
#include "mhc/replay/plan.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>

#include "mhc/common/error.hpp"

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

// Events grouped by the recorded event that decided them: key (what, index).
struct Groups {
    std::map<std::pair<int, int32_t>, std::vector<size_t>> by_origin;
};

}  // namespace

Plan make_plan(const trace::TraceData& t, const sim::Result& r) {
    if (r.event_origin.size() != r.events.size())
        throw Error("replay needs a run simulated with its events and their origins (record_events on)");
    Plan plan;
    plan.device = r.device;
    plan.capacity = r.capacity;
    plan.allocator = r.config.allocator;
    plan.predicted_peak = r.simulated_peak;
    plan.predicted_host_peak = r.host_peak;
    const auto& A = t.allocations;
    const auto& K = t.kernels;

    // Recorded event orders, as the simulator's prepare() builds them.
    std::vector<int32_t> korder, aorder, forder;
    for (size_t k = 0; k < K.size(); ++k)
        if (K.device[k] == plan.device) korder.push_back(static_cast<int32_t>(k));
    std::sort(korder.begin(), korder.end(), [&](int32_t x, int32_t y) {
        return K.t_start[x] != K.t_start[y] ? K.t_start[x] < K.t_start[y] : K.id[x] < K.id[y];
    });
    std::vector<int32_t> kend(korder.size());
    std::iota(kend.begin(), kend.end(), 0);
    std::sort(kend.begin(), kend.end(), [&](int32_t x, int32_t y) {
        int64_t ex = K.t_end[korder[x]], ey = K.t_end[korder[y]];
        return ex != ey ? ex < ey : x < y;
    });
    for (size_t a = 0; a < A.size(); ++a) {
        if (A.device[a] != plan.device) continue;
        aorder.push_back(static_cast<int32_t>(a));
        if (A.t_free[a] != trace::kNoTime) forder.push_back(static_cast<int32_t>(a));
    }
    std::sort(aorder.begin(), aorder.end(), [&](int32_t x, int32_t y) {
        return A.t_alloc[x] != A.t_alloc[y] ? A.t_alloc[x] < A.t_alloc[y] : A.id[x] < A.id[y];
    });
    std::sort(forder.begin(), forder.end(), [&](int32_t x, int32_t y) {
        return A.t_free[x] != A.t_free[y] ? A.t_free[x] < A.t_free[y] : A.id[x] < A.id[y];
    });

    // Streams of the device, numbered.
    plan.stream_of.assign(K.size(), -1);
    std::map<int64_t, int32_t> streams;
    for (int32_t k : korder) {
        auto [it, fresh] = streams.try_emplace(K.stream[k], static_cast<int32_t>(streams.size()));
        plan.stream_of[static_cast<size_t>(k)] = it->second;
    }
    plan.streams = static_cast<int32_t>(streams.size());

    // Span of the device's recorded rows.
    plan.t_begin = INT64_MAX;
    plan.t_end = INT64_MIN;
    for (int32_t k : korder) {
        plan.t_begin = std::min(plan.t_begin, K.t_start[k]);
        plan.t_end = std::max(plan.t_end, K.t_end[k]);
    }
    for (int32_t a : aorder) {
        plan.t_begin = std::min(plan.t_begin, A.t_alloc[a]);
        plan.t_end = std::max(plan.t_end, A.t_alloc[a]);
        if (A.t_free[a] != trace::kNoTime) plan.t_end = std::max(plan.t_end, A.t_free[a]);
    }
    if (plan.t_begin > plan.t_end) plan.t_begin = plan.t_end = 0;

    // Events by origin, in emission order.
    std::map<std::pair<int, int32_t>, std::vector<size_t>> before, after;
    for (size_t i = 0; i < r.events.size(); ++i) {
        const auto& o = r.event_origin[i];
        (o.after_launch ? after : before)[{o.what, o.index}].push_back(i);
    }
    std::pair<int, int32_t> oom_origin{-1, -1};
    if (r.oom.happened) {
        plan.oom = true;
        plan.oom_allocation = r.oom.allocation ? t.allocation_at(r.oom.allocation) : -1;
        plan.oom_kernel = r.oom.kernel ? t.kernel_at(r.oom.kernel) : -1;
        for (size_t i = 0; i < r.events.size(); ++i)
            if (r.events[i].kind == EK::Oom) oom_origin = {r.event_origin[i].what, r.event_origin[i].index};
    }

    // Swap-out completions by origin, in the simulator's order.
    std::map<std::pair<int, int32_t>, std::vector<size_t>> rel_before, rel_after;
    for (size_t i = 0; i < r.releases.size(); ++i) {
        const auto& o = r.releases[i].origin;
        (o.after_launch ? rel_after : rel_before)[{o.what, o.index}].push_back(i);
    }
    static const std::vector<size_t> kNone;
    // The events of one origin with its releases interleaved: a release recorded when n events
    // existed goes before event n.
    auto emit_events = [&](const std::vector<size_t>& ids, const std::vector<size_t>& rels) {
        bool next_is_prefetch = false;
        size_t ir = 0;
        auto releases_before = [&](size_t n) {
            for (; ir < rels.size() && static_cast<size_t>(r.releases[rels[ir]].before) <= n; ++ir) {
                Action x;
                x.op = r.releases[rels[ir]].failed_allocation ? Op::FailedAlloc : Op::Release;
                x.alloc = r.releases[rels[ir]].alloc;
                plan.actions.push_back(x);
            }
        };
        for (size_t i : ids) {
            releases_before(i);
            const auto& e = r.events[i];
            Action x;
            x.alloc = e.allocation ? static_cast<int32_t>(t.allocation_at(e.allocation)) : -1;
            switch (e.kind) {
                case EK::SwapOut: x.op = Op::SwapOut; break;
                case EK::SwapIn: x.op = Op::SwapIn; x.prefetch = next_is_prefetch; next_is_prefetch = false; break;
                case EK::EvictClean: x.op = Op::EvictClean; break;
                case EK::Drop: x.op = Op::Drop; break;
                case EK::Recompute:
                    x.op = Op::Recompute;
                    x.kernel = e.kernel ? static_cast<int32_t>(t.kernel_at(e.kernel)) : -1;
                    break;
                case EK::Prefetch: next_is_prefetch = true; continue;
                case EK::Stall: case EK::Oom: continue;   // measured, not executed
            }
            plan.actions.push_back(x);
        }
        releases_before(SIZE_MAX);
    };
    auto events_of = [&](auto& m, int what, int32_t idx) -> const std::vector<size_t>* {
        auto it = m.find({what, idx});
        return it == m.end() ? nullptr : &it->second;
    };

    // Merge exactly as the engine's main loop does.
    size_t ia = 0, iff = 0, ik = 0, ie = 0;
    const size_t na = aorder.size(), nf = forder.size(), nk = korder.size();
    for (;;) {
        int64_t te = ie < nk ? K.t_end[korder[kend[ie]]] : INT64_MAX;
        int64_t tf = iff < nf ? A.t_free[forder[iff]] : INT64_MAX;
        int64_t ta = ia < na ? A.t_alloc[aorder[ia]] : INT64_MAX;
        int64_t ts = ik < nk ? K.t_start[korder[ik]] : INT64_MAX;
        int64_t m = std::min(std::min(te, tf), std::min(ta, ts));
        if (m == INT64_MAX) break;
        int what;
        int32_t idx;
        Action x;
        x.recorded = m;
        if (te == m && static_cast<size_t>(kend[ie]) < ik) {
            what = 3; idx = korder[kend[ie++]]; x.op = Op::KernelEnd; x.kernel = idx;
        } else if (tf == m) {
            what = 1; idx = forder[iff++]; x.op = Op::Free; x.alloc = idx;
        } else if (ta == m) {
            what = 0; idx = aorder[ia++]; x.op = Op::Alloc; x.alloc = idx;
        } else {
            what = 2; idx = korder[ik++]; x.op = Op::KernelStart; x.kernel = idx;
        }
        {
            auto* ev = events_of(before, what, idx);
            auto* rl = events_of(rel_before, what, idx);
            if (ev || rl) emit_events(ev ? *ev : kNone, rl ? *rl : kNone);
        }
        bool is_oom = plan.oom && oom_origin == std::pair<int, int32_t>{what, idx};
        plan.actions.push_back(x);   // an OOM action stays: replay must fail on it too
        if (is_oom) break;
        auto* ev = events_of(after, what, idx);
        auto* rl = events_of(rel_after, what, idx);
        if (ev || rl) emit_events(ev ? *ev : kNone, rl ? *rl : kNone);
    }
    return plan;
}

std::string check_plan(const trace::TraceData& t, const Plan& plan) {
    enum S : uint8_t { NotYet, Gpu, Host, Out, Dropped, Freed };
    const auto& A = t.allocations;
    const auto& K = t.kernels;
    std::vector<uint8_t> st(A.size(), NotYet), host_valid(A.size(), 0);
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

}  // namespace mhc::replay
