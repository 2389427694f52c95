// The details pane's contents: one kernel or one allocation, read on demand from the file
// (Reader lookups by id) and from the selected run's events.
#include "mhc/viewer/details.hpp"

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstdio>

#include "mhc/common/units.hpp"
#include "mhc/trace/store.hpp"
#include "mhc/viewer/axis.hpp"
#include "mhc/viewer/metrics.hpp"

namespace mhc::viewer {

namespace {

int64_t on_run_clock(const ViewRun* run, int64_t t) { return run && !run->clock.empty() ? run->clock.map(t) : t; }

}   // namespace

bool kernel_in_run(const ViewRun& run, const trace::Kernel& kernel, int64_t& start, int64_t& end) {
    if (run.kernel_lanes.empty()) {
        start = kernel.t_start;
        end = kernel.t_end;
        return true;
    }
    for (const Lane& l : run.kernel_lanes) {
        if (l.device != kernel.device || l.stream != kernel.stream) continue;
        for (size_t i = 0; i < l.size(); ++i)
            if (l.ref[i] == kernel.id) {
                start = l.t_start[i];
                end = l.t_end[i];
                return true;
            }
    }
    return false;
}

namespace {

// The run's events on allocation `a` around one access of it: before = those ending after the
// previous access (`lo`) and starting by the kernel's start; after = those starting from the
// kernel's end and before the next access (`hi`).
void events_around(const ViewRun& run, int64_t a, int64_t lo, int64_t start, int64_t end, int64_t hi,
                   OperandDetail& o) {
    for (const trace::RunEvent& e : run.events) {
        if (e.allocation != a) continue;
        if (e.t_end > lo && e.t_start <= start) o.before.push_back(e);
        else if (e.t_start >= end && e.t_start < hi) o.after.push_back(e);
    }
}

std::string mode_name(trace::AccessMode m) { return std::string(trace::to_string(m)); }

}   // namespace

KernelDetails kernel_details(const ViewTrace& t, const ViewRun* run, int64_t kernel_id) {
    KernelDetails d;
    d.times = t.time_text();
    if (!t.reader || !t.reader->kernel(kernel_id, d.kernel)) return d;
    d.found = true;
    d.name = t.str(d.kernel.name);
    d.family = t.family_of(d.kernel.name);
    if (run) {
        d.has_run = true;
        d.reached = kernel_in_run(*run, d.kernel, d.run_start, d.run_end);
        for (const trace::RunEvent& e : run->events)
            if (e.kind == trace::EventKind::Stall && e.kernel == kernel_id) d.stall_ns += e.t_end - e.t_start;
    }
    for (const trace::Access& a : t.reader->accesses_of_kernel(kernel_id)) {
        OperandDetail o;
        o.allocation = a.allocation;
        o.mode = a.mode;
        o.index = t.allocations.index_of(a.allocation);
        if (o.index >= 0) {
            auto i = static_cast<size_t>(o.index);
            o.bytes = t.allocations.bytes[i];
            o.category = t.allocations.category[i];
            o.label = t.str(t.allocations.label[i]);
        }
        if (run && d.reached) {
            // The allocation's previous and next accesses bound the windows (recorded order).
            int64_t lo = INT64_MIN, hi = INT64_MAX;
            std::vector<AccessHit> hits = accesses_of(t, a.allocation);
            for (size_t k = 0; k < hits.size(); ++k)
                if (hits[k].kernel == kernel_id) {
                    if (k > 0) lo = on_run_clock(run, hits[k - 1].t_end);
                    if (k + 1 < hits.size()) hi = on_run_clock(run, hits[k + 1].t_start);
                    break;
                }
            events_around(*run, a.allocation, lo, d.run_start, d.run_end, hi, o);
        }
        d.operands.push_back(std::move(o));
    }
    return d;
}

AllocationDetails allocation_details(const ViewTrace& t, const ViewRun* run, int64_t allocation_id, size_t max_rows) {
    AllocationDetails d;
    d.times = t.time_text();
    if (!t.reader || !t.reader->allocation(allocation_id, d.allocation)) return d;
    d.found = true;
    d.label = t.str(d.allocation.label);
    d.t_end = d.allocation.t_free == trace::kNoTime ? t.t_end : d.allocation.t_free;
    std::vector<AccessHit> hits = accesses_of(t, allocation_id);
    d.access_count = static_cast<int64_t>(hits.size());
    for (const AccessHit& h : hits) {
        d.reads += h.mode != trace::AccessMode::Write;
        d.writes += h.mode != trace::AccessMode::Read;
    }
    for (size_t k = 0; k < hits.size() && k < max_rows; ++k) {
        AccessRow r;
        r.kernel = hits[k].kernel;
        r.mode = hits[k].mode;
        r.t_start = hits[k].t_start;
        r.t_end = hits[k].t_end;
        trace::Kernel kn;
        if (t.reader->kernel(r.kernel, kn)) r.name = t.str(kn.name);
        if (run) r.run_start = on_run_clock(run, r.t_start);
        d.accesses.push_back(std::move(r));
    }
    if (run) {
        d.has_run = true;
        for (const trace::RunEvent& e : run->events)
            if (e.allocation == allocation_id) d.events.push_back(e);
    }
    return d;
}

namespace {

// What the policy did, in words: "swapped out", "waited for room" (an allocation's stall).
const char* action(trace::EventKind k) {
    switch (k) {
        case trace::EventKind::SwapOut: return "swapped out";
        case trace::EventKind::SwapIn: return "swapped in";
        case trace::EventKind::EvictClean: return "evicted (host copy valid)";
        case trace::EventKind::Drop: return "dropped";
        case trace::EventKind::Recompute: return "recomputed";
        case trace::EventKind::Stall: return "waited for room";
        case trace::EventKind::Oom: return "out of memory";
        case trace::EventKind::Prefetch: return "prefetch decided";
    }
    return "?";
}

}  // namespace

std::string describe_events(const std::vector<trace::RunEvent>& events, int64_t at, bool before,
                            const RunTimes* times) {
    if (events.empty()) return "-";
    const bool order_only = times && times->order_only;
    std::string out;
    for (const trace::RunEvent& e : events) {
        if (!out.empty()) out += "; ";
        out += action(e.kind);
        if (e.t_end > e.t_start)
            out += " " + (order_only ? times->span(e.t_end - e.t_start) : format_duration(e.t_end - e.t_start));
        if (e.bytes > 0 && e.kind != trace::EventKind::Stall) out += " of " + format_bytes(e.bytes);
        // The distance on an order-only run's clock is no time: where it lies, by op.
        if (order_only) {
            out += ", at " + times->at(e.t_start);
            continue;
        }
        int64_t gap = before ? at - e.t_end : e.t_start - at;
        if (gap <= 0) out += before ? ", up to the start" : ", from the end";
        else out += ", " + format_duration(gap) + (before ? " before" : " after");
    }
    return out;
}

DetailsPane kernel_pane(const KernelDetails& d, const ViewRun* run) {
    const TimeText& times = d.times;
    auto when = [&](int64_t time) { return times.at(time); };
    DetailsPane p;
    if (!d.found) {
        p.title = "kernel not found in the file";
        return p;
    }
    const trace::Kernel& k = d.kernel;
    p.title = d.name.empty() ? "(unnamed kernel)" : d.name;
    p.fields.push_back({"family", family_name(d.family)});
    std::string id = "#" + std::to_string(k.id) + ", " + device_name(k.device) + ", stream " + std::to_string(k.stream);
    if (k.step >= 0) id += ", step " + std::to_string(k.step);
    p.fields.push_back({"kernel", id});
    // Order only: the op's number ("op #12"), not a start and an end one apart.
    p.fields.emplace_back("recorded", times.interval(k.t_start, k.t_end));
    if (d.has_run && run) {
        std::string v = "not reached (the run stopped before it)";
        if (d.reached && run->times.order_only) {
            // Ops + link time: the op's start is where the run reached it, after that much link time.
            v = "reached after " + run->times.span(d.run_start - k.t_start) +
                " in all (the stalls before it; the trace's ops have no durations)";
        } else if (d.reached) {
            int64_t shift = d.run_start - k.t_start;
            v = "start " + when(d.run_start) + " (" + (shift >= 0 ? "+" : "-") + times.span(std::llabs(shift)) +
                "), end " + when(d.run_end);
        }
        p.fields.push_back({"run " + run->label(), v});
        if (d.stall_ns > 0) p.fields.emplace_back("stalled", run->times.span(d.stall_ns) + " waiting for its operands");
    }
    if (k.grid[0] > 0) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "grid %dx%dx%d, block %dx%dx%d, %s shared, %d registers", k.grid[0], k.grid[1],
                      k.grid[2], k.block[0], k.block[1], k.block[2], format_bytes(k.shared_mem).c_str(), k.registers);
        p.fields.push_back({"launch", buf});
    }
    p.columns = {"allocation", "label", "bytes", "category", "access"};
    const bool policy = d.has_run && d.reached;
    if (policy) {
        p.columns.push_back("the policy before it");
        p.columns.push_back("after it");
    }
    for (const OperandDetail& o : d.operands) {
        std::vector<std::string> row{"#" + std::to_string(o.allocation), o.label.empty() ? "-" : o.label,
                                     o.index >= 0 ? format_bytes(o.bytes) : "?",
                                     std::string(trace::to_string(o.category)), mode_name(o.mode)};
        if (policy) {
            row.push_back(describe_events(o.before, d.run_start, true, &run->times));
            row.push_back(describe_events(o.after, d.run_end, false, &run->times));
        }
        p.rows.push_back(std::move(row));
    }
    p.empty_table = "no recorded accesses for this kernel (the trace has none for it)";
    return p;
}

DetailsPane allocation_pane(const AllocationDetails& d, const ViewRun* run) {
    const TimeText& times = d.times;
    auto when = [&](int64_t time) { return times.at(time); };
    DetailsPane p;
    if (!d.found) {
        p.title = "allocation not found in the file";
        return p;
    }
    const trace::Allocation& a = d.allocation;
    p.title = d.label.empty() ? "allocation #" + std::to_string(a.id) : d.label;
    std::string id = "#" + std::to_string(a.id) + ", " + format_bytes(a.bytes) + ", " +
                     std::string(trace::to_string(a.category)) + ", " + device_name(a.device) + ", stream " +
                     std::to_string(a.stream);
    if (a.address) {
        char buf[32];
        std::snprintf(buf, sizeof buf, ", address 0x%" PRIx64, static_cast<uint64_t>(a.address));
        id += buf;
    }
    p.fields.push_back({"allocation", id});
    std::string life = "allocated " + when(a.t_alloc) + ", " +
                       (a.t_free == trace::kNoTime ? "alive at the end of the trace" : "freed " + when(a.t_free)) +
                       " (" + times.span(d.t_end - a.t_alloc) + ")";
    p.fields.push_back({"lifetime", life});
    p.fields.push_back({"label (source frame)", d.label.empty() ? "-" : d.label});
    p.fields.push_back({"accesses", std::to_string(d.access_count) + ": " + std::to_string(d.reads) + " reading, " +
                                        std::to_string(d.writes) + " writing"});
    if (d.has_run && run) {
        std::vector<int64_t> count(trace::kEventKindCount, 0);
        for (const trace::RunEvent& e : d.events) ++count[static_cast<size_t>(e.kind)];
        std::string v;
        for (int k = 0; k < trace::kEventKindCount; ++k)
            if (count[static_cast<size_t>(k)] > 0)
                v += (v.empty() ? "" : ", ") + event_label(static_cast<trace::EventKind>(k)) + " x" +
                     std::to_string(count[static_cast<size_t>(k)]);
        if (!d.events.empty()) v += "; first at " + run->times.at(d.events.front().t_start);
        p.fields.push_back({"run " + run->label(), v.empty() ? "left resident: no event on it" : v});
    }
    p.columns = {"kernel", "name", "access", "start (recorded)"};
    if (d.has_run) p.columns.push_back("start (run)");
    for (const AccessRow& r : d.accesses) {
        std::vector<std::string> row{"#" + std::to_string(r.kernel), r.name, mode_name(r.mode), when(r.t_start)};
        if (d.has_run) row.push_back(run ? run->times.at(r.run_start) : when(r.run_start));
        p.rows.push_back(std::move(row));
    }
    p.empty_table = "no recorded accesses (the trace has none for this allocation)";
    if (d.access_count > static_cast<int64_t>(d.accesses.size()))
        p.fields.push_back({"listed", "the first " + std::to_string(d.accesses.size()) + " accesses by time"});
    return p;
}

std::string details_text(const DetailsPane& pane) {
    std::string out = pane.title + "\n";
    for (const auto& [field, value] : pane.fields) out += field + ": " + value + "\n";
    auto row = [&out](const std::vector<std::string>& cells) {
        for (size_t i = 0; i < cells.size(); ++i) out += (i ? "\t" : "") + cells[i];
        out += "\n";
    };
    if (pane.rows.empty()) {
        if (!pane.empty_table.empty()) out += pane.empty_table + "\n";
        return out;
    }
    if (!pane.columns.empty()) row(pane.columns);
    for (const std::vector<std::string>& cells : pane.rows) row(cells);
    return out;
}

}  // namespace mhc::viewer
