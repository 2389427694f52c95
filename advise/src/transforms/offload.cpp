// Activation offloading: saved tensors of the named modules go to pinned host memory in the
// forward and come back in the backward, either synchronously on the compute stream
// (torch.autograd.graph.save_on_cpu semantics) or streamed on a side stream with a bounded
// forward stash and prefetch (torchtune's OffloadActivations, TRL's activation offloading).
// docs/simulator.md "Settings: offload" states the rules this file follows.
#include "offload.hpp"

#include <algorithm>

namespace mhc::advise {

namespace offloading {

namespace {

// A synchronous copy of `bytes` on the compute stream, belonging to recorded kernel `anchor` of
// `step`: D2H in the forward, H2D in the backward. Appended to the plan's ops, not yet placed.
int32_t add_copy(const Base& base, Plan& plan, bool h2d, int64_t bytes, int32_t step, int32_t anchor) {
    Op cp;
    cp.kind = h2d ? OpKind::CopyH2D : OpKind::CopyD2H;
    cp.bytes = bytes;
    cp.step = step;
    cp.phase = h2d ? Phase::Backward : Phase::Forward;
    cp.module = base.module[static_cast<size_t>(anchor)];
    cp.anchor = anchor;
    cp.name = plan.intern(h2d ? "offload H2D" : "offload D2H");
    return plan.add_op(cp);
}

}  // namespace

PassOffload::PassOffload(const Context& ctx, Plan& plan, int32_t pass, const OffloadSetting& setting,
                         const std::vector<int32_t>& scope)
    : ctx_(ctx), base_(ctx.base), plan_(plan), pass_(pass), setting_(setting), scope_(scope),
      streamed_(setting.mode == OffloadMode::Streamed) {
    uncovered_.assign(base_.info.module_name.size(), 0);
    for (const Region& region : checkpoint_regions(base_.info, ctx.setting.checkpoint)) {
        if (covers(region.module)) continue;
        for (size_t m = 0; m < uncovered_.size(); ++m)
            if (base_.info.within(static_cast<int32_t>(m), region.module)) uncovered_[m] = 1;
    }
}

void PassOffload::apply() {
    collect_packs();
    add_hook_saves();
    index_eligible_packs();
    choose_copied_back();
    find_first_unpack();
    for (size_t i = 0; i < packs_.size(); ++i) {
        auto first = first_pack_.find(packs_[i].alloc);
        if (first != first_pack_.end() && first->second == i) move(i);
    }
    place_device_copies();
}

// The storage first packed at `own`: copied to the host after the saving op; if it dies on the
// device, let go of there and copied back in the backward.
void PassOffload::move(size_t own) {
    const Base& base = base_;
    Plan& plan = plan_;
    const int32_t step = base.steps[static_cast<size_t>(base.pass_step[static_cast<size_t>(pass_)])];
    const int32_t alloc_id = packs_[own].alloc;
    const int32_t pack_seq = packs_[own].seq;
    Alloc& saved = plan.allocs[static_cast<size_t>(alloc_id)];
    const Point recorded_free = saved.freed;
    const int64_t recorded_free_offset = saved.freed_offset;
    // The host copy, made after the saving op.
    Alloc host_copy = saved;
    host_copy.src = -1;
    host_copy.device = -1;
    host_copy.made = {pack_seq, true};
    host_copy.made_offset = host_copy.freed_offset = 0;
    int32_t d2h = -1;
    // a checkpoint's input is packed before the call runs (before what the call adds before its
    // first op: BatchNorm's statistics copies)
    const bool before_call = packs_[own].hook >= 0 && !packs_[own].output;
    if (before_call) host_copy.made = {pack_seq, false};
    if (streamed_) {
        plan.copies.push_back({false, saved.bytes, pack_seq, before_call});
        d2h = static_cast<int32_t>(plan.copies.size() - 1);
    } else if (before_call) {
        // after the copies of the call's earlier inputs (autograd packs the arguments in order),
        // before anything else placed there
        const int32_t id = add_copy(base, plan, false, saved.bytes, step, pack_seq);
        const auto& placed = plan.before[static_cast<size_t>(pack_seq)];
        size_t& copied = call_input_copies_[pack_seq];
        copied < placed.size() ? plan.insert_before_op(placed[copied], id) : plan.insert_before(pack_seq, id);
        ++copied;
    } else {
        plan.insert_after(pack_seq, add_copy(base, plan, false, saved.bytes, step, pack_seq));
    }
    auto outside = outside_release_.find(alloc_id);
    const int32_t unpack = outside == outside_release_.end() ? unpack_at(alloc_id) : hook_unpack_at(alloc_id);
    if (never_back_.count(alloc_id)) {
        // a checkpoint's cached output past its early stop: its frame lets go of it when the
        // call's backward ends; a later unpack's prefetch may still bring it back, and then the
        // copy stays until then (the hook holds a copy until its last save is unpacked)
        Point frame_end = saved.freed;
        for (size_t place : pack_places_.at(alloc_id))
            if (packs_[place].hook >= 0) frame_end = plan.hook_saves[static_cast<size_t>(packs_[place].hook)].frame_end;
        saved.freed = device_release(own, alloc_id, d2h);
        saved.freed_offset = 0;
        int32_t bring = plan.end_op();
        size_t distance = 0;
        const size_t trigger = bringing_pack(own, alloc_id, bring, distance);
        host_copy.freed = trigger == own ? frame_end : Point{bring, false};
        plan.add_alloc(host_copy);
        if (trigger == own) return;
        plan.copies.push_back({true, saved.bytes, bring, true});
        Alloc device_copy = saved;
        device_copy.src = -1;
        device_copy.made = {bring, false};
        device_copy.freed = frame_end;
        device_copy.made_offset = device_copy.freed_offset = 0;
        backs_.push_back({trigger, distance, alloc_id, device_copy});
        return;
    }
    if (!copied_back_.count(alloc_id) || unpack < 0) {
        // the hook drops the host copy at its own unpack
        const int32_t hook_unpack = hook_unpack_at(alloc_id);
        host_copy.freed = hook_unpack >= 0 ? Point{hook_unpack, false} : saved.freed;
        plan.add_alloc(host_copy);
        return;
    }
    saved.freed = device_release(own, alloc_id, d2h);
    saved.freed_offset = 0;
    // held by the saves outside to their backward (a streamed offload's stash may hold it longer)
    if (outside != outside_release_.end() && plan.key(Point{outside->second, true}) > plan.key(saved.freed))
        saved.freed = Point{outside->second, true};
    // Back in the backward: at the unpack, or earlier when a later pack's unpack prefetches it
    // (only the unpack of a storage copied back prefetches: the hook hands the others back as
    // they are).
    int32_t bring = unpack;
    size_t distance = 0;
    const size_t trigger = bringing_pack(own, alloc_id, bring, distance);
    Alloc device_copy = device_copy_back(alloc_id, saved, recorded_free, recorded_free_offset);
    int32_t h2d = -1;
    if (streamed_) {
        plan.copies.push_back({true, saved.bytes, bring, true});
        plan.ops[static_cast<size_t>(unpack)].waits.push_back(static_cast<int32_t>(plan.copies.size() - 1));
        device_copy.made = {bring, false};
    } else {
        // placed with the others in the order the hook unpacks (place_device_copies)
        const int32_t anchor = unpack < plan.recorded ? unpack : plan.ops[static_cast<size_t>(unpack)].anchor;
        h2d = add_copy(base, plan, true, saved.bytes, step, anchor);
        device_copy.made = {h2d, false};
    }
    device_copy.made_offset = 0;
    host_copy.freed = device_copy.made;
    plan.add_alloc(host_copy);
    // brought on demand: in the order of the save its node unpacks first, not of the storage's first pack
    const size_t order = trigger == own ? unpacking_pack(own, alloc_id, bring) : trigger;
    backs_.push_back({order, trigger == own ? 0 : distance, alloc_id, device_copy, h2d, unpack});
}

// The device copies in the order the hook makes them at one instant (allocations made at one
// point keep the order they are added in, and so do their frees at one instant): at each unpack,
// the save itself first (on demand), then the saves before it, nearest first
// (python/mhc_torch/offload.py, _unpack: index - 1 down to index - prefetch); the saves of one
// node in the order it unpacks them (the pack order of that node's saves, not of the storages'
// first packs: the tiny mHC model's final RMSNorm saves its input for the pow, then rsqrt's
// output, and its mul saves both again, rsqrt's first; the mul's node brought the input back
// first in the prediction, and its streamed offload at stash 2, prefetch 1 was predicted 68 MiB
// reserved against 70 MiB captured). Sync copies are placed here too. Added in forward order instead, a prefetch
// brought a block's earlier saves back before the save being unpacked, and the expandable
// segments' model placed them elsewhere: the UNet's offload of everything
// (bench/advise/new_user/unet.py) predicted 922 MiB reserved against the capture's 1022 MiB.
// The backward's reads of each storage then read its copy.
void PassOffload::place_device_copies() {
    const Base& base = base_;
    std::stable_sort(backs_.begin(), backs_.end(), [](const Back& lhs, const Back& rhs) {
        return lhs.trigger != rhs.trigger ? lhs.trigger < rhs.trigger : lhs.distance < rhs.distance;
    });
    for (Back& back : backs_) {
        const int32_t storage = back.storage;
        if (back.h2d >= 0) plan_.insert_before_op(back.unpack, back.h2d);
        const int32_t dc = plan_.add_alloc(back.copy);
        // a checkpoint's save: the reads from where it comes back on, the recomputation's too
        const bool hooked = hook_unpack_.count(storage) > 0;
        const int64_t from = plan_.key(back.copy.made);
        auto redirect = [&](int32_t op) {
            if ((hooked || outside_release_.count(storage)) && plan_.key(Point{op, false}) < from) return;
            for (PlanAccess& pa : plan_.ops[static_cast<size_t>(op)].acc)
                if (pa.alloc == storage) pa.alloc = dc;
        };
        base.for_acc(storage, [&](int32_t seq, trace::AccessMode) {
            if (base.phase[static_cast<size_t>(seq)] == Phase::Backward && base.pass[static_cast<size_t>(seq)] == pass_)
                redirect(seq);
        });
        if (!hooked) continue;
        for (size_t op = static_cast<size_t>(plan_.recorded) + 2; op < plan_.ops.size(); ++op) {
            const Op& added = plan_.ops[op];
            if (added.phase == Phase::Recompute && base.pass[static_cast<size_t>(added.anchor)] == pass_)
                redirect(static_cast<int32_t>(op));
        }
    }
}

}  // namespace offloading

namespace {

class Offload final : public Transform {
public:
    Offload(OffloadSetting setting, std::vector<int32_t> scope) : o_(std::move(setting)), scope_(std::move(scope)) {}
    void apply(const Context& ctx, Plan& plan) const override {
        for (size_t pass = 0; pass < ctx.base.pass_step.size(); ++pass)
            offloading::PassOffload(ctx, plan, static_cast<int32_t>(pass), o_, scope_).apply();
    }

private:
    OffloadSetting o_;
    std::vector<int32_t> scope_;   // modules whose forward runs under the hook; empty: the whole forward
};

}  // namespace

std::unique_ptr<Transform> make_offload(const Base& base, const OffloadSetting& setting) {
    std::vector<int32_t> scope;
    if (setting.modules) scope = resolve_modules(base.info, *setting.modules, "offload.modules");
    return std::make_unique<Offload>(setting, std::move(scope));
}

}  // namespace mhc::advise
