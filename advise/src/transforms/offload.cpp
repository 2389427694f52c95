// Activation offloading: saved tensors of the named modules go to pinned host memory in the
// forward and come back in the backward, either synchronously on the compute stream
// (torch.autograd.graph.save_on_cpu semantics) or streamed on a side stream with a bounded
// forward stash and prefetch (torchtune's OffloadActivations, TRL's activation offloading).
// docs/simulator.md "Settings: offload" states the rules this file follows.
#include <algorithm>
#include <climits>
#include <map>
#include <unordered_map>

#include "mhc/advise/transforms.hpp"

namespace mhc::advise {

namespace {

struct Pack {
    int32_t seq;     // the saving op
    int32_t alloc;   // the storage
    bool output;     // made by the saving op: packed after it ran (its inputs are packed before)
    Point at() const { return {seq, output}; }
};

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

class Offload final : public Transform {
public:
    Offload(OffloadSetting setting, std::vector<int32_t> scope) : o_(std::move(setting)), scope_(std::move(scope)) {}
    void apply(const Context& ctx, Plan& plan) const override {
        for (size_t pi = 0; pi < ctx.base.pass_step.size(); ++pi) apply_pass(ctx, plan, static_cast<int32_t>(pi));
    }

private:
    OffloadSetting o_;
    std::vector<int32_t> scope_;   // modules whose forward runs under the hook; empty: the whole forward

    bool in_scope(const Context& ctx, int32_t seq) const {
        // (a module the model does not register: its caller's)
        const int32_t mod = ctx.caller[static_cast<size_t>(seq)];
        if (mod >= 0 && ctx.in_checkpoint[static_cast<size_t>(mod)]) return false;   // the checkpoint's own hook
        // null: around the model's forward (the root module's call), not a loss computed after it
        if (!o_.modules) return mod >= 0;
        for (int32_t scoped : scope_)
            if (ctx.base.info.within(mod, scoped)) return true;
        return false;
    }
    bool eligible(const Base& base, const Plan& plan, int32_t alloc_id) const {
        const Alloc& alloc = plan.allocs[static_cast<size_t>(alloc_id)];
        const std::string& label = plan.strings[static_cast<size_t>(alloc.label)];
        return alloc.device == base.device && alloc.bytes >= o_.min_bytes && alloc.category != trace::Category::Param &&
               label.rfind("buffer ", 0) != 0;
    }
    // One forward and its backward (a step with gradient accumulation has one per micro-batch).
    void apply_pass(const Context& ctx, Plan& plan, int32_t pass) const;
};

void Offload::apply_pass(const Context& ctx, Plan& plan, int32_t pass) const {
    const Base& base = ctx.base;
    const int32_t step = base.steps[static_cast<size_t>(base.pass_step[static_cast<size_t>(pass)])];
    const int32_t nrec = static_cast<int32_t>(base.trace->allocations.size());
    const bool streamed = o_.mode == OffloadMode::Streamed;
    const int prefetch = o_.prefetch_or_default();
    // Packs the hook sees, in forward order.
    std::vector<Pack> packs;
    for (int32_t x = 0; x < nrec; ++x)
        base.for_packs(x, [&](int32_t seq, int32_t count) {
            if (seq >= 0 && base.pass[static_cast<size_t>(seq)] == pass &&
                base.phase[static_cast<size_t>(seq)] == Phase::Forward && in_scope(ctx, seq))
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
    std::unordered_map<int32_t, size_t> first_pack;   // storage -> its first eligible pack
    std::unordered_map<int32_t, std::vector<size_t>> pack_places;   // storage -> all its packs
    for (size_t i = 0; i < packs.size(); ++i)
        if (eligible(base, plan, packs[i].alloc)) {
            first_pack.emplace(packs[i].alloc, i);
            pack_places[packs[i].alloc].push_back(i);
        }
    const int32_t fwd_end = base.pass_fwd_last[static_cast<size_t>(pass)];
    // A backward node unpacks all it saved before its first kernel (capture.unpacks).
    auto unpack_at = [&](int32_t storage) { return base.unpack_in_pass(storage, pass); };
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
    for (const Region& region : checkpoint_regions(base.info, ctx.setting.checkpoint))
        if (region.policy == Policy::SaveMatmuls)
            for (size_t m = 0; m < cached_by.size(); ++m)
                if (base.info.within(static_cast<int32_t>(m), region.module)) cached_by[m] = 1;
    auto kept_by_policy = [&](int32_t storage) {
        const int32_t made_by = storage < static_cast<int32_t>(base.creator.size())
                                    ? base.creator[static_cast<size_t>(storage)] : -1;
        if (made_by < 0) return false;
        const int32_t mod = ctx.caller[static_cast<size_t>(made_by)];
        if (mod < 0 || !cached_by[static_cast<size_t>(mod)] ||
            !kept_by_save_matmuls(plan.strings[static_cast<size_t>(plan.ops[static_cast<size_t>(made_by)].name)]))
            return false;
        const int32_t unpacked = unpack_at(storage);
        return unpacked >= 0 && plan.key(plan.allocs[static_cast<size_t>(storage)].freed) > plan.key(Point{unpacked, false});
    };
    // A storage that a pack outside the hook keeps, or that the program holds (made before this
    // step's forward: the batch, buffers), stays on the device; its unpack uses it and the host
    // copy is dropped then. The others die on the device and are copied back in the backward.
    std::unordered_map<int32_t, bool> copied_back;
    for (auto& [x, i] : first_pack) {
        const int32_t made_by = x < static_cast<int32_t>(base.creator.size()) ? base.creator[static_cast<size_t>(x)]
                                                                              : -1;
        bool dies = made_by >= 0 && base.pass[static_cast<size_t>(made_by)] == pass &&
                    base.phase[static_cast<size_t>(made_by)] == Phase::Forward;
        base.for_savers(x, [&](int32_t saver) { dies = dies && saver >= 0 && in_scope(ctx, saver); });
        // the program holds what a kernel of another pass uses (GradScaler's scale, read by the
        // unscale after the backward)
        base.for_acc(
            x, [&](int32_t seq, trace::AccessMode) { dies = dies && base.pass[static_cast<size_t>(seq)] == pass; });
        if (dies && !recomputed_reads.count(x) && unpack_at(x) >= 0 && !kept_by_policy(x)) copied_back[x] = true;
    }
    // Where the hook itself first unpacks a storage. A storage that ops outside the hook saved
    // too (a timestep embedding every block reads) may be unpacked first by one of theirs, which
    // the hook never sees (capture.unpacks has a storage's first unpack only): then the first
    // backward op in the hook's scope that reads it.
    auto hook_unpack_at = [&](int32_t storage) {
        const int32_t unpacked = unpack_at(storage);
        bool outside = false;
        base.for_savers(storage, [&](int32_t saver) {
            if (saver >= 0 && base.pass[static_cast<size_t>(saver)] == pass &&
                base.phase[static_cast<size_t>(saver)] == Phase::Forward && !in_scope(ctx, saver))
                outside = true;
        });
        if (!outside || unpacked < 0) return unpacked;
        int32_t found = -1;
        base.for_acc(storage, [&](int32_t seq, trace::AccessMode) {
            if (found < 0 && seq >= unpacked && base.pass[static_cast<size_t>(seq)] == pass &&
                base.phase[static_cast<size_t>(seq)] == Phase::Backward && in_scope(ctx, seq))
                found = seq;
        });
        return found >= 0 ? found : unpacked;
    };
    // Where a pack's own save is unpacked (what a prefetch from it waits for): the storage's
    // unpack, but for a storage that several forward ops of the pass saved (a time embedding
    // every block reads), the first backward kernel at or after it of the saving op's module
    // or a module inside it that reads it (the storage's first unpack is another node's). Inside:
    // a backward kernel is recorded under the module whose backward ran last, so a ResBlock's
    // silu_backward of the time embedding runs under its `skip` conv's (bench/advise/new_user/
    // unet.py); with the module alone, such a block's prefetch fell back to the storage's first
    // unpack, in another block, and brought its storages back hundreds of kernels early.
    auto save_unpack_at = [&](size_t pack) {
        const int32_t storage = packs[pack].alloc, unpacked = unpack_at(storage);
        if (unpacked < 0) return unpacked;
        int32_t savers = 0;
        base.for_savers(storage, [&](int32_t saver) {
            if (saver >= 0 && base.pass[static_cast<size_t>(saver)] == pass &&
                base.phase[static_cast<size_t>(saver)] == Phase::Forward)
                ++savers;
        });
        if (savers <= 1) return unpacked;
        const int32_t mod = base.module[static_cast<size_t>(packs[pack].seq)];
        int32_t found = -1;
        base.for_acc(storage, [&](int32_t seq, trace::AccessMode) {
            if (found < 0 && seq >= unpacked && base.pass[static_cast<size_t>(seq)] == pass &&
                base.phase[static_cast<size_t>(seq)] == Phase::Backward &&
                base.info.within(base.module[static_cast<size_t>(seq)], mod))
                found = seq;
        });
        return found >= 0 ? found : unpacked;
    };
    // The hook's first unpack (of a storage it moved) releases what the stash still holds.
    int32_t first_unpack = -1;
    for (auto& [x, i] : first_pack) {
        int32_t unpacked = hook_unpack_at(x);
        if (unpacked >= 0 && (first_unpack < 0 || unpacked < first_unpack)) first_unpack = unpacked;
    }

    struct Back {
        size_t trigger, distance;
        int32_t storage;
        Alloc copy;
    };
    std::vector<Back> backs;
    for (size_t i = 0; i < packs.size(); ++i) {
        const int32_t alloc_id = packs[i].alloc;
        auto fp = first_pack.find(alloc_id);
        if (fp == first_pack.end() || fp->second != i) continue;
        const int32_t pack_seq = packs[i].seq;
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
        if (streamed) {
            plan.copies.push_back({false, saved.bytes, pack_seq, false});
            d2h = static_cast<int32_t>(plan.copies.size() - 1);
        } else {
            plan.insert_after(pack_seq, add_copy(base, plan, false, saved.bytes, step, pack_seq));
        }
        const int32_t unpack = unpack_at(alloc_id);
        const bool dies = copied_back.count(alloc_id) > 0;
        if (!dies || unpack < 0) {
            // the hook drops the host copy at its own unpack
            const int32_t hu = hook_unpack_at(alloc_id);
            host_copy.freed = hu >= 0 ? Point{hu, false} : saved.freed;
            plan.add_alloc(host_copy);
            continue;
        }
        // The device storage dies at its last forward use, or (streamed) once max_fwd_stash
        // more packs have happened or the forward ended.
        int32_t lf = base.last_access_in_pass(alloc_id, Phase::Forward, pass);
        if (base.param_cast[static_cast<size_t>(alloc_id)]) lf = std::max(lf, fwd_end);
        // or later, while a frame of the model's code still refers to it (capture.frame_holds)
        const int32_t held = base.held_seq[static_cast<size_t>(alloc_id)];
        if (held >= 0 && base.phase[static_cast<size_t>(held)] == Phase::Forward &&
            base.pass[static_cast<size_t>(held)] == pass)
            lf = std::max(lf, held);
        Point release{lf, true};
        if (streamed) {
            // kept until a pack the hook offloads comes max_fwd_stash or more packs later (the
            // others count but let go of nothing: torchtune's pack_tensor), else until the
            // hook's first unpack; the compute stream waits there for the copy to land
            size_t stash_end = i + static_cast<size_t>(o_.max_fwd_stash);
            while (stash_end < packs.size() && !eligible(base, plan, packs[stash_end].alloc)) ++stash_end;
            Point stash = stash_end < packs.size() ? packs[stash_end].at()
                          : first_unpack >= 0      ? Point{first_unpack, false}
                                                   : Point{fwd_end, true};
            release = plan.later(release, stash);
            int32_t waiter = stash_end < packs.size() ? packs[stash_end].seq + (packs[stash_end].output ? 1 : 0)
                             : first_unpack >= 0      ? first_unpack
                                                      : base.pass_bwd_first[static_cast<size_t>(pass)];
            // the D2H is issued at the saving op's end: no op before it can wait for it (a
            // stash smaller than the saving op's own input packs)
            waiter = std::max(waiter, pack_seq + 1);
            if (waiter >= 0 && waiter < plan.recorded) plan.ops[static_cast<size_t>(waiter)].waits.push_back(d2h);
        }
        saved.freed = release;
        saved.freed_offset = 0;
        // Back in the backward: at the unpack, or earlier when a later pack's unpack prefetches it
        // (only the unpack of a storage copied back prefetches: the hook hands the others back as
        // they are).
        int32_t bring = unpack;
        // Which unpack brings it: the save the hook unpacks (own, i) or a later one whose
        // prefetch reaches it (q); at one instant the hook copies in the order it runs.
        // Any save of the storage is one the hook looks back to: a storage saved twice (a ReLU's
        // output, saved by the ReLU and by the matmul that reads it) comes back with the unpack
        // of a save up to `prefetch` after either (offload.py, _unpack: saves index-1 ..
        // index-prefetch, whichever storage they hold).
        // Among the unpacks at one kernel, the earliest pack's; it reaches back to the nearest.
        size_t trigger = i, distance = 0;
        if (streamed)
            for (size_t place : pack_places[alloc_id])
                for (size_t q = place + 1; q <= place + static_cast<size_t>(prefetch) && q < packs.size(); ++q) {
                    if (!copied_back.count(packs[q].alloc)) continue;   // kept on the device: no prefetch
                    int32_t uq = save_unpack_at(q);
                    if (uq >= 0 && (uq < bring || (uq == bring && trigger != i && q < trigger))) {
                        bring = uq;
                        trigger = q;
                    }
                    if (trigger == q) distance = q - place;   // places ascend: the last is the nearest
                }
        // The hook lets go of the device copy at the storage's last unpack: it dies when that
        // backward node returns.
        Alloc device_copy = saved;
        device_copy.src = -1;
        device_copy.freed = recorded_free;
        device_copy.freed_offset = recorded_free_offset;
        if (auto end = base.node_return(alloc_id, pass, recorded_free)) {
            device_copy.freed = *end;
            device_copy.freed_offset = 0;
        }
        if (streamed) {
            plan.copies.push_back({true, saved.bytes, bring, true});
            plan.ops[static_cast<size_t>(unpack)].waits.push_back(static_cast<int32_t>(plan.copies.size() - 1));
            device_copy.made = {bring, false};
        } else {
            int32_t id = add_copy(base, plan, true, saved.bytes, step, unpack);
            plan.insert_before(unpack, id);
            device_copy.made = {id, false};
        }
        device_copy.made_offset = 0;
        host_copy.freed = device_copy.made;
        plan.add_alloc(host_copy);
        backs.push_back({trigger, trigger == i ? 0 : distance, alloc_id, device_copy});
    }
    // The device copies in the order the hook makes them at one instant (allocations made at one
    // point keep the order they are added in, and so do their frees at one instant): at each
    // unpack, the save itself first (on demand), then the saves before it, nearest first
    // (python/mhc_torch/offload.py, _unpack: index - 1 down to index - prefetch); the saves of one
    // node in the order it unpacks them (the pack order). Added in forward order instead, a
    // prefetch brought a block's earlier saves back before the save being unpacked, and the
    // expandable segments' model placed them elsewhere: the UNet's offload of everything
    // (bench/advise/new_user/unet.py) predicted 922 MiB reserved against the capture's 1022 MiB.
    std::stable_sort(backs.begin(), backs.end(), [](const Back& lhs, const Back& rhs) {
        return lhs.trigger != rhs.trigger ? lhs.trigger < rhs.trigger : lhs.distance < rhs.distance;
    });
    for (Back& back : backs) {
        const int32_t storage = back.storage;
        const int32_t dc = plan.add_alloc(back.copy);
        base.for_acc(storage, [&](int32_t seq, trace::AccessMode) {
            if (base.phase[static_cast<size_t>(seq)] != Phase::Backward || base.pass[static_cast<size_t>(seq)] != pass)
                return;
            for (PlanAccess& pa : plan.ops[static_cast<size_t>(seq)].acc)
                if (pa.alloc == storage) pa.alloc = dc;
        });
    }
}

}  // namespace

std::unique_ptr<Transform> make_offload(const Base& base, const OffloadSetting& setting) {
    std::vector<int32_t> scope;
    if (setting.modules) scope = resolve_modules(base.info, *setting.modules, "offload.modules");
    return std::make_unique<Offload>(setting, std::move(scope));
}

}  // namespace mhc::advise
