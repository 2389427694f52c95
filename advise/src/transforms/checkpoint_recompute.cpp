// A checkpointed call's recomputation: its ops up to the early stop, placed before the backward op
// that first unpacks what it saved, with autocast's casts made again and BatchNorm's statistics
// copies (docs/simulator.md "Settings: checkpoint").
#include <algorithm>
#include <array>
#include <climits>
#include <string>

#include "checkpoint.hpp"

namespace mhc::advise::checkpointing {

namespace {

// The recomputation runs in the backward, on the autograd engine's device thread, which keeps
// cuBLAS and cuBLASLt workspaces of its own (one of each per thread, taken at the thread's first
// GEMM of that kind and kept to the end: python/mhc_torch/workspaces.py). A recomputed op that used
// the main thread's workspace uses the autograd thread's: the captured one (made here instead if
// the captured backward made it later), else one made here.
int32_t thread_workspace(Plan& plan, int32_t alloc, int32_t op, Recomputation& rec) {
    static const std::string kMain = " (main thread)";
    const Alloc& main = plan.allocs[static_cast<size_t>(alloc)];
    const std::string& label = plan.strings[static_cast<size_t>(main.label)];
    if (main.freed.op != kNoFree || label.size() <= kMain.size() ||
        label.compare(label.size() - kMain.size(), kMain.size(), kMain) != 0 || label.rfind("cuBLAS", 0) != 0)
        return alloc;
    const Point here{op, false};
    auto use = [&](int32_t found) {   // made by the recomputation's first op that uses it, at the latest
        Alloc& theirs = plan.allocs[static_cast<size_t>(found)];
        if (plan.key(theirs.made) > plan.key(here)) {
            theirs.made = here;
            theirs.made_offset = 0;
        }
        rec.workspace_of[alloc] = found;
        return found;
    };
    // found once per recomputation: a scan of every allocation for each recomputed GEMM was a
    // tenth of the search's time on a decoder
    if (auto known = rec.workspace_of.find(alloc); known != rec.workspace_of.end()) return use(known->second);
    const std::string own = label.substr(0, label.size() - kMain.size()) + " (autograd thread)";
    for (size_t i = 0; i < plan.allocs.size(); ++i) {
        const Alloc& theirs = plan.allocs[i];
        if (theirs.removed || theirs.device != main.device || plan.strings[static_cast<size_t>(theirs.label)] != own)
            continue;
        return use(static_cast<int32_t>(i));
    }
    Alloc made = main;
    made.src = -1;
    made.label = plan.intern(own);
    made.made = here;
    made.made_offset = 0;
    return use(plan.add_alloc(made));
}

// The parameter allocation a recomputed op reads before `trigger`: the recorded one, unless it was
// freed by then. FSDP2 frees a group's unsharded parameters after its forward (reshard_after_forward)
// and gathers them again before its backward into new allocations of the same name and size
// (python/mhc_torch/data_parallel.py): the recomputation reads those.
int32_t live_param(const Plan& plan, int32_t alloc, int32_t trigger) {
    const Alloc& read = plan.allocs[static_cast<size_t>(alloc)];
    const int64_t at = plan.key(Point{trigger, false});
    if (read.category != trace::Category::Param || plan.key(read.freed) > at) return alloc;
    for (size_t other = 0; other < plan.allocs.size(); ++other) {
        const Alloc& gathered = plan.allocs[other];
        if (gathered.category == trace::Category::Param && gathered.label == read.label &&
            gathered.bytes == read.bytes && gathered.device == read.device && !gathered.removed &&
            plan.key(gathered.made) <= at && plan.key(gathered.freed) > at)
            return static_cast<int32_t>(other);
    }
    return alloc;
}

bool is_cast(const Plan& plan, int32_t seq) {
    return plan.strings[static_cast<size_t>(plan.ops[static_cast<size_t>(seq)].name)] == "aten::_to_copy";
}

// A weight cast the recomputation makes again: where it goes (a recorded seq), the op that made
// the recorded cast, and the recorded cast.
struct RecastPlace {
    int32_t place = 0, creator = 0, cast = 0;
};

// The recomputation runs in an autocast region of its own, outside the forward's (the
// backward runs outside autocast): its cache starts empty. A weight cast that the forward
// served from the cache (cast by an earlier call of a module called many times) is cast again
// by the op that first uses it, the stop included (autocast casts before the op packs its
// inputs), and a cached op of selective checkpointing too (the cast is not one). Autocast
// casts an op's arguments before its kernels: the casts go before the casts of inputs that
// precede the first op reading them, and casts one op made together in the call that made them
// (an LSTM cell's weights and biases, read by its two matmuls and its fused kernel) stay
// together, at the earliest of their places, in the order they ran. Sorted by place.
std::vector<RecastPlace> recast_places(const Base& base, const Plan& plan, const Call& call, int32_t stop) {
    const int32_t recorded_allocs = static_cast<int32_t>(base.trace->allocations.size());
    std::vector<std::array<int32_t, 3>> recasts;   // (place, creator, cast)
    for (int32_t seq = call.first; seq <= stop; ++seq) {
        if (plan.ops[static_cast<size_t>(seq)].kind != OpKind::Kernel) continue;
        for (const PlanAccess& read : base.plan.ops[static_cast<size_t>(seq)].acc) {
            const int32_t cast = read.alloc, made = cast < recorded_allocs ? base.creator[static_cast<size_t>(cast)] : -1;
            if (made < 0 || !base.param_cast[static_cast<size_t>(cast)] || call.holds(made) ||
                std::any_of(recasts.begin(), recasts.end(), [&](const auto& entry) { return entry[2] == cast; }))
                continue;
            int32_t at = seq;
            while (at > call.first && is_cast(plan, at - 1)) --at;
            recasts.push_back({at, made, cast});
        }
    }
    std::sort(recasts.begin(), recasts.end(), [](const auto& lhs, const auto& rhs) { return lhs[1] < rhs[1]; });
    for (size_t i = 1, group = 0; i <= recasts.size(); ++i) {   // groups [group, i) of casts made together
        bool together = i < recasts.size();
        for (int32_t seq = recasts[i - 1][1] + 1; together && seq < recasts[i][1]; ++seq) together = is_cast(plan, seq);
        if (together) continue;
        int32_t at = INT32_MAX;
        for (size_t q = group; q < i; ++q) at = std::min(at, recasts[q][0]);
        for (size_t q = group; q < i; ++q) recasts[q][0] = at;
        group = i;
    }
    std::sort(recasts.begin(), recasts.end());
    std::vector<RecastPlace> places;
    places.reserve(recasts.size());
    for (const auto& entry : recasts) places.push_back({entry[0], entry[1], entry[2]});
    return places;
}

// The recorded cast made again before `trigger`, for recorded op `seq` that first reads it.
void insert_recast(Plan& plan, const RecastPlace& recast, int32_t seq, int32_t trigger, Recomputation& rec) {
    const Op recorded = plan.ops[static_cast<size_t>(recast.creator)];
    Op op;
    op.src = recast.creator;
    op.name = recorded.name;
    op.module = plan.ops[static_cast<size_t>(seq)].module;
    op.step = recorded.step;
    op.phase = Phase::Recompute;
    op.anchor = trigger;
    op.kind = OpKind::Kernel;
    op.duration = recorded.duration;
    const int32_t id = plan.add_op(op);
    plan.insert_before(trigger, id);
    Alloc copy = plan.allocs[static_cast<size_t>(recast.cast)];
    copy.src = -1;
    copy.made = {id, false};
    copy.freed = {id, true};
    copy.made_offset = copy.freed_offset = 0;
    const int32_t copy_id = plan.add_alloc(copy);
    std::vector<PlanAccess> acc;
    for (const PlanAccess& in : recorded.acc)
        acc.push_back(in.alloc == recast.cast ? PlanAccess{copy_id, in.mode}
                                              : PlanAccess{live_param(plan, in.alloc, trigger), in.mode});
    plan.ops[static_cast<size_t>(id)].acc = std::move(acc);
    rec.copy_of[recast.cast] = copy_id;
    rec.last_use[copy_id] = id;   // autocast's cache of the recomputation holds it to the region's end
    rec.last_op = id;
}

// Recorded op `seq` again before `trigger`: a kernel that writes new copies of what it made, or,
// for an op whose output the policy cached, a mark that gives the cached output back.
void rerun_op(const Base& base, Plan& plan, const Call& call, int32_t seq, int32_t trigger, Recomputation& rec) {
    const int32_t recorded_allocs = static_cast<int32_t>(base.trace->allocations.size());
    const Op src = plan.ops[static_cast<size_t>(seq)];   // a copy: add_op below may move plan.ops
    Op op;
    op.src = seq;
    op.name = src.name;
    op.module = src.module;
    op.step = src.step;
    op.phase = Phase::Recompute;
    op.anchor = trigger;
    if (cached(plan, call, seq)) {
        op.kind = OpKind::Mark;
        const int32_t id = plan.add_op(op);
        plan.insert_before(trigger, id);
        rec.replayed_at[seq] = id;
        return;
    }
    op.kind = OpKind::Kernel;
    op.duration = src.duration;
    const int32_t id = plan.add_op(op);
    plan.insert_before(trigger, id);
    rec.rerun_of[seq] = id;
    std::vector<PlanAccess> acc;
    for (const PlanAccess& access : src.acc) {
        const int32_t storage = access.alloc;
        // made by this op: a new storage, unless it lives to the end (the thread's cuBLAS
        // workspace that the capture's first matmul made is made once, not by the recompute)
        if (storage < recorded_allocs && base.creator[static_cast<size_t>(storage)] == seq &&
            !rec.copy_of.count(storage) && base.plan.allocs[static_cast<size_t>(storage)].freed.op != kNoFree) {
            Alloc copy = plan.allocs[static_cast<size_t>(storage)];
            copy.src = -1;
            copy.made = {id, false};
            copy.made_offset = copy.freed_offset = 0;
            copy.freed = {id, true};
            rec.copy_of[storage] = plan.add_alloc(copy);
        }
        auto it = rec.copy_of.find(storage);
        const int32_t use =
            it == rec.copy_of.end() ? thread_workspace(plan, live_param(plan, storage, trigger), id, rec) : it->second;
        acc.push_back({use, access.mode});
        if (it != rec.copy_of.end()) rec.last_use[use] = id;
    }
    plan.ops[static_cast<size_t>(id)].acc = std::move(acc);
    rec.last_op = id;
}

}  // namespace

// The recomputation: the call's ops up to the stop, placed before the trigger; cached ops
// (selective) give their saved output back without a kernel. PyTorch's early stop ends it at the
// call's last pack. An op packs its inputs before its kernel runs and its output after, so the
// stop's kernel reruns only when the stop saves its own output (relu, sigmoid); a matmul or gelu
// saving its input stops before.
Recomputation insert_recomputation(const Base& base, Plan& plan, const Call& call, const Saves& saves,
                                   const std::vector<StatsCall>& stats) {
    const int32_t stop = saves.stop, trigger = saves.trigger;
    Recomputation rec;
    const int32_t recorded_allocs = static_cast<int32_t>(base.trace->allocations.size());
    bool stop_runs = false;   // an output written in place counts (an in-place ReLU saves its result)
    for (const PlanAccess& access : base.plan.ops[static_cast<size_t>(stop)].acc)
        if (access.mode != trace::AccessMode::Read && access.alloc < recorded_allocs)
            base.for_savers(access.alloc, [&](int32_t saver) { stop_runs = stop_runs || saver == stop; });
    rec.last_rerun = stop_runs ? stop : stop - 1;
    const std::vector<RecastPlace> recasts = recast_places(base, plan, call, stop);
    size_t next_cast = 0;
    size_t next_stats = 0;
    for (int32_t seq = call.first; seq <= std::max(rec.last_rerun, stop); ++seq) {
        for (; next_cast < recasts.size() && recasts[next_cast].place == seq; ++next_cast)
            insert_recast(plan, recasts[next_cast], seq, trigger, rec);
        if (seq <= rec.last_rerun && next_stats < stats.size() && stats[next_stats].first == seq) {
            rec.stats_copies.emplace_back(insert_clones(base, plan, stats[next_stats], Phase::Recompute, trigger, trigger),
                                          &stats[next_stats]);
            ++next_stats;
        }
        if (plan.ops[static_cast<size_t>(seq)].kind != OpKind::Kernel) continue;
        if (seq > rec.last_rerun) break;
        rerun_op(base, plan, call, seq, trigger, rec);
    }
    if (rec.last_op < 0 && !plan.before[static_cast<size_t>(trigger)].empty())
        rec.last_op = plan.before[static_cast<size_t>(trigger)].back();
    return rec;
}

}  // namespace mhc::advise::checkpointing
