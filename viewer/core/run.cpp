// Runs read through the trace library (trace::load_run) and laid out as lanes and curves.
#include <algorithm>
#include <unordered_map>

#include "mhc/common/error.hpp"
#include "mhc/common/units.hpp"
#include "mhc/viewer/axis.hpp"
#include "mhc/viewer/data.hpp"
#include "mhc/viewer/metrics.hpp"

namespace mhc::viewer {

std::string ViewRun::label() const {
    return "#" + std::to_string(info.id) + " " +
           (info.name.empty() ? std::string(to_string(info.kind)) : trace::run_name_with_device(info));
}

std::string run_list_entry(const trace::RunInfo& info) {
    return "#" + std::to_string(info.id) + " " + info.name + trace::run_name_notes(info, std::string(to_string(info.status)));
}

std::string run_device_note(const trace::RunInfo& info, int32_t shown_device) {
    const std::optional<int32_t> device = trace::run_device(info);
    if (!device || *device == shown_device) return {};
    auto whose = [](int32_t dev) { return (dev < 0 ? "the " : "") + device_name(dev) + "'s"; };
    return "#" + std::to_string(info.id) + " simulated " + whose(*device) + " memory, not " + whose(shown_device) +
           ": pick " + device_name(*device) + " in 'memory of' to see its curve";
}

namespace {

// kernel id -> (t_start, t_end) of a run; direct indexing when ids are contiguous.
class KernelTimes {
public:
    explicit KernelTimes(const std::vector<trace::RunKernelTime>& kt) : kt_(kt) {
        contiguous_ = !kt.empty() && kt.back().kernel - kt.front().kernel + 1 == static_cast<int64_t>(kt.size());
    }
    const trace::RunKernelTime* find(int64_t kernel) const {
        if (kt_.empty()) return nullptr;
        if (contiguous_) {
            int64_t i = kernel - kt_.front().kernel;
            return (i >= 0 && i < static_cast<int64_t>(kt_.size())) ? &kt_[static_cast<size_t>(i)] : nullptr;
        }
        auto it = std::lower_bound(kt_.begin(), kt_.end(), kernel,
                                   [](const trace::RunKernelTime& r, int64_t k) { return r.kernel < k; });
        return (it != kt_.end() && it->kernel == kernel) ? &*it : nullptr;
    }

private:
    const std::vector<trace::RunKernelTime>& kt_;
    bool contiguous_ = false;
};

Curve samples_curve(const std::vector<trace::RunMemorySample>& m, bool host) {
    std::vector<int64_t> t;
    std::vector<double> v;
    t.reserve(m.size()); v.reserve(m.size());
    for (const auto& s : m) {
        t.push_back(s.t);
        v.push_back(static_cast<double>(host ? s.host_bytes : s.device_bytes));
    }
    // run_memory is written in time order; tolerate a writer that did not sort.
    if (!std::is_sorted(t.begin(), t.end())) {
        std::vector<size_t> o(t.size());
        for (size_t i = 0; i < o.size(); ++i) o[i] = i;
        std::stable_sort(o.begin(), o.end(), [&](size_t a, size_t b) { return t[a] < t[b]; });
        std::vector<int64_t> t2; std::vector<double> v2;
        for (size_t i : o) { t2.push_back(t[i]); v2.push_back(v[i]); }
        t.swap(t2); v.swap(v2);
    }
    Curve c;
    c.assign(std::move(t), std::move(v));
    return c;
}

}  // namespace

std::string run_outcome(const ViewRun& run, const TimeText& times) {
    auto config = [&](const char* key) {
        auto it = run.config.find(key);
        return it == run.config.end() ? std::string() : it->second;
    };
    switch (run.info.status) {
        case trace::RunStatus::Complete: return {};
        case trace::RunStatus::Oom: {
            std::string out = "out of memory";
            // An order-only trace's run: at the op it reached and the link time since (run_times.hpp).
            if (auto at = run.metrics.find("oom_time_ns"); at != run.metrics.end())
                out += " at " + (run.times.order_only ? run.times.at(static_cast<int64_t>(at->second))
                                                      : times.at(static_cast<int64_t>(at->second)));
            for (const char* key : {"oom_where", "oom_why"})
                if (!config(key).empty()) out += ": " + config(key);
            return out;
        }
        default: break;
    }
    return std::string(trace::to_string(run.info.status)) + ": the run did not finish (nothing after its last event)";
}

size_t run_index(const std::vector<trace::RunInfo>& runs, int64_t run_id, const std::string& path,
                 const std::string& runs_db) {
    for (size_t i = 0; i < runs.size(); ++i)
        if (runs[i].id == run_id) return i;
    throw Error(trace::no_such_run(path, run_id, runs.size(), runs_db));
}

ViewRun load_view_run(const ViewTrace& t, int64_t run_id) {
    ViewRun r;
    bool found = false;
    const std::vector<trace::RunInfo> runs = trace::list_runs(t.path, t.runs_db);
    for (const trace::RunInfo& info : runs)
        if (info.id == run_id) { r.info = info; found = true; }
    if (!found) throw Error(trace::no_such_run(t.path, run_id, runs.size(), t.runs_db));
    trace::Run run = trace::load_run(t.path, run_id, t.runs_db);
    r.config = std::move(run.config);
    r.metrics = std::move(run.metrics);
    if (auto it = r.config.find("capacity_bytes"); it != r.config.end()) {
        try { r.capacity = parse_bytes(it->second); } catch (const Error&) { r.capacity = -1; }
    }
    int64_t t_end = 0;
    // The run's kernel times are every kernel it reached (a missing one was never reached); a
    // run stored without its timeline has none and is drawn at the recorded times, one that
    // reached no kernel (an OOM before the first) draws none.
    auto reached = r.metrics.find("kernels_reached");
    if (!run.kernel_times.empty() || (reached != r.metrics.end() && reached->second == 0)) {
        std::sort(run.kernel_times.begin(), run.kernel_times.end(),
                  [](const trace::RunKernelTime& a, const trace::RunKernelTime& b) { return a.kernel < b.kernel; });
        KernelTimes kt(run.kernel_times);
        RunClock& clock = r.clock;
        r.kernel_lanes.reserve(t.kernel_lanes.size());
        for (const Lane& src : t.kernel_lanes) {
            Lane l;
            l.kind = src.kind; l.title = src.title; l.device = src.device; l.stream = src.stream;
            l.t_start.reserve(src.size()); l.t_end.reserve(src.size());
            l.key.reserve(src.size()); l.ref.reserve(src.size());
            for (size_t i = 0; i < src.size(); ++i) {
                const trace::RunKernelTime* k = kt.find(src.ref[i]);
                // Kernels the run did not reach (OOM) have no time: they are not drawn.
                if (!k) continue;
                l.push(k->t_start, k->t_end, src.key[i], src.ref[i]);
                clock.add(src.t_start[i], k->t_start);
                t_end = std::max(t_end, k->t_end);
            }
            l.finish();
            l.classify(t.family_of_name, static_cast<uint8_t>(KernelFamily::Other), kFamilyCount);
            r.kernel_lanes.push_back(std::move(l));
        }
        // Markers and copies have no simulated times: they follow the kernels (RunClock).
        clock.finish();
        for (const Lane& src : t.marker_lanes) r.marker_lanes.push_back(clock.map_lane(src));
        for (const Lane& src : t.copy_lanes) r.copy_lanes.push_back(clock.map_lane(src));
        for (const auto* lanes : {&r.marker_lanes, &r.copy_lanes})
            for (const Lane& l : *lanes)
                if (!l.empty()) t_end = std::max(t_end, l.end_max(l.size() - 1));
    } else {
        t_end = t.t_end;
    }
    r.events = std::move(run.events);
    std::vector<Lane> by_kind(trace::kEventKindCount);
    for (size_t i = 0; i < r.events.size(); ++i) {
        const trace::RunEvent& e = r.events[i];
        int k = static_cast<int>(e.kind);
        if (k < 0 || k >= trace::kEventKindCount) continue;
        by_kind[static_cast<size_t>(k)].push(e.t_start, e.t_end, k, static_cast<int64_t>(i));
        t_end = std::max(t_end, e.t_end);
    }
    for (int k = 0; k < trace::kEventKindCount; ++k) {
        Lane& l = by_kind[static_cast<size_t>(k)];
        if (l.empty()) continue;
        l.kind = LaneKind::Events;
        l.stream = k;
        l.title = event_label(static_cast<trace::EventKind>(k));
        l.finish();
        r.event_lanes.push_back(std::move(l));
    }
    r.memory = samples_curve(run.memory, false);
    r.host = samples_curve(run.memory, true);
    if (!r.memory.empty()) t_end = std::max(t_end, r.memory.times().back());
    r.t_end = t_end;
    r.times = run_times(t, r);
    return r;
}

std::vector<Lane> highlight_lanes(const ViewTrace& t, const ViewRun* run, const std::vector<AccessHit>& hits) {
    std::vector<Lane> lanes;
    std::unordered_map<int64_t, size_t> lane_of;   // (device, stream) packed
    // A run with its own kernel times: look each hit up in the run's lane of that stream.
    std::unordered_map<int64_t, std::pair<int64_t, int64_t>> run_times;
    if (run && !run->kernel_lanes.empty()) {
        std::unordered_map<int64_t, bool> wanted;
        for (const AccessHit& h : hits) wanted[h.kernel] = true;
        for (const Lane& l : run->kernel_lanes)
            for (size_t i = 0; i < l.size(); ++i)
                if (wanted.count(l.ref[i])) run_times[l.ref[i]] = {l.t_start[i], l.t_end[i]};
    }
    for (const AccessHit& h : hits) {
        int64_t key = h.stream * 4096 + h.device;
        auto [it, fresh] = lane_of.try_emplace(key, lanes.size());
        if (fresh) {
            Lane l;
            l.kind = LaneKind::Highlight;
            l.device = h.device;
            l.stream = h.stream;
            lanes.push_back(std::move(l));
        }
        int64_t a = h.t_start, b = h.t_end;
        if (auto rt = run_times.find(h.kernel); rt != run_times.end()) { a = rt->second.first; b = rt->second.second; }
        else if (run && !run->kernel_lanes.empty()) continue;   // the run never ran it
        lanes[it->second].push(a, b, static_cast<int32_t>(h.mode), h.kernel);
    }
    for (Lane& l : lanes) l.finish();
    (void)t;
    return lanes;
}

}  // namespace mhc::viewer
