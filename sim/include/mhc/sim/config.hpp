#pragma once
// Configuration of one simulated run.
#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mhc/sim/link.hpp"

namespace mhc::sim {

inline constexpr int64_t kUnlimited = INT64_MAX / 4;
// The largest host buffer ratio (Config::cpu_buffer_ratio): a larger buffer is no limit on any
// machine (0 says unlimited); the engine holds a product past kUnlimited at kUnlimited.
inline constexpr double kMaxCpuBufferRatio = 1000;
// Config::device when none is given: the GPU device (>= 0) with the largest live peak. The
// host (device -1, pinned buffers of nsys/ET imports) is simulated only when asked for.
inline constexpr int32_t kAutoDevice = INT32_MIN;

#ifdef NDEBUG
inline constexpr bool kCheckInvariantsByDefault = false;
#else
inline constexpr bool kCheckInvariantsByDefault = true;
#endif

// GPU capacity: bytes, or a share of the unlimited (baseline) peak of the trace.
struct Capacity {
    int64_t bytes = kUnlimited;
    double fraction = 0;   // > 0: capacity = fraction x baseline peak (bytes ignored)
    bool unlimited() const { return fraction <= 0 && bytes >= kUnlimited; }
    std::string to_string() const;
};
// A share of the unlimited peak ("60%", "60 %", at most 100%), a size ("40GiB", "40 GB", "512B":
// the size grammar of parse_size), or "unlimited". A number alone is refused with a hint (70% or
// 70GiB was meant). Throws mhc::Error for negative, zero, > 100% or malformed values.
Capacity parse_capacity(const std::string& text);

// Bounds of the options validate() accepts (docs/simulator.md): beyond them a run would
// allocate without end or leave the int64 nanosecond range.
inline constexpr int kMaxMemorySamples = 1000000;
inline constexpr double kMinSwapOpsPerSec = 1e-3, kMaxSwapOpsPerSec = 1e12;

struct Config {
    Capacity capacity;
    double cpu_buffer_ratio = 0;    // host buffer = ratio x GPU capacity; 0: unlimited
    std::string eviction = "lru";   // lru | largest | belady | dtr | cost_aware
    std::string prefetch = "none";  // none | lookahead:K | periodic[:K] | capuchin | forecast[:H]
    std::string allocator = "ideal";// ideal | caching
    // PYTORCH_CUDA_ALLOC_CONF text applied over the trace's recorded allocator settings
    // (caching only; "" keeps the recorded ones).
    std::string allocator_conf;
    bool early_swap_out = true;     // rule 10: lookahead/periodic/forecast evict ahead of demand
    LinkModel link;                 // default: pcie4 (set by the constructor)
    double max_swap_ops_per_sec = 0;// 0: unlimited
    int32_t device = kAutoDevice;   // kAutoDevice: the GPU with the largest live peak; -1: the host
    bool check_invariants = kCheckInvariantsByDefault;
    bool record_events = true;      // timeline events and per-kernel times in the Result
    int memory_samples = 4096;      // memory timeline buckets (peak kept in each), 1..kMaxMemorySamples
    // When given and set (by another thread), simulate() stops within a few thousand events
    // and throws sim::Cancelled. Not part of the run's configuration (to_map, run_name).
    const std::atomic<bool>* cancel = nullptr;
    Config();
};

// Throws mhc::Error (bad input) with one clear line: unknown policy, bad numbers.
void validate(const Config& c);

// An eviction policy and an allocator model, parsed from their names once, where a
// configuration is checked (validate) and where a run starts. Throw mhc::Error (bad input) with
// one line naming the text, the known names and the likely one.
enum class EvictionKind { Lru, Largest, Belady, Dtr, CostAware };
enum class AllocatorKind { Ideal, Caching };
EvictionKind parse_eviction(const std::string& name);
AllocatorKind parse_allocator(const std::string& name);
// What a peak counts under an allocator model, for the lines that print one: the caching model's
// peak is its reserved segments, above the live bytes `mhc info` reports; the ideal model's is the
// live bytes.
const char* peak_meaning(AllocatorKind allocator);

// A prefetch policy, parsed once from its name ("none", "lookahead:K", "periodic[:K]",
// "capuchin", "forecast[:H]"); the window defaults to 8. Throws mhc::Error (bad input) naming
// the text for an unknown name or a window that is not an integer in 1..100000.
enum class PrefetchKind { None, Lookahead, Periodic, Capuchin, Forecast };
struct PrefetchSpec {
    PrefetchKind kind = PrefetchKind::None;
    int window = 8;
};
PrefetchSpec parse_prefetch(const std::string& text);

// Names known to the registries, with one line each (for --help and errors).
struct PolicyInfo { std::string name, help, source; };
const std::vector<PolicyInfo>& eviction_policies();
const std::vector<PolicyInfo>& prefetch_policies();
const std::vector<PolicyInfo>& allocator_models();

// Environment defaults for users of existing mHC deployments: MHC_CPU_BUFFER_RATIO,
// MHC_EVICTION_STRATEGY, MHC_MAX_SWAP_OPS_PER_SEC. Applied only to fields whose option was
// not given (options win). Throws mhc::Error naming the variable when a value is malformed.
struct GivenOptions { bool cpu_buffer_ratio = false, eviction = false, max_swap_ops = false; };
void apply_environment(Config& c, const GivenOptions& given);

// "cost_aware+periodic@60%/pcie4[/caching]"
std::string run_name(const Config& c);
std::map<std::string, std::string> to_map(const Config& c);

}  // namespace mhc::sim
