#include "sim_options.hpp"

#include "command.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "mhc/common/error.hpp"
#include "mhc/common/refusal.hpp"
#include "mhc/sim/allocator.hpp"
#include "mhc/sim/link.hpp"
#include <sstream>

namespace mhc::cli {

void add_sim_base_options(CLI::App& app, SimBaseOptions& o, const std::string& allocator_note) {
    o.allocator = kDefaultAllocator;
    app.add_option("--allocator", o.allocator,
                   "Allocator model: caching (PyTorch's block and segment rules) or ideal (bytes only)" +
                       allocator_note)
        ->type_name("MODEL")
        ->default_str(kDefaultAllocator)
        ->check(parsed_by(sim::parse_allocator));
    o.ratio = app.add_option(
                     "--cpu-buffer-ratio", o.cpu_buffer_ratio,
                     "Host buffer as a ratio of GPU capacity, 0 to 1000, 0 for unlimited ($MHC_CPU_BUFFER_RATIO when "
                     "not given)")
                  ->check(finite_number())
                  ->check(CLI::Range(0.0, sim::kMaxCpuBufferRatio))
                  ->default_str("0");
    o.ops = app.add_option("--max-swap-ops-per-sec", o.max_swap_ops,
                           "Cap on swap transfers per second, 0.001 to 1e12, 0 for none ($MHC_MAX_SWAP_OPS_PER_SEC "
                           "when not given)")
                ->check(finite_number())
                ->check(CLI::Validator(
                    [](std::string& text) {
                        const double ops = std::strtod(text.c_str(), nullptr);
                        return ops == 0 || (ops >= sim::kMinSwapOpsPerSec && ops <= sim::kMaxSwapOpsPerSec)
                                   ? std::string()
                                   : mhc::quoted_value(text) + ": must be 0 (unlimited) or in [0.001, 1e12]";
                    },
                    ""))
                ->default_str("0");
    app.add_option("--device", o.device,
                   "Device to simulate: auto is the GPU with the largest peak; -1 is the host's pinned memory")
        ->transform(CLI::Transformer({{"auto", std::to_string(sim::kAutoDevice)}}))
        ->type_name("DEVICE")
        ->default_str("auto")
        // -1 and up, or auto (which the transform has made kAutoDevice).
        ->check(CLI::Validator(
            [](std::string& v) {
                const long long d = std::strtoll(v.c_str(), nullptr, 10);
                return d >= -1 || d == sim::kAutoDevice ? std::string()
                                                        : mhc::quoted_value(v) + ": a device is -1 (the host), 0 or more, or auto";
            },
            "DEVICE"));
    app.add_flag("--no-early", o.no_early,
                 "No early swap-out: evict only on demand (rule 10 of docs/simulator.md off)");
}

void add_allocator_conf_option(CLI::App& app, SimBaseOptions& o) {
    app.add_option("--allocator-conf", o.allocator_conf, "What-if caching allocator settings over the recorded ones, " +
                                                             std::string(kAllocatorConfHelp))
        ->type_name("CONF")
        ->check(allocator_conf_once());
}

CLI::Validator allocator_conf_once() {
    return CLI::Validator(
        [](std::string& text) {
            // Settings are separated by commas outside brackets (roundup_power2_divisions:[256:1,>:4]).
            std::vector<std::string> keys;
            std::string key;
            int depth = 0;
            bool in_key = true;
            for (size_t at = 0; at <= text.size(); ++at) {
                const char byte = at < text.size() ? text[at] : ',';
                if (byte == '[') ++depth;
                if (byte == ']') --depth;
                if (byte == ',' && depth == 0) {
                    const size_t first = key.find_first_not_of(' '), last = key.find_last_not_of(' ');
                    const std::string trimmed = first == std::string::npos ? "" : key.substr(first, last - first + 1);
                    if (!trimmed.empty() && std::find(keys.begin(), keys.end(), trimmed) != keys.end())
                        return mhc::quoted_value(text) + ": " + trimmed + " is given twice (the last one was used); give it once";
                    keys.push_back(trimmed);
                    key.clear();
                    in_key = true;
                } else if (byte == ':' && depth == 0) {
                    in_key = false;
                } else if (in_key) {
                    key += byte;
                }
            }
            // Its syntax and values, as the command line is read (allocator read the trace first and
            // said it had no segments): the parser names the option itself, CLI11 names it again.
            const std::string option = "--allocator-conf";
            try {
                sim::parse_allocator_conf(text, option);
            } catch (const Error& e) {
                const std::string said = e.what();
                return said.rfind(option + ": ", 0) == 0 ? said.substr(option.size() + 2) : said;
            }
            return std::string();
        },
        "");
}

void apply_sim_base_options(const SimBaseOptions& o, sim::Config& c, bool policy_given) {
    c.allocator = o.allocator;
    c.allocator_conf = o.allocator_conf;
    c.cpu_buffer_ratio = o.cpu_buffer_ratio;
    c.max_swap_ops_per_sec = o.max_swap_ops;
    c.device = o.device;
    c.early_swap_out = !o.no_early;
    sim::apply_environment(c, {o.ratio && o.ratio->count() > 0, policy_given, o.ops && o.ops->count() > 0});
}

CLI::Option* add_policy_options(CLI::App& app, std::string& policy, std::string& prefetch) {
    auto* pol = app.add_option("--policy,--eviction", policy,
                               "Eviction policy: " + policy_names(sim::eviction_policies()) + " (mhc help policies)")
                    ->type_name("POLICY")
                    ->default_str(policy)
                    ->check(parsed_by(sim::parse_eviction));
    app.add_option("--prefetch", prefetch, "Prefetch policy: " + policy_names(sim::prefetch_policies()) + " (mhc help prefetch)")
        ->type_name("POLICY")
        ->default_str(prefetch)
        ->check(parsed_by(sim::parse_prefetch));
    return pol;
}

std::string policy_names(const std::vector<sim::PolicyInfo>& v) {
    std::string s;
    for (const auto& p : v) s += (s.empty() ? "" : ", ") + p.name;
    return s;
}

std::string link_preset_names() {
    std::string names;
    for (const auto& link : sim::link_presets()) names += (names.empty() ? "" : ", ") + link.name;
    return names;
}

void check_link_name(const std::string& spec) {
    std::error_code ec;
    const bool file_meant = std::filesystem::exists(spec, ec) || std::filesystem::is_symlink(spec, ec) ||
                            spec.find('/') != std::string::npos || spec.ends_with(".json");
    if (!file_meant) sim::link_from_spec(spec);   // a preset, else refused by name
}

CLI::Validator link_name() { return parsed_by(check_link_name); }

std::vector<std::string> split_list(const std::string& option, const std::string& text) {
    std::vector<std::string> out;
    std::stringstream ss(text);
    for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
    if (!text.empty() && text.back() == ',') out.emplace_back();
    for (const auto& item : out)
        if (item.find_first_not_of(" \t") == std::string::npos)
            throw Error(refused_value(option, text, "an empty item (two commas, or one at an end); separate the items by one comma"));
    return out;
}

std::string capacity_key(const sim::Capacity& capacity) {
    if (capacity.unlimited()) return "unlimited";
    char key[64];
    if (capacity.fraction > 0) std::snprintf(key, sizeof key, "share %.17g", capacity.fraction);
    else std::snprintf(key, sizeof key, "bytes %lld", static_cast<long long>(capacity.bytes));
    return key;
}

void refuse_repeats(const std::string& option, const std::vector<std::string>& items,
                    const std::vector<std::string>& keys) {
    for (size_t i = 0; i < keys.size(); ++i)
        for (size_t j = 0; j < i; ++j)
            if (keys[i] == keys[j])
                throw Error(option + ": " +
                            (items[i] == items[j] ? "'" + items[i] + "' is given twice"
                                                  : "'" + items[j] + "' and '" + items[i] + "' name the same thing") +
                            "; give each once");
}

std::shared_ptr<const sim::Prepared> prepare_for_simulation(const trace::TraceData& t, int device,
                                                            const std::string& trace_path) {
    auto prepared = sim::prepare_cached(t, device);
    sim::require_allocations(t, *prepared, device, trace_path);
    return prepared;
}

}  // namespace mhc::cli
