#pragma once
// Runs launched from the viewer: the launcher's fields turned into a simulator Config, and a
// worker that loads and prepares the trace once, simulates one configuration at a time off
// the UI thread and stores the run in the trace file. Plain C++ (no GL), tested with Catch2.
// Built only when mhc_sim is part of the build (library mhc_viewer_launch).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "mhc/sim/config.hpp"

namespace mhc::sim { struct Prepared; }
namespace mhc::trace { struct TraceData; }

namespace mhc::viewer {

// What the launcher's widgets hold.
struct LaunchFields {
    std::string eviction = "lru";     // a name of sim::eviction_policies()
    std::string prefetch = "none";    // a base name of sim::prefetch_policies() ("lookahead", ...)
    std::string prefetch_arg;         // optional K / H (digits); empty: the policy's default
    bool capacity_is_percent = true;
    double capacity_percent = 70;     // of the trace's unlimited (baseline) peak
    std::string capacity_text = "40GiB";   // bytes, or anything sim::parse_capacity accepts
    std::string link = "pcie4";       // a preset name (sim::link_presets())
    std::string link_file;            // non-empty: a link profile JSON file instead of the preset
    std::string allocator = "caching";  // a name of sim::allocator_models(); the mhc commands' default
    bool record_events = true;
    // The device whose memory the run keeps under the capacity: the one the memory views show
    // (draw_launcher sets it; mhc-view --device, the toolbar's "memory of"); sim::kAutoDevice: the GPU
    // with the largest live peak, as mhc simulate.
    int32_t device = sim::kAutoDevice;
};

// "lookahead:K" -> "lookahead", "periodic[:K]" -> "periodic", "lru" -> "lru".
std::string policy_base_name(const std::string& registry_name);
// Whether the registry name takes a ":N" argument, and whether it is optional ("[:K]").
bool policy_takes_argument(const std::string& registry_name);

// Builds and validates the Config; throws mhc::Error with one line naming the field
// (capacity, prefetch argument, link file, unknown policy).
sim::Config make_config(const LaunchFields& f);

enum class LaunchPhase { Idle, Loading, Preparing, Simulating, Storing, Done, Failed, Cancelled };
const char* phase_name(LaunchPhase p);

// The state of the current or last launch, copied out under the launcher's lock.
struct LaunchStatus {
    LaunchPhase phase = LaunchPhase::Idle;
    double elapsed_s = 0;       // since start (frozen once done or failed)
    std::string name;           // sim::run_name of the config
    std::string message;        // error (Failed), OOM / invariant note (Done), else empty
    std::string summary;        // sim::to_text of the result (Done)
    int64_t run_id = 0;         // stored run (Done)
    bool oom = false;
    int64_t generation = 0;     // increments at every finished launch (done or failed)
};

class Launcher {
public:
    explicit Launcher(std::string trace_path);
    ~Launcher();   // cancels a running simulation and waits for its thread
    Launcher(const Launcher&) = delete;
    Launcher& operator=(const Launcher&) = delete;

    // Starts simulating `c` on the worker thread; false (and nothing started) while busy.
    bool start(const sim::Config& c);
    bool busy() const;
    // Asks a running simulation to stop (it stops within a few thousand events; nothing is
    // stored). Loading and preparing the trace run to their end first.
    void cancel();
    LaunchStatus status() const;
    // Blocks until the current launch (if any) has finished. For tests and screenshot mode.
    void wait();

private:
    void work(sim::Config c);
    void set_phase(LaunchPhase p);

    std::string path_;
    mutable std::mutex mutex_;
    LaunchStatus status_;
    std::chrono::steady_clock::time_point started_;
    bool busy_ = false;
    std::atomic<bool> cancel_{false};
    std::thread worker_;
    // Loaded and prepared on the first launch, reused by later ones (the trace's rows do not
    // change when runs are added). Prepared points into TraceData: both live here.
    std::unique_ptr<trace::TraceData> data_;
    std::shared_ptr<const sim::Prepared> prepared_;
    int32_t prepared_device_ = sim::kAutoDevice;   // the device prepared_ is of: another is prepared again
};

}  // namespace mhc::viewer
