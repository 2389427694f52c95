// The viewer's loading path: column projections of the trace tables (trace::Reader::scan),
// only the columns the viewer shows (no accesses, no launch geometry), straight into lanes.
#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <numeric>
#include <set>
#include <thread>
#include <unordered_map>

#include "mhc/common/error.hpp"
#include "mhc/common/units.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/viewer/axis.hpp"
#include "mhc/trace/event_order.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/store.hpp"
#include "mhc/viewer/band_colors.hpp"
#include "mhc/viewer/bands.hpp"
#include "mhc/viewer/colors.hpp"
#include "mhc/viewer/data.hpp"
#include "accesses.hpp"

namespace mhc::viewer {

namespace {

// A lane title's device: "GPU2 " (said when the trace has several devices or one other than GPU 0),
// "host " for device -1 (an execution trace's CPU ops read "GPU-1 stream 1"), "" otherwise.
std::string lane_device(int32_t device, bool multi_device) {
    if (device < 0) return "host ";
    return multi_device || device != 0 ? "GPU" + std::to_string(device) + " " : std::string();
}

// A marker's step number, or -1 for a marker of another kind or a step marker without its number.
int32_t marker_step(int64_t kind, int64_t idx) {
    return kind == static_cast<int64_t>(trace::MarkerKind::Step) && idx >= 0 ? static_cast<int32_t>(idx) : -1;
}

// Which steps a trace has: its step markers are the authority when it has any, else the steps
// its kernels carry. The loader (spans) and step_numbers (numbers only) both decide by it.
template <class Step>
std::vector<Step> steps_by_authority(std::vector<Step> from_markers, std::vector<Step> from_kernels) {
    return from_markers.empty() ? std::move(from_kernels) : std::move(from_markers);
}

// (device, stream) -> lane index, with a one-entry cache: consecutive rows share a stream.
class LaneMap {
public:
    size_t get(std::vector<Lane>& lanes, int32_t device, int64_t key, LaneKind kind) {
        if (last_ < lanes.size() && lanes[last_].device == device && lanes[last_].stream == key) return last_;
        auto it = index_.find({device, key});
        if (it != index_.end()) return last_ = it->second;
        Lane l;
        l.kind = kind;
        l.device = device;
        l.stream = key;
        lanes.push_back(std::move(l));
        index_.emplace(std::pair{device, key}, lanes.size() - 1);
        return last_ = lanes.size() - 1;
    }

private:
    struct Hash {
        size_t operator()(const std::pair<int32_t, int64_t>& p) const {
            return std::hash<int64_t>()(p.second * 131 + p.first);
        }
    };
    std::unordered_map<std::pair<int32_t, int64_t>, size_t, Hash> index_;
    size_t last_ = SIZE_MAX;
};

// Overlapping items (nested ranges, concurrent copies) on rows of their own.
std::vector<Lane> split_all(const std::vector<Lane>& lanes) {
    std::vector<Lane> out;
    for (const Lane& l : lanes)
        for (Lane& r : split_rows(l, kMaxRows)) out.push_back(std::move(r));
    return out;
}

void sort_lanes(std::vector<Lane>& lanes) {
    std::sort(lanes.begin(), lanes.end(), [](const Lane& a, const Lane& b) {
        return a.device != b.device ? a.device < b.device : a.stream < b.stream;
    });
    for (Lane& l : lanes) l.finish();
}

// Loads the tables; kernels and allocations on two threads, each with its own connection.
struct Loader {
    ViewTrace& t;
    const LoadOptions& opt;
    int64_t total = 1;
    std::atomic<int64_t> done{0};
    bool multi_device = false;   // kernels on more than one device: lane titles name the GPU
    int64_t alloc_lo = INT64_MAX, alloc_hi = INT64_MIN;   // first and last allocation event
    std::vector<int64_t> kernel_ids{};                      // in id order, for grouping the accesses (accesses.hpp)
    void tick(int64_t rows) {
        int64_t d = done += rows;
        if (opt.progress) opt.progress(std::min(1.0, static_cast<double>(d) / static_cast<double>(total)), opt.user);
    }

    void kernels(const trace::Reader& reader) {
        trace::Scan s = reader.scan(trace::TraceTable::Kernels,
                                       {"id", "device", "stream", "name", "t_start", "t_end", "step"});
        LaneMap map;
        std::vector<KernelNameStat> stats(t.strings.size());
        std::unordered_map<int32_t, StepSpan> steps;
        StepSpan* last_step = nullptr;
        int64_t n = 0;
        int32_t first_device = 0;
        while (s.next()) {
            int32_t dev = static_cast<int32_t>(s[1]);
            int64_t name = s[3], a = s[4], b = s[5];
            int32_t step = static_cast<int32_t>(s[6]);
            if (n > 0 && dev != first_device) multi_device = true;
            if (n == 0) first_device = dev;
            Lane& lane = t.kernel_lanes[map.get(t.kernel_lanes, dev, s[2], LaneKind::Kernels)];
            lane.push(a, b, static_cast<int32_t>(name), s[0]);
            kernel_ids.push_back(s[0]);
            if (name >= 0 && static_cast<size_t>(name) < stats.size()) {
                KernelNameStat& k = stats[static_cast<size_t>(name)];
                ++k.count;
                k.total_ns += b - a;
                k.max_ns = std::max(k.max_ns, b - a);
            }
            if (step >= 0) {
                if (!last_step || last_step->step != step) {
                    auto [it, fresh] = steps.try_emplace(step, StepSpan{step, a, b});
                    last_step = &it->second;
                }
                last_step->t0 = std::min(last_step->t0, a);
                last_step->t1 = std::max(last_step->t1, b);
            }
            if (++n % 262144 == 0) tick(262144);
        }
        tick(n % 262144);
        t.kernel_count = n;
        for (size_t i = 0; i < stats.size(); ++i)
            if (stats[i].count > 0) { stats[i].name = static_cast<int32_t>(i); t.kernel_stats.push_back(stats[i]); }
        for (auto& [k, v] : steps) t.steps.push_back(v);
        sort_lanes(t.kernel_lanes);
        for (Lane& l : t.kernel_lanes)
            l.title = lane_device(l.device, multi_device) + "stream " + std::to_string(l.stream);
        // Families and colours of the kernel names, once per name.
        t.family_of_name.assign(t.strings.size(), static_cast<uint8_t>(KernelFamily::Other));
        t.color_of_name.assign(t.strings.size(), 0);
        t.family_ns.assign(kFamilyCount, 0);
        for (const KernelNameStat& k : t.kernel_stats) {
            auto i = static_cast<size_t>(k.name);
            KernelFamily f = opt.families.classify(t.strings[i]);
            t.family_of_name[i] = static_cast<uint8_t>(f);
            t.color_of_name[i] = kernel_color(t.strings[i], f);
            t.family_ns[static_cast<size_t>(f)] += k.total_ns;
        }
        for (Lane& l : t.kernel_lanes)
            l.classify(t.family_of_name, static_cast<uint8_t>(KernelFamily::Other), kFamilyCount);
    }

    void allocations(const trace::Reader& reader) {
        trace::Scan s = reader.scan(trace::TraceTable::Allocations,
                                       {"id", "device", "bytes", "t_alloc", "t_free", "category", "label"});
        AllocationTable& a = t.allocations;
        while (s.next()) {
            a.id.push_back(s[0]);
            a.device.push_back(static_cast<int32_t>(s[1]));
            a.bytes.push_back(s[2]);
            a.t_alloc.push_back(s[3]);
            a.t_free.push_back(s.is_null(4) ? trace::kNoTime : s[4]);
            alloc_lo = std::min(alloc_lo, a.t_alloc.back());
            alloc_hi = std::max(alloc_hi, a.t_free.back() == trace::kNoTime ? a.t_alloc.back() : a.t_free.back());
            int64_t c = s[5];
            a.category.push_back((c >= 0 && c < trace::kCategoryCount) ? static_cast<trace::Category>(c)
                                                                       : trace::Category::Other);
            a.label.push_back(s[6]);
            if (a.id.size() % 262144 == 0) tick(262144);
        }
        tick(static_cast<int64_t>(a.id.size() % 262144));
    }

    void copies() {
        trace::Scan s = t.reader->scan(trace::TraceTable::Copies, {"id", "device", "kind", "t_start", "t_end"});
        LaneMap map;
        while (s.next()) {
            int64_t kind = s[2];
            Lane& l = t.copy_lanes[map.get(t.copy_lanes, static_cast<int32_t>(s[1]), kind, LaneKind::Copies)];
            l.push(s[3], s[4], static_cast<int32_t>(kind), s[0]);
            ++t.copy_count;
        }
        tick(t.copy_count);
        sort_lanes(t.copy_lanes);
        for (Lane& l : t.copy_lanes) {
            auto k = (l.stream >= 0 && l.stream < trace::kCopyKindCount) ? static_cast<trace::CopyKind>(l.stream)
                                                                         : trace::CopyKind::D2D;
            l.title = lane_device(l.device, multi_device) + "copies " + std::string(trace::to_string(k));
        }
        t.copy_lanes = split_all(t.copy_lanes);
    }

    void markers() {
        trace::Scan s =
            t.reader->scan(trace::TraceTable::Markers, {"id", "name", "t_start", "t_end", "kind", "idx"});
        LaneMap map;
        std::vector<StepSpan> marker_steps;
        while (s.next()) {
            int64_t kind = s[4];
            Lane& l = t.marker_lanes[map.get(t.marker_lanes, 0, kind, LaneKind::Markers)];
            l.push(s[2], s[3], static_cast<int32_t>(s[1]), s[0]);
            if (const int32_t step = marker_step(kind, s[5]); step >= 0) marker_steps.push_back({step, s[2], s[3]});
            ++t.marker_count;
        }
        tick(t.marker_count);
        sort_lanes(t.marker_lanes);
        for (Lane& l : t.marker_lanes) {
            auto k = (l.stream >= 0 && l.stream <= 2) ? static_cast<trace::MarkerKind>(l.stream)
                                                      : trace::MarkerKind::Range;
            l.title = std::string(trace::to_string(k)) + " markers";
        }
        t.marker_lanes = split_all(t.marker_lanes);
        t.steps = steps_by_authority(std::move(marker_steps), std::move(t.steps));
        std::sort(t.steps.begin(), t.steps.end(), [](const StepSpan& a, const StepSpan& b) { return a.step < b.step; });
    }

    void bounds() {
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        auto lanes = [&](const std::vector<Lane>& ls) {
            for (const Lane& l : ls) {
                if (l.empty()) continue;
                lo = std::min(lo, l.t_start.front());
                hi = std::max(hi, l.end_max(l.size() - 1));
            }
        };
        lanes(t.kernel_lanes);
        lanes(t.copy_lanes);
        lanes(t.marker_lanes);
        lo = std::min(lo, alloc_lo);
        hi = std::max(hi, alloc_hi);
        if (lo > hi) { lo = 0; hi = 1; }
        t.t_begin = lo;
        t.t_end = std::max(hi, lo + 1);
    }
};

}  // namespace

void check_memory_device(const std::string& path, int32_t wanted, const std::vector<int32_t>& have) {
    if (wanted == kAutoMemoryDevice || std::find(have.begin(), have.end(), wanted) != have.end()) return;
    std::string names;
    for (const int32_t device : have) names += (names.empty() ? "" : ", ") + device_name(device);
    throw Error(path + ": no allocations on " + device_name(wanted) +
                    (names.empty() ? " (the trace has no allocations)" : " (allocations on: " + names + ")"),
                Error::Kind::BadInput);
}

std::vector<int32_t> step_numbers(const trace::Reader& reader) {
    std::set<int32_t> markers, kernels;
    trace::Scan marker = reader.scan(trace::TraceTable::Markers, {"kind", "idx"});
    while (marker.next())
        if (const int32_t step = marker_step(marker[0], marker[1]); step >= 0) markers.insert(step);
    if (markers.empty()) {   // the kernels' column is read only when the markers name no step
        trace::Scan kernel = reader.scan(trace::TraceTable::Kernels, {"step"});
        while (kernel.next())
            if (kernel[0] >= 0) kernels.insert(static_cast<int32_t>(kernel[0]));
    }
    return steps_by_authority(std::vector<int32_t>(markers.begin(), markers.end()),
                              std::vector<int32_t>(kernels.begin(), kernels.end()));
}

std::vector<int32_t> allocation_devices(const trace::Reader& reader) {
    std::set<int32_t> devices;
    trace::Scan scan = reader.scan(trace::TraceTable::Allocations, {"device"});
    while (scan.next()) devices.insert(static_cast<int32_t>(scan[0]));
    return {devices.begin(), devices.end()};
}

namespace {

// Each device's allocations and live peak (memory_devices); the device the memory views show
// (options.device, else the GPU with the largest peak, the host only when no GPU has any); the
// allocation table cut to that device's rows. Returns, when rows were dropped, each old row's new
// index (-1: dropped), for the cache's dense allocation indices; empty when all were kept.
std::vector<int32_t> keep_one_device(ViewTrace& view, int32_t wanted) {
    AllocationTable& table = view.allocations;
    std::map<int32_t, std::vector<uint32_t>> rows;
    for (size_t row = 0; row < table.size(); ++row) rows[table.device[row]].push_back(static_cast<uint32_t>(row));
    view.memory_devices.clear();
    for (const auto& [device, index] : rows) {
        int64_t peak = 0;   // one device: its curve's peak, filled once the curve is made
        if (rows.size() > 1) {
            std::vector<int64_t> t_alloc(index.size()), t_free(index.size()), bytes(index.size());
            for (size_t k = 0; k < index.size(); ++k) {
                t_alloc[k] = table.t_alloc[index[k]];
                t_free[k] = table.t_free[index[k]];
                bytes[k] = table.bytes[index[k]];
            }
            peak = static_cast<int64_t>(Curve::from_events(trace::memory_events(t_alloc, t_free), bytes).peak());
        }
        view.memory_devices.push_back({device, static_cast<int64_t>(index.size()), peak});
    }
    if (wanted != kAutoMemoryDevice) {
        std::vector<int32_t> have;
        have.reserve(rows.size());
        for (const auto& [device, index] : rows) have.push_back(device);
        check_memory_device(view.path, wanted, have);
        view.memory_device = wanted;
    } else {
        view.memory_device = rows.empty() ? 0 : rows.begin()->first;   // the host when it is the only one
        int64_t best = -1;
        for (const DeviceMemory& dev : view.memory_devices)
            if (dev.device >= 0 && dev.peak_bytes > best) {
                best = dev.peak_bytes;
                view.memory_device = dev.device;
            }
    }
    if (rows.size() <= 1) return {};
    const std::vector<uint32_t>& keep = rows[view.memory_device];
    std::vector<int32_t> remap(table.size(), -1);
    AllocationTable kept;
    for (uint32_t row : keep) {
        remap[row] = static_cast<int32_t>(kept.id.size());
        kept.id.push_back(table.id[row]);
        kept.device.push_back(table.device[row]);
        kept.bytes.push_back(table.bytes[row]);
        kept.t_alloc.push_back(table.t_alloc[row]);
        kept.t_free.push_back(table.t_free[row]);
        kept.category.push_back(table.category[row]);
        kept.label.push_back(table.label[row]);
    }
    table = std::move(kept);
    return remap;
}

}  // namespace

std::string device_name(int32_t device) { return device < 0 ? std::string("host") : "GPU " + std::to_string(device); }

std::string memory_device_text(const ViewTrace& view) {
    std::string out = device_name(view.memory_device), others;
    for (const DeviceMemory& dev : view.memory_devices)
        if (dev.device != view.memory_device)
            others += (others.empty() ? "" : ", ") + device_name(dev.device) + " (peak " +
                      format_bytes(dev.peak_bytes) + ")";
    if (others.empty()) return view.memory_device == 0 ? std::string() : out;
    return out + "; not shown: " + others;
}

ViewTrace load_view_trace(const std::string& path, const LoadOptions& options) {
    ViewTrace t;
    t.path = path;
    t.runs_db = options.runs_db;
    t.reader = std::make_shared<trace::Reader>(path);   // validates: throws mhc::Error naming the file
    // A runs database of another trace (or no runs database) is refused before any loading.
    if (!t.runs_db.empty()) trace::list_runs(path, t.runs_db);
    t.reader->map_up_to(int64_t{16} << 30);
    t.meta = t.reader->meta();
    t.strings = t.reader->strings();
    trace::TableCounts n = t.reader->counts();
    t.access_count = n.accesses;
    Loader l{t, options};
    // Accesses by allocation: the file's index answers them where it has one, else they are read
    // here, on a third thread with its own connection (docs/viewer.md, "Loading").
    const bool read_accesses = !t.reader->accesses_indexed_by_allocation();
    l.total = std::max<int64_t>(1, n.kernels + n.allocations + n.copies + n.markers + (read_accesses ? n.accesses : 0));
    detail::AccessRows access_rows;
    {
        std::exception_ptr failed[2];
        auto on_thread = [&](std::exception_ptr& failure, auto&& fn) {
            return std::thread([&failure, fn] {
                try {
                    fn();
                } catch (...) { failure = std::current_exception(); }
            });
        };
        // Each connection opens the file by its name: one opened after the file was replaced (a
        // `generate --force` meanwhile) reads another trace, said rather than mixed in. A WAL trace
        // read without a lock is checked once read (Reader::require_unchanged), as load_trace does.
        auto same_trace = [&](const trace::Reader& other) {
            if (other.meta() != t.meta)
                throw Error(path + ": changed while it was read (another file took its name: the viewer read "
                                   "parts of two traces); open it again");
        };
        std::thread kt = on_thread(failed[0], [&] {
            trace::Reader second(path);   // the kernels' own connection
            same_trace(second);
            second.map_up_to(int64_t{16} << 30);
            l.kernels(second);
            second.require_unchanged();
        });
        std::thread at = on_thread(failed[1], [&] {
            if (!read_accesses) return;
            trace::Reader third(path);   // the accesses' own connection
            same_trace(third);
            third.map_up_to(int64_t{16} << 30);
            access_rows = detail::read_access_rows(third, third.fingerprint(n), n,
                                                   [&](int64_t rows) { l.tick(rows); });
            third.require_unchanged();
        });
        try {
            l.allocations(*t.reader);
        } catch (...) {
            kt.join();
            at.join();
            throw;
        }
        kt.join();
        at.join();
        for (const std::exception_ptr& failure : failed)
            if (failure) std::rethrow_exception(failure);
    }
    const std::vector<int32_t> remap = keep_one_device(t, options.device);
    if (access_rows.from_cache && !remap.empty())
        for (int32_t& row : access_rows.allocation) row = row >= 0 ? remap[static_cast<size_t>(row)] : -1;
    if (read_accesses) t.access_index = detail::group_by_allocation(std::move(access_rows), l.kernel_ids, t);
    std::vector<int64_t>().swap(l.kernel_ids);
    l.copies();
    l.markers();
    l.bounds();
    // Where the importer found the steps when not in the profiler's own step markers (meta
    // steps_from: the optimizer's step ranges of a trace profiled without schedule()).
    if (auto from = t.meta.find("steps_from");
        !t.steps.empty() && from != t.meta.end() && from->second.rfind("ProfilerStep#", 0) != 0)
        t.steps_from = from->second;
    finish_allocations(t.allocations, t.t_begin, t.t_end);
    // The live bytes and the memory view's colour keys from one ordering of the events.
    const std::vector<trace::MemoryEvent> ev = trace::memory_events(t.allocations.t_alloc, t.allocations.t_free);
    t.live = Curve::from_events(ev, t.allocations.bytes);
    if (t.memory_devices.size() == 1) t.memory_devices[0].peak_bytes = static_cast<int64_t>(t.live.peak());
    t.keys = std::make_shared<const BandKeys>(band_keys(t, choose_band_coloring(t), ev));
    t.reader->require_unchanged();
    // The file's pages were read once: unmap them (on-demand queries read through the cache).
    t.reader->map_up_to(0);
    return t;
}

namespace {

// sorted_alloc, by_alloc, by_alloc_free and the levels of free-time maxima (data.hpp).
void index_by_alloc_time(AllocationTable& a) {
    const size_t n = a.size();
    std::vector<std::pair<int64_t, uint32_t>> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = {a.t_alloc[i], static_cast<uint32_t>(i)};
    if (!std::is_sorted(order.begin(), order.end())) std::sort(order.begin(), order.end());
    a.sorted_alloc.resize(n);
    a.by_alloc.resize(n);
    a.by_alloc_free.resize(n);
    for (size_t j = 0; j < n; ++j) {
        a.sorted_alloc[j] = order[j].first;
        a.by_alloc[j] = order[j].second;
        a.by_alloc_free[j] = a.t_free[order[j].second];
    }
    a.free_max.clear();
    const std::vector<int64_t>* below = &a.by_alloc_free;
    while (below->size() > 1) {
        std::vector<int64_t> level((below->size() + AllocationTable::kFreeMaxFan - 1) / AllocationTable::kFreeMaxFan);
        for (size_t b = 0; b < level.size(); ++b) {
            size_t lo = b * AllocationTable::kFreeMaxFan, hi = std::min(below->size(), lo + AllocationTable::kFreeMaxFan);
            level[b] = *std::max_element(below->begin() + static_cast<std::ptrdiff_t>(lo), below->begin() + static_cast<std::ptrdiff_t>(hi));
        }
        a.free_max.push_back(std::move(level));
        below = &a.free_max.back();
    }
}

}  // namespace

void finish_allocations(AllocationTable& a, int64_t t_begin, int64_t t_end) {
    // The size order on a second thread while this one sorts the times.
    std::thread sizes([&] {
        a.by_size.resize(a.size());
        std::iota(a.by_size.begin(), a.by_size.end(), 0u);
        std::stable_sort(a.by_size.begin(), a.by_size.end(), [&](uint32_t p, uint32_t q) { return a.bytes[p] > a.bytes[q]; });
    });
    index_by_alloc_time(a);
    a.sorted_free = a.t_free;
    std::sort(a.sorted_free.begin(), a.sorted_free.end());
    sizes.join();
    a.by_size_alloc.resize(a.size());
    a.by_size_free.resize(a.size());
    a.size_rank.resize(a.size());
    for (size_t r = 0; r < a.size(); ++r) {
        a.by_size_alloc[r] = a.t_alloc[a.by_size[r]];
        a.by_size_free[r] = a.t_free[a.by_size[r]];
        a.size_rank[a.by_size[r]] = static_cast<uint32_t>(r);
    }
    a.group.resize(a.size());
    for (size_t i = 0; i < a.size(); ++i)
        a.group[i] = static_cast<uint8_t>(stack_group(a.category[i], a.t_alloc[i], a.t_free[i], t_begin, t_end));
}

int64_t AllocationTable::index_of(int64_t allocation_id) const {
    auto it = std::lower_bound(id.begin(), id.end(), allocation_id);
    return it != id.end() && *it == allocation_id ? it - id.begin() : -1;
}

bool ViewTrace::order_only() const {
    auto timing = meta.find("timing");
    return timing != meta.end() && trace::order_only_timing(timing->second);
}

TimeText ViewTrace::time_text() const {
    TimeText text;
    text.events = order_only();
    auto source = meta.find("source");
    if (text.events && source != meta.end() && source->second.rfind("pytorch-execution-trace", 0) == 0)
        text.noun = "op";
    return text;
}

KernelFamily ViewTrace::family_of(int64_t name_id) const {
    auto i = static_cast<size_t>(name_id);
    return name_id >= 0 && i < family_of_name.size() ? static_cast<KernelFamily>(family_of_name[i]) : KernelFamily::Other;
}

uint32_t ViewTrace::color_of(int64_t name_id) const {
    auto i = static_cast<size_t>(name_id);
    return name_id >= 0 && i < color_of_name.size() && color_of_name[i] ? color_of_name[i]
                                                                        : family_color(KernelFamily::Other);
}

std::string with_import_hint(const std::string& message, const std::string& path) {
    if (message.find(": not an mhc trace") == std::string::npos) return message;
    return message +
           "; a profiler's file (Kineto JSON, Nsight Systems SQLite export, PyTorch memory snapshot, "
           "execution trace) is viewed after `mhc import " +
           path + " -o TRACE.db`";
}

}  // namespace mhc::viewer
