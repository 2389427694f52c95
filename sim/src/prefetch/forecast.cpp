// prefetch forecast[:H]: the demand forecaster and early eviction described by the mHC claim
// (docs/simulator.md, "forecast"). It predicts the live bytes at each position of a step from
// every step seen (the median over the last kMaxSteps steps of the detrended bytes at that
// position, plus a trend: the median step-to-step change of the steps' mean live bytes),
// H steps ahead for its error report; when that forecast, over the time a victim is predicted
// to be away, does not fit, it swaps out early the victim it ranks first by time to next use,
// reload cost, depth in the graph and compute load. Prefetching is periodic:8's. Causal: it
// reads the recorded tables only for kernels that have started (and allocations made).
#include "prefetchers.hpp"

#include <algorithm>
#include <cmath>

namespace mhc::sim {

ForecastPrefetcher::ForecastPrefetcher(const Prepared& p, PrefetchTarget& e, int horizon_steps)
    : PeriodicPrefetcher(p, e, kPrefetchWindow), ctx(e.context()), horizon(std::max(horizon_steps, 1)) {
    const size_t na = P.t->allocations.size();
    track.assign(na, Track{});
    depth.assign(na, 0);
    depth_step.assign(na, -1);
    live.init(na);
    ranked_in.assign(na, 0);
    ahead.resize(static_cast<size_t>(horizon));
    ahead_step.assign(static_cast<size_t>(horizon), -1);
}

void ForecastPrefetcher::on_alloc(int32_t a) {
    live.insert(a);
    track[a].last_kernel = -1;
    track[a].next_pred = -1;
    // A new allocation's first use: where its counterpart (same rank among a step's
    // allocations) of an earlier step was first used, from its step's first kernel.
    const int32_t st = P.alloc_step[a];
    if (st < 0) return;
    const size_t rank = static_cast<size_t>(P.alloc_ordinal[a]);
    if (rank < first_pos.size() && first_pos[rank] >= 0) track[a].next_pred = P.step_begin[st] + first_pos[rank];
}

// Kernel s's step, its position there and its step's first access: the same for all its accesses.
void ForecastPrefetcher::enter_kernel(int32_t kernel) {
    acc_kernel = kernel;
    acc_step = P.step_of[kernel];
    if (acc_step < 0) return;
    acc_pos = kernel - P.step_begin[acc_step];
    acc_base = P.acc_begin[P.step_begin[acc_step]];
}

// Learns, for the previous access of `a`, how many kernels later it was used again (by its
// access offset within its step), and predicts this access's next use from what the same
// offset did in an earlier step.
void ForecastPrefetcher::on_access(int32_t s, int64_t j, int32_t a) {
    if (s != acc_kernel) enter_kernel(s);
    Track& tr = track[a];
    if (tr.last_kernel >= 0) {
        if (tr.last_off >= 0 && tr.last_kernel < s) {   // its previous access, made in a step
            const auto offset = static_cast<size_t>(tr.last_off);
            if (offset >= off_use.size()) off_use.resize(offset + 1);
            off_use[offset] = {tr.last_pos, s - tr.last_kernel};
        }
    } else if (P.alloc_step[a] >= 0) {   // its first use, from its step's first kernel
        const size_t rank = static_cast<size_t>(P.alloc_ordinal[a]);
        if (rank >= first_pos.size()) first_pos.resize(rank + 1, -1);
        first_pos[rank] = s - P.step_begin[P.alloc_step[a]];
    }
    tr.last_kernel = s;
    tr.next_pred = -1;
    tr.last_off = -1;
    if (acc_step < 0) return;
    const auto offset = static_cast<size_t>(j - acc_base);
    tr.last_off = static_cast<int32_t>(offset);
    tr.last_pos = acc_pos;
    if (offset < off_use.size() && off_use[offset].pos == acc_pos && off_use[offset].dist > 0)
        tr.next_pred = static_cast<int32_t>(std::min<int64_t>(kNever - 1, static_cast<int64_t>(s) + off_use[offset].dist));
}

void ForecastPrefetcher::after_launch(int32_t s, int64_t t) {
    observe(s);
    PeriodicPrefetcher::after_launch(s, t);
}

// Kernel s started: step changes (refit, predictions for this step and H steps ahead), the
// depth of what it writes, and the error of the forecast for it.
void ForecastPrefetcher::observe(int32_t s) {
    const int32_t st = P.step_of[s];
    if (st < 0) return;
    if (st != cur_step) {
        close_step(cur_step);   // its peak error
        if (st > cur_step) refit(st);   // from the steps before st
        else pred_cur.clear();          // steps out of order: no forecast
        cur_step = st;
        step_actual_max = 0;
        depth_max_prev = std::max(depth_max_cur, 1);
        depth_max_cur = 0;
    }
    // depth in this step's graph: 1 + the deepest input written in this step
    int32_t d = 0;
    for (int64_t j = P.acc_begin[s]; j < P.acc_begin[s + 1]; ++j) {
        const int32_t a = P.acc_alloc[j];
        if (P.acc_read[j] && depth_step[a] == st) d = std::max(d, depth[a]);
    }
    ++d;
    for (int64_t j = P.acc_begin[s]; j < P.acc_begin[s + 1]; ++j)
        if (P.acc_write[j]) { depth[P.acc_alloc[j]] = d; depth_step[P.acc_alloc[j]] = st; }
    depth_max_cur = std::max(depth_max_cur, d);
    // error of the forecast: 1 step ahead (what the scheduler uses) and H steps ahead
    const int64_t actual = P.live_at[s];
    step_actual_max = std::max(step_actual_max, actual);
    const size_t pos = static_cast<size_t>(s - P.step_begin[st]);
    const double denom = std::max<double>(static_cast<double>(actual), 1);
    if (pos < pred_cur.size()) {
        err_sum += std::abs(static_cast<double>(pred_cur[pos] - actual)) / denom;
        ++n;
    }
    const size_t slot = static_cast<size_t>(st % horizon);
    if (ahead_step[slot] == st && pos < ahead[slot].size()) {
        hor_sum += std::abs(static_cast<double>(ahead[slot][pos] - actual)) / denom;
        ++hor_n;
    }
}

// The peak error of step st, just finished: its predicted peak against the peak seen.
void ForecastPrefetcher::close_step(int32_t st) {
    if (st < 0 || pred_cur.empty()) return;
    peak_err_sum += std::abs(static_cast<double>(pred_peak - step_actual_max)) /
                    std::max<double>(static_cast<double>(step_actual_max), 1);
    ++peak_n;
}

namespace {
// The median of v (reordered); for an even count, `even` picks from the two middle values.
template <class T, class Even>
T median(std::vector<T>& v, Even even) {
    const size_t m = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m), v.end());
    if (v.size() % 2 == 1) return v[m];
    const T hi = v[m];
    const T lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m));
    return even(lo, hi);
}
}  // namespace

// Step st begins: fit the model on the completed steps max(0, st - kMaxSteps) .. st-1 (all
// recorded, all seen), predict this step and the step H-1 after it.
void ForecastPrefetcher::refit(int32_t st) {
    const int32_t first = std::max(0, st - kMaxSteps);
    // trend: the median change of the steps' mean live bytes (0 with fewer than two changes;
    // of the two middle changes, the smaller in magnitude: one odd step does not make a trend)
    std::vector<double> means, diffs;
    size_t len = 0;
    for (int32_t k = first; k < st; ++k) {
        const int32_t b = P.step_begin[k], e = P.step_begin[k + 1];
        if (e <= b) continue;
        means.push_back(step_mean(k));
        len = std::max(len, static_cast<size_t>(e - b));
    }
    for (size_t i = 1; i < means.size(); ++i) diffs.push_back(means[i] - means[i - 1]);
    trend = diffs.size() < 2 ? 0.0 : median(diffs, [](double a, double b) { return std::abs(a) <= std::abs(b) ? a : b; });
    fit_levels(first, st, len);
    pred_cur = predict(st);
    pred_max.build(pred_cur);
    pred_peak = pred_cur.empty() ? INT64_MIN : *std::max_element(pred_cur.begin(), pred_cur.end());
    const int32_t target = st - 1 + horizon;   // made with steps up to st-1: H steps ahead
    const size_t slot = static_cast<size_t>(target % horizon);
    ahead[slot] = predict(target);
    ahead_step[slot] = target;
}

// The mean live bytes of a step (not empty), summed once: a step is in kMaxSteps fits.
double ForecastPrefetcher::step_mean(int32_t step) {
    if (static_cast<size_t>(step) >= mean_of.size()) mean_of.resize(static_cast<size_t>(step) + 1, std::nan(""));
    double& mean = mean_of[static_cast<size_t>(step)];
    if (std::isnan(mean)) {
        const int32_t begin = P.step_begin[step], end = P.step_begin[step + 1];
        double sum = 0;
        for (int32_t q = begin; q < end; ++q) sum += static_cast<double>(P.live_at[q]);
        mean = sum / (end - begin);
    }
    return mean;
}

// Whether steps first .. st-1 have the same length and the same live bytes at every
// position (the common case of a training loop): then every position's median is that value.
bool ForecastPrefetcher::steps_repeat(int32_t first, int32_t st) {
    for (int32_t k = std::max(repeat_checked + 1, 1); k < st; ++k) {
        const int32_t begin = P.step_begin[k], end = P.step_begin[k + 1], before = P.step_begin[k - 1];
        if (end - begin != begin - before || end <= begin ||
            !std::equal(P.live_at.begin() + begin, P.live_at.begin() + end, P.live_at.begin() + before))
            last_change = k;
        repeat_checked = k;
    }
    return last_change <= first && P.step_begin[first + 1] > P.step_begin[first];
}

// level per position: the median of (live - trend x step) over the steps that have it.
void ForecastPrefetcher::fit_levels(int32_t first, int32_t st, size_t len) {
    level.assign(len, 0);
    if (trend == 0 && steps_repeat(first, st)) {   // every median is the one value
        for (size_t p = 0; p < len; ++p)
            level[p] = std::llround(static_cast<double>(P.live_at[static_cast<size_t>(P.step_begin[first]) + p]));
        return;
    }
    std::vector<double> vals;
    for (size_t p = 0; p < len; ++p) {
        vals.clear();
        for (int32_t k = first; k < st; ++k)
            if (P.step_begin[k] + static_cast<int64_t>(p) < P.step_begin[k + 1])
                vals.push_back(static_cast<double>(P.live_at[P.step_begin[k] + p]) - trend * k);
        level[p] = std::llround(median(vals, [](double a, double b) { return (a + b) / 2; }));
    }
}

std::vector<int64_t> ForecastPrefetcher::predict(int32_t target) const {
    std::vector<int64_t> v(level.size());
    for (size_t p = 0; p < level.size(); ++p)
        v[p] = std::max<int64_t>(0, level[p] + std::llround(trend * target));
    return v;
}

// v's next use as learnt: its access offset's distance in an earlier step; never, when it
// lived through the whole previous step unused; -1 unknown.
int32_t ForecastPrefetcher::predicted_next(int32_t v, int32_t s) const {
    const Track& tr = track[v];
    if (tr.next_pred >= 0) return tr.next_pred;
    const int32_t st = P.step_of[s];
    if (st < 1) return -1;
    const int32_t prev = P.step_begin[st - 1];
    return tr.last_kernel < prev && P.t->allocations.t_alloc[v] < P.kstart[prev] ? kNever : -1;
}

int64_t ForecastPrefetcher::early_demand(int32_t v, int32_t s) const {
    return demand_until(predicted_next(v, s), s);
}

// The forecast live bytes over the kernels that run while an allocation next used at nu
// would be away (s+1 .. nu-1): this step's predicted positions, then whole steps (with the
// trend) up to H steps ahead; shifted by today's drift from the forecast (live now - predicted
// now). It grows with nu.
int64_t ForecastPrefetcher::demand_until(int32_t nu, int32_t kernel) const {
    const int32_t st = P.step_of[kernel];
    if (st < 0 || st != cur_step || pred_cur.empty()) return INT64_MIN;
    const int64_t L = static_cast<int64_t>(pred_cur.size());
    const int64_t pos = kernel - P.step_begin[st];
    if (pos >= L) return INT64_MIN;
    if (nu < 0) return INT64_MIN;
    const int64_t len = nu == kNever ? INT64_MAX : static_cast<int64_t>(nu) - kernel - 1;
    if (len <= 0) return INT64_MIN;
    const int64_t rest = L - 1 - pos;
    int64_t demand = INT64_MIN;
    if (rest > 0) demand = pred_max.max(static_cast<size_t>(pos + 1), static_cast<size_t>(pos + std::min(len, rest)));
    if (len > rest) {
        const int64_t over = len - rest;   // kernels into the following steps
        const int64_t step_trend = std::llround(trend);
        demand = std::max(demand, pred_max.max(0, static_cast<size_t>(std::min(over, L) - 1)) + step_trend);
        // ceil(over / L), written so that a victim never used again (len: INT64_MAX) cannot overflow
        const int64_t steps = over > L ? std::min<int64_t>(horizon, 1 + (over - 1) / L) : 1;
        if (steps >= 2) demand = std::max(demand, pred_peak + step_trend * (step_trend > 0 ? steps : 2));
    }
    return demand + eng.live_bytes() - pred_cur[static_cast<size_t>(pos)];
}

// What score() reads that is the same for every candidate of kernel s.
struct ForecastPrefetcher::ScoreBasis {
    int32_t s;
    int64_t q0;             // kernel s's position in the previous step
    int64_t span;           // recorded time from the first kernel to kernel s
    double backlog, load;   // the eviction queue's backlog; compute_load(s)
    int32_t ref_cur, ref_prev;   // the depth a candidate's is measured against: written in this step, before
};

ForecastPrefetcher::ScoreBasis ForecastPrefetcher::score_basis(int32_t kernel) const {
    const int32_t st = P.step_of[kernel];
    return {kernel, P.step_begin[st - 1] + (kernel - P.step_begin[st]), P.kstart[kernel] - P.kstart[0],
            static_cast<double>(ctx.d2h_backlog()), compute_load(kernel),
            std::max(depth_max_cur, depth_max_prev), depth_max_prev};
}

// Rank for early eviction (larger first): time to next use over reload cost, down-weighted
// 10x when the round trip and the eviction queue's backlog do not fit in the compute time
// before the next use (time to next use x compute load), and weighted by depth in the step's
// graph (shallow first: produced early, needed last by the backward pass).
double ForecastPrefetcher::score(const ScoreBasis& basis, int32_t alloc, int32_t nu) const {
    // Every alternative is computed and one selected (the candidates come at random: a branch
    // on each would mispredict). Time to next use: never, as the previous step ran up to it
    // (kernel s's position + d there has started), or d kernels at the mean rate so far.
    const int64_t ahead = static_cast<int64_t>(nu) - basis.s;
    const int64_t q1 = basis.q0 + ahead;
    const bool ran = q1 < basis.s;
    const double as_ran = static_cast<double>(P.kstart[ran ? q1 : basis.q0] - P.kstart[basis.q0]);
    const double at_rate = static_cast<double>(ahead) * static_cast<double>(basis.span) / std::max(basis.s, 1);
    const double ttnu = nu == kNever ? 1e18 : std::max(ran ? as_ran : at_rate, 1.0);
    const double reload = std::max(ctx.swap_in_ns(alloc), 1.0);
    const bool hides = basis.backlog + ctx.swap_out_ns(alloc) + reload <= ttnu * basis.load;
    const int32_t ref = depth_step[alloc] == cur_step ? basis.ref_cur : basis.ref_prev;
    const double ratio = std::min(1.0, depth[alloc] / static_cast<double>(std::max(ref, 1)));
    const double frac = depth_step[alloc] < 0 ? 0.0 : ratio;
    return ttnu / reload * (hides ? 1.0 : 0.1) * (1.25 - 0.5 * frac);
}

// Compute load: the share of the recorded time since kernel s-kLoadWindow that kernels ran
// (up to kernel s's start: nothing later is read).
double ForecastPrefetcher::compute_load(int32_t s) const {
    const int32_t b = std::max(0, s - kLoadWindow);
    const int64_t span = P.kstart[s] - P.kstart[b];
    if (span <= 0) return 1.0;
    int64_t busy = 0, covered = P.kstart[b];   // union of kernel intervals, clipped at kstart[s]
    for (int32_t q = b; q < s; ++q) {
        const int64_t lo = std::max(P.kstart[q], covered), hi = std::min(P.kend[q], P.kstart[s]);
        if (hi > lo) { busy += hi - lo; covered = hi; }
    }
    return std::min(1.0, static_cast<double>(busy) / static_cast<double>(span));
}

// Samples the live allocations (all of them when they are few, else kSample drawn at random,
// each one drawn more than once taken once: it would be kept, skipped or erased alike) and keeps in `kept`, with their predicted next use, the resident, dirty,
// unprotected ones whose next use is learnt and after kernel s+1; drawn allocations found freed
// leave the live set. Returns the latest of those next uses (-1: none kept).
int32_t ForecastPrefetcher::draw_candidates(int32_t kernel) {
    constexpr size_t kSample = SampledSet::kSample;
    const size_t size = live.items.size();
    if (size <= kSample) {
        cand = live.items;
    } else {
        const Remainder index(size);
        const uint64_t* random = draws.take(kSample);
        if (drawn_in.size() < size) drawn_in.resize(size, 0);
        if (++draw_count == 0) {   // wrapped: no mark left is from an earlier draw
            std::fill(drawn_in.begin(), drawn_in.end(), 0);
            draw_count = 1;
        }
        cand.resize(kSample);
        size_t n_drawn = 0;
        for (size_t i = 0; i < kSample; ++i) {   // without branches: the draws are random
            const size_t at = index.of(random[i]);
            cand[n_drawn] = live.items[at];
            n_drawn += drawn_in[at] != draw_count;
            drawn_in[at] = draw_count;
        }
        cand.resize(n_drawn);
    }
    // predicted_next() for every candidate, its step's part read once
    const int32_t st = P.step_of[kernel];
    const int32_t prev = st < 1 ? 0 : P.step_begin[st - 1];
    const int64_t prev_start = st < 1 ? INT64_MIN : P.kstart[prev];
    const int64_t* t_alloc = P.t->allocations.t_alloc.data();
    const Residency* residency = eng.residencies();
    const PrefetchTarget::Protection protection = eng.protection();
    const uint8_t* host_valid = ctx.host_valid.data();
    const Track* tracks = track.data();
    kept.resize(cand.size());
    auto* out = kept.data();
    size_t n_kept = 0;
    int32_t far_nu = -1;
    for (const int32_t candidate : cand) {
        const Residency where = residency[candidate];
        if (where == Residency::Freed) { live.erase(candidate); continue; }
        // Without branches (masks, not conditions: the candidates come at random, so each test
        // would mispredict). nu: its learnt next use, else never (kNever) or unknown (-1).
        const Track& tr = tracks[candidate];
        const int32_t never = -static_cast<int32_t>((tr.last_kernel < prev) & (t_alloc[candidate] < prev_start));
        const int32_t unlearnt = tr.next_pred >> 31;   // all ones when next_pred is -1
        const int32_t nu = (tr.next_pred & ~unlearnt) | (((kNever & never) | ~never) & unlearnt);
        const bool keep = (where == Residency::Gpu) & (protection.stamps[candidate] < protection.floor) &
                          (host_valid[candidate] == 0) & (nu >= 0) & ((nu == kNever) | (nu > kernel + 1));
        out[n_kept] = {candidate, nu};
        n_kept += static_cast<size_t>(keep);
        far_nu = std::max(far_nu, nu | -static_cast<int32_t>(!keep));   // -1 when not kept
    }
    kept.resize(n_kept);
    return far_nu;
}

// Rule 10 with the forecaster's own victims: sample the live allocations, keep the resident,
// dirty, unprotected ones with a learnt next use, rank them, and evict in rank order while the
// forecast demand over each one's absence does not fit and the link is free.
void ForecastPrefetcher::swap_out_early(int32_t s, int64_t t) {
    if (pred_cur.empty() || P.step_of[s] != cur_step || !eng.early_swap_out_open(s)) return;
    // No victim's demand can exceed the forecast peak up to H steps ahead plus the drift:
    // when that fits, nothing is ranked (the common case, kept cheap).
    const int64_t pos = s - P.step_begin[cur_step];
    if (pos >= static_cast<int64_t>(pred_cur.size())) return;
    const int64_t bound = pred_peak + std::max<int64_t>(0, std::llround(trend)) * horizon + eng.live_bytes() -
                          pred_cur[static_cast<size_t>(pos)];
    if (bound - eng.off_bytes() <= eng.capacity()) return;
    const int32_t far_nu = draw_candidates(s);
    // A candidate's demand grows with its time away (its predicted next use), and until one is
    // evicted the bytes off the GPU stay as they are: when the farthest one's demand fits, every
    // candidate would be skipped, so none is ranked.
    if (far_nu < 0) return;
    const int64_t far_demand = demand_until(far_nu, s);
    if (far_demand == INT64_MIN || far_demand - eng.off_bytes() <= eng.capacity()) return;
    const ScoreBasis basis = score_basis(s);
    ranked.clear();
    if (++ranking == 0) {   // wrapped: no mark left is from an earlier ranking
        std::fill(ranked_in.begin(), ranked_in.end(), 0);
        ranking = 1;
    }
    for (const auto& [candidate, nu] : kept)
        if (ranked_in[candidate] != ranking) {   // a candidate drawn twice is ranked once
            ranked_in[candidate] = ranking;
            ranked.emplace_back(score(basis, candidate, nu), candidate);
        }
    // In rank order (larger score first, ties by index), taken lazily from a heap: the loop
    // mostly stops after a few.
    const auto after = [](const auto& lhs, const auto& rhs) {
        return lhs.first != rhs.first ? lhs.first < rhs.first : lhs.second > rhs.second;
    };
    std::make_heap(ranked.begin(), ranked.end(), after);
    const int64_t cap = eng.capacity();
    constexpr int kSkips = 4;
    int skipped = 0;
    for (auto end = ranked.end(); end != ranked.begin(); --end) {
        std::pop_heap(ranked.begin(), end, after);
        const int32_t victim = (end - 1)->second;
        const int64_t demand = early_demand(victim, s);
        if (demand == INT64_MIN || demand - eng.off_bytes() <= cap) {
            if (++skipped > kSkips) break;
            continue;
        }
        const auto outcome = eng.early_swap_out_of(victim, s, t);
        if (outcome == PrefetchTarget::Early::LinkBusy) break;
        if (outcome == PrefetchTarget::Early::Refused) {
            if (++skipped > kSkips) break;
            continue;
        }
        ++evictions;
    }
}

void ForecastPrefetcher::finish(Result& r) {
    close_step(cur_step);   // the last step's peak
    if (n > 0) r.forecast_error = err_sum / static_cast<double>(n);
    if (peak_n > 0) r.forecast_peak_error = peak_err_sum / static_cast<double>(peak_n);
    if (hor_n > 0) r.forecast_horizon_error = hor_sum / static_cast<double>(hor_n);
    r.forecast_horizon_steps = horizon;
    r.forecast_evictions = evictions;
}

}  // namespace mhc::sim
