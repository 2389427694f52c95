// What one checkpointed call saved, where its recomputation stops, and the part of the backward
// that reads the saves back (docs/simulator.md "Settings: checkpoint").
#include <algorithm>
#include <climits>
#include <optional>

#include "checkpoint.hpp"

namespace mhc::advise::checkpointing {

namespace {

// Recorded storages the call's ops touch, sorted, each once.
std::vector<int32_t> touched_storages(const Plan& plan, const Call& call, int32_t recorded_allocs) {
    std::vector<int32_t> touched;
    for (int32_t seq = call.first; seq <= call.last; ++seq)
        for (const PlanAccess& access : plan.ops[static_cast<size_t>(seq)].acc)
            if (access.alloc < recorded_allocs) touched.push_back(access.alloc);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    return touched;
}

// torchvision's video block ends in an in-place ReLU, which saves the block's output, and the next
// block's first convolution saves that output as its input. Checkpointed, the ReLU's save is the
// checkpoint's holder: its backward (which the capture may credit to the block's parent) unpacks
// it, recomputing first, and reads the recomputed copy; the original lives as long as the outside
// nodes that saved it. A read is an outside saver's when its module is within that saver's; when
// an outside saver's module holds the call's, the reads are not told apart (nullopt).
std::optional<SharedSave> shared_save(const Base& base, int32_t alloc, const Call& call) {
    const int32_t made = base.creator[static_cast<size_t>(alloc)];
    if (!call.holds(made)) return std::nullopt;
    std::vector<int32_t> outside;
    bool apart = true;
    base.for_kept_savers(alloc, [&](int32_t saver) {
        if (call.holds(saver)) return;
        const int32_t other = base.module[static_cast<size_t>(saver)];
        apart = apart && other >= 0 && !base.info.within(call.module, other);
        outside.push_back(other);
    });
    if (!apart || outside.empty()) return std::nullopt;
    SharedSave out;
    out.alloc = alloc;
    base.for_acc(alloc, [&](int32_t seq, trace::AccessMode) {
        if (base.phase[static_cast<size_t>(seq)] != Phase::Backward || base.pass[static_cast<size_t>(seq)] != call.pass)
            return;
        const int32_t reader = base.module[static_cast<size_t>(seq)];
        if (std::any_of(outside.begin(), outside.end(), [&](int32_t other) { return base.info.within(reader, other); })) {
            out.outside_last = std::max(out.outside_last, seq);
        } else if (out.run_reads.empty() || out.run_reads.back() != seq) {
            out.run_reads.push_back(seq);
        }
    });
    if (out.run_reads.empty()) return std::nullopt;
    out.run_first = out.run_reads.front();
    out.run_last = out.run_reads.back();
    return out;
}

}  // namespace

// Saved by the call (every pack inside goes to the checkpoint's holders); the last saving op
// is where the recomputation stops (early stop); the first backward op reading one of them
// unpacks first and triggers the recomputation.
Saves find_saves(const Base& base, const Plan& plan, const Call& call) {
    const int32_t recorded_allocs = static_cast<int32_t>(base.trace->allocations.size());
    Saves saves;
    saves.touched = touched_storages(plan, call, recorded_allocs);
    // A module called many times a pass (shared weights): its backward nodes are every call's, and
    // what all calls save (the weights) is read back first by the last call's; this call's own
    // saves alone say when its backward begins and ends.
    const auto& starts = base.info.call_starts;
    const auto first_start = std::lower_bound(starts.begin(), starts.end(), std::make_pair(call.module, INT32_MIN));
    saves.repeated = first_start != starts.end() && first_start->first == call.module;
    saves.only_here.assign(static_cast<size_t>(recorded_allocs), 0);
    for (int32_t storage : saves.touched) {
        bool any = false, all = true;
        // a save whose node the forward let go still counts toward the early stop (a pack), but
        // keeps nothing: its storage is the recomputation's like any other (Base::saved_dropped)
        bool packed_here = false, packed_out = false;
        base.for_savers(storage, [&](int32_t saver) {
            if (call.holds(saver)) saves.stop = std::max(saves.stop, saver);
            (call.holds(saver) ? packed_here : packed_out) = true;
        });
        base.for_kept_savers(storage, [&](int32_t saver) {
            if (call.holds(saver)) any = true;
            else all = false;
        });
        if (packed_here && !packed_out && !base.kept_saved(storage)) saves.dropped_only.push_back(storage);
        if (!any) continue;
        saves.saved.push_back(storage);
        saves.only_here[static_cast<size_t>(storage)] = all;
        if (saves.repeated && !all) continue;
        // the module's own backward nodes unpack what it saved (a storage saved by many
        // modules, such as rotary tables, is read back first by the last module's backward)
        base.for_acc(storage, [&](int32_t seq, trace::AccessMode) {
            if (base.phase[static_cast<size_t>(seq)] == Phase::Backward && base.pass[static_cast<size_t>(seq)] == call.pass &&
                base.info.within(base.module[static_cast<size_t>(seq)], call.module) &&
                (saves.trigger < 0 || seq < saves.trigger))
                saves.trigger = seq;
        });
    }
    return saves;
}

// Nothing the call saved is read back in this pass's backward: no backward reaches the
// module (LLaVA's last vision layer, whose output vision_feature_layer -2 leaves unused;
// its graph lives as long as the model's outputs). Checkpointing keeps only the call's
// inputs there, so what the call made and alone saved and used dies at its last access
// in the forward, not with the graph (predicted 11.88 GiB, captured 11.69: 1.64% over).
// Selective checkpointing's cache keeps the matmul outputs it cached, and autocast's cache
// a weight's cast to the end of the forward (24 MiB of a CLIP layer's bf16 weights).
void free_unread_saves(const Base& base, Plan& plan, const Call& call, const Saves& saves) {
    const int32_t recorded_allocs = static_cast<int32_t>(base.trace->allocations.size());
    for (int32_t storage : saves.saved) {
        const int32_t made = base.creator[static_cast<size_t>(storage)];
        if (!saves.only_here[static_cast<size_t>(storage)] || !call.holds(made) || cached(plan, call, made)) continue;
        bool weight_cast = base.param_cast[static_cast<size_t>(storage)] != 0;
        if (plan.strings[static_cast<size_t>(plan.ops[static_cast<size_t>(made)].name)] == "aten::_to_copy")
            for (const PlanAccess& access : plan.ops[static_cast<size_t>(made)].acc)
                weight_cast = weight_cast ||
                              (access.alloc < recorded_allocs && access.mode == trace::AccessMode::Read &&
                               plan.allocs[static_cast<size_t>(access.alloc)].category == trace::Category::Param);
        int32_t last = weight_cast ? base.autocast_end(call.pass) : -1;
        bool inside = true;
        base.for_acc(storage, [&](int32_t seq, trace::AccessMode) {
            if (base.pass[static_cast<size_t>(seq)] != call.pass) return;
            inside = inside && call.holds(seq);
            last = std::max(last, seq);
        });
        Alloc& alloc = plan.allocs[static_cast<size_t>(storage)];
        if (!inside || last < 0 || (alloc.freed.op != kNoFree && plan.key(alloc.freed) <= plan.key(Point{last, true})))
            continue;
        alloc.freed = Point{last, true};
        alloc.freed_offset = 0;
    }
}

// What only the call saved is read back from its recomputed copy, so the recomputation comes
// before every backward read of it, also one the capture credits to another module (the
// last BERT layer's output LayerNorm backward is credited to the head that follows it).
void move_trigger_before_reads(const Base& base, const Call& call, Saves& saves) {
    for (int32_t storage : saves.saved) {
        if (!saves.only_here[static_cast<size_t>(storage)]) continue;
        base.for_acc(storage, [&](int32_t seq, trace::AccessMode) {
            if (base.phase[static_cast<size_t>(seq)] == Phase::Backward && base.pass[static_cast<size_t>(seq)] == call.pass &&
                seq < saves.trigger)
                saves.trigger = seq;
        });
        // A node unpacks everything it saved before its first kernel: for a module called many
        // times, the node that unpacks this call's own saves may read the shared weights first
        // (addmm's backward: the input's gradient from the weight, then the weight's from the
        // input), and that read is this call's, from its recomputation (capture.unpacks).
        if (saves.repeated) {
            const int32_t unpacked = base.unpack_in_pass(storage, call.pass);
            if (unpacked >= 0 && unpacked < saves.trigger) saves.trigger = unpacked;
        }
    }
}

// The checkpoint's frame (and the inputs it holds) lives until the last backward node
// holding one of its saved tensors is done. A storage that ops outside the call saved too (a
// timestep embedding every block's silu saves) is read by their backward nodes as well, long
// after the checkpoint's: only the reads under the checkpointed module count for it (the
// UNet's checkpointed up.2 held its input until down.0's backward, 235 kernels late, and the
// reserved bytes with expandable segments were predicted 6.05% under the capture).
// A node releases its saved variables (the holders that keep the frame) after it returns, not
// at its last kernel that reads them: RMSNorm's pow node reads its saved fp32 input, then
// multiplies the gradient twice. So a storage only the call saved ends the frame no earlier
// than where the capture freed it, when that was in this pass's backward (mHC's layers.1 held
// layer 0's 192 MiB output two kernels longer than its last read).
// A storage outside ops saved too (shared_save) moves the trigger to the call's first read of it
// and the end to its last.
void find_backward_end(const Base& base, const Plan& plan, const Call& call, Saves& saves) {
    int32_t last = saves.trigger;
    for (int32_t storage : saves.saved) {
        if (saves.only_here[static_cast<size_t>(storage)]) {
            const int32_t read = base.last_access_in_pass(storage, Phase::Backward, call.pass);
            last = std::max(last, read);
            const Point freed = base.plan.allocs[static_cast<size_t>(storage)].freed;
            const int32_t released = freed.at_end ? freed.op : freed.op - 1;
            // (a cast autocast's cache kept past the backward was released by the region's end, not a node)
            const bool in_backward = read >= 0 && freed.op != kNoFree && released >= read && released < plan.recorded &&
                                     !base.cast_kept_past_backward(storage) &&
                                     base.phase[static_cast<size_t>(released)] == Phase::Backward &&
                                     base.pass[static_cast<size_t>(released)] == call.pass;
            if (in_backward) last = std::max(last, released);
            continue;
        }
        if (saves.repeated) continue;
        base.for_acc(storage, [&](int32_t seq, trace::AccessMode) {
            if (base.phase[static_cast<size_t>(seq)] == Phase::Backward && base.pass[static_cast<size_t>(seq)] == call.pass &&
                base.info.within(base.module[static_cast<size_t>(seq)], call.module))
                last = std::max(last, seq);
        });
        if (auto shared = shared_save(base, storage, call)) {
            saves.trigger = std::min(saves.trigger, shared->run_first);
            last = std::max(last, shared->run_last);
            saves.shared.push_back(*shared);
        }
    }
    saves.backward_last = last;
}

}  // namespace mhc::advise::checkpointing
