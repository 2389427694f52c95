// When storages die once a call is checkpointed: its saves, their recomputed copies, the outputs
// selective checkpointing cached, the call's inputs, BatchNorm's statistics copies, and
// autocast's weight casts shared by several calls (docs/simulator.md "Settings: checkpoint").
#include <algorithm>
#include <tuple>

#include "checkpoint.hpp"

namespace mhc::advise::checkpointing {

namespace {

// Where a storage freed at recorded op `freed` (inside the call) dies in the recomputation: at
// the rerun of that op, or at the cached op's place (save_matmuls), or at the recomputation's end
// when that op comes after the stop; never before `end`.
Point end_at_rerun(const Plan& plan, const Recomputation& rec, Point freed, Point end) {
    auto rerun = rec.rerun_of.find(freed.op);
    auto replay = rec.replayed_at.find(freed.op);   // a kept matmul's place (save_matmuls)
    if (freed.op > rec.last_rerun) return plan.later(end, Point{rec.last_op, true});
    if (rerun != rec.rerun_of.end()) return plan.later(end, Point{rerun->second, freed.at_end});
    if (replay != rec.replayed_at.end()) return plan.later(end, Point{replay->second, true});
    return end;
}

}  // namespace

// Saved storages made by the call and saved by nothing else are not kept: they die at their
// last forward use (autocast's cached parameter copies at the end of the forward) and the
// backward reads their recomputed copies.
void hand_saves_to_copies(const Base& base, Plan& plan, const Call& call, const Saves& saves, Recomputation& rec) {
    const int32_t fwd_end = base.autocast_end(call.pass);
    for (int32_t storage : saves.saved) {
        Alloc& alloc = plan.allocs[static_cast<size_t>(storage)];
        auto it = rec.copy_of.find(storage);
        if (!saves.only_here[static_cast<size_t>(storage)] || it == rec.copy_of.end() || alloc.device != base.device)
            continue;
        const int32_t copy_id = it->second;
        Alloc& copy = plan.allocs[static_cast<size_t>(copy_id)];
        // The checkpoint hands a recomputed tensor over at its unpack and keeps no reference to
        // it: it dies when the backward node that unpacked it returns, where the captured step's
        // saved tensor lived until the engine released the node's saved variables, after it had
        // also summed the node's gradients to their inputs' shapes (a bias gradient's aten::sum).
        // So: the captured free, less those trailing sums, and not before its last read.
        copy.freed = alloc.freed;
        copy.freed_offset = alloc.freed_offset;
        if (auto end = base.node_return(storage, call.pass, alloc.freed)) {
            copy.freed = *end;
            copy.freed_offset = 0;
        }
        if (base.cast_kept_past_backward(storage)) {
            // the recorded free is the autocast region's end, not the node's: the node lets go of
            // the recomputed cast after its last read and the engine's sums of its gradients (a
            // weight's gradient cast after it is the cast's own backward node)
            int32_t end = base.last_access_in_pass(storage, Phase::Backward, call.pass);
            for (auto next = static_cast<size_t>(end) + 1; end >= 0 && next < static_cast<size_t>(plan.recorded) &&
                                                           base.phase[next] == Phase::Backward &&
                                                           plan.strings[static_cast<size_t>(plan.ops[next].name)] == "aten::sum";
                 ++next)
                end = static_cast<int32_t>(next);
            copy.freed = {end, true};
            copy.freed_offset = 0;
        }
        int32_t last_forward = base.last_access_in_pass(storage, Phase::Forward, call.pass);
        if (base.param_cast[static_cast<size_t>(storage)]) last_forward = std::max(last_forward, fwd_end);
        if (base.cast_kept_past_backward(storage)) last_forward = -1;   // freed as recorded
        // A frame of the model's code may hold it longer than its last use: `q, k, v` until the
        // block's forward returns, a module's input argument until its own forward does.
        const int32_t held = base.held_seq[static_cast<size_t>(storage)];
        if (held >= 0 && base.phase[static_cast<size_t>(held)] == Phase::Forward &&
            base.pass[static_cast<size_t>(held)] == call.pass)
            last_forward = std::max(last_forward, held);
        if (last_forward >= 0) { alloc.freed = {last_forward, true}; alloc.freed_offset = 0; }
        base.for_acc(storage, [&](int32_t seq, trace::AccessMode) {
            if (base.phase[static_cast<size_t>(seq)] != Phase::Backward || base.pass[static_cast<size_t>(seq)] != call.pass)
                return;
            for (PlanAccess& access : plan.ops[static_cast<size_t>(seq)].acc)
                if (access.alloc == storage) access.alloc = copy_id;
        });
        rec.last_use.erase(copy_id);
    }
}

// What the call made and only nodes the forward let go saved: the checkpoint's holders keep
// nothing, so it dies where the code drops it (its last use, a frame's hold), not with the
// dropped graph; a weight's cast at the forward's end (autocast's cache), and selective
// checkpointing's cached outputs as end_cached_outputs says.
void end_let_go_saves(const Base& base, Plan& plan, const Call& call, const Saves& saves) {
    for (int32_t let_go : saves.dropped_only) {
        Alloc& storage = plan.allocs[static_cast<size_t>(let_go)];
        const int32_t made = base.creator[static_cast<size_t>(let_go)];
        if (!call.holds(made) || cached(plan, call, made) || storage.device != base.device ||
            base.cast_kept_past_backward(let_go))
            continue;
        int32_t kept = base.last_access_in_pass(let_go, Phase::Forward, call.pass);
        if (base.param_cast[static_cast<size_t>(let_go)])
            kept = std::max(kept, base.autocast_end(call.pass));
        const int32_t held = base.held_seq[static_cast<size_t>(let_go)];
        if (held >= 0 && base.pass[static_cast<size_t>(held)] == call.pass) kept = std::max(kept, held);
        if (kept >= 0 && plan.key(Point{kept, true}) < plan.key(storage.freed)) {
            storage.freed = {kept, true};
            storage.freed_offset = 0;
        }
    }
}

// A storage outside ops saved too (shared_save): the call's nodes read its recomputed copy,
// handed over at their unpack (it dies when the last of them returns: where the captured step
// freed it, when that node was the last to hold it); the original dies after its forward use
// and the outside nodes' reads.
void hand_shared_saves_to_copies(const Base& base, Plan& plan, const Call& call, const Saves& saves, Recomputation& rec) {
    for (const SharedSave& shared : saves.shared) {
        auto found = rec.copy_of.find(shared.alloc);
        if (found == rec.copy_of.end()) continue;
        Alloc& original = plan.allocs[static_cast<size_t>(shared.alloc)];
        Alloc& copy = plan.allocs[static_cast<size_t>(found->second)];
        Point end{shared.run_last, true};
        if (auto back = base.node_return(shared.alloc, call.pass, original.freed); back && shared.run_last > shared.outside_last)
            end = plan.later(end, *back);
        copy.freed = plan.later(copy.freed, end);
        copy.freed_offset = 0;
        rec.last_use.erase(found->second);
        for (int32_t seq : shared.run_reads)
            for (PlanAccess& access : plan.ops[static_cast<size_t>(seq)].acc)
                if (access.alloc == shared.alloc) access.alloc = found->second;
        int32_t kept = std::max(base.last_access_in_pass(shared.alloc, Phase::Forward, call.pass), shared.outside_last);
        const int32_t held = base.held_seq[static_cast<size_t>(shared.alloc)];
        if (held >= 0 && base.pass[static_cast<size_t>(held)] == call.pass) kept = std::max(kept, held);
        if (kept >= 0 && plan.key(Point{kept, true}) < plan.key(original.freed)) {
            original.freed = {kept, true};
            original.freed_offset = 0;
        }
    }
}

// Recomputed storages nothing saved die where the captured forward freed them, the same code
// dropping its last reference (a local, an argument: not always at the last use); those
// it freed after the early stop die at the stop, which unwinds the recomputation's frames, and
// so do those it freed after the block's forward or never (an output the block returns beside
// its hidden state, as nn.MultiheadAttention's averaged weights: the recomputation's return
// value is dropped when it ends); autocast's cached parameter copies when the recomputation
// (its autocast region) ends.
void end_unsaved_copies(const Base& base, Plan& plan, const Call& call, Recomputation& rec) {
    for (auto& [storage, copy_id] : rec.copy_of) {
        if (!rec.last_use.count(copy_id)) continue;
        Alloc& copy = plan.allocs[static_cast<size_t>(copy_id)];
        Point end{rec.last_use[copy_id], true};
        const Point freed = base.plan.allocs[static_cast<size_t>(storage)].freed;
        if (base.param_cast[static_cast<size_t>(storage)]) {
            end = {rec.last_op, true};
        } else if (freed.op == kNoFree || freed.op > call.last) {
            // alive when the call returned (a value it returns, as HcMaps' `post` or
            // nn.MultiheadAttention's averaged weights), or never freed: a frame of the call still
            // holds it when the recomputation stops, or returns, and drops it then
            end = plan.later(end, Point{rec.last_op, true});
        } else if (freed.op != kNoFree && freed.op >= call.first && freed.op <= call.last) {
            if (freed.op > rec.last_rerun) end = {rec.last_op, true};
            else end = end_at_rerun(plan, rec, freed, end);
        }
        copy.freed = end;
    }
}

// A weight cast that other calls saved as well: this call's backward nodes read this
// recomputation's copy (release_forward_casts hands them over).
void note_shared_casts(const Base& base, const Call& call, const Saves& saves, const Recomputation& rec,
                       std::vector<Recast>& shared_casts) {
    for (const auto& [storage, copy_id] : rec.copy_of)
        if (base.param_cast[static_cast<size_t>(storage)] &&
            !(saves.only_here[static_cast<size_t>(storage)] &&
              std::find(saves.saved.begin(), saves.saved.end(), storage) != saves.saved.end()))
            shared_casts.push_back({storage, copy_id, saves.trigger, call.pass, call.module});
}

// Outputs the selective policy cached live until the recomputation takes them back (or the
// checkpoint's frame dies, when the recomputation stopped before them). torch's cache
// (create_selective_checkpoint_contexts) lets go of an output when the recomputation replays
// its op; from there it is the recomputation's tensor, as a recomputed copy is: one that only
// the call saved is handed to the node that unpacks it and dies when that node returns (before
// the engine's sums of the node's gradients); one nothing saved dies where the captured
// forward's code dropped it, at the rerun of that kernel of the call (the hyper-connection's
// bmm output, held by its frame until the residual add; the recomputation's end when that
// kernel comes after the stop). Never before its replay and its last recomputed reader.
void end_cached_outputs(const Base& base, Plan& plan, const Call& call, const Saves& saves, const Recomputation& rec) {
    const int32_t recorded_allocs = static_cast<int32_t>(base.trace->allocations.size());
    for (int32_t seq = call.first; seq <= call.last; ++seq) {
        if (!cached(plan, call, seq)) continue;
        for (const PlanAccess& access : plan.ops[static_cast<size_t>(seq)].acc) {
            const int32_t kept = access.alloc;
            if (kept >= recorded_allocs || base.creator[static_cast<size_t>(kept)] != seq) continue;
            Alloc& out = plan.allocs[static_cast<size_t>(kept)];
            if (out.freed.op == kNoFree) continue;
            auto it = rec.replayed_at.find(seq);
            Point until = it != rec.replayed_at.end() ? Point{it->second, true} : Point{saves.backward_last, true};
            for (int32_t op : plan.before[static_cast<size_t>(saves.trigger)])
                for (const PlanAccess& use : plan.ops[static_cast<size_t>(op)].acc)
                    if (use.alloc == kept) until = plan.later(until, Point{op, true});
            const Point recorded = base.plan.allocs[static_cast<size_t>(kept)].freed;
            const bool saved_here = saves.only_here[static_cast<size_t>(kept)] != 0 &&
                                    std::binary_search(saves.saved.begin(), saves.saved.end(), kept);
            if (it != rec.replayed_at.end() && saved_here) {
                Point end = recorded;
                if (auto back = base.node_return(kept, call.pass, recorded)) end = *back;
                out.freed = plan.later(until, end);
                out.freed_offset = 0;
                continue;
            }
            if (it != rec.replayed_at.end() && !base.kept_saved(kept) && call.holds(recorded.op)) {
                out.freed = end_at_rerun(plan, rec, recorded, until);
                out.freed_offset = 0;
                continue;
            }
            if (plan.key(until) > plan.key(out.freed)) { out.freed = until; out.freed_offset = 0; }
        }
    }
}

// The checkpoint keeps its inputs (storages made before the call) until its backward ends:
// the engine releases the last node's saved variables (the checkpoint's holders) after it has
// summed the node's gradients to their inputs' shapes (a bias gradient's aten::sum).
void keep_inputs(const Base& base, Plan& plan, const Call& call, const Saves& saves) {
    const int32_t recorded_allocs = static_cast<int32_t>(base.trace->allocations.size());
    int32_t inputs_end = saves.backward_last;
    for (int32_t next = inputs_end + 1;
         next < plan.recorded && base.phase[static_cast<size_t>(next)] == Phase::Backward &&
         base.plan.strings[static_cast<size_t>(base.plan.ops[static_cast<size_t>(next)].name)] == "aten::sum";
         ++next)
        inputs_end = next;
    for (int32_t storage : saves.touched) {
        Alloc& alloc = plan.allocs[static_cast<size_t>(storage)];
        if (alloc.freed.op == kNoFree || alloc.category == trace::Category::Param) continue;
        // autocast's cached cast of a weight an earlier call made is no argument of the call
        // (the module reads its parameters; the recomputation casts them again)
        if (storage < recorded_allocs && base.param_cast[static_cast<size_t>(storage)]) continue;
        if (plan.key(alloc.made) >= plan.key(Point{call.first, false})) continue;
        Point until{inputs_end, true};
        if (plan.key(until) > plan.key(alloc.freed)) { alloc.freed = until; alloc.freed_offset = 0; }
    }
}

// The recompute's statistics copies: running_mean's and running_var's live as long as what the
// recomputed batch-norm op made and its node saved (save_mean, save_invstd), num_batches_tracked's
// to the op's end (the hooks put the buffers back when the call returns).
void end_stats_copies(const Base& base, Plan& plan, const Recomputation& rec) {
    const int32_t recorded_allocs = static_cast<int32_t>(base.trace->allocations.size());
    for (const auto& [allocs, stats_call] : rec.stats_copies) {
        auto rerun = rec.rerun_of.find(stats_call->bn);
        if (rerun == rec.rerun_of.end()) continue;
        const int32_t id = rerun->second;
        Point held{id, true};
        for (const PlanAccess& access : plan.ops[static_cast<size_t>(id)].acc) {
            const Alloc& made = plan.allocs[static_cast<size_t>(access.alloc)];
            if (access.alloc >= recorded_allocs && made.made.op == id && made.freed.op != kNoFree)
                held = plan.later(held, made.freed);
        }
        const bool batches = stats_call->bytes.size() == 3;
        for (size_t i = 0; i < allocs.size(); ++i) {
            Alloc& copy = plan.allocs[static_cast<size_t>(allocs[i])];
            copy.freed = batches && i + 1 == allocs.size() ? Point{id, true} : held;
            copy.freed_offset = 0;
        }
    }
}

// A weight cast that several calls saved (a cell called many times a pass: every call saves the
// cast of its shared weights) is read by each call's backward nodes from that call's
// recomputation: a backward read of the module goes to the copy of the call whose recomputation
// came last before it (the calls' backwards run one after another, the last call's first), and
// the copy lives until the last such read is done. Autocast's cached casts that only checkpointed
// calls saved are then kept by nothing once the forward's autocast region ends: the forward's
// cast dies at the forward's end (or after a read no recomputation took over).
void release_forward_casts(const Base& base, Plan& plan, const std::vector<Call>& calls, std::vector<Recast> casts) {
    std::sort(casts.begin(), casts.end(), [](const Recast& lhs, const Recast& rhs) {
        return std::tie(lhs.cast, lhs.trigger) < std::tie(rhs.cast, rhs.trigger);
    });
    for (size_t first = 0; first < casts.size();) {
        size_t end = first;
        while (end < casts.size() && casts[end].cast == casts[first].cast) ++end;
        const int32_t cast = casts[first].cast;
        base.for_acc(cast, [&](int32_t seq, trace::AccessMode) {
            if (base.phase[static_cast<size_t>(seq)] != Phase::Backward) return;
            const Recast* owner = nullptr;
            for (size_t q = first; q < end && casts[q].trigger <= seq; ++q)
                if (casts[q].pass == base.pass[static_cast<size_t>(seq)] &&
                    base.info.within(base.module[static_cast<size_t>(seq)], casts[q].module))
                    owner = &casts[q];
            if (owner == nullptr) return;
            for (PlanAccess& access : plan.ops[static_cast<size_t>(seq)].acc)
                if (access.alloc == cast) access.alloc = owner->copy;
            Alloc& copy = plan.allocs[static_cast<size_t>(owner->copy)];
            copy.freed = plan.later(copy.freed, Point{seq, true});
        });
        first = end;
    }
    const int32_t recorded_allocs = static_cast<int32_t>(base.trace->allocations.size());
    std::vector<uint8_t> in_call(base.korder.size(), 0);
    for (const Call& call : calls)
        for (int32_t seq = call.first; seq <= call.last; ++seq) in_call[static_cast<size_t>(seq)] = 1;
    for (int32_t cast = 0; cast < recorded_allocs; ++cast) {
        Alloc& alloc = plan.allocs[static_cast<size_t>(cast)];
        const int32_t made = base.creator[static_cast<size_t>(cast)];
        if (!base.param_cast[static_cast<size_t>(cast)] || made < 0 || alloc.device != base.device ||
            alloc.freed.op == kNoFree || !base.kept_saved(cast))
            continue;
        bool only_calls = true;
        base.for_kept_savers(cast, [&](int32_t seq) { only_calls = only_calls && in_call[static_cast<size_t>(seq)]; });
        if (!only_calls) continue;
        const int32_t pass = base.pass[static_cast<size_t>(made)];
        if (base.cast_kept_past_backward(cast)) continue;
        Point end{std::max(base.last_access_in_pass(cast, Phase::Forward, pass),
                           base.autocast_end(pass)),
                  true};
        base.for_acc(cast, [&](int32_t seq, trace::AccessMode) {   // reads no recomputation took over
            for (const PlanAccess& access : plan.ops[static_cast<size_t>(seq)].acc)
                if (access.alloc == cast) end = plan.later(end, Point{seq, true});
        });
        if (plan.key(end) < plan.key(alloc.freed)) {
            alloc.freed = end;
            alloc.freed_offset = 0;
        }
    }
}

}  // namespace mhc::advise::checkpointing
