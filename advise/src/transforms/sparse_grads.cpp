// A sparse gradient accumulated over passes, with the optimizer on the host (sparse_grads.hpp).
#include "sparse_grads.hpp"

#include <array>
#include <cstddef>

namespace mhc::advise {

namespace {

using Pair = std::array<int32_t, 2>;   // indices, values

// The gradient's pairs the step's passes made, in id order, the last being `last`'s; empty where
// the allocations of its label do not pair up.
std::vector<Pair> step_pairs(const Base& base, const std::vector<int32_t>& last, size_t si) {
    const Alloc& final_part = base.plan.allocs[static_cast<size_t>(last[0])];
    std::vector<int32_t> found;
    for (int32_t a = 0; a < last[0] && a < static_cast<int32_t>(base.creator.size()); ++a) {
        const Alloc& al = base.plan.allocs[static_cast<size_t>(a)];
        if (al.label != final_part.label || al.category != trace::Category::Grad) continue;
        const int32_t made = base.creator[static_cast<size_t>(a)];
        if (made < 0 ||
            base.pass_step[static_cast<size_t>(base.pass[static_cast<size_t>(made)])] != static_cast<int32_t>(si))
            continue;
        found.push_back(a);
    }
    if (found.empty() || found.size() % 2 != 0) return {};
    std::vector<Pair> pairs;
    for (size_t i = 0; i < found.size(); i += 2) pairs.push_back({found[i], found[i + 1]});
    pairs.push_back({last[0], last[1]});
    return pairs;
}

int32_t made_pass(const Base& base, int32_t alloc) {
    return base.pass[static_cast<size_t>(base.creator[static_cast<size_t>(alloc)])];
}

// A later pass's reads of an earlier pair (the sparse add that replaced it) read the pair that
// replaced it: on the host optimizer the earlier pair is gone by then.
void redirect_later_reads(const Base& base, Plan& plan, int32_t from, int32_t to, int32_t own_pass) {
    base.for_acc(from, [&](int32_t seq, trace::AccessMode) {
        if (base.pass[static_cast<size_t>(seq)] == own_pass) return;
        for (PlanAccess& pa : plan.ops[static_cast<size_t>(seq)].acc)
            if (pa.alloc == from) pa.alloc = to;
    });
}

}   // namespace

bool move_accumulated_sparse(const Base& base, Plan& plan, size_t si, const std::vector<int32_t>& pair, Op& host,
                             std::vector<int32_t>& free_at_host, int64_t (*host_bytes)(const Base&, int64_t)) {
    if (pair.size() != 2) return false;
    const std::vector<Pair> pairs = step_pairs(base, pair, si);
    if (pairs.size() < 2) return false;
    for (size_t part = 0; part < 2; ++part) {
        int32_t held = -1;    // the host copy so far
        int64_t before = 0;   // the entries' bytes of the pairs before
        for (size_t j = 0; j < pairs.size(); ++j) {
            const int32_t alloc = pairs[j][part];
            const int32_t pass = made_pass(base, alloc);
            const int32_t last = base.last_access_in_pass(alloc, Phase::Backward, pass);
            if (last < 0) return false;
            const int64_t whole = base.plan.allocs[static_cast<size_t>(alloc)].bytes;
            const int64_t own = whole - before;   // this pass's entries
            before = whole;
            if (j + 1 < pairs.size()) redirect_later_reads(base, plan, alloc, pairs[j + 1][part], pass);
            Alloc& life = plan.allocs[static_cast<size_t>(alloc)];
            life.bytes = own;
            life.freed = {last, true};
            life.freed_offset = 0;
            plan.copies.push_back({false, own, last, false});
            host.waits.push_back(static_cast<int32_t>(plan.copies.size() - 1));
            Alloc copy = life;   // the host's gradient so far: this pass's entries added
            copy.src = -1;
            copy.device = -1;
            copy.bytes = host_bytes(base, whole);
            copy.made = {last, j == 0};
            copy.made_offset = copy.freed_offset = 0;
            copy.freed = {kNoFree, false};
            const int32_t made = plan.add_alloc(copy);
            if (held >= 0) {   // the copy before it dies at the add, the pass's own copy with it
                plan.allocs[static_cast<size_t>(held)].freed = {last, true};
                Alloc added;
                added.bytes = host_bytes(base, own);
                added.device = -1;
                added.category = trace::Category::Workspace;
                added.label = plan.intern("gradient accumulation on the host");
                added.made = {last, false};
                added.freed = {last, true};
                plan.add_alloc(added);
            }
            held = made;
        }
        free_at_host.push_back(held);
    }
    return true;
}

}   // namespace mhc::advise
