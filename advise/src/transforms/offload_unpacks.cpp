// Where the offload hook unpacks a storage, and which unpack's prefetch brings a save back
// (offload.hpp).
#include <algorithm>
#include <vector>

#include "offload.hpp"

namespace mhc::advise::offloading {

// A backward node unpacks all it saved before its first kernel (capture.unpacks).
// A storage a checkpoint hands to the hook: that unpack, or the capture's when a save the hook
// packs for the capture is unpacked earlier (the capture's unpack of a save outside the hook, a
// timestep embedding another block saves, is not the hook's).
int32_t PassOffload::unpack_at(int32_t storage) const {
    const int32_t captured = base_.unpack_in_pass(storage, pass_);
    auto hooked = hook_unpack_.find(storage);
    if (hooked == hook_unpack_.end()) return captured;
    if (!captured_pack_.count(storage) || captured < 0) return hooked->second;
    return hooked->second < 0 || earlier(captured, hooked->second) ? captured : hooked->second;
}

// Where the hook itself first unpacks a storage. A storage that ops outside the hook saved too (a
// timestep embedding every block reads) may be unpacked first by one of theirs, which the hook
// never sees (capture.unpacks has a storage's first unpack only): then the first backward op in
// the hook's scope that reads it.
int32_t PassOffload::hook_unpack_at(int32_t storage) const {
    const Base& base = base_;
    // a storage a checkpoint hands to the hook: that unpack, or the hook's unpack of its capture's
    // saves in scope when earlier
    auto hooked = hook_unpack_.find(storage);
    if (hooked != hook_unpack_.end() && !captured_pack_.count(storage)) return hooked->second;
    auto with_hooked = [&](int32_t captured) {
        if (hooked == hook_unpack_.end() || hooked->second < 0) return captured;
        return captured >= 0 && earlier(captured, hooked->second) ? captured : hooked->second;
    };
    const int32_t unpacked = base.unpack_in_pass(storage, pass_);
    bool outside = false;
    base.for_savers(storage, [&](int32_t saver) {
        if (saver >= 0 && base.pass[static_cast<size_t>(saver)] == pass_ &&
            base.phase[static_cast<size_t>(saver)] == Phase::Forward && !in_scope(saver))
            outside = true;
    });
    if (!outside || unpacked < 0) return with_hooked(unpacked);
    int32_t found = -1;
    base.for_acc(storage, [&](int32_t seq, trace::AccessMode) {
        if (found < 0 && seq >= unpacked && base.pass[static_cast<size_t>(seq)] == pass_ &&
            base.phase[static_cast<size_t>(seq)] == Phase::Backward && in_scope(seq))
            found = seq;
    });
    return with_hooked(found >= 0 ? found : unpacked);
}

// Where a pack's own save is unpacked (what a prefetch from it waits for): the storage's unpack,
// but for a storage that several forward ops of the pass saved (a time embedding every block
// reads), the first backward kernel at or after it of the saving op's module or a module inside
// it that reads it (the storage's first unpack is another node's). Inside: a backward kernel is
// recorded under the module whose backward ran last, so a ResBlock's silu_backward of the time
// embedding runs under its `skip` conv's (bench/advise/new_user/unet.py); with the module alone,
// such a block's prefetch fell back to the storage's first unpack, in another block, and brought
// its storages back hundreds of kernels early.
int32_t PassOffload::save_unpack_at(size_t pack) const {
    const Base& base = base_;
    if (packs_[pack].hook >= 0) return plan_.hook_saves[static_cast<size_t>(packs_[pack].hook)].unpack;
    const int32_t storage = packs_[pack].alloc, unpacked = unpack_at(storage);
    if (unpacked < 0) return unpacked;
    int32_t savers = 0;
    base.for_savers(storage, [&](int32_t saver) {
        if (saver >= 0 && base.pass[static_cast<size_t>(saver)] == pass_ &&
            base.phase[static_cast<size_t>(saver)] == Phase::Forward)
            ++savers;
    });
    if (savers <= 1) return unpacked;
    // where the capture recorded this save's own unpack: its node's (F.normalize's norm saves its
    // input as the division after it does; the norm's node runs two nodes after the division's)
    auto own = base.save_unpack_seq.find({storage, packs_[pack].seq});
    if (own != base.save_unpack_seq.end() && base.pass[static_cast<size_t>(own->second)] == pass_ &&
        base.phase[static_cast<size_t>(own->second)] == Phase::Backward)
        return own->second;
    const int32_t mod = base.module[static_cast<size_t>(packs_[pack].seq)];
    // the modules of its other savers inside that module are theirs: a ReLU called in an MLP's
    // forward saves its output, which the next Linear (inside the MLP) saves too; the Linear's
    // weight-gradient matmul reads it before the ReLU's own backward does
    std::vector<int32_t> inner;
    base.for_savers(storage, [&](int32_t saver) {
        if (saver < 0 || saver == packs_[pack].seq || base.pass[static_cast<size_t>(saver)] != pass_ ||
            base.phase[static_cast<size_t>(saver)] != Phase::Forward)
            return;
        const int32_t other = base.module[static_cast<size_t>(saver)];
        if (other != mod && base.info.within(other, mod)) inner.push_back(other);
    });
    // at or after it in the plan's order: a checkpoint's input the hook packs is unpacked where a
    // recomputation starts, an added op whose index says nothing of its place
    int32_t found = -1;
    base.for_acc(storage, [&](int32_t seq, trace::AccessMode) {
        const int32_t at = base.module[static_cast<size_t>(seq)];
        if (found < 0 && !earlier(seq, unpacked) && base.pass[static_cast<size_t>(seq)] == pass_ &&
            base.phase[static_cast<size_t>(seq)] == Phase::Backward && base.info.within(at, mod) &&
            std::none_of(inner.begin(), inner.end(), [&](int32_t other) { return base.info.within(at, other); }))
            found = seq;
    });
    return found >= 0 ? found : unpacked;
}

// The hook's first unpack (of a storage it moved) releases what the stash still holds.
void PassOffload::find_first_unpack() {
    for (auto& [storage, pack] : first_pack_) {
        const int32_t unpacked = hook_unpack_at(storage);
        if (unpacked >= 0 && (first_unpack_ < 0 || earlier(unpacked, first_unpack_))) first_unpack_ = unpacked;
    }
}

// Which unpack brings `storage` (whose first pack is `own`) back: the save the hook unpacks (own)
// or a later one whose prefetch reaches it (q); at one instant the hook copies in the order it
// runs. Any save of the storage is one the hook looks back to: a storage saved twice (a ReLU's
// output, saved by the ReLU and by the matmul that reads it) comes back with the unpack of a save
// up to `prefetch` after either (offload.py, _unpack: saves index-1 .. index-prefetch, whichever
// storage they hold). Among the unpacks at one kernel, the earliest pack's; it reaches back to the
// nearest. `bring`: the storage's unpack in, the bringing one out; `distance`: how far back it reaches.
size_t PassOffload::bringing_pack(size_t own, int32_t storage, int32_t& bring, size_t& distance) const {
    size_t trigger = own;
    distance = 0;
    if (!streamed_) return trigger;
    const size_t prefetch = static_cast<size_t>(setting_.prefetch_or_default());
    for (size_t place : pack_places_.at(storage))
        for (size_t q = place + 1; q <= place + prefetch && q < packs_.size(); ++q) {
            if (!copied_back_.count(packs_[q].alloc)) continue;   // kept on the device: no prefetch
            const int32_t unpacked = save_unpack_at(q);
            if (unpacked >= 0 && (earlier(unpacked, bring) || (unpacked == bring && trigger != own && q < trigger))) {
                bring = unpacked;
                trigger = q;
            }
            if (trigger == q) distance = q - place;   // places ascend: the last is the nearest
        }
    return trigger;
}

// The save of `storage` (first packed at `own`) whose unpack at `at` brings it back on demand:
// its first pack that the capture saw unpacked there (a storage saved by two ops of one node's
// module, the RMSNorm's input for its pow and its mul, is brought back by the mul's save), else `own`.
size_t PassOffload::unpacking_pack(size_t own, int32_t storage, int32_t at) const {
    for (size_t place : pack_places_.at(storage))
        if (save_unpack_at(place) == at) return place;
    return own;
}

}  // namespace mhc::advise::offloading
