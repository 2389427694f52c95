#include "mhc/sim/config.hpp"
#include "mhc/sim/allocator.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "mhc/common/environment.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/numbers.hpp"
#include "mhc/common/units.hpp"

namespace mhc::sim {

Config::Config() : link(link_presets()[1]) {}   // pcie4

std::string Capacity::to_string() const {
    if (fraction > 0) {
        std::ostringstream s;
        s << fraction * 100 << "%";
        return s.str();
    }
    if (bytes >= kUnlimited) return "unlimited";
    return format_bytes(bytes);
}

namespace {
constexpr double kMinPercent = 1e-4;   // 0.0001% of the peak: 80 KB of an 80 GB one
}  // namespace

Capacity parse_capacity(const std::string& text) {
    Capacity c;
    std::string t;
    for (char ch : text)
        if (!std::isspace(static_cast<unsigned char>(ch))) t += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (t == "unlimited" || t == "inf") return c;
    // Refusals in a value parser's form ("'500': ..."): the command names its option before it.
    const std::string quoted = "'" + text + "'";
    // A number alone: 70% of the peak or 70 GiB was meant (never 70 bytes); suggest only what is
    // accepted.
    // (One number: digits and at most one '.'; "1..2" was told "1..2% of the peak, 1..2GiB", "."
    // "must be positive".)
    if (!t.empty() && t.find_first_not_of("0123456789.") == std::string::npos &&
        std::count(t.begin(), t.end(), '.') <= 1 && t.find_first_of("0123456789") != std::string::npos) {
        const double v = std::strtod(t.c_str(), nullptr);
        if (!(v > 0)) throw Error(quoted + ": must be positive");
        throw Error(quoted + ": a capacity needs a unit: " + (v <= 100 ? t + "% of the peak, " : std::string()) + t + "GiB or " +
                    t + "GB (mhc help sizes)");
    }
    if (!t.empty() && t.back() == '%') {
        // Above the unlimited peak nothing is limited: such a run would be stored as if it
        // said something about a limit.
        c.fraction = parse_share(text, INFINITY);
        if (c.fraction <= 0) throw Error("'" + text + "': must be positive");
        if (c.fraction > 1)
            throw Error("'" + text + "': more than 100% of the peak limits nothing; give at most 100% "
                        "(or 'unlimited' for the baseline)");
        // A share so small that it is no capacity at all (1e-300% of any peak is 0 bytes).
        if (c.fraction * 100 < kMinPercent)
            throw Error("'" + text + "': less than " + std::to_string(kMinPercent).substr(0, 6) +
                        "% of the peak; give a size (512KiB) for a limit that small");
    } else {
        c.bytes = parse_size(text);
        if (c.bytes <= 0) throw Error("'" + text + "': must be positive");
    }
    return c;
}

const std::vector<PolicyInfo>& eviction_policies() {
    static const std::vector<PolicyInfo> v{
        {"lru", "least recently used allocation first", "classic; the common default"},
        {"largest", "largest allocation first (ties: least recently used)",
         "vDNN, Rhu et al., MICRO 2016 (offload the big feature maps)"},
        {"belady", "farthest next use first (offline oracle; the reference bound)",
         "Belady, IBM Systems Journal 1966"},
        {"dtr", "smallest h = cost / (size x staleness); drops and recomputes activations",
         "DTR, Kirisame et al., ICLR 2021"},
        {"cost_aware",
         "largest (time to next use / reload cost), reload = min(swap, recompute), weighted by "
         "depth in the step and by whether the transfer hides behind compute",
         "the claimed mHC scheduler; Capuchin (Peng et al., ASPLOS 2020) for swap-vs-recompute"},
    };
    return v;
}

const std::vector<PolicyInfo>& prefetch_policies() {
    static const std::vector<PolicyInfo> v{
        {"none", "swap in on demand only", "vDNN on-demand mode"},
        {"lookahead:K", "oracle: swap in the operands of the next K kernels (default 8)",
         "the bound used with belady"},
        {"periodic[:K]", "learns step i-1's access sequence from step markers and prefetches "
                         "the next K kernels' operands of step i (no oracle)",
         "iteration periodicity, as in vDNN/SwapAdvisor/Capuchin"},
        {"capuchin", "per-access prefetch trigger, moved earlier after each stall by the stall "
                     "time (feedback), learnt from step i-1",
         "Capuchin, Peng et al., ASPLOS 2020"},
        {"forecast[:H]", "demand forecaster: live bytes per step position from all steps seen "
                         "(median of the last 32, with a trend), reported H steps ahead (default "
                         "8); early swap-out of its own victims, ranked by time to next use, "
                         "reload cost, graph depth and compute load; prefetches as periodic:8",
         "the claimed mHC dynamic scheduler, as docs/simulator.md states it"},
    };
    return v;
}

const std::vector<PolicyInfo>& allocator_models() {
    static const std::vector<PolicyInfo> v{
        {"ideal", "no fragmentation: usage is the sum of resident bytes; its peak is the live bytes (mhc info's "
                  "peak)", ""},
        {"caching", "PyTorch CUDA caching allocator (pools, segments, best fit, splitting); its peak is the bytes its "
                    "segments reserve, at or above the live bytes",
         "c10/cuda/CUDACachingAllocator.cpp"},
    };
    return v;
}

namespace {

std::string names_of(const std::vector<PolicyInfo>& v) {
    std::string s;
    for (const auto& p : v) s += (s.empty() ? "" : ", ") + p.name;
    return s;
}

// "; did you mean lru?" for a mistyped name.
std::string guess(const std::vector<PolicyInfo>& v, const std::string& name) {
    std::vector<std::string> bases;
    for (const auto& p : v) bases.push_back(p.name.substr(0, p.name.find_first_of(":[")));
    return did_you_mean(name, bases);
}

bool is_eviction_policy(const std::string& name) {
    for (const auto& p : eviction_policies())
        if (p.name == name) return true;
    return false;
}

// Written as an option's number is (docs/cli.md, "Numbers"): no '+', space, hexadecimal, nan or inf.
double env_number(const char* var) {
    const char* s = std::getenv(var);
    char* end = nullptr;
    double v = std::strtod(s, &end);
    if (!decimal_refusal(s).empty() || *end != '\0' || !std::isfinite(v) || v < 0)
        throw Error("environment variable " + env_refusal(var, s, "must be a non-negative number"));
    return v == 0 ? 0.0 : v;   // -0 is 0 (it was stored as -0 in run_config)
}

}  // namespace

// The registries list the kinds in the order of their enums.
EvictionKind parse_eviction(const std::string& name) {
    const auto& v = eviction_policies();
    for (size_t i = 0; i < v.size(); ++i)
        if (v[i].name == name) return static_cast<EvictionKind>(i);
    throw Error("'" + name + "': not an eviction policy; use one of " + names_of(v) + guess(v, name));
}

AllocatorKind parse_allocator(const std::string& name) {
    const auto& v = allocator_models();
    for (size_t i = 0; i < v.size(); ++i)
        if (v[i].name == name) return static_cast<AllocatorKind>(i);
    throw Error("'" + name + "': not an allocator model; use one of " + names_of(v) + guess(v, name));
}

const char* peak_meaning(AllocatorKind allocator) {
    return allocator == AllocatorKind::Caching
               ? "reserved by the caching allocator model (mhc info's peak: live bytes)"
               : "live bytes, the ideal allocator model's (as mhc info's peak)";
}

void validate(const Config& c) {
    if (c.capacity.fraction < 0 || c.capacity.bytes <= 0)
        throw Error("capacity must be positive");
    if (!std::isfinite(c.cpu_buffer_ratio) || c.cpu_buffer_ratio < 0)
        throw Error("--cpu-buffer-ratio must be >= 0 (0: unlimited host buffer)");
    // 1e308 x the capacity overflowed the host buffer's bytes to -8 EiB: a run that could not swap.
    if (c.cpu_buffer_ratio > kMaxCpuBufferRatio)
        throw Error("--cpu-buffer-ratio must be at most " + std::to_string(static_cast<int>(kMaxCpuBufferRatio)) +
                    " (0: unlimited host buffer)");
    if (!std::isfinite(c.max_swap_ops_per_sec) || c.max_swap_ops_per_sec < 0)
        throw Error("--max-swap-ops-per-sec must be >= 0 (0: unlimited)");
    parse_eviction(c.eviction);
    parse_prefetch(c.prefetch);
    const AllocatorKind allocator = parse_allocator(c.allocator);
    if (!c.allocator_conf.empty()) {
        if (allocator != AllocatorKind::Caching)
            throw Error("--allocator-conf applies to the caching allocator model (--allocator caching)");
        parse_allocator_conf(c.allocator_conf, "--allocator-conf");
    }
    validate(c.link, "link " + c.link.name);
    // Each sample is a stored row and a bucket in memory: a million is finer than any screen.
    if (c.memory_samples < 1 || c.memory_samples > kMaxMemorySamples)
        throw Error("--memory-samples must be in 1.." + std::to_string(kMaxMemorySamples));
    if (c.max_swap_ops_per_sec != 0 &&
        (c.max_swap_ops_per_sec < kMinSwapOpsPerSec || c.max_swap_ops_per_sec > kMaxSwapOpsPerSec))
        throw Error("--max-swap-ops-per-sec must be 0 (unlimited) or in [0.001, 1e12]");
}

PrefetchSpec parse_prefetch(const std::string& text) {
    const size_t colon = text.find(':');
    const std::string base = text.substr(0, colon);
    PrefetchSpec p;
    if (base == "none") p.kind = PrefetchKind::None;
    else if (base == "lookahead") p.kind = PrefetchKind::Lookahead;
    else if (base == "periodic") p.kind = PrefetchKind::Periodic;
    else if (base == "capuchin") p.kind = PrefetchKind::Capuchin;
    else if (base == "forecast") p.kind = PrefetchKind::Forecast;
    else
        throw Error("'" + text + "': not a prefetch policy; use one of " + names_of(prefetch_policies()) +
                    guess(prefetch_policies(), base));
    if (colon != std::string::npos) {
        if (p.kind == PrefetchKind::Capuchin || p.kind == PrefetchKind::None)
            throw Error("'" + text + "': " + base + " takes no argument");
        // The window follows the options' number grammar (docs/cli.md, "Numbers"): 08 was read as 8.
        const std::string_view digits = std::string_view{text}.substr(colon + 1);
        if (const std::string why = whole_number_refusal(digits, false); !why.empty())
            throw Error("'" + text + "': the window " + why);
        const auto window = parse_integer<int>(digits);
        if (!window || *window < 1 || *window > 100000)
            throw Error("'" + text + "': the window must be a whole number in 1..100000");
        p.window = *window;
    }
    return p;
}

void apply_environment(Config& c, const GivenOptions& given) {
    // Out of its range, a variable is named (validate() named the option it stands for, which the
    // user did not give: MHC_CPU_BUFFER_RATIO=1e308 was "--cpu-buffer-ratio must be at most 1000").
    auto out_of_range = [](const char* var, const std::string& range) {
        return Error("environment variable " + env_refusal(var, std::getenv(var), range));
    };
    if (!given.cpu_buffer_ratio && std::getenv("MHC_CPU_BUFFER_RATIO")) {
        c.cpu_buffer_ratio = env_number("MHC_CPU_BUFFER_RATIO");
        if (c.cpu_buffer_ratio > kMaxCpuBufferRatio)
            throw out_of_range("MHC_CPU_BUFFER_RATIO", "must be at most " +
                                                           std::to_string(static_cast<int>(kMaxCpuBufferRatio)) +
                                                           " (0: unlimited host buffer)");
    }
    if (!given.max_swap_ops && std::getenv("MHC_MAX_SWAP_OPS_PER_SEC")) {
        c.max_swap_ops_per_sec = env_number("MHC_MAX_SWAP_OPS_PER_SEC");
        if (c.max_swap_ops_per_sec != 0 &&
            (c.max_swap_ops_per_sec < kMinSwapOpsPerSec || c.max_swap_ops_per_sec > kMaxSwapOpsPerSec))
            throw out_of_range("MHC_MAX_SWAP_OPS_PER_SEC", "must be 0 (unlimited) or in [0.001, 1e12]");
    }
    if (!given.eviction && std::getenv("MHC_EVICTION_STRATEGY")) {
        std::string s = std::getenv("MHC_EVICTION_STRATEGY");
        if (!is_eviction_policy(s))
            throw Error("environment variable " +
                        env_refusal("MHC_EVICTION_STRATEGY", s,
                                    "unknown eviction policy; use one of " + names_of(eviction_policies())));
        c.eviction = s;
    }
}

std::string run_name(const Config& c) {
    std::string n = c.eviction + "+" + c.prefetch + "@" + c.capacity.to_string() + "/" + c.link.name;
    if (c.allocator != "ideal") n += "/" + c.allocator;   // the default model goes unnamed
    if (!c.allocator_conf.empty()) n += "[" + c.allocator_conf + "]";
    if (!c.early_swap_out) n += "/no-early";
    return n;
}

std::map<std::string, std::string> to_map(const Config& c) {
    // -0 is 0 wherever it came from (a link profile's "nccl_share": -0.0 was stored as -0).
    auto num = [](double value) {
        std::ostringstream text;
        text << (value == 0 ? 0.0 : value);
        return text.str();
    };
    std::map<std::string, std::string> m{
        {"capacity", c.capacity.to_string()},
        {"cpu_buffer_ratio", num(c.cpu_buffer_ratio)},
        {"eviction", c.eviction},
        {"prefetch", c.prefetch},
        {"allocator", c.allocator},
        {"early_swap_out", c.early_swap_out ? "1" : "0"},
        {"link", c.link.name},
        {"link.h2d_Bps", num(c.link.h2d.bandwidth_Bps)},
        {"link.d2h_Bps", num(c.link.d2h.bandwidth_Bps)},
        {"link.h2d_latency_s", num(c.link.h2d.latency_s)},
        {"link.d2h_latency_s", num(c.link.d2h.latency_s)},
        {"link.copy_engines", std::to_string(c.link.copy_engines)},
        {"link.duplex_factor", num(c.link.duplex_factor)},
        {"link.nccl_share", num(c.link.nccl_share)},
        {"link.memcpy_share", num(c.link.memcpy_share)},
        {"max_swap_ops_per_sec", num(c.max_swap_ops_per_sec)},
        {"device", c.device == kAutoDevice ? std::string("auto") : std::to_string(c.device)},
    };
    if (!c.allocator_conf.empty()) m["allocator_conf"] = c.allocator_conf;
    return m;
}

}  // namespace mhc::sim
