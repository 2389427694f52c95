#pragma once
// One validation (validate()), by stage, and the helpers its stages share. The class's member
// functions are in the files of their stage:
//   validate.cpp                the stages in order: load and prepare, predict, choose the window
//   validate_configuration.cpp  one configuration: predicted, planned, replayed with its repeats,
//                               compared; the runs stored
//   validate_memory.cpp         the page pool and host arena every replay shares
//   validate_link.cpp, validate_estimate.cpp: the predictions' link, and the replays' duration
//                               estimated before any
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mhc/replay/pages.hpp"
#include "mhc/replay/plan.hpp"
#include "mhc/replay/validate.hpp"
#include "mhc/sim/simulate.hpp"
#include "validate_load.hpp"

namespace mhc::replay::detail {

// validate_link.cpp: the time scale's and the backend's refusals of a link.
void refuse_scale_past_bounds(const sim::LinkModel& unscaled, double scale);
void refuse_unhonoured_latency(const ValidateSpec& spec);

// validate_estimate.cpp: the replays' duration against spec.max_replay_seconds.
void check_replay_duration(const std::string& path, const ValidateSpec& spec, const std::vector<sim::Result>& predicted,
                           const std::vector<int64_t>& makespans, double seconds);

// This process's CPU time so far, every thread, in seconds.
double process_cpu_seconds();

// One validation, by stage: set up the predictions' link and the replay's options, predict every
// configuration on the recorded trace, then per configuration predict, plan, replay (with its
// repeats) and judge; last the load and the verdicts, and the runs stored.
class Validation {
public:
    Validation(const std::string& path, const ValidateSpec& spec, const std::function<void(const std::string&)>& note)
        : path_(path), spec_(spec), note_(note) {}

    Report run();

private:
    // validate.cpp: the stages before the replays
    void end_phase(const char* name);
    void begin();
    void choose_window_start();
    void predict_on_recorded();
    void check_time_limit(const std::vector<int64_t>& makespans) const;
    void say(const std::string& what) const;
    void sample_resident();

    // validate_memory.cpp
    Options shared_memory_for(const Plan& plan);
    void reserve_shared_memory_up_front();
    void reserve_shared_memory(int64_t cap_bytes, int64_t distinct_bytes, size_t host_bytes, size_t host_populate);
    void check_host_memory(int64_t pool_distinct, size_t host_bytes, size_t host_populate) const;

    // validate_configuration.cpp
    bool configuration(const sim::Capacity& cap, const Row* baseline, Row& row);
    void replay_repeats(const Plan& plan, const Options& options, const Row* baseline, Row& row);
    bool fits(const Row& row) const;
    void tell_replay(const Row& row, int replay_no, int replays, const Measured& measured) const;
    void tell_measured(const Row* baseline, const Row& row) const;
    bool agreed(const Row* baseline, const Row& row) const;
    double loss_on_recorded(size_t config) const;
    int64_t compare(const Row* baseline, const Plan& plan, Row& row) const;
    void store_failed(const std::exception& error);
    void note_begun(int64_t id);
    void store();

    const std::string& path_;
    const ValidateSpec& spec_;
    const std::function<void(const std::string&)>& note_;
    Report rep_;
    CpuSample cpu_before_;
    trace::TraceData t_;
    std::shared_ptr<const sim::Prepared> prepared_;
    sim::Config base_;
    Options replay_options_;
    std::vector<sim::Result> on_recorded_;
    std::vector<WindowPrediction> window_on_recorded_;   // of each on_recorded_ (not reached: no window)
    const trace::TraceData* timed_ = &t_;
    trace::TraceData retimed_;
    std::unique_ptr<PageMapper> pool_;
    std::shared_ptr<unsigned char> host_mem_;   // host: anonymous memory; CUDA: pinned (kernels::pinned_host_memory)
    size_t host_mem_bytes_ = 0;
    bool shared_pool_ = true;
    ResidentPeak resident_;
    int config_no_ = 0;
    std::chrono::steady_clock::time_point started_;   // --time-limit counts from here
    double overhead_s_ = 0;                           // a replay's largest cost beyond its makespan x scale
    std::vector<int64_t> begun_;                      // replayed runs begun (stored "incomplete") so far
    int32_t window_kernel_ = -1;   // dense index of the window's first kernel; -1: the whole trace
    std::chrono::steady_clock::time_point phase_start_;
    double phase_cpu_start_ = 0;
    double pool_counted_ = 0, pool_cpu_counted_ = 0;   // of rep_.pool_(cpu_)seconds, what end_phase has reported
};

}  // namespace mhc::replay::detail
