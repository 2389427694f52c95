// prefetch none: swap in on demand only (the engine does that); no early swap-out.
#include "prefetchers.hpp"

namespace mhc::sim {

NonePrefetcher::NonePrefetcher(const Prepared& p, PrefetchTarget& e) : Prefetcher(p, e) {
    acts_after_launch = false;
}

}  // namespace mhc::sim
