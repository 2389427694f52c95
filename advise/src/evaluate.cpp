// Evaluating a setting: transforms, timing, live bytes, and the caching allocator model.
#include "mhc/advise/evaluate.hpp"

#include <algorithm>
#include <cmath>

#include "mhc/common/error.hpp"
#include "mhc/sim/allocator.hpp"
#include "mhc/sim/simulate.hpp"

namespace mhc::advise {

namespace {
constexpr int64_t kNoLimit = INT64_MAX / 2;   // the walk without a limit (CachingWalk's own)

// What a walk at the capacity did beyond the same walk without a limit (never below 0).
int64_t beyond(int64_t at_capacity, int64_t without_limit) { return std::max<int64_t>(0, at_capacity - without_limit); }

// RetryCost's price of full releases, segment calls (freed + made again) and the bytes they move.
int64_t price(const RetryCost& cost, int64_t releases, int64_t segments, int64_t bytes) {
    const double gib = static_cast<double>(bytes) / static_cast<double>(int64_t{1} << 30);
    return releases * cost.sync_ns + segments * cost.call_ns + std::llround(gib * static_cast<double>(cost.ns_per_gib));
}
}   // namespace

Memory measure(const trace::TraceData& trace_data, const std::string& allocator_conf, int64_t capacity,
               const RetryCost& cost) {
    return measure(trace_data, std::vector<std::string>{allocator_conf}, capacity, cost).front();
}

int64_t RetryCost::of(const Memory& memory) const {
    return price(*this, memory.releases, memory.segments_freed + memory.segments_remade,
                 memory.bytes_freed + memory.bytes_remade);
}

int64_t RetryCost::per_step(const Memory& memory) const {
    const int64_t total = price(*this, memory.steady_releases,
                                memory.steady_segments_freed + memory.steady_segments_remade,
                                memory.steady_bytes_freed + memory.steady_bytes_remade);
    const int64_t over = std::max<int64_t>(1, memory.steady_steps);
    return (total + over / 2) / over;
}

bool fits(const Memory& memory, int64_t capacity) {
    return memory.capacity == capacity && capacity > 0 ? memory.fits : memory.reserved <= capacity;
}

std::vector<Memory> measure(const trace::TraceData& trace_data, const std::vector<std::string>& allocator_confs,
                            int64_t capacity, const RetryCost& cost) {
    auto prep = sim::prepare(trace_data);
    const int64_t peak = sim::baseline_peak(*prep, "ideal");
    std::vector<Memory> out;
    out.reserve(allocator_confs.size());
    for (const std::string& conf : allocator_confs) {
        Memory mem;
        mem.peak = peak;
        if (conf.empty()) {
            mem.reserved = sim::baseline_peak(*prep, "caching");
        } else {
            sim::Config config;
            config.allocator = "caching";
            config.allocator_conf = conf;
            config.record_events = false;
            config.check_invariants = false;
            config.memory_samples = 1;
            mem.reserved = sim::simulate(*prep, config).simulated_peak;
        }
        if (capacity > 0) {
            mem.capacity = capacity;
            mem.reserved_at = mem.reserved;
            // garbage_collection_threshold collects above that share of the capacity
            const double gc_threshold = sim::allocator_settings_for(trace_data, conf).garbage_collection_threshold;
            const bool collects = gc_threshold > 0 &&
                                  mem.reserved > static_cast<int64_t>(gc_threshold * static_cast<double>(capacity));
            if (mem.reserved > capacity || collects) {   // some cudaMalloc fails there: PyTorch's retries decide
                const sim::CachingUnderLimit run = sim::caching_under_limit(*prep, conf, capacity);
                mem.fits = run.runs;
                mem.reserved_at = run.reserved_peak;
                mem.retries = run.retries;
                if (run.runs && run.device_frees > 0) {
                    // against the same walk without a limit: what is given back and made again
                    const sim::CachingUnderLimit free_run = sim::caching_under_limit(*prep, conf, kNoLimit);
                    mem.releases = run.releases;
                    mem.segments_freed = beyond(run.device_frees, free_run.device_frees);
                    mem.bytes_freed = beyond(run.free_bytes, free_run.free_bytes);
                    mem.segments_remade = beyond(run.device_allocs, free_run.device_allocs);
                    mem.bytes_remade = beyond(run.alloc_bytes, free_run.alloc_bytes);
                    mem.retry_cost = cost.of(mem);
                    mem.steps = run.steps;
                    if (run.steps >= 2) {   // the steps after the first, against the same without a limit
                        mem.steady_steps = run.steps - 1;
                        mem.steady_releases = run.later_releases;
                        mem.steady_segments_freed = beyond(run.later_frees, free_run.later_frees);
                        mem.steady_bytes_freed = beyond(run.later_free_bytes, free_run.later_free_bytes);
                        mem.steady_segments_remade = beyond(run.later_allocs, free_run.later_allocs);
                        mem.steady_bytes_remade = beyond(run.later_alloc_bytes, free_run.later_alloc_bytes);
                    } else {   // one step: as captured
                        mem.steady_steps = 1;
                        mem.steady_releases = mem.releases;
                        mem.steady_segments_freed = mem.segments_freed;
                        mem.steady_bytes_freed = mem.bytes_freed;
                        mem.steady_segments_remade = mem.segments_remade;
                        mem.steady_bytes_remade = mem.bytes_remade;
                    }
                    // A steady step ends with the reserved bytes it began with, so it makes again what it
                    // gives back: the walk without a limit still growing in the capture's steps (its
                    // first segments or pages) does not take that from the count
                    mem.steady_segments_remade = std::max(mem.steady_segments_remade, mem.steady_segments_freed);
                    mem.steady_bytes_remade = std::max(mem.steady_bytes_remade, mem.steady_bytes_freed);
                    mem.steady_cost = cost.per_step(mem) * std::max<int64_t>(1, run.steps);
                }
            }
        }
        out.push_back(mem);
    }
    return out;
}

Evaluator::Evaluator(const Base& base, sim::LinkModel link, HostModel host)
    : b_(base), link_(std::move(link)), host_(host) {}

Plan Evaluator::plan(const Setting& setting) const {
    Plan planned = b_.plan;
    Context context = make_context(b_, setting, host_);
    for (const auto& transform : make_transforms(b_, setting)) transform->apply(context, planned);
    return planned;
}

Evaluator::Quick Evaluator::quick(const Setting& setting) const {
    Plan planned = plan(setting);
    Order order = order_of(planned);
    Quick answer;
    answer.live = live_profile(planned, order, b_.device);
    answer.step_time = timing(planned, order, link_).makespan;
    return answer;
}

trace::TraceData Evaluator::trace(const Setting& setting) const {
    Plan planned = plan(setting);
    Order order = order_of(planned);
    Timing timed = timing(planned, order, link_,
                          false);   // one stream in launch order: the predicted memory (plan.hpp)
    return to_trace(planned, order, timed, *b_.trace,
                    {{"source", "advise"}, {"advise.setting", to_json(setting)}, {"timing", "estimated"}});
}

Prediction Evaluator::predict(const Setting& setting, int64_t capacity) const {
    return predict(setting, std::vector<std::string>{setting.allocator}, capacity).front();
}

std::vector<Prediction> Evaluator::predict(const Setting& setting, const std::vector<std::string>& allocator_confs,
                                           int64_t capacity) const {
    const Plan transformed = plan(setting);
    const Order order = order_of(transformed);
    const Timing timed = timing(transformed, order, link_);
    const LiveProfile lp = live_profile(transformed, order, b_.device);
    const Timing launch_order = timing(transformed, order, link_, false);
    trace::TraceData written = to_trace(transformed, order, launch_order, *b_.trace,
                                        {{"source", "advise"}, {"advise.setting", to_json(setting)}});
    // The step a setting's transforms wrote is mhc's, not the user's file (which passed the checks
    // when loaded): a trace rule it breaks is a fault of a transform, never blamed on the capture.
    written.path = "the predicted step";
    std::vector<Memory> memories;
    try {
        memories = measure(written, allocator_confs, capacity);
    } catch (const Error& e) {
        if (e.kind() == Error::Kind::Internal) throw;
        throw Error("internal error: setting " + to_json(setting) + ": " + e.what() + " (" + b_.trace->path +
                        " passes the checks: the fault is mhc's transform of it)",
                    Error::Kind::Internal);
    }
    std::vector<Prediction> out;
    out.reserve(allocator_confs.size());
    for (const Memory& memory : memories) {
        Prediction pred;
        pred.memory = memory;
        pred.host_peak = lp.host_peak;
        pred.step_time = timed.makespan;
        pred.waits = timed.waits;
        pred.h2d_bytes = timed.h2d_bytes;
        pred.d2h_bytes = timed.d2h_bytes;
        pred.comm = timed.comm;
        pred.comm_waits = timed.comm_waits;
        out.push_back(pred);
    }
    return out;
}

}  // namespace mhc::advise

#include "mhc/trace/store.hpp"

namespace mhc::advise {

void write_trace(const trace::TraceData& trace_data, const std::string& path, bool force) {
    trace::Writer writer(path, force ? IfExists::Replace : IfExists::Refuse);
    for (size_t i = 1; i < trace_data.strings.size(); ++i)
        writer.intern(trace_data.strings[i]);   // ids stay as they are
    for (auto& [k, v] : trace_data.meta)
        if (k != "format" && k != "schema_version") writer.set_meta(k, v);
    for (size_t i = 0; i < trace_data.allocations.size(); ++i) writer.add(trace_data.allocations.row(i));
    for (size_t k = 0; k < trace_data.kernels.size(); ++k) {
        const trace::Kernel kernel = trace_data.kernels.row(k);
        writer.add(kernel);
        for (int64_t j = trace_data.kernels.access_begin[k]; j < trace_data.kernels.access_begin[k + 1]; ++j)
            writer.add(trace::Access{
                kernel.id,
                trace_data.allocations.id[static_cast<size_t>(trace_data.accesses.allocation[static_cast<size_t>(j)])],
                trace_data.accesses.mode[static_cast<size_t>(j)]});
    }
    for (size_t c = 0; c < trace_data.copies.size(); ++c)
        writer.add(trace::Copy{trace_data.copies.id[c], trace_data.copies.device[c], trace_data.copies.stream[c],
                               trace_data.copies.kind[c], trace_data.copies.bytes[c], trace_data.copies.t_start[c],
                               trace_data.copies.t_end[c]});
    for (size_t m = 0; m < trace_data.markers.size(); ++m)
        writer.add(trace::Marker{trace_data.markers.id[m], trace_data.markers.name[m], trace_data.markers.t_start[m],
                                 trace_data.markers.t_end[m], trace_data.markers.kind[m], trace_data.markers.index[m]});
    writer.finish();
}

}  // namespace mhc::advise
