// A Hugging Face model's own key/value cache under checkpointing. A training forward without
// labels (DPO's policy and reference) makes a cache from the config's use_cache; each layer's
// update copies its keys and values onto it (torch.cat) and the attention reads the copies.
// Checkpointing sets model.config.use_cache = False (mhc_torch.apply and the printed code, as
// transformers' own checkpointing does), so the step with the setting makes no copies: the
// attention reads the keys and values themselves, which then live as long as the copies were read
// (python/mhc_torch/model_cache.py records the updates' kernels).
#include <algorithm>
#include <unordered_map>

#include "mhc/advise/transforms.hpp"

namespace mhc::advise {

void drop_model_cache(const Base& base, Plan& plan, const std::vector<int32_t>& checkpointed) {
    const auto& updates = base.info.model_cache_updates;
    if (updates.empty() || checkpointed.empty()) return;
    std::vector<int32_t> seq_of(base.trace->kernels.size(), -1);
    for (size_t s = 0; s < base.korder.size(); ++s) seq_of[static_cast<size_t>(base.korder[s])] = static_cast<int32_t>(s);
    // the recorded kernels whose copies go: the updates of a model (or of its copy, which shares
    // the switch when made after the setting, as DPO's reference) that holds a checkpointed module
    std::vector<uint8_t> dropped(base.korder.size(), 0);
    std::vector<int32_t> returned(base.korder.size(), -1);   // per dropped seq: its caller's return (a seq)
    for (const auto& update : updates) {
        const int32_t model = update[0], first = update[1], last = update[2], back = update[3];
        if (std::none_of(checkpointed.begin(), checkpointed.end(),
                         [&](int32_t region) { return base.info.within(region, model); }))
            continue;
        for (int32_t row = first; row <= last; ++row) {
            const int32_t seq = seq_of[static_cast<size_t>(row)];
            if (seq < 0) continue;
            dropped[static_cast<size_t>(seq)] = 1;
            returned[static_cast<size_t>(seq)] = seq_of[static_cast<size_t>(back)];
        }
    }
    // each copy (an update's kernel, or its rerun in a recomputation) -> what it copied: the
    // largest storage it reads (the cache it appends to is empty in a training forward)
    std::unordered_map<int32_t, int32_t> source;
    std::vector<int32_t> removed;
    for (size_t op = 0; op < plan.ops.size(); ++op) {
        const Op& kernel = plan.ops[op];
        const int32_t seq = static_cast<int32_t>(op) < plan.recorded ? static_cast<int32_t>(op) : kernel.src;
        if (kernel.kind != OpKind::Kernel || seq < 0 || seq >= plan.recorded || !dropped[static_cast<size_t>(seq)]) continue;
        int32_t copied = -1;
        for (const PlanAccess& read : kernel.acc)
            if (read.mode == trace::AccessMode::Read &&
                (copied < 0 || plan.allocs[static_cast<size_t>(read.alloc)].bytes > plan.allocs[static_cast<size_t>(copied)].bytes))
                copied = read.alloc;
        if (copied < 0) continue;
        for (const PlanAccess& made : kernel.acc)
            if (plan.allocs[static_cast<size_t>(made.alloc)].made.op == static_cast<int32_t>(op)) source[made.alloc] = copied;
        removed.push_back(static_cast<int32_t>(op));
    }
    if (removed.empty()) return;
    for (int32_t op : removed) plan.remove_op(op);
    // the copies' readers read the source; the source lives to the copy's last read, to the copy's
    // free when a backward node read it (saved by the attention: released with the node), and
    // until the attention's forward returns (`key_states, value_states = cache.update(...)`
    // rebinds the names that hold the source without the cache)
    std::unordered_map<int32_t, Point> last_read;
    for (size_t op = 0; op < plan.ops.size(); ++op)
        for (PlanAccess& access : plan.ops[op].acc) {
            auto it = source.find(access.alloc);
            if (it == source.end()) continue;
            const Point here{static_cast<int32_t>(op), true};
            auto [at, fresh] = last_read.emplace(access.alloc, here);
            if (!fresh && plan.key(here) > plan.key(at->second)) at->second = here;
            access.alloc = it->second;
        }
    for (const auto& [copy, copied] : source) {
        Alloc& gone = plan.allocs[static_cast<size_t>(copy)];
        Alloc& kept = plan.allocs[static_cast<size_t>(copied)];
        gone.removed = true;
        auto read = last_read.find(copy);
        if (read == last_read.end()) continue;
        const Phase by = plan.ops[static_cast<size_t>(read->second.op)].phase;
        // where the attention that called the update returned: the recorded one, or its rerun in
        // the recomputation that made this copy
        const int32_t maker = gone.made.op;
        const int32_t src = maker < plan.recorded ? maker : plan.ops[static_cast<size_t>(maker)].src;
        const int32_t back = src >= 0 && src < plan.recorded ? returned[static_cast<size_t>(src)] : -1;
        int32_t rerun = maker < plan.recorded ? back : -1;
        for (size_t q = 0; rerun < 0 && back >= 0 && q < plan.ops.size(); ++q)
            if (plan.ops[q].src == back && plan.ops[q].phase == Phase::Recompute &&
                plan.ops[q].anchor == plan.ops[static_cast<size_t>(maker)].anchor)
                rerun = static_cast<int32_t>(q);
        Point until = read->second;
        if (by == Phase::Backward || (by == Phase::Recompute && rerun < 0)) until = plan.later(until, gone.freed);
        if (rerun >= 0) until = plan.later(until, Point{rerun, true});
        if (plan.key(until) > plan.key(kept.freed)) {
            kept.freed = until;
            kept.freed_offset = 0;
        }
    }
}

}  // namespace mhc::advise
