// The demand forecaster (prefetch forecast[:H], docs/simulator.md "forecast"): its predictions
// and errors worked out by hand on a hand-built trace, and causality (what happens after a
// time t changes nothing it decided before t).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "helpers.hpp"
#include "mhc/sim/event_order.hpp"
#include "mhc/sim/result.hpp"
#include "mhc/sim/simulate.hpp"
#include "mhc/sim/synthetic.hpp"

using namespace simtest;
using namespace mhc;

namespace {
// Five steps of 10 ms, two kernels each: step k allocates A_k (2 + g_k MiB) at 10k ms, k0
// [10k+1, 10k+2] writes it, B_k (1 MiB) at 10k+3, k1 [10k+4, 10k+5] writes it, both freed at
// 10k+6. Live bytes at the kernels' starts: (2 + g_k, 3 + g_k) MiB.
trace::TraceData steps_trace(const std::vector<int64_t>& g) {
    std::vector<Tensor> ts;
    std::vector<K> ks;
    for (int k = 0; k < static_cast<int>(g.size()); ++k) {
        const int64_t t0 = 10 * k * ms;
        ts.push_back({(2 + g[k]) * MiB, t0, t0 + 6 * ms, trace::Category::Activation});
        ts.push_back({MiB, t0 + 3 * ms, t0 + 6 * ms, trace::Category::Activation});
        ks.push_back({t0 + 1 * ms, t0 + 2 * ms, {{2 * k, 'w'}}, k});
        ks.push_back({t0 + 4 * ms, t0 + 5 * ms, {{2 * k + 1, 'w'}}, k});
    }
    return build(ts, ks);
}
// The decisions (events) taken while processing the recorded events before T, in order.
// Simulated time runs later than recorded time by every stall, so the events' own times
// cannot say that: each event's origin (plan_log) names the recorded row being processed.
using Decision = std::tuple<int, int64_t, int64_t, int64_t, int64_t>;
std::vector<Decision> decisions_before(const sim::Result& r, const trace::TraceData& t, int64_t T) {
    std::vector<Decision> v;
    for (size_t i = 0; i < r.events.size(); ++i) {
        const auto& o = r.plan_log.origins[i];
        const auto row = static_cast<size_t>(o.index);
        const int64_t at = o.what == sim::Recorded::Allocation    ? t.allocations.t_alloc[row]
                           : o.what == sim::Recorded::Free        ? t.allocations.t_free[row]
                           : o.what == sim::Recorded::KernelStart ? t.kernels.t_start[row]
                                                                  : t.kernels.t_end[row];
        if (at >= T) break;   // events are recorded in processing order
        const auto& e = r.events[i];
        v.emplace_back(static_cast<int>(e.kind), e.t_start, e.t_end, e.allocation, e.bytes);
    }
    return v;
}
}  // namespace

TEST_CASE("forecast: predictions from all steps seen, with a trend, and their errors by hand", "[sim][forecast]") {
    // g = 0, 1, 2, 6, 4 MiB: a trend of +1 MiB per step with one odd step (3). Live bytes per
    // step (k0, k1): (2,3) (3,4) (4,5) (8,9) (6,7) MiB; step means 2.5 3.5 4.5 8.5 6.5.
    // The model before step i (docs/simulator.md): trend = the median change of the step
    // means (0 with fewer than two changes; of the two middle ones the smaller), level(p) =
    // median over the steps of live(p) - trend x step (the mean of the two middle ones for
    // an even count), prediction = level(p) + trend x i.
    //   step 1 (from step 0): trend 0, levels (2,3): predicted (2,3), actual (3,4)
    //   step 2 (0,1): one change: trend 0; levels (2.5,3.5): predicted (2.5,3.5), actual (4,5)
    //   step 3 (0..2): changes 1,1: trend 1; detrended k0: 2,2,2 -> 2; predicted (2+3, 3+3) =
    //     (5,6), actual (8,9)
    //   step 4 (0..3): changes 1,1,4: trend 1; detrended k0: 2,2,2,5 -> 2; predicted
    //     (2+4, 3+4) = (6,7), actual (6,7): exact (the last step alone would say (8,9))
    // forecast_error = mean |pred - actual| / actual over the 8 kernels of steps 1..4.
    const double e1 = (1.0 / 3 + 1.0 / 4 + 1.5 / 4 + 1.5 / 5 + 3.0 / 8 + 3.0 / 9 + 0 + 0) / 8;
    // forecast_peak_error: step peaks predicted 3, 3.5, 6, 7 against 4, 5, 9, 7.
    const double ep = (1.0 / 4 + 1.5 / 5 + 3.0 / 9 + 0) / 4;
    // H = 2 steps ahead: step i predicted from steps 0..i-2 (made when step i-1 began):
    //   step 2 from step 0: (2,3) vs (4,5); step 3 from 0..1: trend 0, (2.5,3.5) vs (8,9);
    //   step 4 from 0..2: trend 1, (2+4, 3+4) vs (6,7).
    const double eh = (2.0 / 4 + 2.0 / 5 + 5.5 / 8 + 5.5 / 9 + 0 + 0) / 6;
    auto t = steps_trace({0, 1, 2, 6, 4});
    for (int64_t cap : {sim::kUnlimited, 9 * MiB}) {   // the forecast does not depend on the capacity
        auto r = sim::simulate(t, config("lru", cap, "forecast:2"));
        INFO(cap);
        CHECK(r.invariant_violation.empty());
        CHECK(r.forecast_error == Approx(e1).epsilon(1e-12));
        CHECK(r.forecast_peak_error == Approx(ep).epsilon(1e-12));
        CHECK(r.forecast_horizon_error == Approx(eh).epsilon(1e-12));
        CHECK(r.forecast_horizon_steps == 2);
        // stored with the run and printed in --json like every metric
        const auto run = sim::to_run(r);
        REQUIRE(run.metrics.count("forecast_horizon_error") == 1);
        CHECK(run.metrics.at("forecast_horizon_error") == Approx(eh).epsilon(1e-12));
        CHECK(run.metrics.at("forecast_horizon_steps") == 2);
        CHECK(sim::to_json(r).find("\"forecast_horizon_error\"") != std::string::npos);
    }
    // With the default H = 8 no step of five is 8 steps ahead: no horizon error is reported.
    auto r8 = sim::simulate(t, config("lru", sim::kUnlimited, "forecast"));
    CHECK(std::isnan(r8.forecast_horizon_error));
    CHECK(r8.forecast_error == Approx(e1).epsilon(1e-12));
    bool listed = false;
    for (const auto& [k, v] : sim::metrics(r8)) listed = listed || k == "forecast_horizon_error";
    CHECK_FALSE(listed);
}

TEST_CASE("forecast: a repeating trace is forecast exactly once a step has been seen", "[sim][forecast]") {
    auto t = steps_trace({1, 1, 1, 1});
    auto r = sim::simulate(t, config("lru", sim::kUnlimited, "forecast:1"));
    CHECK(r.forecast_error == 0);
    CHECK(r.forecast_peak_error == 0);
    CHECK(r.forecast_horizon_error == 0);
}

TEST_CASE("forecast: causal, a change after time T changes nothing decided before T", "[sim][forecast][causality]") {
    // A training trace; the copy shrinks every allocation made at or after T (half way) 16x:
    // live bytes, and so the recorded demand, change only after T. Every event of the run
    // (swap-outs, early evictions, swap-ins, stalls) that starts before T must be the same.
    // The oracle lookahead reads the recorded future (the next kernels' operands, live
    // bytes): its decisions before T do change, which shows that the comparison sees a peek.
    auto base = sim::synthetic::training(3, 60'000, 8, 1);
    auto changed = base;
    const auto& al = base.allocations;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; i < al.size(); ++i) { lo = std::min(lo, al.t_alloc[i]); hi = std::max(hi, al.t_alloc[i]); }
    const int64_t T = lo + (hi - lo) / 2;
    for (size_t i = 0; i < al.size(); ++i)
        if (al.t_alloc[i] >= T) changed.allocations.bytes[i] = std::max<int64_t>(1, al.bytes[i] / 16);
    // ... and drops the accesses of the kernels that start at or after T.
    {
        auto& k = changed.kernels;
        trace::AccessColumns kept;
        std::vector<int64_t> begin{0};
        for (size_t i = 0; i < k.size(); ++i) {
            if (k.t_start[i] < T)
                for (int64_t j = k.access_begin[i]; j < k.access_begin[i + 1]; ++j) {
                    kept.allocation.push_back(changed.accesses.allocation[j]);
                    kept.mode.push_back(changed.accesses.mode[j]);
                }
            begin.push_back(static_cast<int64_t>(kept.allocation.size()));
        }
        changed.accesses = std::move(kept);
        k.access_begin = std::move(begin);
    }
    const int64_t cap = sim::baseline_peak(*sim::prepare(base), "ideal") * 6 / 10;
    auto before_T = [&](const sim::Result& r) { return decisions_before(r, base, T); };
    for (std::string ev : {"lru", "largest"}) {
        auto c = config(ev, cap, "forecast");
        c.link = sim::link_from_spec("pcie4");
        auto a = sim::simulate(base, c), b = sim::simulate(changed, c);
        INFO(ev);
        REQUIRE(a.forecast_evictions > 0);
        auto pa = before_T(a), pb = before_T(b);
        CHECK(pa.size() > 100);
        size_t same = 0;   // events before T that agree, in order
        while (same < pa.size() && same < pb.size() && pa[same] == pb[same]) ++same;
        INFO("first difference at event " << same << " of " << pa.size() << " / " << pb.size()
             << (same < pa.size() ? " at " + std::to_string(std::get<1>(pa[same])) : std::string()) << ", T = " << T);
        CHECK(same == pa.size());
        CHECK(pa.size() == pb.size());
        CHECK(a.events.size() != b.events.size());   // the change does show after T
    }
    auto c = config("lru", cap, "lookahead:8");
    c.link = sim::link_from_spec("pcie4");
    const bool oracle_same = before_T(sim::simulate(base, c)) == before_T(sim::simulate(changed, c));
    CHECK_FALSE(oracle_same);
}

TEST_CASE("forecast: causal, the live bytes later in the current step are not read before they happen", "[sim][forecast][causality]") {
    // Four steps of 20 ms, 12 kernels of 0.5 ms at 0, 1, .., 11 ms of each step. V (2 MiB,
    // never freed) is read by k11 of every step; X_i (1 MiB) is allocated at 0.7 ms, written
    // by k1, freed at 10.7 ms. Live bytes: k0 2 MiB, k1..k10 3 MiB, k11 2 MiB. Capacity 3 MiB.
    // At k0 of step 2 (40 ms) the forecast (steps 0, 1) for positions 1..10, while V would be
    // away (its next use, learnt: 12 kernels after k11 of step 1), is 3 MiB: it fits, V stays.
    // The copy makes X_2, allocated at 40.7 ms (after T = 40.6), 2 MiB: live 4 MiB later in
    // step 2. A forecaster that read the recorded live bytes of the current step would swap V
    // out early at 40 ms; this one decides the same before T in both, and swaps V out only
    // when X_2 needs the room.
    auto make = [](int64_t x2) {
        std::vector<Tensor> ts{{2 * MiB, 0, trace::kNoTime, trace::Category::Param}};
        std::vector<K> ks;
        for (int st = 0; st < 4; ++st) {
            const int64_t t0 = 20 * st * ms;
            ts.push_back({st == 2 ? x2 : MiB, t0 + 7 * ms / 10, t0 + 107 * ms / 10, trace::Category::Activation});
            for (int i = 0; i < 12; ++i) {
                std::vector<Use> uses;
                if (i == 1) uses.push_back({st + 1, 'w'});
                if (i == 11) uses.push_back({0, 'r'});
                ks.push_back({t0 + i * ms, t0 + i * ms + ms / 2, uses, st});
            }
        }
        return build(ts, ks);
    };
    auto base = make(MiB), changed = make(2 * MiB);
    const int64_t T = 40 * ms + 6 * ms / 10;
    auto c = config("lru", 3 * MiB, "forecast");
    auto a = sim::simulate(base, c), b = sim::simulate(changed, c);
    CHECK(a.invariant_violation.empty());
    CHECK(b.invariant_violation.empty());
    CHECK(a.swap_out_count == 0);   // it all fits: nothing forecast, nothing evicted
    CHECK(a.forecast_error == 0);
    CHECK(decisions_before(a, base, T) == decisions_before(b, changed, T));
    CHECK(b.swap_out_count >= 1);   // the change shows after T
    CHECK(b.early_evictions == 0);  // nothing foresaw it
}


TEST_CASE("forecast: steps that repeat give their own live bytes, an odd step in the window its median", "[sim][forecast]") {
    // Step 0 holds 4 MiB more than the 35 steps after it, which repeat exactly: live bytes (6,7)
    // then (2,3) MiB. Step 1 is predicted from step 0 alone: (6,7). Step 2 from steps 0..1: the
    // median of two, (4,5). From step 3 on the median over the window is the repeated (2,3),
    // exact — first with step 0 in the window, and from step 33 on (window 1..32) from
    // repeating steps alone, whose levels are read without medians.
    std::vector<int64_t> extra(36, 0);
    extra[0] = 4;
    const auto data = steps_trace(extra);
    const auto run = sim::simulate(data, config("lru", sim::kUnlimited, "forecast"));
    CHECK(run.forecast_error == Approx((4.0 / 2 + 4.0 / 3 + 2.0 / 2 + 2.0 / 3) / 70).epsilon(1e-12));
    CHECK(run.forecast_peak_error == Approx((4.0 / 3 + 2.0 / 3) / 35).epsilon(1e-12));
}

TEST_CASE("forecast: a victim never used again counts the steps ahead at every position of the step",
          "[sim][forecast]") {
    // Five steps of 10 ms as steps_trace (A_k of 2 + g_k MiB written by k0 at 10k+1 ms, B_k written by
    // k1 at 10k+4 ms), g = 0, 1, 2, 2, 4 MiB and B_3 = 2 MiB (1 MiB else), and X (1 MiB, the last row)
    // made at 0, written by step 0's k0, never used again, freed at 60 ms. Live bytes at the kernels'
    // starts (k0, k1): (3,4) (4,5) (5,6) (5,7) (7,8) MiB: at most 8 MiB, so the capacity of 8.5 MiB
    // never needs an on-demand eviction, and no allocation is used twice (the forecaster learns no
    // next use: the only candidate is X, "never used again" from step 2 on).
    // Step 3 (docs/simulator.md, "forecast"), fitted on steps 0..2: step means 3.5 4.5 5.5, changes
    // 1, 1: trend 1 MiB; levels (3, 4) MiB; predicted (6, 7) MiB, peak 7; H = 2.
    //   k0 (31 ms): bound = peak 7 + 1 x H + live 5 - predicted 6 = 8 MiB <= 8.5: nothing drawn.
    //   k1 (34 ms), position 1 = the forecast's last (rest 0): X's demand = max(6, 7) + round(trend)
    //     = 8 for the next step's positions; it runs past a whole step, so steps = min(H, ...) = 2 and
    //     the step's peak + trend x steps = 7 + 2 = 9 counts; drift live 7 - predicted 7 = 0: demand
    //     9 MiB, off 0, > 8.5 MiB: X is swapped out early at 34 ms.
    // Before 2026-12-05 ceil((L - rest) / length) overflowed for a victim never used again at every
    // position but a step's first: the 9 was dropped, X skipped at 34 ms (8 <= 8.5) and evicted at
    // step 4's k0 (41 ms) instead.
    const std::vector<int64_t> grow = {0, 1, 2, 2, 4};
    std::vector<Tensor> ts;
    std::vector<K> ks;
    for (int k = 0; k < 5; ++k) {
        const int64_t t0 = 10 * k * ms;
        ts.push_back({(2 + grow[k]) * MiB, t0, t0 + 6 * ms, trace::Category::Activation});
        ts.push_back({(k == 3 ? 2 : 1) * MiB, t0 + 3 * ms, t0 + 6 * ms, trace::Category::Activation});
        ks.push_back({t0 + 1 * ms, t0 + 2 * ms, {{2 * k, 'w'}}, k});
        ks.push_back({t0 + 4 * ms, t0 + 5 * ms, {{2 * k + 1, 'w'}}, k});
    }
    ts.push_back({MiB, 0, 60 * ms, trace::Category::Activation});   // X, row 10 (id 11)
    ks[0].uses.push_back({10, 'w'});
    const auto trace = build(ts, ks);
    const auto run = sim::simulate(trace, config("lru", 8 * MiB + MiB / 2, "forecast:2"));
    REQUIRE(run.invariant_violation.empty());
    REQUIRE_FALSE(run.oom.happened);
    CHECK(run.forecast_evictions == 1);
    CHECK(run.early_evictions == 1);
    int swap_outs = 0;
    for (const auto& event : run.events)
        if (event.kind == trace::EventKind::SwapOut) {
            ++swap_outs;
            CHECK(event.allocation == 11);
            CHECK(event.t_start == 34 * ms);
        }
    CHECK(swap_outs == 1);
}
