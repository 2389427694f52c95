#include <cmath>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "mhc/common/units.hpp"
#include "mhc/sim/result.hpp"
#include "mhc/sim/result_fields.hpp"

namespace mhc::sim {

namespace {

// The metrics of a run, read from its field list (result_fields.hpp): each field tagged with a
// metric name, under the condition its tag states.
struct MetricList {
    const Result& r;
    std::vector<std::pair<std::string, double>>& out;

    template <class T>
    void operator()(const Field& f, const T& x) {
        if constexpr (std::is_same_v<T, Oom>) {
            fields(x, *this);
        } else if constexpr (std::is_arithmetic_v<T>) {
            if (f.when == MetricWhen::Never) return;
            const bool unlimited = f.unlimited_as_minus_one && static_cast<double>(x) >= static_cast<double>(kUnlimited);
            add(f, unlimited ? -1.0 : static_cast<double>(x));
        }
    }
    void add(const Field& f, double v) {
        const bool oom = r.oom.happened;
        switch (f.when) {
            case MetricWhen::Never: return;
            case MetricWhen::Always: break;
            case MetricWhen::Finished:
                if (oom && f.metric_after_oom) out.emplace_back(f.metric_after_oom, v);
                if (oom || std::isnan(v)) return;   // NaN: a loss over a zero baseline (no metric)
                break;
            case MetricWhen::OnOom: if (!oom) return; break;
            case MetricWhen::Known: if (std::isnan(v)) return; break;
            case MetricWhen::Positive: if (!(v > 0)) return; break;
            case MetricWhen::Reached: if (!(v >= 0)) return; break;
        }
        out.emplace_back(f.metric, v);
    }
};

// The keys of --json's "oom" object, from the same list.
struct OomJson {
    nlohmann::json& j;
    template <class T>
    void operator()(const Field& f, const T& x) {
        if (f.json) j[f.json] = x;
    }
};

}  // namespace

// A run that stopped at an OOM did not finish: it has no peak reduction or throughput loss
// (null in --json, absent here); the slowdown of the part that ran has its own name.
std::vector<std::pair<std::string, double>> metrics(const Result& r) {
    std::vector<std::pair<std::string, double>> m;
    fields(r, MetricList{r, m});
    return m;
}

namespace {
std::string pct(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2f%%", v * 100);
    return b;
}
}  // namespace

std::string to_text(const Result& r) {
    std::ostringstream o;
    o << "run            " << run_name(r.config) << " (device " << r.device << ")\n";
    for (const auto& w : r.warnings) o << "warning        " << w << "\n";
    // An OOM run did not finish: its headline is the OOM, and it has no peak reduction or
    // throughput loss to report, only what happened before it stopped.
    if (r.oom.happened) {
        o << "OUT OF MEMORY  " << r.oom.where << ": " << r.oom.why << "\n";
        // Simulated time runs later than recorded time by every stall and recomputation before
        // the OOM: an OOM "at 19.6 s" of a 109 ms trace is a run that stalled for 19.5 s.
        o << "               at " << format_ns(r.oom.time) << " of simulated time (the recorded trace lasts "
          << format_ns(r.baseline_makespan);
        if (r.stall_time + r.recompute_time > 0)
            o << "; stalls and recomputations before the OOM delayed it by "
              << format_ns(r.stall_time + r.recompute_time);
        o << ")\n";
        if (!r.order_only) o << "               " << kEstimateNote << "\n";
    }
    o << "capacity       " << (r.capacity >= kUnlimited ? std::string("unlimited") : format_bytes(r.capacity));
    // A share says of what: the baseline peak below, whose kind the allocator model decides.
    if (r.config.capacity.fraction > 0 && r.capacity < kUnlimited)
        o << " (" << r.config.capacity.to_string() << " of the baseline peak)";
    o << "   host buffer " << (r.host_capacity >= kUnlimited ? std::string("unlimited") : format_bytes(r.host_capacity))
      << "\n";
    // What the peaks count: under the default caching model, reserved segments, which are more than
    // the live bytes `mhc info` reports (a user compared the two and took one for wrong).
    const std::string peak_kind = std::string("               ") + peak_meaning(parse_allocator(r.config.allocator)) + "\n";
    if (r.oom.happened) {
        o << "peak           baseline " << format_bytes(r.baseline_peak) << "; the run stopped at the OOM "
          << "(no peak reduction or throughput loss: it did not finish)\n" << peak_kind;
        o << "before the OOM ";
    } else {
        char red[32];
        std::snprintf(red, sizeof red, "%.1f%%", r.peak_reduction * 100);
        o << "peak           baseline " << format_bytes(r.baseline_peak) << " -> simulated "
          << format_bytes(r.simulated_peak) << " (peak reduction " << red << ")\n" << peak_kind;
        // The baseline is the trace's own span; the simulated one is the link model's estimate.
        if (r.order_only)
            o << "makespan       not a time: the timing is order only (see the warning)\n";
        else if (std::isnan(r.throughput_loss))
            o << "makespan       recorded " << format_ns(r.baseline_makespan) << " -> simulated "
              << format_ns(r.simulated_makespan) << " (throughput loss not defined: see the warning)\n";
        else
            o << "makespan       recorded " << format_ns(r.baseline_makespan) << " -> simulated "
              << format_ns(r.simulated_makespan) << " (throughput loss " << pct(r.throughput_loss) << ")\n";
        if (!r.order_only) o << "               " << kEstimateNote << "\n";
        o << "stalls         ";
    }
    o << r.stall_count << " stalls";
    if (!r.order_only) o << " totalling " << format_ns(r.stall_time);
    o << "\n";
    o << "swap-in (H2D)  " << r.swap_in_count << " transfers, " << format_bytes(r.swap_in_bytes)
      << " (" << r.prefetch_count << " prefetched)\n";
    o << "swap-out (D2H) " << r.swap_out_count << " transfers, " << format_bytes(r.swap_out_bytes)
      << "; " << r.evict_clean_count << " clean evictions; " << r.early_evictions
      << " early evictions\n";
    o << "recompute      " << r.drop_count << " drops, " << r.recompute_count << " recomputations, "
      << format_ns(r.recompute_time) << ", deepest chain " << r.recompute_depth_max << "\n";
    o << "host peak      " << format_bytes(r.host_peak) << "\n";
    if (!std::isnan(r.forecast_error)) {
        // Predicted against actual live bytes; a figure the run could not measure (too few
        // steps to look that far ahead) is left out, not printed as "-".
        o << "forecast       error " << pct(r.forecast_error) << " per kernel";
        if (!std::isnan(r.forecast_peak_error)) o << ", " << pct(r.forecast_peak_error) << " per step peak";
        o << ", 1 step ahead\n               ";
        if (!std::isnan(r.forecast_horizon_error))
            o << pct(r.forecast_horizon_error) << " per kernel " << r.forecast_horizon_steps << " steps ahead; ";
        o << r.forecast_evictions << " early evictions by the forecaster\n";
    }
    if (!r.invariant_violation.empty()) o << "INVARIANT      " << r.invariant_violation << "\n";
    char b[96];
    std::snprintf(b, sizeof b, "%.3f s, %.2f M rows/s", r.seconds, r.seconds > 0 ? r.rows / r.seconds / 1e6 : 0.0);
    o << "simulated in   " << b << " (this machine's wall time)\n";
    return o.str();
}

std::string to_json(const Result& r) {
    nlohmann::json j;
    j["run"] = run_name(r.config);
    j["config"] = to_map(r.config);
    j["device"] = r.device;
    nlohmann::json m = nlohmann::json::object();
    for (auto& [k, v] : metrics(r)) m[k] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
    if (r.oom.happened) {   // the run did not finish: there is no reduction or loss to report
        m["peak_reduction"] = nullptr;
        m["throughput_loss"] = nullptr;
    }
    if (std::isnan(r.throughput_loss)) m["throughput_loss"] = nullptr;   // a zero baseline: not defined
    j["metrics"] = m;
    // order-only: the time metrics count event numbers, not nanoseconds (and a warning says so)
    j["timing"] = r.order_only ? "order-only" : "exact";
    j["warnings"] = r.warnings;
    j["oom"] = nullptr;
    if (r.oom.happened) fields(r.oom, OomJson{j["oom"]});
    j["assumed_accesses"] = r.assumed_accesses;
    if (!r.invariant_violation.empty()) j["invariant_violation"] = r.invariant_violation;
    return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

// Everything of the run but its rows.
trace::Run run_without_rows(const Result& result) {
    trace::Run run;
    run.kind = trace::RunKind::Simulated;
    run.name = run_name(result.config);
    using trace::RunStatus;
    run.status = !result.invariant_violation.empty() ? RunStatus::Failed : result.oom.happened ? RunStatus::Oom : RunStatus::Complete;
    run.config = to_map(result.config);
    run.config["capacity_bytes"] = std::to_string(result.capacity >= kUnlimited ? -1 : result.capacity);
    if (result.oom.happened) {
        run.config["oom_where"] = result.oom.where;
        run.config["oom_why"] = result.oom.why;
    }
    if (!result.warnings.empty()) {
        std::string text;
        for (const auto& warning : result.warnings) text += (text.empty() ? "" : "\n") + warning;
        run.config["warnings"] = text;
    }
    if (result.assumed_accesses) run.config["note"] = "trace has no accesses: assumed first-kernel write, last-kernel read";
    for (auto& [name, value] : metrics(result))
        if (std::isfinite(value)) run.metrics[name] = value;
    return run;
}

}  // namespace

trace::Run to_run(const Result& result) {
    trace::Run run = run_without_rows(result);
    run.events = result.events;
    run.kernel_times = result.kernel_times;
    run.memory = result.memory;
    return run;
}

trace::Run take_run(Result& result) {
    trace::Run run = run_without_rows(result);
    run.events = std::exchange(result.events, {});
    run.kernel_times = std::exchange(result.kernel_times, {});
    run.memory = std::exchange(result.memory, {});
    return run;
}

}  // namespace mhc::sim
