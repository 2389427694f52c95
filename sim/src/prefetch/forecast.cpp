// prefetch forecast[:H]: periodic:H plus a demand forecaster that predicts the live bytes at
// each position of a step as those at the same position of the previous step and reports
// its error. Its decisions are periodic:H's, so are its numbers (docs/simulator.md).
#include "prefetchers.hpp"

#include <algorithm>
#include <cmath>

namespace mhc::sim {

// Accounts the forecast error at kernel s (the live bytes predicted from the previous step).
void ForecastPrefetcher::observe(int32_t s) {
    int32_t st = P.step_of[s];
    int32_t pos = s - P.step_begin[st];
    int32_t prev = P.step_begin[st - 1], prev_end = P.step_begin[st];
    if (st != step) {   // a new step: close the previous step's peak error
        close_step();
        step = st;
        step_actual_max = 0;
    }
    step_actual_max = std::max(step_actual_max, P.live_at[s]);
    if (prev + pos >= prev_end) return;
    int64_t pred_now = P.live_at[prev + pos];
    err_sum += std::abs(static_cast<double>(pred_now - P.live_at[s])) / std::max<double>(P.live_at[s], 1);
    ++n;
}

// The peak error of the step just finished: its peak predicted as the previous step's,
// against the peak seen.
void ForecastPrefetcher::close_step() {
    if (step < 1) return;
    int64_t pred = 0;
    for (int32_t q = P.step_begin[step - 1]; q < P.step_begin[step]; ++q) pred = std::max(pred, P.live_at[q]);
    peak_err_sum += std::abs(static_cast<double>(pred - step_actual_max)) / std::max<double>(step_actual_max, 1);
    ++peak_n;
}

void ForecastPrefetcher::finish(Result& r) {
    close_step();   // the last step's peak
    if (n > 0) r.forecast_error = err_sum / static_cast<double>(n);
    if (peak_n > 0) r.forecast_peak_error = peak_err_sum / static_cast<double>(peak_n);
    r.forecast_evictions = evictions;
}

}  // namespace mhc::sim
