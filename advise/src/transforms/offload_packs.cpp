// The packs the offload hook sees in one pass, in the order it sees them (offload.hpp).
#include <algorithm>
#include <climits>
#include <map>
#include <unordered_map>

#include "offload.hpp"

namespace mhc::advise::offloading {

bool PassOffload::in_scope(int32_t seq) const {
    // (a module the model does not register: its caller's)
    if (checkpointed(seq)) return false;   // the checkpoint's own hook
    const int32_t mod = ctx_.caller[static_cast<size_t>(seq)];
    // null: around the model's forward (the root module's call), not a loss computed after it
    if (!setting_.modules) return mod >= 0;
    for (int32_t scoped : scope_)
        if (base_.info.within(mod, scoped)) return true;
    return false;
}

// Whether op `seq` runs inside a checkpointed module (its saves are the checkpoint's).
bool PassOffload::checkpointed(int32_t seq) const {
    const int32_t mod = ctx_.caller[static_cast<size_t>(seq)];
    return mod >= 0 && ctx_.in_checkpoint[static_cast<size_t>(mod)];
}

// Whether op `seq` runs inside a checkpoint the hook is not around: that checkpoint's frame holds
// its inputs on the device to its own backward, whatever the hook does with the same storage.
bool PassOffload::checkpointed_outside(int32_t seq) const {
    const int32_t mod = ctx_.caller[static_cast<size_t>(seq)];
    return mod >= 0 && uncovered_[static_cast<size_t>(mod)];
}

// Whether the hook is around a checkpointed module's calls (entered before checkpoint packs the
// call's inputs: around the module itself or a module holding it, or the whole forward).
bool PassOffload::covers(int32_t checkpointed) const {
    if (!setting_.modules) return checkpointed >= 0;
    for (int32_t scoped : scope_)
        if (base_.info.within(checkpointed, scoped)) return true;
    return false;
}

bool PassOffload::eligible(int32_t alloc_id) const {
    const Alloc& alloc = plan_.allocs[static_cast<size_t>(alloc_id)];
    const std::string& label = plan_.strings[static_cast<size_t>(alloc.label)];
    return alloc.device == base_.device && alloc.bytes >= setting_.min_bytes &&
           alloc.category != trace::Category::Param && label.rfind("buffer ", 0) != 0;
}

void PassOffload::collect_packs() {
    const Base& base = base_;
    const int32_t pass = pass_;
    const int32_t nrec = static_cast<int32_t>(base.trace->allocations.size());
    std::vector<Pack>& packs = packs_;
    for (int32_t x = 0; x < nrec; ++x)
        base.for_packs(x, [&](int32_t seq, int32_t count) {
            if (seq >= 0 && base.pass[static_cast<size_t>(seq)] == pass &&
                base.phase[static_cast<size_t>(seq)] == Phase::Forward && in_scope(seq))
                for (int32_t i = 0; i < count; ++i)
                    packs.push_back({seq, x, base.creator[static_cast<size_t>(x)] == seq});
        });
    // A storage's place among this pass's backward's first unpacks (capture.unpacks' order),
    // else last. Per pass: a parameter saved in every pass has its first place in the first
    // pass, which would sort it before the activations a later pass's op saved with it.
    std::unordered_map<int32_t, int32_t> pass_rank;
    // Where the capture recorded the order of the saves (capture.pack_order), an op's saves keep
    // it: (storage, saving seq) -> its first place.
    std::map<std::pair<int32_t, int32_t>, int32_t> pack_place;
    {
        std::vector<int32_t> seq_of(base.trace->kernels.size(), -1);
        for (size_t s = 0; s < base.korder.size(); ++s)
            seq_of[static_cast<size_t>(base.korder[s])] = static_cast<int32_t>(s);
        const auto& order = base.info.pack_order;
        for (size_t r = 0; r < order.size(); ++r) {
            const int32_t seq = seq_of[static_cast<size_t>(order[r].second)];
            if (seq >= 0 && base.pass[static_cast<size_t>(seq)] == pass)
                pack_place.emplace(std::make_pair(order[r].first, seq), static_cast<int32_t>(r));
        }
        const auto& listed = base.info.unpacks_listed;
        for (size_t r = 0; r < listed.size(); ++r) {
            const int32_t seq = seq_of[static_cast<size_t>(listed[r].second)];
            if (seq >= 0 && base.pass[static_cast<size_t>(seq)] == pass)
                pass_rank.emplace(listed[r].first, static_cast<int32_t>(r));
        }
    }
    auto unpack_rank = [&](int32_t storage) {
        auto it = pass_rank.find(storage);
        return it != pass_rank.end() ? it->second : INT32_MAX;
    };
    // One op's saves in the order autograd made them, which its node unpacks them in too (the
    // formula's saved variables), not in the order they were allocated (autocast casts the last
    // argument first): the copies back at one unpack are allocated in this order.
    // Where the capture recorded every save's place, the hook's order is that one across ops too:
    // an op's output that autograd does not differentiate (flash attention's logsumexp) has no
    // grad_fn, and the capture credits its save to the next kernel, yet autograd packed it with
    // the op's other outputs, before the output itself (nanoGPT: the stash let go of the output
    // first, the capture of the logsumexp; reserved +0.06%).
    bool all_placed = !pack_place.empty();
    for (const Pack& pack_entry : packs)
        all_placed = all_placed && pack_place.count({pack_entry.alloc, pack_entry.seq}) > 0;
    std::sort(packs.begin(), packs.end(), [&](const Pack& left, const Pack& right) {
        auto pl = pack_place.find({left.alloc, left.seq}), pr = pack_place.find({right.alloc, right.seq});
        if (all_placed && pl->second != pr->second) return pl->second < pr->second;
        if (left.seq != right.seq) return left.seq < right.seq;
        if (pl != pack_place.end() && pr != pack_place.end() && pl->second != pr->second)
            return pl->second < pr->second;
        if (left.output != right.output) return !left.output;
        const int32_t rank_left = unpack_rank(left.alloc), rank_right = unpack_rank(right.alloc);
        return rank_left != rank_right ? rank_left < rank_right : left.alloc < right.alloc;
    });
}

// The saves checkpoints in the hook's scope hand to it (Plan::hook_saves), among the captured packs
// at their places: an input before the call's first op, a cached output after its op.
void PassOffload::add_hook_saves() {
    for (const Pack& pack : packs_) captured_pack_[pack.alloc] = true;
    std::vector<Pack> hooked;
    for (size_t h = 0; h < plan_.hook_saves.size(); ++h) {
        const HookSave& save = plan_.hook_saves[h];
        if (save.pass != pass_ || !covers(save.module)) continue;
        hooked.push_back({save.seq, save.alloc, save.output, static_cast<int32_t>(h)});
        auto [it, fresh] = hook_unpack_.emplace(save.alloc, save.unpack);
        if (!fresh && save.unpack >= 0 && (it->second < 0 || earlier(save.unpack, it->second))) it->second = save.unpack;
    }
    std::stable_sort(hooked.begin(), hooked.end(), [](const Pack& left, const Pack& right) {
        return left.seq != right.seq ? left.seq < right.seq : !left.output && right.output;
    });
    std::vector<Pack> merged;
    merged.reserve(packs_.size() + hooked.size());
    size_t next = 0;
    for (const Pack& save : hooked) {
        while (next < packs_.size() && (packs_[next].seq < save.seq ||
                                        (packs_[next].seq == save.seq && (save.output || !packs_[next].output))))
            merged.push_back(packs_[next++]);
        merged.push_back(save);
    }
    merged.insert(merged.end(), packs_.begin() + static_cast<std::ptrdiff_t>(next), packs_.end());
    packs_ = std::move(merged);
}

void PassOffload::index_eligible_packs() {
    for (size_t i = 0; i < packs_.size(); ++i)
        if (eligible(packs_[i].alloc)) {
            first_pack_.emplace(packs_[i].alloc, i);
            pack_places_[packs_[i].alloc].push_back(i);
        }
}

}  // namespace mhc::advise::offloading
