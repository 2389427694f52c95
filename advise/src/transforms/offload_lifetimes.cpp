// Which storages the offload hook's moves let die on the device and bring back, and when the
// device copies die (offload.hpp).
#include <algorithm>
#include <unordered_map>

#include "offload.hpp"

namespace mhc::advise::offloading {

// A storage that a pack outside the hook keeps, or that the program holds (made before this
// step's forward: the batch, buffers), stays on the device; its unpack uses it and the host copy
// is dropped then. The others die on the device and are copied back in the backward.
void PassOffload::choose_copied_back() {
    const Base& base = base_;
    const Plan& plan = plan_;
    // What a checkpoint's recomputation reads (its frame holds its inputs) stays on the device.
    std::unordered_map<int32_t, bool> recomputed_reads;
    for (const Op& op : plan.ops)
        if (op.phase == Phase::Recompute)
            for (const PlanAccess& pa : op.acc) recomputed_reads[pa.alloc] = true;
    // A storage saved by two saved-tensor regimes lives as long as its longest holder: an output a
    // selective checkpoint's policy keeps (a convolution's, "save_matmuls") is held by the
    // checkpoint's cache until the recomputation replays its op, in the checkpointed module's
    // backward; an offloaded module after it that saves it too (the BatchNorm that reads it)
    // unpacks it before then, finds it still on the device and uses it as it is (the hook drops
    // its host copy there). Moved to the host, it died at the BatchNorm in the prediction and
    // came back as a second device copy (the DCGAN's selective checkpoint + offload at 3.2 GiB:
    // reserved +1.87%, and a capacity the captured step did not run at).
    std::vector<uint8_t> cached_by(base.info.module_name.size(), 0);
    for (const Region& region : checkpoint_regions(base.info, ctx_.setting.checkpoint))
        if (region.policy == Policy::SaveMatmuls)
            for (size_t m = 0; m < cached_by.size(); ++m)
                if (base.info.within(static_cast<int32_t>(m), region.module)) cached_by[m] = 1;
    auto cached = [&](int32_t storage) {   // an output a selective checkpoint's policy keeps
        const int32_t made_by = storage < static_cast<int32_t>(base.creator.size())
                                    ? base.creator[static_cast<size_t>(storage)]
                                    : -1;
        if (made_by < 0) return false;
        const int32_t mod = ctx_.caller[static_cast<size_t>(made_by)];
        return mod >= 0 && cached_by[static_cast<size_t>(mod)] &&
               kept_by_save_matmuls(plan.strings[static_cast<size_t>(plan.ops[static_cast<size_t>(made_by)].name)]);
    };
    auto kept_by_policy = [&](int32_t storage) {
        if (!cached(storage)) return false;
        const int32_t unpacked = unpack_at(storage);
        return unpacked >= 0 &&
               plan.key(plan.allocs[static_cast<size_t>(storage)].freed) > plan.key(Point{unpacked, false});
    };
    for (auto& [x, i] : first_pack_) {
        const int32_t made_by = x < static_cast<int32_t>(base.creator.size()) ? base.creator[static_cast<size_t>(x)]
                                                                              : -1;
        bool dies = made_by >= 0 && base.pass[static_cast<size_t>(made_by)] == pass_ &&
                    base.phase[static_cast<size_t>(made_by)] == Phase::Forward;
        // A storage a checkpoint hands to the hook (its input, a cached output) is no longer held by
        // the checkpoint's frame or cache, nor by the saves inside the checkpoint (its holders).
        // A save inside a checkpoint that its policy does not keep is not made at all (the
        // checkpoint's holder replaces it; the recomputation saves a storage of its own): blocks.0's
        // in-place ReLU saving its output, which blocks.1 saves too (ResNet's basic blocks), held
        // it to blocks.0's backward in the prediction, where the step lets it die after blocks.1.
        const bool hooked = hook_unpack_.count(x) > 0, replaced = hooked || !cached(x);
        int32_t first_outside = -1;   // the first forward save of this pass outside the hook
        base.for_savers(x, [&](int32_t saver) {
            if (replaced && saver >= 0 && checkpointed(saver)) return;
            if (saver >= 0 && !in_scope(saver) && base.pass[static_cast<size_t>(saver)] == pass_ &&
                base.phase[static_cast<size_t>(saver)] == Phase::Forward)
                first_outside = first_outside < 0 ? saver : std::min(first_outside, saver);
            else
                dies = dies && saver >= 0 && in_scope(saver);
        });
        // A checkpoint the hook is not around that takes the storage as an input too (vgg.19
        // reading what vgg.18's in-place ReLU wrote, only vgg.18 offloaded) holds it in its frame:
        // an outside save. Left out, the storage died after its last forward read and vgg.19's
        // backward read it dead (bench/advise/new_user/style_hooks.py: access-outside-lifetime).
        for (const HookSave& save : plan.hook_saves)
            if (save.alloc == x && save.pass == pass_ && !covers(save.module))
                first_outside = first_outside < 0 ? save.seq : std::min(first_outside, save.seq);
        if (first_outside >= 0 && dies) {
            const int32_t released = released_outside(x, first_outside, replaced);
            if (released >= 0) outside_release_[x] = released;
            dies = released >= 0;
        }
        // autocast's cache holds a weight cast to its region's end, after the backward when the
        // backward runs inside it (SAM's second): the hook finds it still on the device
        dies = dies && !base.cast_kept_past_backward(x);
        // the program holds what a kernel of another pass uses (GradScaler's scale, read by the
        // unscale after the backward)
        base.for_acc(
            x, [&](int32_t seq, trace::AccessMode) { dies = dies && base.pass[static_cast<size_t>(seq)] == pass_; });
        if (dies && hooked && unpack_at(x) < 0) never_back_[x] = true;
        if (dies && (hooked || (!recomputed_reads.count(x) && !kept_by_policy(x))) && unpack_at(x) >= 0)
            copied_back_[x] = true;
        if (!copied_back_.count(x)) outside_release_.erase(x);
    }
}

// A storage the hook packs that saves outside it hold too (a module's output its caller's mul
// saves: NeRF's `w[..., None] * rgb`): the backward runs the nodes made later first, so when every
// outside save (the first at `first_outside`) was made after the hook's packs and every backward
// read of the storage outside the hook comes before the hook's unpack, those nodes let go of it
// first and it dies on the device after the last of those reads; the hook's unpack then finds it
// gone and copies it back (python/mhc_torch/offload.py). Returns that read, else -1 (it stays on
// the device). A checkpoint's input the hook packs is packed before the call: the stem's ReLU
// that saved it before keeps it (ResNet, layer1.0 checkpointed). `replaced`: the checkpointed
// ops' own reads are the recomputation's, through the checkpoint's unpacks, not outside reads.
namespace {
bool reads(const Plan& plan, int32_t seq, int32_t storage) {
    const auto& acc = plan.ops[static_cast<size_t>(seq)].acc;
    return std::any_of(acc.begin(), acc.end(), [&](const PlanAccess& pa) { return pa.alloc == storage; });
}
}   // namespace

int32_t PassOffload::released_outside(int32_t storage, int32_t first_outside, bool replaced) const {
    const Base& base = base_;
    const int32_t unpack = hook_unpack_at(storage);
    if (unpack < 0) return -1;
    int32_t last_inside = -1;
    for (size_t place : pack_places_.at(storage)) last_inside = std::max(last_inside, packs_[place].seq);
    if (last_inside < 0 || first_outside < last_inside) return -1;
    int32_t released = -1;
    bool after_unpack = false;
    base.for_acc(storage, [&](int32_t seq, trace::AccessMode) {
        if (base.pass[static_cast<size_t>(seq)] != pass_ || base.phase[static_cast<size_t>(seq)] != Phase::Backward ||
            in_scope(seq) || (replaced && checkpointed(seq) && !checkpointed_outside(seq)))
            return;
        // a checkpoint outside the hook reads it through its own frame, unless its recomputation
        // now reads a storage of its own
        if (checkpointed_outside(seq) && !reads(plan_, seq, storage)) return;
        if (earlier(seq, unpack)) released = std::max(released, seq);
        else after_unpack = true;
    });
    // the recomputation of a checkpoint outside the hook reads it through that frame too (before
    // that checkpoint's backward, whose reads set the release; none: the frame's end is not known)
    int32_t recomputed = -1;
    for (size_t op = static_cast<size_t>(plan_.recorded) + 2; op < plan_.ops.size(); ++op) {
        const Op& added = plan_.ops[op];
        if (added.phase != Phase::Recompute || base.pass[static_cast<size_t>(added.anchor)] != pass_ ||
            !checkpointed_outside(added.anchor) || !reads(plan_, static_cast<int32_t>(op), storage))
            continue;
        if (!earlier(static_cast<int32_t>(op), unpack)) return -1;
        if (recomputed < 0 || earlier(recomputed, static_cast<int32_t>(op))) recomputed = static_cast<int32_t>(op);
    }
    if (after_unpack || released < 0) return -1;
    // the node releases what it saved after the engine's checks of its gradients (the aten::sum
    // and aten::_to_copy kernels right after it: a Linear's bias gradient summed to the bias's
    // shape, a gradient cast to its input's dtype; engine.cpp,
    // Engine::evaluate_function: call_function, then release_variables)
    const Plan& plan = plan_;
    auto engine_check = [&](int32_t seq) {
        const std::string& name = plan.strings[static_cast<size_t>(plan.ops[static_cast<size_t>(seq)].name)];
        return base.phase[static_cast<size_t>(seq)] == Phase::Backward &&
               (name == "aten::sum" || name == "aten::_to_copy");
    };
    while (released + 1 < static_cast<int32_t>(base.phase.size()) && engine_check(released + 1)) ++released;
    return recomputed >= 0 && earlier(released, recomputed) ? recomputed : released;
}

// When the device lets go of `storage` (first packed at `own`) in the forward: at its last forward
// use, or (streamed) once max_fwd_stash more packs have happened or the forward ended; the compute
// stream waits there for the copy out (`d2h`) to land.
Point PassOffload::device_release(size_t own, int32_t storage, int32_t d2h) {
    const Base& base = base_;
    const int32_t fwd_end = base.pass_fwd_last[static_cast<size_t>(pass_)];
    int32_t last_use = base.last_access_in_pass(storage, Phase::Forward, pass_);
    if (base.param_cast[static_cast<size_t>(storage)]) last_use = std::max(last_use, base.autocast_end(pass_));
    // or later, while a frame of the model's code still refers to it (capture.frame_holds)
    const int32_t held = base.held_seq[static_cast<size_t>(storage)];
    if (held >= 0 && base.phase[static_cast<size_t>(held)] == Phase::Forward &&
        base.pass[static_cast<size_t>(held)] == pass_)
        last_use = std::max(last_use, held);
    Point release{last_use, true};
    if (!streamed_) return release;
    // kept until a pack the hook offloads comes max_fwd_stash or more packs later (the others
    // count but let go of nothing: torchtune's pack_tensor), else until the hook's first unpack
    size_t stash_end = own + static_cast<size_t>(setting_.max_fwd_stash);
    while (stash_end < packs_.size() && !eligible(packs_[stash_end].alloc)) ++stash_end;
    const Point stash = stash_end < packs_.size() ? packs_[stash_end].at()
                        : first_unpack_ >= 0      ? Point{first_unpack_, false}
                                                  : Point{fwd_end, true};
    release = plan_.later(release, stash);
    int32_t waiter = stash_end < packs_.size() ? packs_[stash_end].seq + (packs_[stash_end].output ? 1 : 0)
                     : first_unpack_ >= 0      ? first_unpack_
                                               : base.pass_bwd_first[static_cast<size_t>(pass_)];
    // the D2H is issued at the saving op's end: no op before it can wait for it (a stash smaller
    // than the saving op's own input packs)
    waiter = std::max(waiter, packs_[own].seq + 1);
    if (waiter >= 0 && waiter != plan_.begin_op() && waiter != plan_.end_op())
        plan_.ops[static_cast<size_t>(waiter)].waits.push_back(d2h);
    return release;
}

// The copy of `storage` back on the device, made where it is brought back: the hook lets go of
// it at the storage's last unpack, so it dies when that backward node returns.
Alloc PassOffload::device_copy_back(int32_t storage, const Alloc& saved, Point recorded_free,
                                    int64_t recorded_free_offset) const {
    Alloc device_copy = saved;
    device_copy.src = -1;
    device_copy.freed = recorded_free;
    device_copy.freed_offset = recorded_free_offset;
    // a checkpoint's save: as long as the checkpoint keeps it on the device without the hook
    if (hook_unpack_.count(storage)) return device_copy;
    if (auto end = base_.node_return(storage, pass_, recorded_free)) {
        device_copy.freed = *end;
        device_copy.freed_offset = 0;
    }
    return device_copy;
}

}  // namespace mhc::advise::offloading
