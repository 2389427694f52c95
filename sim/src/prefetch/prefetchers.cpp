// The one place a parsed --prefetch becomes a prefetcher.
#include "prefetchers.hpp"

namespace mhc::sim {

std::unique_ptr<Prefetcher> make_prefetcher(const PrefetchSpec& spec, const Prepared& p, PrefetchTarget& e) {
    switch (spec.kind) {
        case PrefetchKind::None: return std::make_unique<NonePrefetcher>(p, e);
        case PrefetchKind::Lookahead: return std::make_unique<LookaheadPrefetcher>(p, e, spec.window);
        case PrefetchKind::Periodic: return std::make_unique<PeriodicPrefetcher>(p, e, spec.window);
        case PrefetchKind::Capuchin: return std::make_unique<CapuchinPrefetcher>(p, e);
        case PrefetchKind::Forecast: return std::make_unique<ForecastPrefetcher>(p, e, spec.window);
    }
    return std::make_unique<NonePrefetcher>(p, e);
}

}  // namespace mhc::sim
