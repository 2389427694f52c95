#pragma once
// What the simulating commands (simulate, sweep, validate) share: the options that shape a
// simulation besides policy, capacity and link, declared once, and the small steps each
// command repeats around them.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "mhc/sim/config.hpp"
#include "mhc/sim/simulate.hpp"

namespace mhc::cli {

// What --allocator-conf takes (simulate, sweep, validate, allocator), said once.
inline constexpr const char* kAllocatorConfHelp =
    "in PYTORCH_CUDA_ALLOC_CONF syntax, comma-separated: expandable_segments:True or False, "
    "max_split_size_mb:N and max_non_split_rounding_mb:N (MiB, 20 or more), roundup_power2_divisions:N (a "
    "power of 2, or [MiB:N,...,>:N]), garbage_collection_threshold:X (between 0 and 1); e.g. "
    "expandable_segments:True or max_split_size_mb:128";

// One allocator model for every command (simulate, sweep, validate and the viewer's launcher):
// PyTorch's caching allocator is what a training job meets; `ideal` (bytes only) is the bound.
inline constexpr const char* kDefaultAllocator = "caching";

struct SimBaseOptions {
    std::string allocator;
    double cpu_buffer_ratio = 0, max_swap_ops = 0;
    int device = sim::kAutoDevice;
    bool no_early = false;
    CLI::Option* ratio = nullptr;   // to tell a given option from the environment's default
    CLI::Option* ops = nullptr;
    std::string allocator_conf;     // --allocator-conf (simulate and sweep only)
};

// --allocator (default kDefaultAllocator; `allocator_note` is appended to its help),
// --cpu-buffer-ratio, --max-swap-ops-per-sec, --device, --no-early.
void add_sim_base_options(CLI::App& app, SimBaseOptions& o, const std::string& allocator_note = "");
// --allocator-conf: PYTORCH_CUDA_ALLOC_CONF over the trace's recorded allocator settings.
void add_allocator_conf_option(CLI::App& app, SimBaseOptions& o);
// Its check (simulate, sweep, validate, allocator): a setting named twice is refused
// ("expandable_segments:True,expandable_segments:False" ran with the last, without a word).
CLI::Validator allocator_conf_once();
// Copies them into `c`, then lets the environment variables fill what was not given
// (docs/simulator.md); `policy_given`: whether the command's eviction option was given.
void apply_sim_base_options(const SimBaseOptions& o, sim::Config& c, bool policy_given);

// --policy (--eviction) and --prefetch of a single run (simulate, validate), their defaults the
// values `policy` and `prefetch` hold; returns --policy's option (given or not: apply_sim_base_options).
CLI::Option* add_policy_options(CLI::App& app, std::string& policy, std::string& prefetch);

// "lru, largest, belady, dtr, cost_aware": the names of a policy registry, for an option's line
// (the descriptions are in `mhc help policies`).
std::string policy_names(const std::vector<sim::PolicyInfo>& v);
// "pcie3, pcie4, ...": the link presets every --link, --links and --model-link takes, for their
// lines (each had its own list; sweep's and validate's none, advise's one short).
std::string link_preset_names();

// --link's check when the command line is read (and each item of --links): a preset, or a name
// that is a file or reads as one (its faults are said naming the file when it is read): "--link:
// 'pcie44': not a link; use one of ...; did you mean pcie4?".
void check_link_name(const std::string& spec);
CLI::Validator link_name();

// "a,b,c" -> {"a", "b", "c"}; an empty item ("a,,c", "a,") is refused naming `option` (it was
// dropped without a word: `--capacities 90%,,70%` ran two capacities).
std::vector<std::string> split_list(const std::string& option, const std::string& text);

// A list option naming one thing twice (`--capacities 80%,80 %`, `--policies lru,lru`) would run
// and store it twice: refused (mhc::Error naming the option and both items). `keys[i]` is what
// items[i] names (the parsed capacity, the policy's name).
void refuse_repeats(const std::string& option, const std::vector<std::string>& items,
                    const std::vector<std::string>& keys);
// What a capacity names, exactly (Capacity::to_string rounds sizes to two decimals).
std::string capacity_key(const sim::Capacity& capacity);

// The trace prepared for simulation. Throws mhc::Error (exit 2) when the simulated device has
// no allocations: there is nothing to limit. What else it lacks is in sim::trace_warnings.
std::shared_ptr<const sim::Prepared> prepare_for_simulation(const trace::TraceData& t, int device,
                                                            const std::string& trace_path);

}  // namespace mhc::cli
