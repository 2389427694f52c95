#pragma once
// mhc advise's planner: which settings make a captured step fit a GPU, fastest first
// (docs/advise.md "Search").
//
// Per block the choices are: unchanged, checkpoint (full), selective checkpoint keeping
// matmuls, mHC's hyper-connections recomputed (mHC models), offload of its saved tensors
// (streamed), and checkpoint (full) with its saved inputs offloaded (the offload's hooks around
// the checkpoint: what a checkpointed block saves is its call's inputs). Globally: the
// optimizer's implementation (foreach -> fused) and placement (device, host), and the allocator's settings (as captured, expandable segments, and a max_split_size_mb
// chosen from the step's own large allocations where it reserves less). Each block choice is
// evaluated alone on the whole step (transform, then live bytes per window and time); the
// separable model (dp.hpp) combines them, and a DP finds, per global combination and per family
// of block choices, the fastest combination whose live-bytes peak fits the capacity minus a
// margin for the caching allocator. Every answer is then predicted exactly (the whole
// transformed step through the simulator's caching allocator model); the margin grows until
// the exact reserved peak fits. Then an exact search moves from each global setting's best answer
// to a better neighbour (one block's choice or the global setting changed, predicted exactly)
// while there is one: the first answer fits and no such neighbour of it is faster and fits.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mhc/advise/dp.hpp"
#include "mhc/advise/evaluate.hpp"

namespace mhc::advise {

enum class BlockChoice : int { Keep = 0, Full, SaveMatmuls, Mhc, Offload, FullOffload, Count };
std::string_view to_string(BlockChoice c);

struct PlannerOptions {
    int64_t capacity = 0;        // bytes the reserved peak must fit
    double budget = -1;          // largest loss against the baseline step time; < 0: none
    int top = 3;
    std::vector<std::string> allocator_confs{"", "expandable_segments:True"};
    // max_split_size_mb: at most this many values, read from the step's large allocations
    // (split_size_values), are predicted on the captured step, alone and with expandable segments;
    // the one that does best at the capacity (with the values of roundup_power2_divisions below)
    // joins allocator_confs when it does better there than each of them (docs/advise.md "Search",
    // allocator settings). 0: none.
    int split_sizes = 8;
    // roundup_power2_divisions: at most this many values (roundup_values), tried the same way. 0: none.
    int roundup_divisions = 4;
    OffloadSetting offload;      // the offload the block choices "offload" and "checkpoint + offload" use
    // in each of these modes: one per combination (one set of hooks), so each is a dimension of the
    // global setting (docs/advise.md "Search"); empty: offload.mode alone
    std::vector<OffloadMode> offload_modes{OffloadMode::Streamed, OffloadMode::Sync};
    bool host_optimizer = true, fused_optimizer = true;
    // The exact search also moves two blocks' choices at once, or one block's and the global
    // setting, where no single change is better (docs/advise.md "Search", 5).
    bool pair_moves = true;
    std::function<void(const std::string&)> progress;   // a line per stage, or nothing
};

struct Candidate {
    Setting setting;
    Prediction prediction;
    double loss = 0;                  // step time / baseline - 1 (estimated)
    std::vector<BlockChoice> blocks;  // per block
    int64_t model_peak = 0;           // the separable model's peak (the DP's view)
    bool fits = false, within_budget = false;
    bool broken = false;   // its predicted step broke a trace rule (a transform's fault): never ranked
};

struct Advice {
    Prediction baseline;
    std::vector<std::string> allocator_confs;   // the allocator settings searched (each combination under each)
    std::string split_conf;                     // the allocator setting the search added ("" none did better)
    int64_t split_values = 0;                   // values of max_split_size_mb tried on the captured step
    int64_t roundup_values = 0;                 // values of roundup_power2_divisions tried there
    int64_t allocator_trials = 0;               // caching model runs there to choose among them
    std::vector<Candidate> ranked;    // fitting (and within the budget), fastest first, at most top
    std::vector<Candidate> all;       // every distinct setting predicted, fastest first
    int64_t dp_runs = 0, evaluations = 0, max_states = 0;
    int64_t refine_rounds = 0;   // rounds of the exact search over neighbouring combinations
    int64_t pair_rounds = 0;     // of which also tried two changes at once
    double seconds = 0;
    // combinations left out because their predicted step broke a trace rule (mhc's fault, not the
    // capture's): the first one's message, and how many
    std::string broken_first;
    int64_t broken = 0;
};

Advice advise(const Evaluator& ev, const PlannerOptions& o);

// The values of max_split_size_mb (MiB) that act differently on `step`, at most `most`, largest
// first: only the requests of at least N MiB and the segments of at least N MiB (of the device's
// requests, rounded as the caching allocator rounds them: 512 B, then 2 MiB for its segment) set
// apart what N does, so the N > 20 fall into classes between consecutive such sizes in MiB (a
// request's size rounded down, a segment's); each class is given by its roundest member (the most
// trailing zero bits), the classes with the largest sizes first.
std::vector<int64_t> split_size_values(const trace::TraceData& step, size_t most);

// The values of roundup_power2_divisions that act differently on `step`, at most `most`: of 2, 4, 8
// and 16 divisions, those that round the device's requests otherwise than plain rounding (512 B)
// and than every smaller value before them (one per class of equal roundings).
std::vector<int64_t> roundup_values(const trace::TraceData& step, size_t most);

// The allocator settings the search tries on `ev`'s step: opts.allocator_confs, then the best of
// the max_split_size_mb values of split_size_values and the roundup_power2_divisions values of
// roundup_values (each alone or with expandable segments) at the capacity when on the captured step
// it does better there than each of those: one that runs there first, then the smaller cost of
// giving cached memory back there, then the smaller reserved peak there, then without a limit (of
// equals, the first tried). `trials` counts the caching model's runs.
std::vector<std::string> search_allocator_confs(const Evaluator& ev, const PlannerOptions& opts, int64_t& trials);
// The same on each of `on` (the search's global settings alone: an allocator value that does best
// under a fused optimizer need not under the captured one), each one's best kept once, in that order.
std::vector<std::string> search_allocator_confs(const Evaluator& ev, const PlannerOptions& opts,
                                                const std::vector<Setting>& on, int64_t& trials);

// Whether the search offers selective checkpointing ("keep matmuls") for block `block`: not when
// its forward runs no op that policy keeps (it would be full checkpointing under another name),
// nor where selective_refusal says why PyTorch stops the step.
bool offers_selective(const Base& base, size_t block);

// Why PyTorch stops a step that checkpoints `module` selectively (policy save_matmuls), empty when
// it runs: its forward writes in place into the output of an op the save list keeps ("Tensor cached
// during selective activation checkpoint has been mutated": timm's EfficientNet), or, under
// autocast, it is or holds a module called several times a pass (ALBERT's shared layer).
std::string selective_refusal(const Base& base, int32_t module);

// Why checkpointing or offloading `module` is not modelled, empty when it is: a backward of a later
// pass reads what its forward saved (a graph kept by create_graph=True or retain_graph=True: a
// WGAN-GP's critic, whose gradient penalty's graph the critic loss's backward goes through again).
// PyTorch recomputes a checkpointed module once per backward that unpacks, and an offload's device
// copy is gone (mhc_torch's offload refuses the second unpack); the transforms model one backward
// per forward. Nor in a step that offloads every save itself (meta capture.save_on_cpu: the user's
// torch.autograd.graph.save_on_cpu), nor for a module that runs inside torch.func's grad (meta
// capture.torch_func_modules), whose transforms refuse saved-tensor hooks, or inside its jvp (meta
// capture.jvp_modules), where checkpoint recomputes without the tangents. The planner offers
// neither on such a block.
std::string reread_refusal(const Base& base, int32_t module);

// Why checkpointing `module` (full or selective) stops in PyTorch, empty when it does not: its
// forward updates a Hugging Face key/value cache that the setting leaves on (a forward given
// use_cache=True: meta capture.kept_cache_callers), which the recompute appends to again. The
// planner offers neither on such a block.
std::string cache_refusal(const Base& base, int32_t module);

// Refuses (mhc::Error, one line naming the field and the module) a setting that checkpoints a module
// selectively where selective_refusal says PyTorch stops, checkpoints one where cache_refusal
// does, or checkpoints or offloads one that
// reread_refusal says is not modelled: `mhc advise --setting` predicts only what it models.
void check_selective(const Base& base, const Setting& setting);

// The setting that applies per-block choices on top of a global setting.
Setting combine(const Base& b, const Setting& global, const std::vector<BlockChoice>& per_block, const OffloadSetting& offload);

}  // namespace mhc::advise
