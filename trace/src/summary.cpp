#include "mhc/trace/summary.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

#include "mhc/common/error.hpp"
#include "mhc/common/numbers.hpp"
#include "mhc/trace/limits.hpp"

#include "mhc/common/units.hpp"
#include "mhc/trace/event_order.hpp"

namespace mhc::trace {

int64_t requested_peak(const TraceData& t, int32_t device) {
    const auto& a = t.allocations;
    int64_t live = 0, peak = 0;
    for (const MemoryEvent& e : memory_events(a, device)) {
        const auto i = static_cast<size_t>(e.row);
        const int64_t b = a.requested_at(i) != kNoBytes ? a.requested_at(i) : a.bytes[i];
        live += e.free ? -b : b;
        peak = std::max(peak, live);
    }
    return peak;
}

int64_t reserved_peak(const TraceData& t, int32_t device) {
    std::vector<std::pair<int64_t, int64_t>> ev;   // (time, delta): at one time frees (negative) first
    for (const auto& s : t.segments) {
        if (s.device != device) continue;
        ev.push_back({s.t_alloc, s.bytes});
        if (s.t_free != kNoTime) ev.push_back({s.t_free, -s.bytes});
    }
    if (ev.empty()) return -1;
    std::sort(ev.begin(), ev.end());
    int64_t live = 0, peak = 0;
    for (const auto& [time, d] : ev) {
        live += d;
        peak = std::max(peak, live);
    }
    return peak;
}

LivePeak live_peak(const TraceData& t, int32_t device) {
    // Replayed in the order of docs/trace-format.md "Events at one instant": a block alive
    // only at one instant counts with everything alive when it was made.
    const auto& a = t.allocations;
    LivePeak p;
    int64_t live = 0;
    std::array<int64_t, kCategoryCount> by_category{};
    for (const MemoryEvent& e : memory_events(a, device)) {
        const size_t i = static_cast<size_t>(e.row);
        if (a.bytes[i] <= 0) continue;
        const int64_t d = e.free ? -a.bytes[i] : a.bytes[i];
        live += d;
        by_category[static_cast<size_t>(a.category[i])] += d;
        if (live > p.bytes) {
            p.bytes = live;
            p.time = e.time;
            p.by_category = by_category;
        }
    }
    return p;
}

std::string capture_versions(const std::map<std::string, std::string>& meta) {
    auto torch = meta.find("torch_version");
    if (torch == meta.end()) return "";
    auto hf = meta.find("transformers_version");
    return "torch " + torch->second + (hf == meta.end() ? "" : ", transformers " + hf->second);
}

std::string version_mismatch(const std::vector<std::pair<std::string, std::string>>& versions) {
    const std::pair<std::string, std::string>* first = nullptr;
    for (const auto& v : versions) {
        if (v.second.empty()) continue;
        if (!first) first = &v;
        else if (v.second != first->second)
            return "traces captured with different versions are compared: " + first->first + " (" + first->second +
                   ") and " + v.first + " (" + v.second + ")";
    }
    return "";
}

namespace {
// The kernels by total time (ties by name: the map's order is no order; docs/trace-format.md, "The
// summary"); returns the kernel time of every kernel.
int64_t top_kernels(const TraceData& trace, int top_n, std::vector<Summary::Top>& out) {
    int64_t kernel_time = 0;
    std::unordered_map<int64_t, Summary::Top> by_name;
    for (size_t i = 0; i < trace.kernels.size(); ++i) {
        const int64_t length = trace.kernels.t_end[i] - trace.kernels.t_start[i];
        kernel_time += length;
        auto& entry = by_name[trace.kernels.name[i]];
        entry.count++;
        entry.total += length;
    }
    for (auto& [name, entry] : by_name) {
        entry.name = trace.str(name);
        out.push_back(entry);
    }
    std::sort(out.begin(), out.end(), [](const auto& left, const auto& right) {
        return left.total != right.total ? left.total > right.total : left.name < right.name;
    });
    if (static_cast<int>(out.size()) > top_n) out.resize(static_cast<size_t>(top_n));
    return kernel_time;
}

// The largest allocations, ties in row order (partial_sort is not stable); one alive at the end
// lives to the trace's end.
std::vector<Summary::Top> largest_allocations(const TraceData& trace, int top_n, int64_t t_end) {
    const auto& allocs = trace.allocations;
    std::vector<size_t> idx(allocs.size());
    std::iota(idx.begin(), idx.end(), size_t{0});
    const size_t count = std::min(idx.size(), static_cast<size_t>(top_n));
    std::partial_sort(idx.begin(), idx.begin() + static_cast<long>(count), idx.end(), [&](size_t left, size_t right) {
        const int64_t lb = allocs.bytes[left], rb = allocs.bytes[right];
        return lb != rb ? lb > rb : left < right;
    });
    std::vector<Summary::Top> out;
    for (size_t i = 0; i < count; ++i) {
        const size_t row = idx[i];
        Summary::Top entry;
        entry.name = trace.str(allocs.label[row]);
        if (entry.name.empty()) entry.name = "allocation " + std::to_string(allocs.id[row]);
        entry.bytes = allocs.bytes[row];
        entry.count = 1;
        entry.total = (allocs.t_free[row] == kNoTime ? t_end : allocs.t_free[row]) - allocs.t_alloc[row];
        entry.category = std::string(to_string(allocs.category[row]));
        out.push_back(entry);
    }
    return out;
}
}   // namespace

Summary summarize(const TraceData& t, int top_n) {
    Summary s;
    s.path = t.path;
    s.source = t.meta_or("source", "unknown");
    s.device_name = t.meta_or("device_name", "unknown");
    // A whole number of bytes, else unknown (0): std::stoll read "1e400" as 1 (`mhc check` says which).
    const std::optional<int64_t> memory = parse_integer<int64_t>(t.meta_or("device_memory", "0"));
    s.device_memory = memory && *memory > 0 && *memory <= limits::kMaxBytes ? *memory : 0;
    s.t_begin = t.t_begin();
    s.t_end = t.t_end();
    s.allocations = static_cast<int64_t>(t.allocations.size());
    s.kernels = static_cast<int64_t>(t.kernels.size());
    s.accesses = static_cast<int64_t>(t.accesses.size());
    s.copies = static_cast<int64_t>(t.copies.size());
    s.markers = static_cast<int64_t>(t.markers.size());
    s.has_accesses = s.accesses > 0;
    for (auto& [k, v] : t.meta) s.meta.emplace_back(k, v);

    std::set<int32_t> devs(t.allocations.device.begin(), t.allocations.device.end());
    devs.insert(t.kernels.device.begin(), t.kernels.device.end());
    s.devices.assign(devs.begin(), devs.end());
    // The headline peak is the device `mhc simulate` takes by default (sim's pick_device): the GPU
    // with the largest peak, the host (device -1: pinned buffers) only when no GPU allocates.
    // Taking the host's larger peak (an execution trace's 40 MiB of host tensors beside 768 KiB
    // on GPU 0) gave a figure that simulate at unlimited capacity never prints.
    // Ranked by (a GPU with allocations, bytes); ties: the lowest device number.
    std::pair<bool, int64_t> best{false, -1};
    for (int32_t d : s.devices) {
        LivePeak p = live_peak(t, d);
        const std::pair<bool, int64_t> rank{d >= 0 && p.bytes > 0, p.bytes};
        if (rank > best) {
            best = rank;
            s.peak = p;
            s.peak_device = d;
        }
    }
    std::set<int32_t> alloc_devs(t.allocations.device.begin(), t.allocations.device.end());
    bool any_requested = false;
    for (size_t i = 0; i < t.allocations.size() && !any_requested; ++i) any_requested = t.allocations.requested_at(i) != kNoBytes;
    for (int32_t device : alloc_devs) {
        const LivePeak live = live_peak(t, device);
        Summary::DeviceMemory mem{device, live.bytes, any_requested ? requested_peak(t, device) : -1,
                                reserved_peak(t, device), live.time};
        if (mem.reserved < 0) {
            // A value that is not a whole number is not a figure to print (a hand-edited trace).
            const auto recorded =
                parse_integer<int64_t>(t.meta_or("kineto.reserved_peak.device" + std::to_string(device), ""));
            if (recorded && *recorded > 0) mem.profiler_reserved = *recorded;
            const auto first = parse_integer<int64_t>(
                t.meta_or("kineto.reserved_first.device" + std::to_string(device), ""));
            if (recorded && *recorded > 0 && first && *first >= 0 && *first <= *recorded)
                mem.profiler_reserved_first = *first;
        }
        s.memory.push_back(mem);
    }
    s.timing = t.meta_or("timing", "exact");

    s.kernel_time = top_kernels(t, top_n, s.top_kernels);
    s.top_allocations = largest_allocations(t, top_n, s.t_end);
    for (size_t i = 0; i < t.markers.size(); ++i) {
        if (t.markers.kind[i] == MarkerKind::Step) {
            ++s.steps;
            s.step_durations.push_back(t.markers.t_end[i] - t.markers.t_start[i]);
        } else if (t.markers.kind[i] == MarkerKind::Layer) {
            ++s.layers;
        }
    }
    return s;
}

namespace {
// Names in the lists are cut to keep each line within 100 columns ("..." says so).
std::string fit(const std::string& name, size_t room) {
    return name.size() <= room ? name : name.substr(0, room - 3) + "...";
}
// The summary's text, a line at a time. One line each, whole: what the trace says (a label, the
// device's name, the file's own name) with a control byte shown as '?' (a label with a newline was
// printed over two lines, an escape sent to the terminal), and no length cut (a path past 512
// bytes lost its newline).
struct SummaryText {
    std::string out;
    template <typename... Args>
    void line(const char* fmt, Args... args) {
        const int length = std::snprintf(nullptr, 0, fmt, args...);
        if (length <= 0) return;
        std::string text(static_cast<size_t>(length) + 1, '\0');
        std::snprintf(text.data(), text.size(), fmt, args...);
        text.pop_back();
        const bool ends = text.back() == '\n';
        if (ends) text.pop_back();
        out += printable(std::move(text)) + (ends ? "\n" : "");
    }
};

// A time of the trace as said: an order-only trace's is an event number (event k at k ns).
std::string when(const Summary& summary, int64_t time) {
    return order_only_timing(summary.timing) ? "event #" + std::to_string(time) : format_ns(time - summary.t_begin);
}

// Where the trace came from, its device, and its timing and duration.
void origin_lines(const Summary& summary, SummaryText& text) {
    text.line("trace       %s\n", summary.path.c_str());
    text.line("source      %s\n", summary.source.c_str());
    std::map<std::string, std::string> meta(summary.meta.begin(), summary.meta.end());
    if (std::string versions = capture_versions(meta); !versions.empty())
        text.line("captured    with %s\n", versions.c_str());
    text.line("device      %s%s\n", summary.device_name.c_str(),
           summary.device_memory > 0 ? (" (" + format_bytes(summary.device_memory) + ")").c_str() : "");
    if (order_only_timing(summary.timing)) {
        text.out += "timing      order only: the source has no timestamps, so times are event numbers; time figures "
                 "(durations, loss, stalls, makespan) say nothing, memory figures stand\n";
        text.line("duration    %lld events\n", static_cast<long long>(summary.t_end - summary.t_begin));
        return;
    }
    text.line("duration    %s\n", format_ns(summary.t_end - summary.t_begin).c_str());
    // Times no GPU measured are said to be a model's, beside the first of them: a generated trace
    // (the generator's roofline) and a capture (meta timing "estimated", its timing_model).
    auto model = std::find_if(summary.meta.begin(), summary.meta.end(), [](const auto& kv) { return kv.first == "timing_model"; });
    if (summary.source == "generate")
        text.out += "timing      estimated: the generator's roofline of the GPU, not a measurement\n";
    else if (summary.timing == "estimated")
        text.line("timing      estimated: %s\n",
               model != summary.meta.end() ? model->second.c_str() : "a model of the GPU, not a measurement");
}

// The rows per table, what is missing, the kernels' time, and the peak by category.
void rows_and_peak_lines(const Summary& summary, SummaryText& text) {
    const bool order = order_only_timing(summary.timing);
    text.line("rows        %lld allocations, %lld kernels, %lld accesses, %lld copies, %lld markers\n",
           static_cast<long long>(summary.allocations), static_cast<long long>(summary.kernels), static_cast<long long>(summary.accesses), static_cast<long long>(summary.copies),
           static_cast<long long>(summary.markers));
    if (!summary.has_accesses && summary.allocations > 0)
        text.out += "accesses    none: simulation will use allocation lifetimes only (coarser results)\n";
    if (summary.kernels == 0 && summary.allocations > 0)
        text.out += "kernels     none: a simulation's throughput loss then comes from swap-outs only\n";
    if (!order && summary.kernels > 0)   // none: the `kernels` line above says so
        text.line("kernel time %s (%.1f%% of the duration)\n", format_ns(summary.kernel_time).c_str(),
               summary.t_end > summary.t_begin ? 100.0 * summary.kernel_time / static_cast<double>(summary.t_end - summary.t_begin) : 0.0);
    if (summary.allocations == 0)
        text.out += "peak        none: the trace has no allocations (a timeline only; nothing to simulate)\n";
    else
        text.line("peak        %s live on device %d%s at %s\n", format_bytes(summary.peak.bytes).c_str(), summary.peak_device,
               summary.peak_device < 0 ? " (host)" : "", when(summary, summary.peak.time).c_str());
    for (int c = 0; c < kCategoryCount; ++c)
        if (summary.peak.by_category[static_cast<size_t>(c)] > 0)
            text.line("  %-11s %12s  %5.1f%%\n", std::string(to_string(static_cast<Category>(c))).c_str(),
                   format_bytes(summary.peak.by_category[static_cast<size_t>(c)]).c_str(),
                   100.0 * summary.peak.by_category[static_cast<size_t>(c)] / static_cast<double>(std::max<int64_t>(1, summary.peak.bytes)));
}

// Each device's figures when there are several (the `peak` line is the largest GPU's): blocks,
// requested and reserved peaks.
void device_memory_lines(const Summary& summary, SummaryText& text) {
    for (const auto& memory : summary.memory) {
        const bool several = summary.memory.size() > 1;
        if (several)
            text.line("blocks      %s peak on device %d%s at %s (the allocator's blocks live at once)\n",
                   format_bytes(memory.peak).c_str(), memory.device, memory.device < 0 ? " (host)" : "", when(summary, memory.peak_time).c_str());
        if (memory.requested < 0 && memory.reserved < 0 && memory.profiler_reserved < 0) continue;
        std::string dev = several ? " on device " + std::to_string(memory.device) : "";
        if (memory.requested >= 0)
            text.line("requested   %s peak%s (what the program asked for; `peak` counts the allocator's blocks)\n",
                   format_bytes(memory.requested).c_str(), dev.c_str());
        if (memory.reserved >= 0)
            text.line("reserved    %s peak%s (the allocator's segments)\n", format_bytes(memory.reserved).c_str(), dev.c_str());
        else if (memory.profiler_reserved >= 0)
            text.line("reserved    %s peak%s (the profiler's Total Reserved%s; no segments recorded)\n",
                   format_bytes(memory.profiler_reserved).c_str(), dev.c_str(),
                   memory.profiler_reserved_first == memory.profiler_reserved
                       ? ", all of it at its first memory event: reserved before profiling"
                   : memory.profiler_reserved_first >= 0
                       ? (", " + format_bytes(memory.profiler_reserved_first) + " at its first memory event").c_str()
                       : "");
    }
}

// The steps and layers marked, and where the steps were found.
void step_lines(const Summary& summary, SummaryText& text) {
    if (summary.steps > 0) {
        int64_t tot = std::accumulate(summary.step_durations.begin(), summary.step_durations.end(), int64_t{0});
        if (order_only_timing(summary.timing))   // a step's span is a count of events, not a time
            text.line("steps       %lld (mean %lld events)\n", static_cast<long long>(summary.steps),
                   static_cast<long long>(tot / summary.steps));
        else
            text.line("steps       %lld (mean %s)\n", static_cast<long long>(summary.steps), format_ns(tot / summary.steps).c_str());
        // Where the importer found them, when not from the trace's own step markers (steps_from).
        for (const auto& [k, v] : summary.meta)
            if (k == "steps_from" && v.rfind("ProfilerStep#", 0) != 0) text.line("            from %s\n", v.c_str());
    } else {
        text.out += "steps       none marked\n";
    }
    if (summary.layers > 0) text.line("layers      %lld layer markers\n", static_cast<long long>(summary.layers));
}

// The largest allocations and the kernels by total time.
void top_lines(const Summary& summary, SummaryText& text) {
    if (!summary.top_allocations.empty()) {
        text.out += "largest allocations\n";
        for (const auto& entry : summary.top_allocations)
            text.line("  %12s  %-10s %s\n", format_bytes(entry.bytes).c_str(), entry.category.c_str(), fit(entry.name, 100 - 27).c_str());
    }
    if (!summary.top_kernels.empty()) {
        text.out += "kernels by total time\n";
        for (const auto& entry : summary.top_kernels)
            text.line("  %12s  %8lldx  %s\n", format_ns(entry.total).c_str(), static_cast<long long>(entry.count),
                   fit(entry.name, 100 - 27).c_str());   // 27: the columns before the name
    }
}
}  // namespace

std::string to_text(const Summary& summary) {
    SummaryText text;
    origin_lines(summary, text);
    rows_and_peak_lines(summary, text);
    device_memory_lines(summary, text);
    // Traces without addresses (Kineto before about PyTorch 1.10): say what is exact and what is not.
    for (const auto& [k, v] : summary.meta)
        if (k == "pairing" && v == "size")
            text.out += "frees       paired by size (no addresses recorded): live bytes exact,\n"
                     "            which block a free ended inferred\n";
    step_lines(summary, text);
    top_lines(summary, text);
    return text.out;
}

std::string to_json(const Summary& s) {
    nlohmann::json j;
    j["trace"] = s.path;
    j["source"] = s.source;
    j["device_name"] = s.device_name;
    j["device_memory"] = s.device_memory;
    j["t_begin_ns"] = s.t_begin;
    j["t_end_ns"] = s.t_end;
    j["duration_ns"] = s.t_end - s.t_begin;
    j["counts"] = {{"allocations", s.allocations}, {"kernels", s.kernels}, {"accesses", s.accesses},
                   {"copies", s.copies}, {"markers", s.markers}};
    j["has_accesses"] = s.has_accesses;
    j["kernel_time_ns"] = s.kernel_time;
    if (s.allocations == 0)
        j["peak"] = nullptr;   // no allocations: no peak, and no time at which it happened
    else
        j["peak"] = {{"bytes", s.peak.bytes}, {"time_ns", s.peak.time}, {"device", s.peak_device}};
    j["timing"] = s.timing;
    // Lists are lists even when empty (a timeline-only trace lacked "memory" and "largest_allocations").
    j["memory"] = nlohmann::json::array();
    j["top_kernels"] = nlohmann::json::array();
    j["largest_allocations"] = nlohmann::json::array();
    for (const auto& m : s.memory) {
        nlohmann::json entry{{"device", m.device}, {"peak_bytes", m.peak}, {"peak_time_ns", m.peak_time}};
        entry["requested_peak_bytes"] = m.requested >= 0 ? nlohmann::json(m.requested) : nlohmann::json(nullptr);
        entry["reserved_peak_bytes"] = m.reserved >= 0 ? nlohmann::json(m.reserved) : nlohmann::json(nullptr);
        entry["profiler_reserved_peak_bytes"] =
            m.profiler_reserved >= 0 ? nlohmann::json(m.profiler_reserved) : nlohmann::json(nullptr);
        entry["profiler_reserved_first_bytes"] = m.profiler_reserved_first >= 0
                                                     ? nlohmann::json(m.profiler_reserved_first)
                                                     : nlohmann::json(nullptr);
        j["memory"].push_back(entry);
    }
    for (int c = 0; c < kCategoryCount && s.allocations > 0; ++c)
        j["peak"]["by_category"][std::string(to_string(static_cast<Category>(c)))] =
            s.peak.by_category[static_cast<size_t>(c)];
    j["steps"] = s.steps;
    j["layers"] = s.layers;
    j["step_durations_ns"] = s.step_durations;
    for (const auto& e : s.top_kernels)
        j["top_kernels"].push_back({{"name", e.name}, {"count", e.count}, {"total_ns", e.total}});
    for (const auto& e : s.top_allocations)
        j["largest_allocations"].push_back(
            {{"label", e.name}, {"bytes", e.bytes}, {"category", e.category}, {"lifetime_ns", e.total}});
    for (const auto& [k, v] : s.meta) j["meta"][k] = v;
    return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace mhc::trace
