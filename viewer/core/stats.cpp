#include "mhc/viewer/stats.hpp"

#include "mhc/common/error.hpp"
#include "mhc/trace/store.hpp"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <string>

namespace mhc::viewer {

bool contains_ci(std::string_view hay, std::string_view needle) {
    if (needle.empty()) return true;
    auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(), [](char a, char b) {
        return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
    });
    return it != hay.end();
}

std::vector<uint32_t> kernel_table(const ViewTrace& t, std::string_view filter, KernelSort by, bool ascending) {
    std::vector<uint32_t> out;
    for (uint32_t i = 0; i < t.kernel_stats.size(); ++i)
        if (contains_ci(t.str(t.kernel_stats[i].name), filter)) out.push_back(i);
    auto key = [&](uint32_t i) -> double {
        const KernelNameStat& k = t.kernel_stats[i];
        switch (by) {
            case KernelSort::Count: return static_cast<double>(k.count);
            case KernelSort::Total: return static_cast<double>(k.total_ns);
            case KernelSort::Mean: return static_cast<double>(k.total_ns) / static_cast<double>(std::max<int64_t>(k.count, 1));
            case KernelSort::Max: return static_cast<double>(k.max_ns);
            default: return 0;
        }
    };
    std::stable_sort(out.begin(), out.end(), [&](uint32_t a, uint32_t b) {
        bool less = by == KernelSort::Name ? t.str(t.kernel_stats[a].name) < t.str(t.kernel_stats[b].name)
                                           : key(a) < key(b);
        bool greater = by == KernelSort::Name ? t.str(t.kernel_stats[b].name) < t.str(t.kernel_stats[a].name)
                                              : key(b) < key(a);
        return ascending ? less : greater;
    });
    return out;
}

std::vector<uint32_t> allocation_table(const ViewTrace& t, std::string_view filter, AllocSort by,
                                       bool ascending, size_t limit) {
    const AllocationTable& a = t.allocations;
    std::vector<uint32_t> out;
    // by_size is already sorted by bytes: walk it in the wanted direction, filter, stop early.
    if (by == AllocSort::Bytes) {
        for (size_t r = 0; r < a.size() && out.size() < limit; ++r) {
            uint32_t i = a.by_size[ascending ? a.size() - 1 - r : r];
            if (contains_ci(t.str(a.label[i]), filter)) out.push_back(i);
        }
        return out;
    }
    for (uint32_t i = 0; i < a.size(); ++i)
        if (contains_ci(t.str(a.label[i]), filter)) out.push_back(i);
    auto cmp = [&](uint32_t p, uint32_t q) {
        switch (by) {
            case AllocSort::Label: return t.str(a.label[p]) < t.str(a.label[q]);
            case AllocSort::Category: return a.category[p] < a.category[q];
            case AllocSort::Lifetime: return a.end_or(p, t.t_end) - a.t_alloc[p] < a.end_or(q, t.t_end) - a.t_alloc[q];
            default: return a.t_alloc[p] < a.t_alloc[q];
        }
    };
    size_t k = std::min(limit, out.size());
    if (ascending) std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(k), out.end(), cmp);
    else std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(k), out.end(),
                           [&](uint32_t p, uint32_t q) { return cmp(q, p); });
    out.resize(k);
    return out;
}

std::string header_counts(const ViewTrace& view, size_t runs, bool ops, const std::string& on) {
    auto count = [](int64_t number, const char* one, const char* many) {
        return std::to_string(number) + " " + (number == 1 ? one : many);
    };
    return count(view.kernel_count, ops ? "op" : "kernel", ops ? "ops" : "kernels") + ", " +
           count(static_cast<int64_t>(view.allocations.size()), "allocation", "allocations") + on + ", " +
           count(view.copy_count, "copy", "copies") + ", " + count(static_cast<int64_t>(runs), "run", "runs");
}

std::vector<uint32_t> live_at(const AllocationTable& allocations, int64_t at) {
    std::vector<uint32_t> out;
    if (allocations.size() == 0) return out;
    allocations.list_overlapping(at, at + 1, out);   // t_alloc < at + 1 and t_free > at
    const auto& bytes = allocations.bytes;
    const auto& id = allocations.id;
    std::sort(out.begin(), out.end(), [&](uint32_t first, uint32_t second) {
        return bytes[first] != bytes[second] ? bytes[first] > bytes[second] : id[first] < id[second];
    });
    return out;
}

PeakLive live_at_peak(const ViewTrace& view) {
    PeakLive out;
    if (view.live.empty() || view.allocations.size() == 0) return out;
    out.time = view.live.peak_time();
    out.bytes = view.live.peak();
    out.rows = live_at(view.allocations, out.time);
    return out;
}

const char* to_string(Residence where) {
    switch (where) {
        case Residence::Device: return "device";
        case Residence::Host: return "host";
        case Residence::Dropped: return "dropped";
    }
    return "device";
}

namespace {

// When an event changes where its allocation is, and to where (nullopt: it does not: a stall, a
// prefetch decision, an OOM).
std::optional<std::pair<int64_t, Residence>> residence_change(const trace::RunEvent& event) {
    switch (event.kind) {
        case trace::EventKind::SwapOut: return std::make_pair(event.t_end, Residence::Host);
        case trace::EventKind::EvictClean: return std::make_pair(event.t_start, Residence::Host);
        case trace::EventKind::Drop: return std::make_pair(event.t_start, Residence::Dropped);
        case trace::EventKind::SwapIn:
        case trace::EventKind::Recompute: return std::make_pair(event.t_start, Residence::Device);
        default: return std::nullopt;
    }
}

}   // namespace

RunPeakLive live_at_run_peak(const ViewTrace& view, const ViewRun& run) {
    if (run.memory.empty() || view.allocations.size() == 0) return {};
    RunPeakLive out = live_at_run_time(view, run, run.memory.peak_time());
    out.bytes = run.memory.peak();
    return out;
}

RunOom live_at_run_oom(const ViewTrace& view, const ViewRun& run) {
    RunOom oom;
    if (run.info.status != trace::RunStatus::Oom) return oom;
    oom.found = true;
    for (const trace::RunEvent& event : run.events)
        if (event.kind == trace::EventKind::Oom) {
            oom.time = event.t_start;
            oom.allocation = event.allocation;
            oom.kernel = event.kernel;
        }
    if (auto at = run.metrics.find("oom_time_ns"); at != run.metrics.end()) oom.time = static_cast<int64_t>(at->second);
    // Alive by the recording's order at the point the run stopped: just before the kernel that
    // needed the room, else at the allocation that could not be made. The run's clock maps an
    // allocation made for that kernel (its output) past the OOM, by the kernel before's shift.
    const AllocationTable& allocs = view.allocations;
    int64_t recorded_at = -1;
    if (oom.kernel != 0)
        for (const Lane& lane : view.kernel_lanes)
            for (size_t i = 0; i < lane.size(); ++i)
                if (lane.ref[i] == oom.kernel) recorded_at = lane.t_start[i];
    const int64_t needed_index = allocs.index_of(oom.allocation);
    if (recorded_at < 0 && needed_index >= 0) recorded_at = allocs.t_alloc[static_cast<size_t>(needed_index)];
    // What the recording makes at that instant after the allocation that could not be placed, the
    // run never made (FlexGen's snapshot: 460 blocks alive from its start; the run stopped at the
    // 173rd, and the 287 after it read as on the device, 18.9 MiB where mhc simulate said 0 B in use).
    oom.live = live_at_run_time(view, run, oom.time, recorded_at, oom.allocation);
    oom.recorded_at = recorded_at;
    std::unordered_set<int64_t> operands;
    if (oom.kernel != 0 && view.reader)
        for (const trace::Access& access : view.reader->accesses_of_kernel(oom.kernel))
            operands.insert(access.allocation);
    auto& rows = oom.live.rows;
    oom.operand.assign(rows.size(), false);
    for (size_t i = 0; i < rows.size(); ++i) {
        const size_t row = rows[i].row;
        oom.operand[i] = operands.count(allocs.id[row]) > 0;
        if (allocs.id[row] == oom.allocation) {
            // The one it could not place: never on the device without an event before (made then),
            // else where its last event left it (swapped out and needed back).
            oom.needed = static_cast<int64_t>(i);
            for (const trace::RunEvent& event : run.events)
                oom.needed_placed |= event.allocation == oom.allocation && event.kind != trace::EventKind::Oom &&
                                     event.t_start <= oom.time;
            if (!oom.needed_placed && rows[i].where == Residence::Device) {
                oom.live.on_device -= allocs.bytes[row];
                --oom.live.device_rows;
            }
            continue;
        }
        if (oom.operand[i] && rows[i].where == Residence::Device) oom.operand_bytes += allocs.bytes[row];
    }
    return oom;
}

std::string live_group_name(const std::string& label) {
    // "L" digits "." then a name.
    size_t digits = 1;
    while (digits < label.size() && std::isdigit(static_cast<unsigned char>(label[digits]))) ++digits;
    if (label.size() > digits + 1 && label[0] == 'L' && digits > 1 && label[digits] == '.')
        return "L*" + label.substr(digits);
    return label;
}

std::vector<LiveGroup> group_live_by_label(const ViewTrace& view, const RunPeakLive& live, const RunOom* oom) {
    const AllocationTable& allocs = view.allocations;
    std::unordered_map<int64_t, size_t> group_of_label;      // label -> index in out
    std::unordered_map<std::string, size_t> group_of_name;   // group name -> index in out
    std::vector<LiveGroup> out;
    for (size_t i = 0; i < live.rows.size(); ++i) {
        const RunPeakRow& each = live.rows[i];
        const int64_t label = allocs.label[each.row] < 0 ? -1 : allocs.label[each.row];
        auto it = group_of_label.find(label);
        if (it == group_of_label.end()) {
            std::string name = live_group_name(view.str(label));
            auto [named, fresh] = group_of_name.try_emplace(name, out.size());
            if (fresh) {
                out.emplace_back();
                out.back().label = label;
                out.back().name = std::move(name);
            }
            it = group_of_label.emplace(label, named->second).first;
        }
        LiveGroup& group = out[it->second];
        const int64_t bytes = allocs.bytes[each.row];
        ++group.count;
        group.bytes += bytes;
        group.largest = std::max(group.largest, bytes);
        group.rows.push_back(i);
        if (oom && oom->needed == static_cast<int64_t>(i)) {
            group.needed = true;
            group.needed_bytes += bytes;
            // Swapped out and needed back: it is on the host (its bytes count there); else not placed.
            if (oom->needed_placed && each.where == Residence::Host) group.on_host += bytes;
            continue;
        }
        switch (each.where) {
            case Residence::Device:
                group.on_device += bytes;
                ++group.device_count;
                if (oom && i < oom->operand.size() && oom->operand[i]) {
                    group.operand_bytes += bytes;
                    ++group.operands;
                }
                break;
            case Residence::Host: group.on_host += bytes; break;
            case Residence::Dropped: group.dropped += bytes; break;
        }
    }
    for (LiveGroup& group : out)
        std::stable_sort(group.rows.begin(), group.rows.end(), [&](size_t one, size_t other) {
            return allocs.bytes[live.rows[one].row] > allocs.bytes[live.rows[other].row];
        });
    std::sort(out.begin(), out.end(), [&](const LiveGroup& one, const LiveGroup& other) {
        if (one.on_device != other.on_device) return one.on_device > other.on_device;
        if (one.needed != other.needed) return one.needed;   // what it could not place, next
        if (one.bytes != other.bytes) return one.bytes > other.bytes;
        return one.name < other.name;
    });
    return out;
}

RunPeakLive live_at_run_time(const ViewTrace& view, const ViewRun& run, int64_t at, int64_t recorded_at,
                             int64_t last_made) {
    RunPeakLive out;
    if (view.allocations.size() == 0) return out;
    out.has_peak = !run.memory.empty();
    out.time = at;
    out.bytes = run.memory.empty() ? 0.0 : run.memory.value_at(at);
    out.host_bytes = run.host.empty() ? 0.0 : run.host.value_at(out.time);
    for (const char* moved : {"swap_outs", "clean_evictions", "drops"})
        if (auto it = run.metrics.find(moved); it != run.metrics.end()) out.moves += static_cast<int64_t>(it->second);
    out.placement_known = !run.events.empty() || out.moves == 0;
    // The kernel the run started last by its peak, and its recorded start.
    int64_t best_start = INT64_MIN, best_kernel = 0;
    size_t best_lane = 0;
    for (size_t lane = 0; lane < run.kernel_lanes.size(); ++lane) {
        const Lane& ran = run.kernel_lanes[lane];
        const auto it = std::upper_bound(ran.t_start.begin(), ran.t_start.end(), out.time);
        if (it == ran.t_start.begin()) continue;
        const auto item = static_cast<size_t>(it - ran.t_start.begin()) - 1;
        if (ran.t_start[item] > best_start) {
            best_start = ran.t_start[item];
            best_kernel = ran.ref[item];
            best_lane = lane;
        }
    }
    if (best_start != INT64_MIN && best_lane < view.kernel_lanes.size()) {
        const Lane& recorded = view.kernel_lanes[best_lane];
        for (size_t item = 0; item < recorded.size(); ++item)
            if (recorded.ref[item] == best_kernel) out.recorded_time = recorded.t_start[item];
    }
    const AllocationTable& allocs = view.allocations;
    auto on_run = [&](int64_t recorded) {
        return recorded == trace::kNoTime || run.clock.empty() ? recorded : run.clock.map(recorded);
    };
    // The run's events by allocation, in time order (events are stored in the order they happened).
    std::unordered_map<int64_t, std::vector<size_t>> events_of;
    for (size_t i = 0; i < run.events.size(); ++i)
        if (run.events[i].allocation != 0) events_of[run.events[i].allocation].push_back(i);
    for (size_t i = 0; i < allocs.size(); ++i) {
        const int64_t t_alloc = on_run(allocs.t_alloc[i]), t_free = on_run(allocs.t_free[i]);
        if (recorded_at >= 0 ? allocs.t_alloc[i] > recorded_at || allocs.t_free[i] <= recorded_at
                             : t_alloc > out.time || t_free <= out.time)
            continue;
        // Made at that instant after `last_made` (the allocations of one time come by id: every
        // reader's order, trace/event_order.hpp): the run had not reached them.
        if (recorded_at >= 0 && last_made != 0 && allocs.t_alloc[i] == recorded_at && allocs.id[i] > last_made)
            continue;
        RunPeakRow row;
        row.row = static_cast<uint32_t>(i);
        row.t_alloc = t_alloc;
        row.t_free = t_free;
        int64_t changed_at = INT64_MIN;
        if (auto it = events_of.find(allocs.id[i]); it != events_of.end()) {
            std::stable_sort(it->second.begin(), it->second.end(), [&](size_t first, size_t second) {
                return run.events[first].t_start < run.events[second].t_start;
            });
            for (size_t event_index : it->second) {
                const trace::RunEvent& event = run.events[event_index];
                const auto change = residence_change(event);
                const int64_t at = change ? change->first : event.t_start;
                if (at <= out.time) {
                    row.before = static_cast<int64_t>(event_index);
                    if (change && at >= changed_at) {
                        changed_at = at;
                        row.where = change->second;
                    }
                } else if (row.after < 0) {
                    row.after = static_cast<int64_t>(event_index);
                }
            }
        }
        const int64_t bytes = allocs.bytes[i];
        switch (row.where) {
            case Residence::Device:
                out.on_device += bytes;
                ++out.device_rows;
                break;
            case Residence::Host:
                out.on_host += bytes;
                ++out.host_rows;
                break;
            case Residence::Dropped:
                out.dropped += bytes;
                ++out.dropped_rows;
                break;
        }
        out.rows.push_back(row);
    }
    std::sort(out.rows.begin(), out.rows.end(), [&](const RunPeakRow& first, const RunPeakRow& second) {
        if (first.where != second.where) return first.where < second.where;
        const int64_t one = allocs.bytes[first.row], other = allocs.bytes[second.row];
        return one != other ? one > other : allocs.id[first.row] < allocs.id[second.row];
    });
    return out;
}

std::vector<CategoryStat> category_stats(const ViewTrace& t) {
    const AllocationTable& a = t.allocations;
    std::vector<CategoryStat> out(trace::kCategoryCount);
    std::vector<std::vector<int64_t>> ta(trace::kCategoryCount), tf(trace::kCategoryCount), by(trace::kCategoryCount);
    for (size_t i = 0; i < a.size(); ++i) {
        auto c = static_cast<size_t>(a.category[i]);
        out[c].count++;
        out[c].bytes += a.bytes[i];
        out[c].largest = std::max(out[c].largest, a.bytes[i]);
        ta[c].push_back(a.t_alloc[i]); tf[c].push_back(a.t_free[i]); by[c].push_back(a.bytes[i]);
    }
    for (size_t c = 0; c < out.size(); ++c) {
        out[c].category = static_cast<trace::Category>(c);
        out[c].peak_live = Curve::from_intervals(ta[c], tf[c], by[c]).peak();
    }
    return out;
}

std::string no_allocations_reason(const ViewTrace& view) {
    // The importers write "none (why)": "none (no CUDA_GPU_MEMORY_USAGE_EVENTS: record with nsys
    // profile --cuda-memory-usage=true)", "none (the trace has no [memory] events: ...)".
    auto it = view.meta.find("allocations");
    if (it == view.meta.end()) return {};
    const std::string& value = it->second;
    if (value.size() < 7 || value.compare(0, 6, "none (") != 0 || value.back() != ')') return {};
    return mhc::printable(value.substr(6, value.size() - 7));
}

std::string empty_table_text(const ViewTrace& view, StatsTable table, size_t rows, std::string_view search) {
    if (rows > 0) return {};
    auto source = view.meta.find("source");
    const bool snapshot = source != view.meta.end() && source->second == "pytorch-memory-snapshot";
    switch (table) {
        case StatsTable::Kernels:
            if (view.kernel_count == 0)
                return snapshot
                           ? "no kernels in this trace: a PyTorch memory snapshot records allocations, not kernels "
                             "(see the Memory view)"
                           : "no kernels in this trace";
            return "no kernel name contains '" + std::string(search) + "'";
        case StatsTable::Allocations:
            if (view.allocations.size() == 0) {
                // The importer's reason when it gave one (an Nsight Systems export recorded without
                // --cuda-memory-usage was told to record Kineto's profile_memory).
                if (std::string why = no_allocations_reason(view); !why.empty())
                    return "no allocations in this trace: a timeline only (" + why + ")";
                return "no allocations in this trace: a timeline only (its source recorded no memory events; import a "
                       "memory snapshot, or a profile recorded with profile_memory, for memory)";
            }
            return "no allocation label contains '" + std::string(search) + "'";
        case StatsTable::Steps: return "no steps in this trace (no ProfilerStep#N, step markers or kernels' steps)";
    }
    return {};
}

std::vector<StepStat> step_stats(const ViewTrace& t) {
    std::vector<StepStat> out;
    for (const StepSpan& s : t.steps)
        out.push_back({s.step, s.t0, s.t1, t.live.range(s.t0, std::max(s.t1, s.t0 + 1)).max});
    return out;
}

void sort_steps(std::vector<StepStat>& steps, StepSort by, bool ascending) {
    auto key = [by](const StepStat& s) -> double {
        switch (by) {
        case StepSort::Step: return s.step;
        case StepSort::Start: return static_cast<double>(s.t0);
        case StepSort::Time: return static_cast<double>(s.t1 - s.t0);
        case StepSort::Peak: return s.peak;
        }
        return 0;
    };
    std::stable_sort(steps.begin(), steps.end(),
                     [&](const StepStat& x, const StepStat& y) { return ascending ? key(x) < key(y) : key(y) < key(x); });
}

}  // namespace mhc::viewer
