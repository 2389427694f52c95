// The allocator settings the search tries (planner.hpp: split_size_values, roundup_values,
// search_allocator_confs; docs/advise.md "Search", allocator settings).
#include <algorithm>
#include <iterator>
#include <set>
#include <tuple>

#include "mhc/advise/planner.hpp"
#include "mhc/common/error.hpp"
#include "mhc/sim/allocator.hpp"
#include "mhc/trace/torch_sizes.hpp"
#include "planner_parts.hpp"

namespace mhc::advise {

std::vector<int64_t> split_size_values(const trace::TraceData& step, size_t most) {
    constexpr int64_t kMiB = int64_t{1} << 20;
    constexpr int64_t kLeast = trace::torch::kLargeBuffer / kMiB;   // max_split_size_mb must be more than 20
    // The sizes in MiB where what N does changes: a request of r bytes is oversize when
    // r / MiB >= N (rounded down), a segment of g bytes (a multiple of 2 MiB) holds blocks of N MiB
    // or more only when g / MiB >= N.
    std::set<int64_t> edges;
    for (size_t i = 0; i < step.allocations.size(); ++i) {
        if (step.allocations.device[i] < 0) continue;   // host memory: not the caching allocator's
        const int64_t rounded = trace::torch::round_size(step.allocations.bytes[i], 0);
        for (const int64_t edge : {rounded / kMiB, sim::CachingAllocator::segment_size(rounded) / kMiB})
            if (edge > kLeast) edges.insert(edge);
    }
    // Each class (lo, hi] of N, from the largest: its roundest member, the multiple of the largest
    // power of two within it (one only: two such multiples would hold a multiple of twice it).
    std::vector<int64_t> out;
    for (auto it = edges.rbegin(); it != edges.rend() && out.size() < most; ++it) {
        const int64_t hi = *it;
        const int64_t lo = std::next(it) == edges.rend() ? kLeast : *std::next(it);
        for (int bit = 62; bit >= 0; --bit) {
            const int64_t unit = int64_t{1} << bit;
            if (hi / unit * unit > lo) {
                out.push_back(hi / unit * unit);
                break;
            }
        }
    }
    return out;
}

std::vector<int64_t> roundup_values(const trace::TraceData& step, size_t most) {
    std::vector<int64_t> sizes;
    for (size_t i = 0; i < step.allocations.size(); ++i)
        if (step.allocations.device[i] >= 0) sizes.push_back(step.allocations.bytes[i]);
    auto rounded = [&](int64_t divisions) {
        std::vector<int64_t> out;
        out.reserve(sizes.size());
        for (const int64_t bytes : sizes) out.push_back(trace::torch::round_size(bytes, divisions));
        return out;
    };
    std::vector<std::vector<int64_t>> seen{rounded(0)};
    std::vector<int64_t> out;
    for (const int64_t divisions : {2, 4, 8, 16}) {
        if (out.size() >= most) break;
        std::vector<int64_t> got = rounded(divisions);
        if (std::find(seen.begin(), seen.end(), got) != seen.end()) continue;
        seen.push_back(std::move(got));
        out.push_back(divisions);
    }
    return out;
}

std::vector<std::string> search_allocator_confs(const Evaluator& ev, const PlannerOptions& opts, int64_t& trials) {
    return search_allocator_confs(ev, opts, {Setting{}}, trials);
}

std::vector<std::string> search_allocator_confs(const Evaluator& ev, const PlannerOptions& opts,
                                                const std::vector<Setting>& on, int64_t& trials) {
    std::vector<std::string> confs = opts.allocator_confs;
    const std::vector<int64_t> values = opts.split_sizes > 0
                                            ? split_size_values(*ev.base().trace, static_cast<size_t>(opts.split_sizes))
                                            : std::vector<int64_t>{};
    const std::vector<int64_t> divisions = opts.roundup_divisions > 0
                                               ? roundup_values(*ev.base().trace,
                                                                static_cast<size_t>(opts.roundup_divisions))
                                               : std::vector<int64_t>{};
    if (values.empty() && divisions.empty()) return confs;
    // On the captured step: the search's own allocator settings, then each value alone and with
    // expandable segments (max_split_size_mb largest value first, then roundup_power2_divisions);
    // one transformed step, a caching model run each (two where it runs at the capacity).
    std::vector<std::string> tries = confs;
    for (const int64_t mib : values)
        for (const char* with : {"", "expandable_segments:True,"})
            tries.push_back(with + std::string("max_split_size_mb:") + std::to_string(mib));
    for (const int64_t division : divisions)
        for (const char* with : {"", "expandable_segments:True,"})
            tries.push_back(with + std::string("roundup_power2_divisions:") + std::to_string(division));
    // each at the capacity (docs/advise.md "Search", allocator settings): one that runs there
    // first, then the less time giving cached memory back costs there, then the smaller reserved
    // peak there, then without a limit; one that does not run, by its reserved peak without a limit
    auto key = [&](const Memory& memory) {
        const bool runs = opts.capacity > 0 && fits(memory, opts.capacity);
        return std::make_tuple(runs ? 0 : 1, runs ? memory.steady_cost : 0, runs ? memory.retry_cost : 0,
                               runs ? memory.reserved_at : 0, memory.reserved);
    };
    const size_t own = confs.size();
    for (const Setting& setting : on) {
        std::vector<Prediction> got;
        try {
            got = ev.predict(setting, tries, opts.capacity);
        } catch (const Error& e) {
            // a step a transform gets wrong: the search leaves it out and says so (Predictions)
            if (e.kind() != Error::Kind::Internal) throw;
            continue;
        }
        trials += static_cast<int64_t>(tries.size());
        auto least = key(got[0].memory);   // the best of the search's own allocator settings
        for (size_t i = 1; i < own; ++i) least = std::min(least, key(got[i].memory));
        size_t best = tries.size();
        for (size_t i = own; i < tries.size(); ++i)
            if (key(got[i].memory) < least) {   // strictly better: of equals, the first (larger value, alone)
                least = key(got[i].memory);
                best = i;
            }
        if (best < tries.size() && std::find(confs.begin(), confs.end(), tries[best]) == confs.end())
            confs.push_back(tries[best]);
    }
    return confs;
}

namespace planning {

// search_allocator_confs tried each value of split_size_values and roundup_values (alone and with
// expandable segments) on each step it tried them on.
void count_allocator_values(const Base& base, const PlannerOptions& options, Advice& advice) {
    if (advice.allocator_trials <= 0) return;
    const auto most = [](int values) { return static_cast<size_t>(std::max(values, 0)); };
    advice.roundup_values = static_cast<int64_t>(roundup_values(*base.trace, most(options.roundup_divisions)).size());
    advice.split_values = static_cast<int64_t>(split_size_values(*base.trace, most(options.split_sizes)).size());
}

}  // namespace planning

}  // namespace mhc::advise
