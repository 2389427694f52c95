// Replaying a window of the last steps (mhc validate --replay-steps): where it begins, what the
// simulated run predicted for it, and a windowed replay against the whole plan.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>

#include "mhc/datasets/generate.hpp"
#include "mhc/replay/plan.hpp"
#include "mhc/replay/replay.hpp"
#include "mhc/replay/validate.hpp"
#include "mhc/sim/simulate.hpp"
#include "mhc/test/temp.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/store.hpp"

namespace datasets = mhc::datasets;
namespace replay = mhc::replay;
namespace sim = mhc::sim;
namespace trace = mhc::trace;
namespace fs = std::filesystem;

namespace {

// A tiny llama (2 layers, 128 tokens, hidden 256) of `steps` training steps.
std::string window_trace(const std::string& name, int steps) {
    fs::path path = mhc::test::scratch_dir("mhc_replay_window_tests") / (name + ".db");
    fs::remove(path);
    datasets::GeneratorConfig config = datasets::preset("llama2-7b");
    config.layers = 2;
    config.steps = steps;
    config.seq = 128;
    config.hidden = 256;
    config.heads = config.kv_heads = 4;
    config.ffn = 704;
    config.vocab = 1000;
    config.tp = config.pp = config.dp = 1;
    config.zero1 = false;
    datasets::generate_file(config, path.string());
    return path.string();
}

sim::Result simulate(const trace::TraceData& trace_data, double fraction) {
    sim::Config config;
    config.capacity.fraction = fraction;
    config.allocator = "caching";
    config.check_invariants = true;
    config.record_events = true;
    config.link = sim::link_from_spec("pcie4");
    return sim::simulate(trace_data, config);
}

}  // namespace

TEST_CASE("the window's prediction: from its first kernel's simulated start to the run's end", "[replay][window]") {
    // Hand-worked: kernels 10, 20, 30, 40 recorded at 0, 40, 100, 150 (span 0..200); the run
    // stalled 30 ns before kernel 30, so it started at 130, and ended at 260.
    trace::TraceData recorded;
    recorded.kernels.id = {10, 20, 30, 40};
    recorded.kernels.t_start = {0, 40, 100, 150};
    recorded.kernels.t_end = {40, 90, 140, 200};
    sim::Result run;
    run.kernel_times = {{10, 0, 40}, {20, 40, 90}, {30, 130, 170}, {40, 170, 260}};
    run.simulated_makespan = 260;
    run.baseline_makespan = 200;
    run.events = {{trace::EventKind::SwapOut, 50, 120, 1, 0, 64}, {trace::EventKind::SwapIn, 90, 130, 2, 30, 64}};
    replay::WindowPrediction window = replay::predict_window(recorded, run, 2, 0);
    CHECK(window.reached);
    CHECK(window.start_ns == 130);
    CHECK(window.shift_ns == 30);
    CHECK(window.makespan_ns == 130);   // 260 - 130
    CHECK(window.baseline_ns == 100);   // 200 - 100: the unlimited run starts kernel 30 when recorded
    CHECK(window.loss == Approx(0.30));
    CHECK(window.quiescent());          // the swap-in ended as the kernel started

    // A transfer and a kernel of another stream still running at 130 make it not quiescent.
    run.events.push_back({trace::EventKind::SwapOut, 120, 150, 3, 0, 64});
    run.kernel_times.push_back({50, 100, 131});
    window = replay::predict_window(recorded, run, 2, 0);
    CHECK(window.transfers_in_flight == 1);
    CHECK(window.kernels_running == 1);
    CHECK_FALSE(window.quiescent());
    // A run that never started the kernel (an OOM before) has no window.
    run.kernel_times.resize(2);
    CHECK_FALSE(replay::predict_window(recorded, run, 2, 0).reached);
}

TEST_CASE("the window begins at the first kernel of the last steps, none without more steps", "[replay][window]") {
    auto three = trace::load_trace(window_trace("steps3", 3));
    const auto& kernels = three.kernels;
    for (int steps : {1, 2}) {
        const int32_t first = replay::window_first_kernel(three, 0, steps);
        REQUIRE(first >= 0);
        CHECK(kernels.step[static_cast<size_t>(first)] == 3 - steps);
        for (size_t j = 0; j < kernels.size(); ++j)   // every kernel of those steps starts at or after it, none before
            CHECK((kernels.step[j] >= 3 - steps) == (kernels.t_start[j] >= kernels.t_start[static_cast<size_t>(first)]));
    }
    CHECK(replay::window_first_kernel(three, 0, 3) == -1);   // the window would be the whole trace
    CHECK(replay::window_first_kernel(three, 0, 0) == -1);
    trace::TraceData no_steps = three;
    std::fill(no_steps.kernels.step.begin(), no_steps.kernels.step.end(), -1);
    CHECK(replay::window_first_kernel(no_steps, 0, 1) == -1);
}

TEST_CASE("a windowed replay measures the window and keeps the whole plan's peak, traffic and checksums", "[replay][window]") {
    auto trace_data = trace::load_trace(window_trace("replay", 2));
    const int32_t first = replay::window_first_kernel(trace_data, 0, 1);
    REQUIRE(first >= 0);
    const sim::Result base = simulate(trace_data, 10.0), lim = simulate(trace_data, 0.7);
    REQUIRE(lim.swap_out_bytes > 0);
    const replay::Plan whole = replay::make_plan(trace_data, lim);
    // The run restricted: the window's makespan and the part before it make the whole run.
    const replay::WindowPrediction window = replay::predict_window(trace_data, lim, first, whole.t_begin);
    REQUIRE(window.reached);
    CHECK(window.makespan_ns + (window.start_ns - whole.t_begin) == lim.simulated_makespan);
    // The unlimited run loses nothing over the window, starts it when recorded, and its window
    // is the one every limited run's loss is counted against.
    const replay::WindowPrediction unlimited = replay::predict_window(trace_data, base, first, replay::make_plan(trace_data, base).t_begin);
    CHECK(unlimited.loss == 0);
    CHECK(unlimited.shift_ns == 0);
    CHECK(unlimited.makespan_ns == window.baseline_ns);
    CHECK(window.loss == Approx(static_cast<double>(window.makespan_ns) / static_cast<double>(unlimited.makespan_ns) - 1));

    const replay::Plan plan = replay::with_window(whole, first);
    CHECK(plan.window_begin > 0);
    CHECK(plan.actions[plan.window_begin].op == replay::Op::KernelStart);
    CHECK(plan.window_t == trace_data.kernels.t_start[static_cast<size_t>(first)]);
    replay::Options options;
    options.time_scale = 0.2;
    options.chunk_bytes = 64 << 10;
    options.pace_h2d_Bps = options.pace_d2h_Bps = 2e9;
    const replay::Measured measured = replay::replay(trace_data, plan, options);
    REQUIRE(to_string(measured.status) == "complete");
    CHECK(measured.mismatches == 0);
    CHECK(measured.checksums > 0);
    CHECK(measured.peak == lim.simulated_peak);   // the steps before ran too: the whole plan's peak and traffic
    CHECK(measured.swap_out_bytes == lim.swap_out_bytes);
    CHECK(measured.swap_in_bytes == lim.swap_in_bytes);
    // The host copies fit in what mhc validate faults in up front (the simulator's host peak):
    // the rest of the arena is room that first-fit placement did not need here.
    CHECK(measured.host_arena_high_water > 0);
    CHECK(measured.host_arena_high_water <= replay::host_arena_populated_bytes(trace_data, plan));
    CHECK(replay::host_arena_populated_bytes(trace_data, plan) <= replay::host_arena_bytes(trace_data, plan));
    // Only the window's kernels are timed, on its clock: from its recorded start on.
    size_t in_window = 0;
    for (size_t j = 0; j < trace_data.kernels.size(); ++j) in_window += trace_data.kernels.step[j] >= trace_data.kernels.step[static_cast<size_t>(first)];
    CHECK(measured.kernel_times.size() == in_window);
    for (const auto& kt : measured.kernel_times) CHECK(kt.t_start >= plan.window_t);
    // At least the window's recorded span: the window is replayed on its recorded times.
    CHECK(measured.makespan_ns >= whole.t_end - plan.window_t);
    for (const auto& event : measured.events) CHECK(event.t_start >= plan.window_t);
}

TEST_CASE("validation over the last step compares the window's loss and says so", "[replay][window]") {
    const std::string path = window_trace("validate", 2);
    replay::ValidateSpec spec;
    spec.base.link = sim::link_from_spec("pcie4");
    spec.base.allocator = "caching";
    spec.capacities = {sim::parse_capacity("70%")};
    spec.replay.time_scale = 0.2;
    spec.replay.chunk_bytes = 64 << 10;
    spec.repeat = 2;
    spec.store = false;
    spec.replay_steps = 1;
    replay::Report rep = replay::validate(path, spec);
    REQUIRE(rep.ok());
    INFO(rep.window_origin);
    REQUIRE(rep.window_kernel >= 0);
    CHECK(rep.window_origin.find("the last 1 step") == 0);
    const replay::Row& row = rep.rows.at(0);
    REQUIRE(row.windowed);
    CHECK(row.window.quiescent());
    CHECK(row.predicted_loss() == row.window.loss);
    CHECK(row.loss_error_pp == Approx(100.0 * (row.measured_loss - row.window.loss)));
    CHECK(row.measured.peak == row.predicted.simulated_peak);
    CHECK(row.measured.swap_out_bytes == row.predicted.swap_out_bytes);
    // The replayed run to store says what was compared: the window's losses, the whole run's beside.
    CHECK(row.replay_record.metrics.at("predicted_throughput_loss") == row.window.loss);
    CHECK(row.replay_record.metrics.at("whole_run_predicted_throughput_loss") == row.predicted.throughput_loss);
    CHECK(row.replay_record.config.at("window_first_kernel") == std::to_string(rep.window_kernel));
    CHECK(rep.baseline.windowed);
    CHECK(rep.baseline.window.loss == 0);
    CHECK(replay::to_text(rep).find("replayed and measured: the last 1 step") != std::string::npos);

    spec.replay_steps = 2;   // no more steps than that: the whole trace, and why
    rep = replay::validate(path, spec);
    CHECK(rep.window_kernel == -1);
    CHECK(rep.window_origin.find("all steps (the trace has no more than 2 steps") == 0);
    CHECK_FALSE(rep.rows.at(0).windowed);
}
