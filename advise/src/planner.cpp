// The planner (planner.hpp): single-block effects, the separable model, the DP per global
// combination and family of choices, exact predictions with the caching allocator model.
#include "mhc/advise/planner.hpp"

#include "mhc/advise/transforms.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <functional>
#include <map>

#include "mhc/common/error.hpp"
#include "planner_parts.hpp"

namespace mhc::advise {

namespace {

using planning::BlockEffects;
using planning::Combo;
using planning::kChoices;
using planning::Predictions;
using planning::count_allocator_values;
using planning::rank_distinct;
using planning::refine;

constexpr int64_t kNone = INT64_MIN;

// Where each live-bytes window sits: the block that owns it (-1: none), whether it is in a
// forward, and (outside blocks) how many blocks are held then.
struct Windows {
    std::vector<int32_t> owner, held;
    std::vector<uint8_t> fwd;
};

Windows classify(const Base& base) {
    // per pass (a step with gradient accumulation holds its blocks once per micro-batch)
    const size_t seqs = base.korder.size(), nb = base.info.block_name.size(), ns = base.pass_step.size();
    Windows windows;
    windows.owner.assign(seqs + 2, -1);
    windows.held.assign(seqs + 2, 0);
    windows.fwd.assign(seqs + 2, 0);
    std::vector<int32_t> first_fwd(nb * ns, INT32_MAX), last_fwd(nb * ns, -1);
    std::vector<int32_t> first_bwd(nb * ns, INT32_MAX), last_bwd(nb * ns, -1);
    for (size_t s = 0; s < seqs; ++s) {
        const int32_t module = base.module[s];
        const int32_t block = module >= 0 ? base.info.module_block[static_cast<size_t>(module)] : -1;
        windows.owner[s] = block;
        windows.fwd[s] = base.phase[s] == Phase::Forward;
        if (block < 0) continue;
        size_t slot = static_cast<size_t>(block) * ns + static_cast<size_t>(base.pass[s]);
        const auto at = static_cast<int32_t>(s);
        if (base.phase[s] == Phase::Forward) {
            first_fwd[slot] = std::min(first_fwd[slot], at);
            last_fwd[slot] = std::max(last_fwd[slot], at);
        }
        if (base.phase[s] == Phase::Backward) {
            first_bwd[slot] = std::min(first_bwd[slot], at);
            last_bwd[slot] = std::max(last_bwd[slot], at);
        }
    }
    // An op of a module outside every block that runs in the middle of a block's forward or
    // backward (a shared activation module the blocks call, one not registered under them) is
    // that block's: the block is not held there, its forward not done.
    for (size_t s = 0; s < seqs; ++s) {
        if (windows.owner[s] >= 0) continue;
        const auto at = static_cast<int32_t>(s);
        const size_t si = static_cast<size_t>(base.pass[s]);
        for (size_t k = 0; k < nb; ++k) {
            const size_t slot = k * ns + si;
            if ((first_fwd[slot] < at && at < last_fwd[slot]) || (first_bwd[slot] < at && at < last_bwd[slot])) {
                windows.owner[s] = static_cast<int32_t>(k);
                break;
            }
        }
    }
    for (size_t s = 0; s < seqs; ++s) {
        if (windows.owner[s] >= 0) continue;
        size_t si = static_cast<size_t>(base.pass[s]);
        int32_t held = 0;
        for (size_t k = 0; k < nb; ++k)
            held += first_fwd[k * ns + si] < static_cast<int32_t>(s) && last_bwd[k * ns + si] > static_cast<int32_t>(s);
        windows.held[s] = held;
    }
    return windows;
}

bool block_has_type(const Base& base, size_t block, const std::string& type) {
    for (size_t m = 0; m < base.info.module_name.size(); ++m)
        if (base.info.module_type[m] == type &&
            base.info.within(static_cast<int32_t>(m), base.info.block_module[block]))
            return true;
    return false;
}

}  // namespace

std::string_view to_string(BlockChoice choice) {
    switch (choice) {
        case BlockChoice::Keep: return "keep";
        case BlockChoice::Full: return "checkpoint";
        case BlockChoice::SaveMatmuls: return "selective checkpoint";
        case BlockChoice::Mhc: return "mhc recompute";
        case BlockChoice::Offload: return "offload";
        case BlockChoice::FullOffload: return "checkpoint + offload";
        case BlockChoice::Count: break;
    }
    return "?";
}

Setting combine(const Base& base, const Setting& global, const std::vector<BlockChoice>& per_block,
                const OffloadSetting& offload) {
    Setting setting = global;
    setting.checkpoint.clear();
    setting.offload.reset();
    const std::pair<BlockChoice, Policy> groups[] = {{BlockChoice::Full, Policy::Full},
                                                     {BlockChoice::SaveMatmuls, Policy::SaveMatmuls},
                                                     {BlockChoice::Mhc, Policy::Mhc}};
    // checkpoint + offload: the block in the full checkpoint's group and in the offload's modules,
    // whose hooks then go around the checkpoint and take what it saves (the call's inputs)
    for (auto [choice, policy] : groups) {
        CheckpointGroup group;
        group.policy = policy;
        for (size_t k = 0; k < per_block.size(); ++k)
            if (per_block[k] == choice || (choice == BlockChoice::Full && per_block[k] == BlockChoice::FullOffload))
                group.modules.push_back(base.info.block_name[k]);
        if (!group.modules.empty()) setting.checkpoint.push_back(group);
    }
    std::vector<std::string> off;
    for (size_t k = 0; k < per_block.size(); ++k)
        if (per_block[k] == BlockChoice::Offload || per_block[k] == BlockChoice::FullOffload)
            off.push_back(base.info.block_name[k]);
    if (!off.empty()) {
        setting.offload = offload;
        setting.offload->modules = off;
    }
    return setting;
}

namespace {

bool offloads(int choice) {
    return choice == static_cast<int>(BlockChoice::Offload) || choice == static_cast<int>(BlockChoice::FullOffload);
}

// Each block choice alone under `offload`; with `from` (the same under another offload mode), only
// the choices that offload are evaluated again, the others copied.
BlockEffects block_effects(const Evaluator& ev, const PlannerOptions& options, const OffloadSetting& offload,
                           const BlockEffects* from, int64_t& evaluations) {
    const Base& base = ev.base();
    const size_t nb = base.info.block_name.size();
    if (from != nullptr) {
        BlockEffects effects = *from;
        for (size_t k = 0; k < nb; ++k)
            for (int c = 1; c < kChoices; ++c) {
                std::vector<int64_t>& delta = effects.delta[k][static_cast<size_t>(c)];
                if (!offloads(c) || delta.empty()) continue;
                std::vector<BlockChoice> per(nb, BlockChoice::Keep);
                per[k] = static_cast<BlockChoice>(c);
                Evaluator::Quick quick = ev.quick(combine(base, Setting{}, per, offload));
                ++evaluations;
                for (size_t w = 0; w < delta.size(); ++w) delta[w] = quick.live.window[w] - effects.base_window[w];
                effects.time[k][static_cast<size_t>(c)] = quick.step_time - effects.base_time;
            }
        return effects;
    }
    BlockEffects effects;
    Evaluator::Quick q0 = ev.quick(Setting{});
    ++evaluations;
    effects.base_window = q0.live.window;
    effects.base_time = q0.step_time;
    effects.delta.assign(nb, std::vector<std::vector<int64_t>>(kChoices));
    effects.time.assign(nb, std::vector<int64_t>(kChoices, 0));
    for (size_t k = 0; k < nb; ++k) {
        effects.delta[k][0].assign(effects.base_window.size(), 0);
        const bool mhc = block_has_type(base, k, kMhcMaps);
        const bool selective = offers_selective(base, k);
        // none of checkpointing or offloading where a later backward reads the block's saves again
        if (!reread_refusal(base, base.info.block_module[k]).empty()) continue;
        const bool recomputable = cache_refusal(base, base.info.block_module[k]).empty();
        for (int c = 1; c < kChoices; ++c) {
            if (c == static_cast<int>(BlockChoice::Mhc) && !mhc) continue;
            if ((c == static_cast<int>(BlockChoice::Full) || c == static_cast<int>(BlockChoice::SaveMatmuls) ||
                 c == static_cast<int>(BlockChoice::FullOffload)) &&
                !recomputable)
                continue;
            if (c == static_cast<int>(BlockChoice::SaveMatmuls) && !selective) continue;
            std::vector<BlockChoice> per(nb, BlockChoice::Keep);
            per[k] = static_cast<BlockChoice>(c);
            Evaluator::Quick quick = ev.quick(combine(base, Setting{}, per, offload));
            ++evaluations;
            std::vector<int64_t>& delta = effects.delta[k][static_cast<size_t>(c)];
            delta.resize(quick.live.window.size());
            for (size_t w = 0; w < delta.size(); ++w) delta[w] = quick.live.window[w] - effects.base_window[w];
            effects.time[k][static_cast<size_t>(c)] = quick.step_time - q0.step_time;
        }
        if (options.progress && (k + 1) % 8 == 0)
            options.progress("evaluated the choices of " + std::to_string(k + 1) + " of " + std::to_string(nb) +
                             " blocks");
    }
    return effects;
}

SeparableModel build_model(const BlockEffects& effects, const Windows& windows, const std::vector<int64_t>& m0,
                           size_t nb) {
    SeparableModel model;
    model.blocks.assign(nb, std::vector<BlockOption>(kChoices));
    model.gap_f.assign(nb + 1, kNone);
    model.gap_b.assign(nb + 1, kNone);
    for (size_t s = 0; s < m0.size(); ++s) {
        if (windows.owner[s] >= 0) continue;
        auto& gap = windows.fwd[s] ? model.gap_f : model.gap_b;
        size_t held_blocks = static_cast<size_t>(std::min<int32_t>(windows.held[s], static_cast<int32_t>(nb)));
        gap[held_blocks] = std::max(gap[held_blocks], m0[s]);
    }
    for (size_t k = 0; k < nb; ++k)
        for (size_t c = 0; c < static_cast<size_t>(kChoices); ++c) {
            BlockOption& opt = model.blocks[k][c];
            const std::vector<int64_t>& delta = effects.delta[k][c];
            if (delta.empty()) {   // not available: never feasible
                opt.wf = opt.wb = INT64_MAX / 4;
                continue;
            }
            opt.wf = opt.wb = kNone;
            int64_t df = kNone, db = kNone;
            for (size_t s = 0; s < m0.size(); ++s) {
                const int32_t own = windows.owner[s];
                if (own == static_cast<int32_t>(k)) {
                    int64_t& win = windows.fwd[s] ? opt.wf : opt.wb;
                    win = std::max(win, m0[s] + delta[s]);
                    continue;
                }
                const bool held = own > static_cast<int32_t>(k) ||
                                  (own < 0 && windows.held[s] > static_cast<int32_t>(k));
                if (!held) continue;
                int64_t& hd = windows.fwd[s] ? df : db;
                hd = std::max(hd, delta[s]);   // the least saving seen while held: conservative
            }
            opt.df = df == kNone ? 0 : df;
            opt.db = db == kNone ? 0 : db;
            opt.time = effects.time[k][c];
        }
    return model;
}

// Global combinations: optimizer implementation x placement: as captured, on the host, fused. Where
// the fused AdamW is offered, the host's step is fused too: torch's fused CPU step takes about a
// fifth of the for-loop's time and holds no more host bytes (docs/advise.md, "Host step
// implementations"), so the for-loop on the host was never the faster answer; `--setting` still
// predicts it.
std::vector<Setting> global_settings(const Base& base, const PlannerOptions& options) {
    std::vector<Setting> globals;
    // a host optimizer is refused then (and under DDP or FSDP2, or for torch.func's gradients: make_host_optimizer)
    const bool grads_read_late = !grads_used_after_backward(base).empty() || !base.info.data_parallel.empty() ||
                                 !base.info.torch_func_modules.empty();
    const bool fused_offered = options.fused_optimizer && base.optimizer_impl == "foreach" &&
                               base.info.adam_optimizer() && base.info.fused_refused.empty();
    const bool host_offered = options.host_optimizer && !base.opt_first.empty() && base.opt_first[0] >= 0 &&
                              !grads_read_late;
    globals.emplace_back();
    if (host_offered) {
        Setting host;
        host.optimizer_on_host = true;
        if (fused_offered) host.optimizer_impl = OptimizerImpl::Fused;
        globals.push_back(host);
    }
    if (fused_offered) {
        Setting fused;
        fused.optimizer_impl = OptimizerImpl::Fused;
        globals.push_back(fused);
    }
    return globals;
}

// The DP over the blocks for one global setting (by its index) and one family of block choices;
// each combination it returns is predicted exactly under each allocator setting and added to
// `dp_points`. The DP's capacity is lowered by a margin for the caching allocator's rounding and
// fragmentation, grown by the excess of an answer that does not run (at most 6 tries).
void search_family(const Evaluator& ev, const PlannerOptions& options, const SeparableModel& model, size_t gi,
                   const Setting& global, const OffloadSetting& offload, const std::vector<uint8_t>& family,
                   int64_t base_margin,
                   Predictions& predictions, std::vector<Combo>& dp_points, Advice& advice) {
    const Base& base = ev.base();
    const size_t nb = base.info.block_name.size();
    int64_t margin = base_margin;
    for (int iter = 0; iter < 6; ++iter) {
        DpResult result = solve(model, options.capacity - margin, family);
        ++advice.dp_runs;
        advice.max_states = std::max(advice.max_states, result.states);
        if (!result.feasible && iter == 0 && margin > 0) {
            // A combination's own reserved-minus-peak can be below the global setting's:
            // try once more without the margin (the exact prediction decides).
            margin = 0;
            continue;
        }
        if (!result.feasible) break;
        std::vector<BlockChoice> per(nb);
        for (size_t k = 0; k < nb; ++k) per[k] = static_cast<BlockChoice>(result.choice[k]);
        dp_points.push_back({gi, per});
        // Of its allocator settings, one that runs at the capacity, else the least reserving:
        // when none runs, the margin grows by that one's excess (its unlimited reserved peak
        // is then above the capacity: at or below it nothing fails).
        Candidate best;
        bool have = false;
        for (Candidate& cand : predictions.predict_each(combine(base, global, per, offload))) {
            cand.blocks = per;
            cand.model_peak = result.peak;
            predictions.keep(cand);
            if (!have || (cand.fits && !best.fits) ||
                (cand.fits == best.fits && cand.prediction.memory.reserved < best.prediction.memory.reserved)) {
                best = cand;
                have = true;
            }
        }
        if (best.fits || best.broken) break;
        margin += best.prediction.memory.reserved - options.capacity + (16 << 20);
    }
}

}  // namespace

Advice advise(const Evaluator& ev, const PlannerOptions& options) {
    auto t0 = std::chrono::steady_clock::now();
    const Base& base = ev.base();
    const size_t nb = base.info.block_name.size();
    Advice advice;
    advice.baseline = ev.predict(Setting{}, options.capacity);
    ++advice.evaluations;
    if (options.progress)
        options.progress("evaluating " + std::to_string(nb) + " blocks x " + std::to_string(kChoices - 1) + " choices");
    // The block choices that offload use one mode per combination (one SavedTensorOffload): each
    // mode searched is a dimension of the global setting, with the blocks' effects under it.
    std::vector<OffloadSetting> modes;
    for (const OffloadMode mode : options.offload_modes) {
        modes.push_back(options.offload);
        modes.back().mode = mode;
        if (mode == OffloadMode::Sync) modes.back().prefetch = -1;   // the mode's default: none
    }
    if (modes.empty()) modes.push_back(options.offload);
    std::vector<BlockEffects> effects;
    effects.reserve(modes.size());
    for (const OffloadSetting& mode : modes)
        effects.push_back(block_effects(ev, options, mode, effects.empty() ? nullptr : &effects.front(),
                                        advice.evaluations));
    const Windows windows = classify(base);

    std::vector<Setting> globals = global_settings(base, options);
    add_reshard_choices(base, globals);   // FSDP2: reshard_after_forward false (transforms/reshard.cpp)
    const std::vector<Setting> global_alone = globals;   // where the allocator's values are tried
    // each global setting under each offload mode (one mode alone where no block offers an offload)
    bool any_offload = false;
    for (size_t k = 0; k < nb; ++k)
        any_offload |= !effects.front().delta[k][static_cast<size_t>(BlockChoice::Offload)].empty();
    const size_t mode_count = any_offload ? modes.size() : 1;
    std::vector<size_t> mode_of;
    std::vector<OffloadSetting> offloads;
    {
        const std::vector<Setting> one = globals;
        globals.clear();
        for (size_t m = 0; m < mode_count; ++m)
            for (const Setting& global : one) {
                globals.push_back(global);
                mode_of.push_back(m);
                offloads.push_back(modes[m]);
            }
    }
    // Families of block choices: all of them, and each alone (answers people can read).
    const std::vector<std::vector<uint8_t>> families = {{1, 1, 1, 1, 1, 1}, {1, 1, 0, 0, 0, 0}, {1, 0, 1, 0, 0, 0},
                                                        {1, 0, 0, 1, 0, 0}, {1, 0, 0, 0, 1, 0}, {1, 0, 0, 0, 0, 1},
                                                        {1, 0, 0, 0, 0, 0}};
    static_assert(kChoices == 6, "a family per choice: one more row and column per choice added");
    // The allocator settings every combination is predicted under (as captured, expandable
    // segments, and a max_split_size_mb where the captured step says it reserves less).
    const std::vector<std::string> confs = search_allocator_confs(ev, options, global_alone, advice.allocator_trials);
    advice.allocator_confs = confs;
    count_allocator_values(base, options, advice);
    if (confs.size() > options.allocator_confs.size()) advice.split_conf = confs[options.allocator_confs.size()];
    Predictions predictions(ev, options, confs, advice);
    // every combination the DP returned, as (global, block choices): where the exact search starts
    std::vector<Combo> dp_points;
    for (size_t gi = 0; gi < globals.size(); ++gi) {
        const Setting& global = globals[gi];
        dp_points.push_back({gi, std::vector<BlockChoice>(nb, BlockChoice::Keep)});
        const SeparableModel model = build_model(effects[mode_of[gi]], windows, ev.quick(global).live.window, nb);
        ++advice.evaluations;
        // The caching allocator's rounding and fragmentation, as the global setting alone has them.
        const Prediction pg = predictions.predict(global).prediction;
        const int64_t base_margin = std::max<int64_t>(0, pg.memory.reserved - pg.memory.peak);
        for (const auto& family : families) {
            // under a second mode, the families without an offload are the first mode's again
            if (mode_of[gi] > 0 && !family[static_cast<size_t>(BlockChoice::Offload)] &&
                !family[static_cast<size_t>(BlockChoice::FullOffload)])
                continue;
            search_family(ev, options, model, gi, global, offloads[gi], family, base_margin, predictions, dp_points,
                          advice);
        }
    }
    // The exact search from each global setting's best start (each optimizer choice under each
    // offload mode): from one start per mode it stopped where that start fits, though slowly (the
    // optimizer on the host), and reached no faster combination of another global setting, whose
    // start did not fit, by one or two changes (a decoder at 68% of its reserved peak answered
    // +234.9% where the answer at 66%, +39.9%, fits too); and from the best of all, at a combination
    // of one mode that no one or two changes take to a fitting one of the other.
    for (size_t gi = 0; gi < globals.size(); ++gi) {
        std::vector<Combo> starts;
        for (const Combo& point : dp_points)
            if (point.global == gi) starts.push_back(point);
        refine(ev, globals, offloads, effects.front(), options, starts, predictions, advice);
    }
    rank_distinct(predictions.seen(), options, advice);
    advice.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return advice;
}

}  // namespace mhc::advise
