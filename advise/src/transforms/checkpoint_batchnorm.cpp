// BatchNorm's running statistics in a checkpointed call (docs/simulator.md "Settings: checkpoint").
#include <string>

#include "checkpoint.hpp"

namespace mhc::advise::checkpointing {

// BatchNorm inside a checkpointed module keeps its running statistics through the recompute:
// mhc_torch.apply's hooks (the printed keep_running_stats) clone the module's buffers
// (running_mean, running_var, num_batches_tracked) before each of its forward calls, drop the
// clones at once in the forward and, in the recompute, give them to the module to update there:
// there they live as long as the recomputed batch-norm op's saved tensors (its node saves the
// running statistics it was given), num_batches_tracked's until the call returns. Small (the
// caching allocator's 512 B blocks), but at a capacity where a step runs only by giving cached
// memory back, a small segment made or not decides the retries (DeepLabV3-R50 at 3 GiB: the
// reserved bytes 0.07% to 1.32% off, 312 allocations of 424,768 B not predicted).
// The calls of BatchNorm modules with running statistics among seqs [first, last].
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
    for (int32_t seq = first; seq <= last; ++seq) {
        const int32_t module = base.module[static_cast<size_t>(seq)];
        if (base.phase[static_cast<size_t>(seq)] != Phase::Forward || !is_batchnorm(module)) continue;
        if (seq > first && base.module[static_cast<size_t>(seq) - 1] == module) continue;   // not the call's first kernel
        StatsCall call{seq, -1, module, {}};
        int64_t batches = 0;
        for (int32_t op = seq; op <= last && base.module[static_cast<size_t>(op)] == module; ++op) {
            const std::string& name = plan.strings[static_cast<size_t>(base.plan.ops[static_cast<size_t>(op)].name)];
            const bool norm = name.find("batch_norm") != std::string::npos;
            for (const PlanAccess& access : base.plan.ops[static_cast<size_t>(op)].acc) {
                if (!buffer(access.alloc)) continue;
                if (norm && call.bn < 0)
                    call.bytes.push_back(base.plan.allocs[static_cast<size_t>(access.alloc)].bytes);
                else if (!norm && access.mode != trace::AccessMode::Read)
                    batches = base.plan.allocs[static_cast<size_t>(access.alloc)].bytes;
            }
            if (norm && call.bn < 0) call.bn = op;
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

}  // namespace mhc::advise::checkpointing
