#include "mhc/viewer/launch.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <sstream>

#include "mhc/common/error.hpp"
#include "mhc/common/units.hpp"
#include "mhc/sim/link.hpp"
#include "mhc/sim/result.hpp"
#include "mhc/sim/simulate.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/runs.hpp"

namespace mhc::viewer {

std::string policy_base_name(const std::string& registry_name) {
    auto cut = registry_name.find_first_of(":[");
    return cut == std::string::npos ? registry_name : registry_name.substr(0, cut);
}

bool policy_takes_argument(const std::string& registry_name) {
    return registry_name.find(':') != std::string::npos;
}

sim::Config make_config(const LaunchFields& f) {
    sim::Config c;
    if (f.capacity_is_percent) {
        if (!std::isfinite(f.capacity_percent) || f.capacity_percent <= 0)
            throw Error("capacity: the percentage of the baseline peak must be positive");
        std::ostringstream s;
        s << f.capacity_percent << "%";
        c.capacity = sim::parse_capacity(s.str());
    } else {
        c.capacity = sim::parse_capacity(f.capacity_text);
    }
    c.eviction = f.eviction;

    c.prefetch = f.prefetch_arg.empty() ? f.prefetch : f.prefetch + ":" + f.prefetch_arg;
    sim::parse_prefetch(c.prefetch);   // the simulator's one parser: unknown names, bad windows

    c.allocator = f.allocator;
    c.link = f.link_file.empty() ? sim::link_from_spec(f.link) : sim::load_link_profile(f.link_file);
    c.record_events = f.record_events;
    c.device = f.device;
    sim::validate(c);
    return c;
}

const char* phase_name(LaunchPhase p) {
    switch (p) {
    case LaunchPhase::Idle: return "idle";
    case LaunchPhase::Loading: return "loading the trace";
    case LaunchPhase::Preparing: return "preparing (event order, next uses, baseline peak)";
    case LaunchPhase::Simulating: return "simulating";
    case LaunchPhase::Storing: return "storing the run";
    case LaunchPhase::Done: return "done";
    case LaunchPhase::Failed: return "failed";
    case LaunchPhase::Cancelled: return "cancelled";
    }
    return "?";
}

Launcher::Launcher(std::string trace_path) : path_(std::move(trace_path)) {}

Launcher::~Launcher() {
    cancel_ = true;
    if (worker_.joinable()) worker_.join();
}

void Launcher::cancel() { cancel_ = true; }

bool Launcher::start(const sim::Config& c) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (busy_) return false;
    if (worker_.joinable()) worker_.join();   // finished: its thread only has to be reaped
    busy_ = true;
    started_ = std::chrono::steady_clock::now();
    int64_t gen = status_.generation;
    status_ = LaunchStatus{};
    status_.generation = gen;
    status_.phase = LaunchPhase::Loading;
    status_.name = sim::run_name(c);
    cancel_ = false;
    sim::Config run = c;
    run.cancel = &cancel_;
    worker_ = std::thread(&Launcher::work, this, run);
    return true;
}

bool Launcher::busy() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return busy_;
}

LaunchStatus Launcher::status() const {
    std::lock_guard<std::mutex> lock(mutex_);
    LaunchStatus s = status_;
    if (busy_) s.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    return s;
}

void Launcher::wait() {
    std::thread t;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        t = std::move(worker_);
    }
    if (t.joinable()) t.join();
}

void Launcher::set_phase(LaunchPhase p) {
    std::lock_guard<std::mutex> lock(mutex_);
    status_.phase = p;
}

void Launcher::work(sim::Config c) {
    LaunchStatus out;
    try {
        if (!prepared_ || prepared_device_ != c.device) {   // a run of another device: prepared for it
            if (!data_) {
                set_phase(LaunchPhase::Loading);
                data_ = std::make_unique<trace::TraceData>(trace::load_trace(path_));
            }
            set_phase(LaunchPhase::Preparing);
            prepared_.reset();
            prepared_ = sim::prepare(*data_, c.device);   // validates the trace
            prepared_device_ = c.device;
        }
        set_phase(LaunchPhase::Simulating);
        sim::Result r = sim::simulate(*prepared_, c);
        set_phase(LaunchPhase::Storing);
        // Stored even when it ran out of memory, as `mhc simulate` does: the run then shows
        // where (its oom event) and why (its status and metrics).
        out.run_id = trace::add_run(path_, sim::to_run(r), "", data_->fingerprint);
        out.summary = sim::to_text(r);
        out.phase = LaunchPhase::Done;
        if (r.oom.happened) {
            out.oom = true;
            out.message = "out of memory at " + format_ns(r.oom.time) + ": " + r.oom.where + ": " + r.oom.why;
        }
        if (!r.invariant_violation.empty())
            out.message += (out.message.empty() ? "" : "; ") + std::string("simulator invariant violated: ") +
                           r.invariant_violation;
    } catch (const sim::Cancelled&) {
        out.phase = LaunchPhase::Cancelled;
        out.message = "cancelled; nothing stored";
    } catch (const std::exception& e) {
        out.phase = LaunchPhase::Failed;
        out.message = e.what();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    out.name = status_.name;
    out.generation = status_.generation + 1;
    out.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    status_ = std::move(out);
    busy_ = false;
}

}  // namespace mhc::viewer
