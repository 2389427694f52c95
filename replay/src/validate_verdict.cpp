// The judgements of a validation: how far the replays spread, where a measured timeline first
// left the predicted one, and each configuration's verdict against the target.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "mhc/common/units.hpp"
#include "mhc/replay/validate.hpp"

namespace mhc::replay {

int64_t makespan_spread(std::vector<int64_t> v) {
    if (v.size() < 2) return 0;
    std::sort(v.begin(), v.end());
    const size_t drop = v.size() >= 5 ? 1 : 0;
    return v[v.size() - 1 - drop] - v[drop];
}

bool repeats_agree(const std::vector<int64_t>& makespans, int64_t baseline_median_ns, double loss_factor, double carried_pp,
                   double bound_pp, size_t min_replays) {
    if (makespans.size() < std::max<size_t>(min_replays, 2) || baseline_median_ns <= 0) return false;
    const double own_pp =
        100.0 * loss_factor * static_cast<double>(makespan_spread(makespans)) / static_cast<double>(baseline_median_ns);
    return own_pp + carried_pp <= bound_pp;
}

Divergence first_divergence(const trace::TraceData& t, const std::vector<trace::RunKernelTime>& predicted,
                            const std::vector<trace::RunKernelTime>& measured, int64_t threshold_ns) {
    Divergence d;
    d.threshold_ns = threshold_ns;
    std::unordered_map<int64_t, int64_t> measured_start;
    measured_start.reserve(measured.size());
    for (const trace::RunKernelTime& m : measured) measured_start[m.kernel] = m.t_start;
    std::vector<const trace::RunKernelTime*> by_start;
    by_start.reserve(predicted.size());
    for (const trace::RunKernelTime& p : predicted) by_start.push_back(&p);
    std::stable_sort(by_start.begin(), by_start.end(), [](auto* a, auto* b) { return a->t_start < b->t_start; });
    for (const trace::RunKernelTime* p : by_start) {
        auto m = measured_start.find(p->kernel);
        if (m == measured_start.end() || std::llabs(m->second - p->t_start) <= threshold_ns) continue;
        d.found = true;
        d.kernel = p->kernel;
        const int64_t k = t.kernel_at(p->kernel);
        if (k >= 0) d.name = t.str(t.kernels.name[static_cast<size_t>(k)]);
        d.predicted_ns = p->t_start;
        d.measured_ns = m->second;
        break;
    }
    return d;
}

bool Report::ok() const {
    auto good = [](const Row& row) { return !row.measured.failed(); };
    if (!good(baseline)) return false;
    for (const Row& r : rows)
        if (!good(r)) return false;
    return true;
}

namespace {
// "; diverged first at kernel 81 (name): started 4.10 ms predicted, 5.02 ms measured (+0.92 ms,
// more than the replays' spread of 0.31 ms)", or nothing.
std::string diverged_first(const Row& x) {
    const Divergence& d = x.divergence;
    if (!d.found) return "; no kernel started further from its predicted time than that spread";
    char b[512];
    std::snprintf(b, sizeof b, "; diverged first at kernel %lld (%.80s): started %s predicted, %s measured (%s%s, more than %s)",
                  static_cast<long long>(d.kernel), d.name.c_str(), format_ns(d.predicted_ns).c_str(),
                  format_ns(d.measured_ns).c_str(), d.measured_ns >= d.predicted_ns ? "+" : "-",
                  format_ns(std::llabs(d.measured_ns - d.predicted_ns)).c_str(), format_ns(d.threshold_ns).c_str());
    return b;
}
}  // namespace

std::string traffic_mismatch(const sim::Result& predicted, const Measured& measured) {
    if (predicted.oom.happened || measured.oom) return "";
    auto off = [](int64_t want, int64_t got) { return std::llabs(got - want) > kTrafficToleranceBytes; };
    if (!off(predicted.swap_in_bytes, measured.swap_in_bytes) &&
        !off(predicted.swap_out_bytes, measured.swap_out_bytes))
        return "";
    auto bytes = [](int64_t value) { return format_bytes(value) + " (" + std::to_string(value) + " bytes)"; };
    return "the replay moved swap-in " + bytes(measured.swap_in_bytes) + ", swap-out " +
           bytes(measured.swap_out_bytes) + "; the prediction swap-in " + bytes(predicted.swap_in_bytes) +
           ", swap-out " + bytes(predicted.swap_out_bytes) + " (traffic is judged to the byte)";
}

std::string verdict(const Row& x, double target, const Load& load) {
    const auto& p = x.predicted;
    const auto& m = x.measured;
    char b[1024];
    std::string v;
    if (m.failed()) {
        v = "FAILED: " + (m.failure.empty() ? std::string("checksum mismatch") : m.failure);
    } else if (p.oom.happened || m.oom) {
        if (p.oom.happened && m.oom) v = "agrees: out of memory, predicted and measured";
        else v = std::string("not validated: out of memory ") + (p.oom.happened ? "predicted only" : "measured only");
    } else if (x.windowed && !x.window.quiescent()) {
        // The replay begins its window with nothing in flight; this prediction did not.
        std::snprintf(b, sizeof b, "inconclusive: the prediction began the window with %lld transfers in flight and %lld kernels "
                                   "running, the replay with none (error %+.2f pp; --replay-steps all replays every step)",
                      static_cast<long long>(x.window.transfers_in_flight), static_cast<long long>(x.window.kernels_running),
                      x.loss_error_pp);
        v = b;
    } else {
        const double e = std::fabs(x.loss_error_pp);
        if (x.spread_pp < 0)
            std::snprintf(b, sizeof b, "%s: error %+.2f pp %s target %.1f pp (one replay: its noise is unknown; --repeat 3 measures it)",
                          e <= target ? "within target, unconfirmed" : "not validated", x.loss_error_pp, e <= target ? "<=" : ">", target);
        else if (e > target && e > kMissFactor * x.spread_pp)
            std::snprintf(b, sizeof b, "missed: error %+.2f pp, beyond the %.1f pp target and %.1f x the %.2f pp the %zu replays spread%s",
                          x.loss_error_pp, target, x.spread_pp > 0 ? e / x.spread_pp : INFINITY, x.spread_pp,
                          x.makespans.size(), diverged_first(x).c_str());
        else if (x.spread_pp > target)
            std::snprintf(b, sizeof b, "inconclusive: the %zu replays spread %.2f pp, more than the %.1f pp target (error %+.2f pp)",
                          x.makespans.size(), x.spread_pp, target, x.loss_error_pp);
        else
            std::snprintf(b, sizeof b, "%s: error %+.2f pp %s target %.1f pp (%zu replays spread %.2f pp)%s",
                          e <= target ? "validated" : "not validated", x.loss_error_pp, e <= target ? "<=" : ">", target,
                          x.makespans.size(), x.spread_pp, e <= target ? "" : diverged_first(x).c_str());
        v = b;
    }
    // Paced copies the host could not keep up with ran slower than the link predicted with.
    if (m.late_transfers > 0 && m.makespan_ns > 0 && m.late_ns * 100 > m.makespan_ns) {
        std::snprintf(b, sizeof b, "; the host fell behind the emulated link (%lld transfers late by %s in all: "
                                   "a slower --link or a larger --time-scale keeps the pace)",
                      static_cast<long long>(m.late_transfers), format_ns(m.late_ns).c_str());
        v += b;
    }
    if (load.loaded()) v += "; the machine was loaded (" + load.text() + ")";
    return v;
}

}  // namespace mhc::replay
