// Activation checkpointing of modules: torch.utils.checkpoint(use_reentrant=False) with its
// default early stop ("full"), or selective checkpointing that keeps matmul and attention
// outputs ("save_matmuls"), or full checkpointing of mHC's hyper-connections around their
// maps ("mhc": full checkpointing of every HcMaps module, the RMSNorm, projection, sigmoids and
// Sinkhorn-Knopp iterations of a hyper-connection, inside the named modules).
// docs/simulator.md "Settings: checkpoint" states the rules this file follows.
#include <algorithm>
#include <array>
#include <climits>
#include <tuple>
#include <unordered_map>

#include "mhc/advise/transforms.hpp"
#include "mhc/common/error.hpp"

namespace mhc::advise {

const std::string kMhcMaps = "HcMaps";

// Ops whose outputs selective checkpointing caches instead of recomputing: matmuls, attention,
// and convolutions (a CNN's matmuls: without them its selective checkpoint recomputed everything).
bool kept_by_save_matmuls(const std::string& name) {
    return name == "aten::mm" || name == "aten::bmm" || name == "aten::addmm" || name == "aten::baddbmm" ||
           name == "aten::convolution" || name.rfind("aten::_scaled_dot_product_", 0) == 0;
}

namespace {

bool is_matmul(const std::string& name) { return kept_by_save_matmuls(name); }

// The recomputation runs in the backward, on the autograd engine's device thread, which keeps
// cuBLAS and cuBLASLt workspaces of its own (one of each per thread, taken at the thread's first
// GEMM of that kind and kept to the end: python/mhc_torch/workspaces.py). A recomputed op that used
// the main thread's workspace uses the autograd thread's: the captured one (made here instead if
// the captured backward made it later), else one made here.
int32_t thread_workspace(Plan& plan, int32_t alloc, int32_t op) {
    static const std::string kMain = " (main thread)";
    const Alloc& main = plan.allocs[static_cast<size_t>(alloc)];
    const std::string& label = plan.strings[static_cast<size_t>(main.label)];
    if (main.freed.op != kNoFree || label.size() <= kMain.size() ||
        label.compare(label.size() - kMain.size(), kMain.size(), kMain) != 0 || label.rfind("cuBLAS", 0) != 0)
        return alloc;
    const std::string own = label.substr(0, label.size() - kMain.size()) + " (autograd thread)";
    const Point here{op, false};
    for (size_t i = 0; i < plan.allocs.size(); ++i) {
        Alloc& theirs = plan.allocs[i];
        if (theirs.removed || theirs.device != main.device || plan.strings[static_cast<size_t>(theirs.label)] != own)
            continue;
        if (plan.key(theirs.made) > plan.key(here)) {
            theirs.made = here;
            theirs.made_offset = 0;
        }
        return static_cast<int32_t>(i);
    }
    Alloc made = main;
    made.src = -1;
    made.label = plan.intern(own);
    made.made = here;
    made.made_offset = 0;
    return plan.add_alloc(made);
}

struct Run {
    int32_t first = 0, last = 0;   // forward seqs [first, last] of one call of the module
    int32_t module = -1;
    Policy policy = Policy::Full;
    int32_t pass = 0;   // Base::pass (a step with gradient accumulation has several)
};

// The parameter allocation a recomputed op reads before `trigger`: the recorded one, unless it was
// freed by then. FSDP2 frees a group's unsharded parameters after its forward (reshard_after_forward)
// and gathers them again before its backward into new allocations of the same name and size
// (python/mhc_torch/data_parallel.py): the recomputation reads those.
int32_t live_param(const Plan& plan, int32_t alloc, int32_t trigger) {
    const Alloc& read = plan.allocs[static_cast<size_t>(alloc)];
    const int64_t at = plan.key(Point{trigger, false});
    if (read.category != trace::Category::Param || plan.key(read.freed) > at) return alloc;
    for (size_t other = 0; other < plan.allocs.size(); ++other) {
        const Alloc& gathered = plan.allocs[other];
        if (gathered.category == trace::Category::Param && gathered.label == read.label &&
            gathered.bytes == read.bytes && gathered.device == read.device && !gathered.removed &&
            plan.key(gathered.made) <= at && plan.key(gathered.freed) > at)
            return static_cast<int32_t>(other);
    }
    return alloc;
}

// A weight cast other calls saved too, which a call's recomputation made anew (or made again).
struct Recast {
    int32_t cast = 0, copy = 0;   // the recorded cast, the recomputation's copy
    int32_t trigger = 0, pass = 0, module = -1;
};

// BatchNorm inside a checkpointed module keeps its running statistics through the recompute:
// mhc_torch.apply's hooks (the printed keep_running_stats) clone the module's buffers
// (running_mean, running_var, num_batches_tracked) before each of its forward calls, drop the
// clones at once in the forward and, in the recompute, give them to the module to update there:
// there they live as long as the recomputed batch-norm op's saved tensors (its node saves the
// running statistics it was given), num_batches_tracked's until the call returns. Small (the
// caching allocator's 512 B blocks), but at a capacity where a step runs only by giving cached
// memory back, a small segment made or not decides the retries (DeepLabV3-R50 at 3 GiB: the
// reserved bytes 0.07% to 1.32% off, 312 allocations of 424,768 B not predicted).
struct StatsCall {
    int32_t first = -1, bn = -1, module = -1;   // the call's first kernel, its batch-norm op (seqs)
    std::vector<int64_t> bytes;                 // the clones, in named_buffers order
};

std::vector<StatsCall> stats_calls(const Base& base, const Plan& plan, int32_t first, int32_t last) {
    std::vector<StatsCall> out;
    auto is_batchnorm = [&](int32_t module) {
        if (module < 0) return false;
        const std::string& type = base.info.module_type[static_cast<size_t>(module)];
        return type == "BatchNorm1d" || type == "BatchNorm2d" || type == "BatchNorm3d" || type == "SyncBatchNorm";
    };
    auto buffer = [&](int32_t alloc) {
        const Alloc& storage = base.plan.allocs[static_cast<size_t>(alloc)];
        return storage.category == trace::Category::Other &&
               plan.strings[static_cast<size_t>(storage.label)].rfind("buffer ", 0) == 0;
    };
    for (int32_t s = first; s <= last; ++s) {
        const int32_t module = base.module[static_cast<size_t>(s)];
        if (base.phase[static_cast<size_t>(s)] != Phase::Forward || !is_batchnorm(module)) continue;
        if (s > first && base.module[static_cast<size_t>(s) - 1] == module) continue;   // not the call's first kernel
        StatsCall call{s, -1, module, {}};
        int64_t batches = 0;
        for (int32_t q = s; q <= last && base.module[static_cast<size_t>(q)] == module; ++q) {
            const std::string& name = plan.strings[static_cast<size_t>(base.plan.ops[static_cast<size_t>(q)].name)];
            const bool norm = name.find("batch_norm") != std::string::npos;
            for (const PlanAccess& access : base.plan.ops[static_cast<size_t>(q)].acc) {
                if (!buffer(access.alloc)) continue;
                if (norm && call.bn < 0)
                    call.bytes.push_back(base.plan.allocs[static_cast<size_t>(access.alloc)].bytes);
                else if (!norm && access.mode != trace::AccessMode::Read)
                    batches = base.plan.allocs[static_cast<size_t>(access.alloc)].bytes;
            }
            if (norm && call.bn < 0) call.bn = q;
        }
        if (call.bn < 0 || call.bytes.empty()) continue;   // no running statistics (track_running_stats=False)
        if (batches > 0) call.bytes.push_back(batches);
        out.push_back(std::move(call));
    }
    return out;
}

// The clone ops of a call's statistics copies, inserted before `before` (a recorded seq); their
// allocations made at each clone, freed at the last one's end (set again by the caller).
std::vector<int32_t> insert_clones(const Base& base, Plan& plan, const StatsCall& call, Phase phase, int32_t before,
                                   int32_t anchor) {
    std::vector<int32_t> allocs;
    int32_t last = -1;
    const int64_t name = plan.intern("aten::clone");
    const int64_t label = plan.intern(base.info.module_name[static_cast<size_t>(call.module)] + ":aten::clone");
    for (int64_t bytes : call.bytes) {
        Op op;
        op.kind = OpKind::Kernel;
        op.name = name;
        op.module = call.module;
        op.step = base.plan.ops[static_cast<size_t>(call.bn)].step;
        op.phase = phase;
        op.anchor = anchor;
        op.duration = base.launch_overhead;
        const int32_t id = plan.add_op(op);
        plan.insert_before(before, id);
        Alloc alloc;
        alloc.bytes = bytes;
        alloc.device = base.device;
        alloc.category = trace::Category::Workspace;
        alloc.label = label;
        alloc.made = {id, false};
        alloc.freed = {id, true};
        const int32_t alloc_id = plan.add_alloc(alloc);
        plan.ops[static_cast<size_t>(id)].acc = {{alloc_id, trace::AccessMode::Write}};
        allocs.push_back(alloc_id);
        last = id;
    }
    for (int32_t alloc_id : allocs) plan.allocs[static_cast<size_t>(alloc_id)].freed = {last, true};
    return allocs;
}

// A storage a call made and saved that ops outside the call save as well (Checkpoint::apply_run),
// its backward reads split by whose nodes make them.
struct SharedSave {
    int32_t alloc = -1;
    std::vector<int32_t> run_reads;          // backward reads of the call's nodes, in order
    int32_t run_first = -1, run_last = -1;
    int32_t outside_last = -1;               // the last read of an outside saver's node
};

// torchvision's video block ends in an in-place ReLU, which saves the block's output, and the next
// block's first convolution saves that output as its input. Checkpointed, the ReLU's save is the
// checkpoint's holder: its backward (which the capture may credit to the block's parent) unpacks
// it, recomputing first, and reads the recomputed copy; the original lives as long as the outside
// nodes that saved it. A read is an outside saver's when its module is within that saver's; when
// an outside saver's module holds the call's, the reads are not told apart (nullopt).
std::optional<SharedSave> shared_save(const Base& base, int32_t alloc, int32_t module, int32_t pass, int32_t first,
                                      int32_t last) {
    const int32_t made = base.creator[static_cast<size_t>(alloc)];
    if (made < first || made > last) return std::nullopt;
    std::vector<int32_t> outside;
    bool apart = true;
    base.for_kept_savers(alloc, [&](int32_t saver) {
        if (saver >= first && saver <= last) return;
        const int32_t other = base.module[static_cast<size_t>(saver)];
        apart = apart && other >= 0 && !base.info.within(module, other);
        outside.push_back(other);
    });
    if (!apart || outside.empty()) return std::nullopt;
    SharedSave out;
    out.alloc = alloc;
    base.for_acc(alloc, [&](int32_t seq, trace::AccessMode) {
        if (base.phase[static_cast<size_t>(seq)] != Phase::Backward || base.pass[static_cast<size_t>(seq)] != pass) return;
        const int32_t by = base.module[static_cast<size_t>(seq)];
        if (std::any_of(outside.begin(), outside.end(), [&](int32_t other) { return base.info.within(by, other); })) {
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

class Checkpoint final : public Transform {
public:
    explicit Checkpoint(std::vector<Region> regions) : regions_(std::move(regions)) {}
    void apply(const Context& ctx, Plan& plan) const override {
        std::vector<Run> all = runs(ctx);
        // In forward order, whatever order the setting names the modules in: a call's rules for
        // what it saved (they die at their last forward use) come before a later call's for its
        // inputs (kept until its backward ends). Named the other way round (a selective
        // checkpoint's group after a full one's, or a group's modules listed back to front), the
        // earlier call's rule undid the later call's, and the later recomputation read its input
        // after it had died (an invalid step: access-outside-lifetime).
        std::stable_sort(all.begin(), all.end(), [](const Run& lhs, const Run& rhs) { return lhs.first < rhs.first; });
        recasts_.clear();
        for (const Run& run : all) apply_run(ctx.base, plan, run);
        release_forward_casts(ctx.base, plan, all, std::move(recasts_));
        recasts_.clear();
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
    std::vector<Run> runs(const Context& ctx) const {
        const Base& base = ctx.base;
        const auto& starts = base.info.call_starts;
        std::vector<Run> out;
        for (const Region& g : regions_) {
            Run cur;
            bool open = false;
            for (size_t s = 0; s < base.korder.size(); ++s) {
                if (base.phase[s] != Phase::Forward) continue;
                bool in = base.info.within(ctx.caller[s], g.module);
                const int32_t pass = base.pass[s];
                const bool begins = in && open && !starts.empty() &&
                                    std::binary_search(starts.begin(), starts.end(),
                                                       std::make_pair(g.module, base.korder[s]));
                if (open && (!in || pass != cur.pass || begins)) {
                    out.push_back(cur);
                    open = false;
                }
                if (in && !open) {
                    cur = {static_cast<int32_t>(s), static_cast<int32_t>(s), g.module, g.policy, pass};
                    open = true;
                }
                if (in) cur.last = static_cast<int32_t>(s);
            }
            if (open) out.push_back(cur);
        }
        return out;
    }

    // The casts other calls saved too that apply_run cast again: filled by it, handed over by apply.
    mutable std::vector<Recast> recasts_;

    void apply_run(const Base& b, Plan& p, const Run& r) const;
    static void release_forward_casts(const Base& base, Plan& plan, const std::vector<Run>& all,
                                      std::vector<Recast> casts);
};

// A weight cast that several calls saved (a cell called many times a pass: every call saves the
// cast of its shared weights) is read by each call's backward nodes from that call's
// recomputation: a backward read of the module goes to the copy of the call whose recomputation
// came last before it (the calls' backwards run one after another, the last call's first), and
// the copy lives until the last such read is done. Autocast's cached casts that only checkpointed
// calls saved are then kept by nothing once the forward's autocast region ends: the forward's
// cast dies at the forward's end (or after a read no recomputation took over).
void Checkpoint::release_forward_casts(const Base& base, Plan& plan, const std::vector<Run>& all,
                                       std::vector<Recast> casts) {
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
            for (PlanAccess& pa : plan.ops[static_cast<size_t>(seq)].acc)
                if (pa.alloc == cast) pa.alloc = owner->copy;
            Alloc& copy = plan.allocs[static_cast<size_t>(owner->copy)];
            copy.freed = plan.later(copy.freed, Point{seq, true});
        });
        first = end;
    }
    const int32_t nrec = static_cast<int32_t>(base.trace->allocations.size());
    std::vector<uint8_t> in_run(base.korder.size(), 0);
    for (const Run& run : all)
        for (int32_t seq = run.first; seq <= run.last; ++seq) in_run[static_cast<size_t>(seq)] = 1;
    for (int32_t cast = 0; cast < nrec; ++cast) {
        Alloc& alloc = plan.allocs[static_cast<size_t>(cast)];
        const int32_t made = base.creator[static_cast<size_t>(cast)];
        if (!base.param_cast[static_cast<size_t>(cast)] || made < 0 || alloc.device != base.device ||
            alloc.freed.op == kNoFree || !base.kept_saved(cast))
            continue;
        bool only_runs = true;
        base.for_kept_savers(cast, [&](int32_t seq) { only_runs = only_runs && in_run[static_cast<size_t>(seq)]; });
        if (!only_runs) continue;
        const int32_t pass = base.pass[static_cast<size_t>(made)];
        Point end{std::max(base.last_access_in_pass(cast, Phase::Forward, pass),
                           base.pass_fwd_last[static_cast<size_t>(pass)]),
                  true};
        base.for_acc(cast, [&](int32_t seq, trace::AccessMode) {   // reads no recomputation took over
            for (const PlanAccess& pa : plan.ops[static_cast<size_t>(seq)].acc)
                if (pa.alloc == cast) end = plan.later(end, Point{seq, true});
        });
        if (plan.key(end) < plan.key(alloc.freed)) {
            alloc.freed = end;
            alloc.freed_offset = 0;
        }
    }
}

void Checkpoint::apply_run(const Base& b, Plan& p, const Run& r) const {
    const trace::TraceData& t = *b.trace;
    const int32_t nrec = static_cast<int32_t>(t.allocations.size());
    // BatchNorm's statistics copies in the forward: made before the call and dropped at once
    const std::vector<StatsCall> stats = stats_calls(b, p, r.first, r.last);
    for (const StatsCall& call : stats) insert_clones(b, p, call, Phase::Forward, call.first, call.first);
    auto in_run = [&](int32_t s) { return s >= r.first && s <= r.last; };
    auto cached = [&](int32_t s) {
        return r.policy == Policy::SaveMatmuls && is_matmul(p.strings[static_cast<size_t>(p.ops[static_cast<size_t>(s)].name)]);
    };
    // Recorded storages the run's ops touch.
    std::vector<int32_t> touched;
    for (int32_t s = r.first; s <= r.last; ++s)
        for (const PlanAccess& a : p.ops[static_cast<size_t>(s)].acc)
            if (a.alloc < nrec) touched.push_back(a.alloc);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    // Saved by the run (every pack inside goes to the checkpoint's holders); the last saving op
    // is where the recomputation stops (early stop); the first backward op reading one of them
    // unpacks first and triggers the recomputation.
    int32_t stop = -1, trigger = -1;
    // A module called many times a pass (shared weights): its backward nodes are every call's, and
    // what all calls save (the weights) is read back first by the last call's; this call's own
    // saves alone say when its backward begins and ends.
    const auto& starts = b.info.call_starts;
    const auto first_start = std::lower_bound(starts.begin(), starts.end(), std::make_pair(r.module, INT32_MIN));
    const bool repeated = first_start != starts.end() && first_start->first == r.module;
    std::vector<int32_t> saved, dropped_only;   // dropped_only: saved by the run's let-go nodes alone
    std::vector<uint8_t> only_here(static_cast<size_t>(nrec), 0);
    for (int32_t x : touched) {
        bool any = false, all = true;
        // a save whose node the forward let go still counts toward the early stop (a pack), but
        // keeps nothing: its storage is the recomputation's like any other (Base::saved_dropped)
        bool packed_here = false, packed_out = false;
        b.for_savers(x, [&](int32_t saver) {
            if (in_run(saver)) stop = std::max(stop, saver);
            (in_run(saver) ? packed_here : packed_out) = true;
        });
        b.for_kept_savers(x, [&](int32_t saver) {
            if (in_run(saver)) any = true;
            else all = false;
        });
        if (packed_here && !packed_out && !b.kept_saved(x)) dropped_only.push_back(x);
        if (!any) continue;
        saved.push_back(x);
        only_here[static_cast<size_t>(x)] = all;
        if (repeated && !all) continue;
        // the module's own backward nodes unpack what it saved (a storage saved by many
        // modules, such as rotary tables, is read back first by the last module's backward)
        b.for_acc(x, [&](int32_t s, trace::AccessMode) {
            if (b.phase[static_cast<size_t>(s)] == Phase::Backward && b.pass[static_cast<size_t>(s)] == r.pass &&
                b.info.within(b.module[static_cast<size_t>(s)], r.module) && (trigger < 0 || s < trigger))
                trigger = s;
        });
    }
    if (stop < 0) return;   // nothing saved
    // What the run made and only nodes the forward let go saved: the checkpoint's holders keep
    // nothing, so it dies where the code drops it (its last use, a frame's hold), not with the
    // dropped graph; a weight's cast at the forward's end (autocast's cache), and selective
    // checkpointing's cached outputs as below.
    for (int32_t let_go : dropped_only) {
        Alloc& storage = p.allocs[static_cast<size_t>(let_go)];
        const int32_t made = b.creator[static_cast<size_t>(let_go)];
        if (!in_run(made) || cached(made) || storage.device != b.device) continue;
        int32_t kept = b.last_access_in_pass(let_go, Phase::Forward, r.pass);
        if (b.param_cast[static_cast<size_t>(let_go)]) kept = std::max(kept, b.pass_fwd_last[static_cast<size_t>(r.pass)]);
        const int32_t held = b.held_seq[static_cast<size_t>(let_go)];
        if (held >= 0 && b.pass[static_cast<size_t>(held)] == r.pass) kept = std::max(kept, held);
        if (kept >= 0 && p.key(Point{kept, true}) < p.key(storage.freed)) {
            storage.freed = {kept, true};
            storage.freed_offset = 0;
        }
    }
    if (trigger < 0) {
        // Nothing the run saved is read back in this pass's backward: no backward reaches the
        // module (LLaVA's last vision layer, whose output vision_feature_layer -2 leaves unused;
        // its graph lives as long as the model's outputs). Checkpointing keeps only the run's
        // inputs there, so what the run made and alone saved and used dies at its last access
        // in the forward, not with the graph (predicted 11.88 GiB, captured 11.69: 1.64% over).
        // Selective checkpointing's cache keeps the matmul outputs it cached, and autocast's cache
        // a weight's cast to the end of the forward (24 MiB of a CLIP layer's bf16 weights).
        for (int32_t x : saved) {
            const int32_t made = b.creator[static_cast<size_t>(x)];
            if (!only_here[static_cast<size_t>(x)] || !in_run(made) || cached(made)) continue;
            bool weight_cast = b.param_cast[static_cast<size_t>(x)] != 0;
            if (p.strings[static_cast<size_t>(p.ops[static_cast<size_t>(made)].name)] == "aten::_to_copy")
                for (const PlanAccess& pa : p.ops[static_cast<size_t>(made)].acc)
                    weight_cast = weight_cast ||
                                  (pa.alloc < nrec && pa.mode == trace::AccessMode::Read &&
                                   p.allocs[static_cast<size_t>(pa.alloc)].category == trace::Category::Param);
            int32_t last = weight_cast ? b.pass_fwd_last[static_cast<size_t>(r.pass)] : -1;
            bool inside = true;
            b.for_acc(x, [&](int32_t s, trace::AccessMode) {
                if (b.pass[static_cast<size_t>(s)] != r.pass) return;
                inside = inside && in_run(s);
                last = std::max(last, s);
            });
            Alloc& a = p.allocs[static_cast<size_t>(x)];
            if (!inside || last < 0 || (a.freed.op != kNoFree && p.key(a.freed) <= p.key(Point{last, true}))) continue;
            a.freed = Point{last, true};
            a.freed_offset = 0;
        }
        return;
    }
    // What only the run saved is read back from its recomputed copy, so the recomputation comes
    // before every backward read of it, also one the capture credits to another module (the
    // last BERT layer's output LayerNorm backward is credited to the head that follows it).
    for (int32_t storage : saved) {
        if (!only_here[static_cast<size_t>(storage)]) continue;
        b.for_acc(storage, [&](int32_t seq, trace::AccessMode) {
            if (b.phase[static_cast<size_t>(seq)] == Phase::Backward && b.pass[static_cast<size_t>(seq)] == r.pass &&
                seq < trigger)
                trigger = seq;
        });
        // A node unpacks everything it saved before its first kernel: for a module called many
        // times, the node that unpacks this call's own saves may read the shared weights first
        // (addmm's backward: the input's gradient from the weight, then the weight's from the
        // input), and that read is this call's, from its recomputation (capture.unpacks).
        if (repeated) {
            const int32_t unpacked = b.unpack_in_pass(storage, r.pass);
            if (unpacked >= 0 && unpacked < trigger) trigger = unpacked;
        }
    }
    // The checkpoint's frame (and the inputs it holds) lives until the last backward node
    // holding one of its saved tensors is done. A storage that ops outside the run saved too (a
    // timestep embedding every block's silu saves) is read by their backward nodes as well, long
    // after the checkpoint's: only the reads under the checkpointed module count for it (the
    // UNet's checkpointed up.2 held its input until down.0's backward, 235 kernels late, and the
    // reserved bytes with expandable segments were predicted 6.05% under the capture).
    // A node releases its saved variables (the holders that keep the frame) after it returns, not
    // at its last kernel that reads them: RMSNorm's pow node reads its saved fp32 input, then
    // multiplies the gradient twice. So a storage only the run saved ends the frame no earlier
    // than where the capture freed it, when that was in this pass's backward (mHC's layers.1 held
    // layer 0's 192 MiB output two kernels longer than its last read).
    int32_t region_bwd_last = trigger;
    std::vector<SharedSave> shared;
    for (int32_t storage : saved) {
        if (only_here[static_cast<size_t>(storage)]) {
            const int32_t read = b.last_access_in_pass(storage, Phase::Backward, r.pass);
            region_bwd_last = std::max(region_bwd_last, read);
            const Point freed = b.plan.allocs[static_cast<size_t>(storage)].freed;
            const int32_t released = freed.at_end ? freed.op : freed.op - 1;
            const bool in_backward = read >= 0 && freed.op != kNoFree && released >= read && released < p.recorded &&
                                     b.phase[static_cast<size_t>(released)] == Phase::Backward &&
                                     b.pass[static_cast<size_t>(released)] == r.pass;
            if (in_backward) region_bwd_last = std::max(region_bwd_last, released);
            continue;
        }
        if (repeated) continue;
        b.for_acc(storage, [&](int32_t seq, trace::AccessMode) {
            if (b.phase[static_cast<size_t>(seq)] == Phase::Backward && b.pass[static_cast<size_t>(seq)] == r.pass &&
                b.info.within(b.module[static_cast<size_t>(seq)], r.module))
                region_bwd_last = std::max(region_bwd_last, seq);
        });
        if (auto sh = shared_save(b, storage, r.module, r.pass, r.first, r.last)) {
            trigger = std::min(trigger, sh->run_first);
            region_bwd_last = std::max(region_bwd_last, sh->run_last);
            shared.push_back(*sh);
        }
    }
    const int32_t fwd_end = b.pass_fwd_last[static_cast<size_t>(r.pass)];

    // PyTorch's early stop ends the recomputation at the run's last pack. An op packs its inputs
    // before its kernel runs and its output after, so the stop's kernel reruns only when the
    // stop saves its own output (relu, sigmoid); a matmul or gelu saving its input stops before.
    bool stop_runs = false;   // an output written in place counts (an in-place ReLU saves its result)
    for (const PlanAccess& access : b.plan.ops[static_cast<size_t>(stop)].acc)
        if (access.mode != trace::AccessMode::Read && access.alloc < nrec)
            b.for_savers(access.alloc, [&](int32_t saver) { stop_runs = stop_runs || saver == stop; });
    const int32_t recompute_last = stop_runs ? stop : stop - 1;

    // The recomputation: the run's ops up to the stop, placed before the trigger; cached ops
    // (selective) give their saved output back without a kernel.
    std::unordered_map<int32_t, int32_t> copy_of;       // recorded allocation -> its recomputed copy
    std::unordered_map<int32_t, int32_t> last_use;      // recomputed copy -> last recompute op using it
    std::unordered_map<int32_t, int32_t> replayed_at;   // cached op seq -> its position in the recomputation
    std::unordered_map<int32_t, int32_t> rerun_of;      // op seq -> its recomputed op
    int32_t last_recompute = -1;
    // The recomputation runs in an autocast region of its own, outside the forward's (the
    // backward runs outside autocast): its cache starts empty. A weight cast that the forward
    // served from the cache (cast by an earlier call of a module called many times) is cast again
    // by the op that first uses it, the stop included (autocast casts before the op packs its
    // inputs), and a cached op of selective checkpointing too (the cast is not one). Autocast
    // casts an op's arguments before its kernels: the casts go before the casts of inputs that
    // precede the first op reading them, and casts one op made together in the call that made them
    // (an LSTM cell's weights and biases, read by its two matmuls and its fused kernel) stay
    // together, at the earliest of their places, in the order they ran.
    auto is_cast = [&](int32_t seq) {
        return p.strings[static_cast<size_t>(p.ops[static_cast<size_t>(seq)].name)] == "aten::_to_copy";
    };
    std::vector<std::array<int32_t, 3>> recasts;   // (place, creator, cast)
    for (int32_t seq = r.first; seq <= stop; ++seq) {
        if (p.ops[static_cast<size_t>(seq)].kind != OpKind::Kernel) continue;
        for (const PlanAccess& read : b.plan.ops[static_cast<size_t>(seq)].acc) {
            const int32_t cast = read.alloc, made = cast < nrec ? b.creator[static_cast<size_t>(cast)] : -1;
            if (made < 0 || !b.param_cast[static_cast<size_t>(cast)] || in_run(made) ||
                std::any_of(recasts.begin(), recasts.end(), [&](const auto& entry) { return entry[2] == cast; }))
                continue;
            int32_t at = seq;
            while (at > r.first && is_cast(at - 1)) --at;
            recasts.push_back({at, made, cast});
        }
    }
    std::sort(recasts.begin(), recasts.end(), [](const auto& lhs, const auto& rhs) { return lhs[1] < rhs[1]; });
    for (size_t i = 1, g = 0; i <= recasts.size(); ++i) {   // groups [g, i) of casts made together
        bool together = i < recasts.size();
        for (int32_t q = recasts[i - 1][1] + 1; together && q < recasts[i][1]; ++q) together = is_cast(q);
        if (together) continue;
        int32_t at = INT32_MAX;
        for (size_t q = g; q < i; ++q) at = std::min(at, recasts[q][0]);
        for (size_t q = g; q < i; ++q) recasts[q][0] = at;
        g = i;
    }
    std::sort(recasts.begin(), recasts.end());
    size_t next_cast = 0;
    auto cast_again = [&](int32_t cast, int32_t made, int32_t seq) {
        const Op recorded = p.ops[static_cast<size_t>(made)];
        Op op;
        op.src = made;
        op.name = recorded.name;
        op.module = p.ops[static_cast<size_t>(seq)].module;
        op.step = recorded.step;
        op.phase = Phase::Recompute;
        op.anchor = trigger;
        op.kind = OpKind::Kernel;
        op.duration = recorded.duration;
        const int32_t id = p.add_op(op);
        p.insert_before(trigger, id);
        Alloc copy = p.allocs[static_cast<size_t>(cast)];
        copy.src = -1;
        copy.made = {id, false};
        copy.freed = {id, true};
        copy.made_offset = copy.freed_offset = 0;
        const int32_t copy_id = p.add_alloc(copy);
        std::vector<PlanAccess> acc;
        for (const PlanAccess& in : recorded.acc)
            acc.push_back(in.alloc == cast ? PlanAccess{copy_id, in.mode}
                                           : PlanAccess{live_param(p, in.alloc, trigger), in.mode});
        p.ops[static_cast<size_t>(id)].acc = std::move(acc);
        copy_of[cast] = copy_id;
        last_use[copy_id] = id;   // autocast's cache of the recomputation holds it to the region's end
        last_recompute = id;
    };
    // the recompute's statistics copies: (their allocations, the call)
    std::vector<std::pair<std::vector<int32_t>, const StatsCall*>> stats_copies;
    size_t next_stats = 0;
    for (int32_t s = r.first; s <= std::max(recompute_last, stop); ++s) {
        for (; next_cast < recasts.size() && recasts[next_cast][0] == s; ++next_cast)
            cast_again(recasts[next_cast][2], recasts[next_cast][1], s);
        if (s <= recompute_last && next_stats < stats.size() && stats[next_stats].first == s) {
            stats_copies.emplace_back(insert_clones(b, p, stats[next_stats], Phase::Recompute, trigger, trigger),
                                      &stats[next_stats]);
            ++next_stats;
        }
        const Op src = p.ops[static_cast<size_t>(s)];   // a copy: add_op below may move p.ops
        if (src.kind != OpKind::Kernel) continue;
        if (s > recompute_last) break;
        Op o;
        o.src = s;
        o.name = src.name;
        o.module = src.module;
        o.step = src.step;
        o.phase = Phase::Recompute;
        o.anchor = trigger;
        if (cached(s)) {
            o.kind = OpKind::Mark;
            int32_t id = p.add_op(o);
            p.insert_before(trigger, id);
            replayed_at[s] = id;
            continue;
        }
        o.kind = OpKind::Kernel;
        o.duration = src.duration;
        int32_t id = p.add_op(o);
        p.insert_before(trigger, id);
        rerun_of[s] = id;
        std::vector<PlanAccess> acc;
        for (const PlanAccess& a : src.acc) {
            int32_t x = a.alloc;
            // made by this op: a new storage, unless it lives to the end (the thread's cuBLAS
            // workspace that the capture's first matmul made is made once, not by the recompute)
            if (x < nrec && b.creator[static_cast<size_t>(x)] == s && !copy_of.count(x) &&
                b.plan.allocs[static_cast<size_t>(x)].freed.op != kNoFree) {
                Alloc c = p.allocs[static_cast<size_t>(x)];
                c.src = -1;
                c.made = {id, false};
                c.made_offset = c.freed_offset = 0;
                c.freed = {id, true};
                copy_of[x] = p.add_alloc(c);
            }
            auto it = copy_of.find(x);
            int32_t use = it == copy_of.end() ? thread_workspace(p, live_param(p, x, trigger), id) : it->second;
            acc.push_back({use, a.mode});
            if (it != copy_of.end()) last_use[use] = id;
        }
        p.ops[static_cast<size_t>(id)].acc = std::move(acc);
        last_recompute = id;
    }
    if (last_recompute < 0 && !p.before[static_cast<size_t>(trigger)].empty())
        last_recompute = p.before[static_cast<size_t>(trigger)].back();

    // Saved storages made by the run and saved by nothing else are not kept: they die at their
    // last forward use (autocast's cached parameter copies at the end of the forward) and the
    // backward reads their recomputed copies.
    for (int32_t x : saved) {
        Alloc& a = p.allocs[static_cast<size_t>(x)];
        auto it = copy_of.find(x);
        if (!only_here[static_cast<size_t>(x)] || it == copy_of.end() || a.device != b.device) continue;
        const int32_t xc = it->second;
        Alloc& c = p.allocs[static_cast<size_t>(xc)];
        // The checkpoint hands a recomputed tensor over at its unpack and keeps no reference to
        // it: it dies when the backward node that unpacked it returns, where the captured step's
        // saved tensor lived until the engine released the node's saved variables, after it had
        // also summed the node's gradients to their inputs' shapes (a bias gradient's aten::sum).
        // So: the captured free, less those trailing sums, and not before its last read.
        c.freed = a.freed;
        c.freed_offset = a.freed_offset;
        if (auto end = b.node_return(x, r.pass, a.freed)) {
            c.freed = *end;
            c.freed_offset = 0;
        }
        int32_t lf = b.last_access_in_pass(x, Phase::Forward, r.pass);
        if (b.param_cast[static_cast<size_t>(x)]) lf = std::max(lf, fwd_end);
        // A frame of the model's code may hold it longer than its last use: `q, k, v` until the
        // block's forward returns, a module's input argument until its own forward does.
        const int32_t held = b.held_seq[static_cast<size_t>(x)];
        if (held >= 0 && b.phase[static_cast<size_t>(held)] == Phase::Forward &&
            b.pass[static_cast<size_t>(held)] == r.pass)
            lf = std::max(lf, held);
        if (lf >= 0) { a.freed = {lf, true}; a.freed_offset = 0; }
        b.for_acc(x, [&](int32_t s, trace::AccessMode) {
            if (b.phase[static_cast<size_t>(s)] != Phase::Backward || b.pass[static_cast<size_t>(s)] != r.pass) return;
            for (PlanAccess& pa : p.ops[static_cast<size_t>(s)].acc)
                if (pa.alloc == x) pa.alloc = xc;
        });
        last_use.erase(xc);
    }
    // A storage outside ops saved too (shared_save): the call's nodes read its recomputed copy,
    // handed over at their unpack (it dies when the last of them returns: where the captured step
    // freed it, when that node was the last to hold it); the original dies after its forward use
    // and the outside nodes' reads.
    for (const SharedSave& sh : shared) {
        auto it = copy_of.find(sh.alloc);
        if (it == copy_of.end()) continue;
        Alloc& original = p.allocs[static_cast<size_t>(sh.alloc)];
        Alloc& copy = p.allocs[static_cast<size_t>(it->second)];
        Point end{sh.run_last, true};
        if (auto back = b.node_return(sh.alloc, r.pass, original.freed); back && sh.run_last > sh.outside_last)
            end = p.later(end, *back);
        copy.freed = p.later(copy.freed, end);
        copy.freed_offset = 0;
        last_use.erase(it->second);
        for (int32_t seq : sh.run_reads)
            for (PlanAccess& pa : p.ops[static_cast<size_t>(seq)].acc)
                if (pa.alloc == sh.alloc) pa.alloc = it->second;
        int32_t kept = std::max(b.last_access_in_pass(sh.alloc, Phase::Forward, r.pass), sh.outside_last);
        const int32_t held = b.held_seq[static_cast<size_t>(sh.alloc)];
        if (held >= 0 && b.pass[static_cast<size_t>(held)] == r.pass) kept = std::max(kept, held);
        if (kept >= 0 && p.key(Point{kept, true}) < p.key(original.freed)) {
            original.freed = {kept, true};
            original.freed_offset = 0;
        }
    }
    // Recomputed storages nothing saved die where the captured forward freed them, the same code
    // dropping its last reference (a local, an argument: not always at the last use); those
    // it freed after the early stop die at the stop, which unwinds the recomputation's frames, and
    // so do those it freed after the block's forward or never (an output the block returns beside
    // its hidden state, as nn.MultiheadAttention's averaged weights: the recomputation's return
    // value is dropped when it ends); autocast's cached parameter copies when the recomputation
    // (its autocast region) ends.
    for (auto& [x, xc] : copy_of) {
        if (!last_use.count(xc)) continue;
        Alloc& c = p.allocs[static_cast<size_t>(xc)];
        Point end{last_use[xc], true};
        const Point freed = b.plan.allocs[static_cast<size_t>(x)].freed;
        if (b.param_cast[static_cast<size_t>(x)]) {
            end = {last_recompute, true};
        } else if (freed.op == kNoFree || freed.op > r.last) {
            // alive when the call returned (a value it returns, as HcMaps' `post` or
            // nn.MultiheadAttention's averaged weights), or never freed: a frame of the call still
            // holds it when the recomputation stops, or returns, and drops it then
            end = p.later(end, Point{last_recompute, true});
        } else if (freed.op != kNoFree && freed.op >= r.first && freed.op <= r.last) {
            auto it = rerun_of.find(freed.op);
            auto replay = replayed_at.find(freed.op);   // a kept matmul's place (save_matmuls)
            if (freed.op > recompute_last) end = {last_recompute, true};
            else if (it != rerun_of.end()) end = p.later(end, Point{it->second, freed.at_end});
            else if (replay != replayed_at.end()) end = p.later(end, Point{replay->second, true});
        }
        c.freed = end;
    }
    // A weight cast that other calls saved as well: this call's backward nodes read this
    // recomputation's copy (release_forward_casts hands them over).
    for (auto& [x, xc] : copy_of)
        if (b.param_cast[static_cast<size_t>(x)] &&
            !(only_here[static_cast<size_t>(x)] && std::find(saved.begin(), saved.end(), x) != saved.end()))
            recasts_.push_back({x, xc, trigger, r.pass, r.module});
    // Outputs the selective policy cached live until the recomputation takes them back (or the
    // checkpoint's frame dies, when the recomputation stopped before them). torch's cache
    // (create_selective_checkpoint_contexts) lets go of an output when the recomputation replays
    // its op; from there it is the recomputation's tensor, as a recomputed copy is: one that only
    // the call saved is handed to the node that unpacks it and dies when that node returns (before
    // the engine's sums of the node's gradients); one nothing saved dies where the captured
    // forward's code dropped it, at the rerun of that kernel of the call (the hyper-connection's
    // bmm output, held by its frame until the residual add; the recomputation's end when that
    // kernel comes after the stop). Never before its replay and its last recomputed reader.
    for (int32_t s = r.first; s <= r.last; ++s) {
        if (!cached(s)) continue;
        for (const PlanAccess& pa : p.ops[static_cast<size_t>(s)].acc) {
            const int32_t kept = pa.alloc;
            if (kept >= nrec || b.creator[static_cast<size_t>(kept)] != s) continue;
            Alloc& out = p.allocs[static_cast<size_t>(kept)];
            if (out.freed.op == kNoFree) continue;
            auto it = replayed_at.find(s);
            Point until = it != replayed_at.end() ? Point{it->second, true} : Point{region_bwd_last, true};
            for (int32_t q : p.before[static_cast<size_t>(trigger)])
                for (const PlanAccess& u : p.ops[static_cast<size_t>(q)].acc)
                    if (u.alloc == kept) until = p.later(until, Point{q, true});
            const Point recorded = b.plan.allocs[static_cast<size_t>(kept)].freed;
            const bool saved_here = only_here[static_cast<size_t>(kept)] != 0 &&
                                    std::binary_search(saved.begin(), saved.end(), kept);
            if (it != replayed_at.end() && saved_here) {
                Point end = recorded;
                if (auto back = b.node_return(kept, r.pass, recorded)) end = *back;
                out.freed = p.later(until, end);
                out.freed_offset = 0;
                continue;
            }
            if (it != replayed_at.end() && !b.kept_saved(kept) && recorded.op >= r.first && recorded.op <= r.last) {
                Point end = until;
                auto rerun = rerun_of.find(recorded.op);
                auto replay = replayed_at.find(recorded.op);
                if (recorded.op > recompute_last) end = p.later(end, Point{last_recompute, true});
                else if (rerun != rerun_of.end()) end = p.later(end, Point{rerun->second, recorded.at_end});
                else if (replay != replayed_at.end()) end = p.later(end, Point{replay->second, true});
                out.freed = end;
                out.freed_offset = 0;
                continue;
            }
            if (p.key(until) > p.key(out.freed)) { out.freed = until; out.freed_offset = 0; }
        }
    }
    // The checkpoint keeps its inputs (storages made before the call) until its backward ends:
    // the engine releases the last node's saved variables (the checkpoint's holders) after it has
    // summed the node's gradients to their inputs' shapes (a bias gradient's aten::sum).
    int32_t inputs_end = region_bwd_last;
    for (int32_t next = inputs_end + 1;
         next < p.recorded && b.phase[static_cast<size_t>(next)] == Phase::Backward &&
         b.plan.strings[static_cast<size_t>(b.plan.ops[static_cast<size_t>(next)].name)] == "aten::sum";
         ++next)
        inputs_end = next;
    for (int32_t x : touched) {
        Alloc& a = p.allocs[static_cast<size_t>(x)];
        if (a.freed.op == kNoFree || a.category == trace::Category::Param) continue;
        // autocast's cached cast of a weight an earlier call made is no argument of the call
        // (the module reads its parameters; the recomputation casts them again)
        if (x < nrec && b.param_cast[static_cast<size_t>(x)]) continue;
        if (p.key(a.made) >= p.key(Point{r.first, false})) continue;
        Point until{inputs_end, true};
        if (p.key(until) > p.key(a.freed)) { a.freed = until; a.freed_offset = 0; }
    }
    // The recompute's statistics copies: running_mean's and running_var's live as long as what the
    // recomputed batch-norm op made and its node saved (save_mean, save_invstd), num_batches_tracked's
    // to the op's end (the hooks put the buffers back when the call returns).
    for (const auto& [allocs, c] : stats_copies) {
        auto rerun = rerun_of.find(c->bn);
        if (rerun == rerun_of.end()) continue;
        const int32_t id = rerun->second;
        Point held{id, true};
        for (const PlanAccess& access : p.ops[static_cast<size_t>(id)].acc) {
            const Alloc& made = p.allocs[static_cast<size_t>(access.alloc)];
            if (access.alloc >= nrec && made.made.op == id && made.freed.op != kNoFree)
                held = p.later(held, made.freed);
        }
        const bool batches = c->bytes.size() == 3;
        for (size_t i = 0; i < allocs.size(); ++i) {
            Alloc& copy = p.allocs[static_cast<size_t>(allocs[i])];
            copy.freed = batches && i + 1 == allocs.size() ? Point{id, true} : held;
            copy.freed_offset = 0;
        }
    }
}

}  // namespace

std::vector<Region> checkpoint_regions(const CaptureInfo& info, const std::vector<CheckpointGroup>& groups) {
    std::vector<Region> out;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
        const CheckpointGroup& g = groups[gi];
        const std::string field = groups.size() == 1 ? "checkpoint.modules" : "checkpoint[" + std::to_string(gi) + "].modules";
        for (int32_t m : resolve_modules(info, g.modules, field)) {
            if (g.policy != Policy::Mhc) {
                out.push_back({m, g.policy});
                continue;
            }
            size_t found = 0;
            for (size_t q = 0; q < info.module_name.size(); ++q)
                if (info.module_type[q] == kMhcMaps && info.within(static_cast<int32_t>(q), m)) {
                    out.push_back({static_cast<int32_t>(q), Policy::Full});
                    ++found;
                }
            if (found == 0)
                throw Error("setting: field '" + field + "': policy mhc: module '" + info.module_name[static_cast<size_t>(m)] +
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

std::unique_ptr<Transform> make_checkpoint(const Base& b, const std::vector<CheckpointGroup>& groups) {
    return std::make_unique<Checkpoint>(checkpoint_regions(b.info, groups));
}

}  // namespace mhc::advise
