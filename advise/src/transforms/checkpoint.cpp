// Activation checkpointing of modules: torch.utils.checkpoint(use_reentrant=False) with its
// default early stop ("full"), or selective checkpointing that keeps matmul and attention
// outputs ("save_matmuls"), or full checkpointing of mHC's hyper-connections around their
// maps ("mhc": full checkpointing of every HcMaps module, the RMSNorm, projection, sigmoids and
// Sinkhorn-Knopp iterations of a hyper-connection, inside the named modules).
// docs/simulator.md "Settings: checkpoint" states the rules this file and its parts (checkpoint.hpp)
// follow. This file: the setting's regions, their calls, and each call's steps in order.
#include "checkpoint.hpp"

#include <algorithm>
#include <string>

#include "mhc/common/error.hpp"

namespace mhc::advise {

const std::string kMhcMaps = "HcMaps";

// Ops whose outputs selective checkpointing caches instead of recomputing: matmuls, attention,
// and convolutions (a CNN's matmuls: without them its selective checkpoint recomputed everything).
bool kept_by_save_matmuls(const std::string& name) {
    return name == "aten::mm" || name == "aten::bmm" || name == "aten::addmm" || name == "aten::baddbmm" ||
           name == "aten::convolution" || name.rfind("aten::_scaled_dot_product_", 0) == 0;
}

namespace checkpointing {

bool cached(const Plan& plan, const Call& call, int32_t seq) {
    return call.policy == Policy::SaveMatmuls &&
           kept_by_save_matmuls(plan.strings[static_cast<size_t>(plan.ops[static_cast<size_t>(seq)].name)]);
}

namespace {

// The saves the call hands to saved-tensor hooks around it (Plan::hook_saves). Its inputs:
// checkpoint packs the tensors passed to it positionally before the forward runs and unpacks them
// when the recomputation starts: those the capture recorded (meta capture.call_args), or, in a
// capture without that record, what the first kernel of the call that reads a tensor made before it
// (not a parameter or a buffer: BatchNorm counts its batches first) reads so (a block's hidden
// states; not a mask or an embedding passed by keyword and read later). Selective checkpointing's cached
// outputs: packed after their op, unpacked where the recomputation replays it (never when the early
// stop comes first: the frame lets go of them when the call's backward ends).
void list_hook_saves(const Base& base, Plan& plan, const Call& call, const Saves& saves, const Recomputation& rec,
                     size_t recompute_from) {
    const auto& placed = plan.before[static_cast<size_t>(saves.trigger)];
    const int32_t starts = recompute_from < placed.size() ? placed[recompute_from] : saves.trigger;
    const Point frame_end{saves.backward_last, true};
    const int32_t recorded_allocs = static_cast<int32_t>(base.trace->allocations.size());
    auto input = [&](int32_t storage) {
        const Alloc& alloc = plan.allocs[static_cast<size_t>(storage)];
        return storage < recorded_allocs && alloc.category != trace::Category::Param && alloc.device == base.device &&
               !base.param_cast[static_cast<size_t>(storage)] && base.creator[static_cast<size_t>(storage)] < call.first &&
               plan.strings[static_cast<size_t>(alloc.label)].rfind("buffer ", 0) != 0;
    };
    // the capture's record of the call's positional arguments, where it has one
    auto args = base.info.call_args.find({call.module, base.korder[static_cast<size_t>(call.first)]});
    if (args != base.info.call_args.end()) {
        for (int32_t storage : args->second)
            if (input(storage))
                plan.hook_saves.push_back({call.module, call.pass, call.first, false, storage, starts, frame_end});
    } else {
        for (int32_t seq = call.first; seq <= call.last; ++seq) {
            bool found = false;
            for (const PlanAccess& read : base.plan.ops[static_cast<size_t>(seq)].acc) {
                if (!input(read.alloc)) continue;
                found = true;
                plan.hook_saves.push_back({call.module, call.pass, call.first, false, read.alloc, starts, frame_end});
            }
            if (found) break;
        }
    }
    for (int32_t seq = call.first; seq <= call.last; ++seq) {
        if (!cached(plan, call, seq)) continue;
        auto replay = rec.replayed_at.find(seq);
        for (const PlanAccess& access : plan.ops[static_cast<size_t>(seq)].acc) {
            const int32_t kept = access.alloc;
            if (kept >= recorded_allocs || base.creator[static_cast<size_t>(kept)] != seq ||
                base.plan.allocs[static_cast<size_t>(kept)].freed.op == kNoFree)
                continue;
            plan.hook_saves.push_back({call.module, call.pass, seq, true, kept,
                                       replay != rec.replayed_at.end() ? replay->second : -1, frame_end});
        }
    }
}

// One call checkpointed: its BatchNorm statistics copies in the forward (made before the call and
// dropped at once), then what it saved, its recomputation, and the lifetimes that changes. The
// weight casts other calls saved too go to `shared_casts` (release_forward_casts hands them over
// once every call is done).
void checkpoint_call(const Base& base, Plan& plan, const Call& call, std::vector<Recast>& shared_casts) {
    const std::vector<StatsCall> stats = stats_calls(base, plan, call.first, call.last);
    for (const StatsCall& stats_call : stats)
        insert_clones(base, plan, stats_call, Phase::Forward, stats_call.first, stats_call.first);
    Saves saves = find_saves(base, plan, call);
    if (saves.stop < 0) return;   // nothing saved
    end_let_go_saves(base, plan, call, saves);
    if (saves.trigger < 0) {
        free_unread_saves(base, plan, call, saves);
        return;
    }
    move_trigger_before_reads(base, call, saves);
    find_backward_end(base, plan, call, saves);
    const size_t recompute_from = plan.before[static_cast<size_t>(saves.trigger)].size();
    Recomputation rec = insert_recomputation(base, plan, call, saves, stats);
    list_hook_saves(base, plan, call, saves, rec, recompute_from);
    hand_saves_to_copies(base, plan, call, saves, rec);
    hand_shared_saves_to_copies(base, plan, call, saves, rec);
    end_unsaved_copies(base, plan, call, rec);
    note_shared_casts(base, call, saves, rec, shared_casts);
    end_cached_outputs(base, plan, call, saves, rec);
    keep_inputs(base, plan, call, saves);
    end_stats_copies(base, plan, rec);
}

class Checkpoint final : public Transform {
public:
    explicit Checkpoint(std::vector<Region> regions) : regions_(std::move(regions)) {}
    void apply(const Context& ctx, Plan& plan) const override {
        std::vector<Call> all = calls(ctx);
        // In forward order, whatever order the setting names the modules in: a call's rules for
        // what it saved (they die at their last forward use) come before a later call's for its
        // inputs (kept until its backward ends). Named the other way round (a selective
        // checkpoint's group after a full one's, or a group's modules listed back to front), the
        // earlier call's rule undid the later call's, and the later recomputation read its input
        // after it had died (an invalid step: access-outside-lifetime).
        std::stable_sort(all.begin(), all.end(), [](const Call& lhs, const Call& rhs) { return lhs.first < rhs.first; });
        std::vector<Recast> shared_casts;
        for (const Call& call : all) checkpoint_call(ctx.base, plan, call, shared_casts);
        release_forward_casts(ctx.base, plan, all, std::move(shared_casts));
        std::vector<int32_t> modules;
        for (const Region& region : regions_) modules.push_back(region.module);
        drop_model_cache(ctx.base, plan, modules);
    }

private:
    std::vector<Region> regions_;

    // The forward calls of each region: maximal seq ranges of a pass's forward kernels inside it,
    // by the module whose call runs each (Context::caller: an op of a module the region calls
    // that is not registered under the model runs, and is recomputed, with the region's), cut
    // where the capture saw a call of the module begin (a layer with shared weights called 12
    // times one after another, as ALBERT's, is 12 checkpoints, not one).
    std::vector<Call> calls(const Context& ctx) const {
        const Base& base = ctx.base;
        const auto& starts = base.info.call_starts;
        std::vector<Call> out;
        for (const Region& region : regions_) {
            Call cur;
            bool open = false;
            for (size_t seq = 0; seq < base.korder.size(); ++seq) {
                if (base.phase[seq] != Phase::Forward) continue;
                bool inside = base.info.within(ctx.caller[seq], region.module);
                const int32_t pass = base.pass[seq];
                const bool begins = inside && open && !starts.empty() &&
                                    std::binary_search(starts.begin(), starts.end(),
                                                       std::make_pair(region.module, base.korder[seq]));
                if (open && (!inside || pass != cur.pass || begins)) {
                    out.push_back(cur);
                    open = false;
                }
                if (inside && !open) {
                    cur = {static_cast<int32_t>(seq), static_cast<int32_t>(seq), region.module, region.policy, pass};
                    open = true;
                }
                if (inside) cur.last = static_cast<int32_t>(seq);
            }
            if (open) out.push_back(cur);
        }
        return out;
    }
};

}  // namespace
}  // namespace checkpointing

std::vector<Region> checkpoint_regions(const CaptureInfo& info, const std::vector<CheckpointGroup>& groups) {
    std::vector<Region> out;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
        const CheckpointGroup& group = groups[gi];
        const std::string field = groups.size() == 1 ? "checkpoint.modules" : "checkpoint[" + std::to_string(gi) + "].modules";
        for (int32_t module : resolve_modules(info, group.modules, field)) {
            if (group.policy != Policy::Mhc) {
                out.push_back({module, group.policy});
                continue;
            }
            size_t found = 0;
            for (size_t q = 0; q < info.module_name.size(); ++q)
                if (info.module_type[q] == kMhcMaps && info.within(static_cast<int32_t>(q), module)) {
                    out.push_back({static_cast<int32_t>(q), Policy::Full});
                    ++found;
                }
            if (found == 0)
                throw Error("setting: field '" + field + "': policy mhc: module '" +
                            info.module_name[static_cast<size_t>(module)] +
                            "' holds no mHC hyper-connection maps (a module of type " + kMhcMaps + ")");
        }
    }
    for (size_t i = 0; i < out.size(); ++i)
        for (size_t j = 0; j < out.size(); ++j)
            if (i != j && info.within(out[i].module, out[j].module))
                throw Error("setting: checkpoint: modules '" + info.module_name[static_cast<size_t>(out[i].module)] + "' and '" +
                            info.module_name[static_cast<size_t>(out[j].module)] + "' overlap (checkpoint each module once)");
    return out;
}

std::unique_ptr<Transform> make_checkpoint(const Base& base, const std::vector<CheckpointGroup>& groups) {
    return std::make_unique<checkpointing::Checkpoint>(checkpoint_regions(base.info, groups));
}

}  // namespace mhc::advise
