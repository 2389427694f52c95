// The rules a trace's rows keep, on rows loaded or built in memory (check_trace, check.hpp).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "check_parts.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/limits.hpp"

namespace mhc::trace {

namespace checks {

std::string t_str(int64_t time_ns) { return std::to_string(time_ns) + " ns"; }

}  // namespace checks

namespace {

using checks::t_str;

// The times of a trace lie within 2^62 ns of one another (146 years): each lies within
// [-2^62, 2^62] (check_ranges), and what computes on a trace takes differences of them (the
// advise plan counts from the first; a span of 2^63 would not fit in 64 bits). The latest time
// is named, with the first.
void check_span(const TraceData& trace, CheckReport& report) {
    struct At {
        int64_t time;
        const char* table;
        int64_t id;
        const char* col;
    };
    At first{INT64_MAX, "", 0, ""}, last{INT64_MIN, "", 0, ""};
    auto see = [&](int64_t value, const char* table, int64_t id, const char* col) {
        if (value == kNoTime) return;
        if (value < first.time) first = {value, table, id, col};
        if (value > last.time) last = {value, table, id, col};
    };
    const auto& allocs = trace.allocations;
    for (size_t i = 0; i < allocs.size(); ++i) {
        see(allocs.t_alloc[i], "allocations", allocs.id[i], "t_alloc");
        see(allocs.t_free[i], "allocations", allocs.id[i], "t_free");
    }
    for (size_t i = 0; i < trace.kernels.size(); ++i) {
        see(trace.kernels.t_start[i], "kernels", trace.kernels.id[i], "t_start");
        see(trace.kernels.t_end[i], "kernels", trace.kernels.id[i], "t_end");
    }
    for (size_t i = 0; i < trace.copies.size(); ++i) {
        see(trace.copies.t_start[i], "copies", trace.copies.id[i], "t_start");
        see(trace.copies.t_end[i], "copies", trace.copies.id[i], "t_end");
    }
    for (size_t i = 0; i < trace.markers.size(); ++i) {
        see(trace.markers.t_start[i], "markers", trace.markers.id[i], "t_start");
        see(trace.markers.t_end[i], "markers", trace.markers.id[i], "t_end");
    }
    if (first.time > last.time) return;
    if (static_cast<__int128>(last.time) - first.time <= limits::kMaxAbsTime) return;
    report.problems.push_back({"range", last.table, last.id,
                               std::string(last.col) + " is " + std::to_string(last.time) +
                                   ", more than 2^62 ns after the trace's first time, " + first.col + " " +
                                   std::to_string(first.time) + " of " + first.table + " row " +
                                   std::to_string(first.id)});
}

// The value ranges of limits.hpp on rows built in memory (importers check before writing);
// rows read from a file were held to them by the Reader already.
void check_ranges(const TraceData& trace, CheckReport& report) {
    auto time = [&](const char* table, int64_t id, const char* col, int64_t value) {
        if (value < -limits::kMaxAbsTime || value > limits::kMaxAbsTime)
            report.problems.push_back(
                {"range", table, id,
                 std::string(col) + " is " + std::to_string(value) + ", outside [-2^62, 2^62] (a time in ns)"});
    };
    auto bytes = [&](const char* table, int64_t id, int64_t value) {
        if (value > limits::kMaxBytes)
            report.problems.push_back(
                {"range", table, id, "bytes is " + std::to_string(value) + ", more than 2^56 (a size in bytes)"});
    };
    // As the Reader's rule says it (rules.cpp): rows an importer made (a snapshot's stream of 2^62)
    // are held to it before the trace is written, not refused by every command afterwards.
    auto stream = [&](const char* table, int64_t id, int64_t value) {
        if (value < -limits::kMaxAbsStream || value > limits::kMaxAbsStream)
            report.problems.push_back(
                {"range", table, id, "stream is " + std::to_string(value) + ", outside [-2^60, 2^60] (a stream)"});
    };
    const auto& allocs = trace.allocations;
    for (size_t i = 0; i < allocs.size(); ++i) {
        time("allocations", allocs.id[i], "t_alloc", allocs.t_alloc[i]);
        if (allocs.t_free[i] != kNoTime) time("allocations", allocs.id[i], "t_free", allocs.t_free[i]);
        bytes("allocations", allocs.id[i], allocs.bytes[i]);
        stream("allocations", allocs.id[i], allocs.stream[i]);
    }
    const auto& kernels = trace.kernels;
    for (size_t i = 0; i < kernels.size(); ++i) {
        time("kernels", kernels.id[i], "t_start", kernels.t_start[i]);
        time("kernels", kernels.id[i], "t_end", kernels.t_end[i]);
        stream("kernels", kernels.id[i], kernels.stream[i]);
    }
    const auto& copies = trace.copies;
    for (size_t i = 0; i < copies.size(); ++i) {
        time("copies", copies.id[i], "t_start", copies.t_start[i]);
        time("copies", copies.id[i], "t_end", copies.t_end[i]);
        bytes("copies", copies.id[i], copies.bytes[i]);
        stream("copies", copies.id[i], copies.stream[i]);
    }
    for (const Segment& segment : trace.segments) stream("segments", segment.id, segment.stream);
    const auto& markers = trace.markers;
    for (size_t i = 0; i < markers.size(); ++i) {
        time("markers", markers.id[i], "t_start", markers.t_start[i]);
        time("markers", markers.id[i], "t_end", markers.t_end[i]);
    }
}

void check_allocations(const TraceData& trace, CheckReport& report) {
    const auto& allocs = trace.allocations;
    int64_t total = 0;
    for (size_t i = 0; i < allocs.size(); ++i) {
        if (allocs.bytes[i] > 0 && allocs.bytes[i] <= limits::kMaxBytes) {
            if (total > limits::kMaxTotalBytes - allocs.bytes[i]) {
                report.problems.push_back({"total-size", "allocations", allocs.id[i],
                                           "the allocations up to this one hold more than 2^62 bytes together"});
                total = 0;
            }
            total += allocs.bytes[i];
        }
        if (allocs.label[i] < 0 || static_cast<size_t>(allocs.label[i]) >= trace.strings.size())
            report.problems.push_back(
                {"unknown-string", "allocations", allocs.id[i],
                 "label refers to string " + std::to_string(allocs.label[i]) + ", which does not exist"});
        if (allocs.bytes[i] <= 0)
            report.problems.push_back(
                {"size", "allocations", allocs.id[i],
                 "size is " + std::to_string(allocs.bytes[i]) + " bytes; an allocation must have a positive size"});
        // An allocator gives at least what is asked (every public snapshot keeps requested <=
        // bytes); more asked than given was read as is: info's "requested 3.32 GiB peak" over a
        // block peak of 849 MiB.
        if (const int64_t asked = allocs.requested_at(i);
            asked != kNoBytes && allocs.bytes[i] > 0 && asked > allocs.bytes[i])
            report.problems.push_back({"requested-over-block", "allocations", allocs.id[i],
                                       "requested_bytes is " + std::to_string(asked) + ", more than the block's " +
                                           std::to_string(allocs.bytes[i]) +
                                           " bytes (an allocator gives at least what is asked)"});
        if (allocs.t_free[i] != kNoTime && allocs.t_free[i] < allocs.t_alloc[i])
            report.problems.push_back(
                {"free-before-alloc", "allocations", allocs.id[i],
                 "freed at " + t_str(allocs.t_free[i]) + ", before it was allocated at " + t_str(allocs.t_alloc[i])});
    }
    // Live ranges at one address on one device must not overlap. Two overlapping ranges that
    // end at the same time are one free applied twice: reported as a double free.
    std::vector<size_t> order;
    for (size_t i = 0; i < allocs.size(); ++i)
        if (allocs.address[i] != 0) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](size_t lhs, size_t rhs) {
        if (allocs.device[lhs] != allocs.device[rhs]) return allocs.device[lhs] < allocs.device[rhs];
        if (allocs.address[lhs] != allocs.address[rhs]) return allocs.address[lhs] < allocs.address[rhs];
        if (allocs.t_alloc[lhs] != allocs.t_alloc[rhs]) return allocs.t_alloc[lhs] < allocs.t_alloc[rhs];
        return allocs.id[lhs] < allocs.id[rhs];
    });
    for (size_t k = 1; k < order.size(); ++k) {
        size_t prev = order[k - 1], row = order[k];
        if (allocs.device[prev] != allocs.device[row] || allocs.address[prev] != allocs.address[row]) continue;
        if (allocs.t_alloc[row] < allocs.t_free[prev]) {
            if (allocs.t_free[row] == allocs.t_free[prev] && allocs.t_free[row] != kNoTime)
                report.problems.push_back({"double-free", "allocations", allocs.id[row],
                                           "address 0x" +
                                               [&] {
                                                   char text[32];
                                                   snprintf(text, sizeof text, "%llx",
                                                            static_cast<unsigned long long>(allocs.address[row]));
                                                   return std::string(text);
                                               }() +
                                               " is freed twice at " + t_str(allocs.t_free[row]) +
                                               " (also by allocation " + std::to_string(allocs.id[prev]) + ")"});
            else
                report.problems.push_back(
                    {"overlap", "allocations", allocs.id[row],
                     "allocated at " + t_str(allocs.t_alloc[row]) + " at an address still held by allocation " +
                         std::to_string(allocs.id[prev]) + " on device " + std::to_string(allocs.device[row]) +
                         " (freed at " +
                         (allocs.t_free[prev] == kNoTime ? std::string("the end") : t_str(allocs.t_free[prev])) + ")"});
        }
    }
}

void check_kernels(const TraceData& trace, CheckReport& report) {
    const auto& kernels = trace.kernels;
    for (size_t i = 0; i < kernels.size(); ++i)
        if (kernels.t_end[i] < kernels.t_start[i])
            report.problems.push_back(
                {"end-before-start", "kernels", kernels.id[i],
                 "ends at " + t_str(kernels.t_end[i]) + ", before it starts at " + t_str(kernels.t_start[i])});
    // Kernels on one stream run one after another.
    std::vector<size_t> order(kernels.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t lhs, size_t rhs) {
        if (kernels.device[lhs] != kernels.device[rhs]) return kernels.device[lhs] < kernels.device[rhs];
        if (kernels.stream[lhs] != kernels.stream[rhs]) return kernels.stream[lhs] < kernels.stream[rhs];
        if (kernels.t_start[lhs] != kernels.t_start[rhs]) return kernels.t_start[lhs] < kernels.t_start[rhs];
        return kernels.id[lhs] < kernels.id[rhs];
    });
    for (size_t j = 1; j < order.size(); ++j) {
        size_t prev = order[j - 1], row = order[j];
        if (kernels.device[prev] != kernels.device[row] || kernels.stream[prev] != kernels.stream[row]) continue;
        if (kernels.t_start[row] < kernels.t_end[prev])
            report.problems.push_back({"stream-overlap", "kernels", kernels.id[row],
                                       "starts at " + t_str(kernels.t_start[row]) + " while kernel " +
                                           std::to_string(kernels.id[prev]) + " still runs on stream " +
                                           std::to_string(kernels.stream[row]) + " (until " +
                                           t_str(kernels.t_end[prev]) + ")"});
    }
    for (size_t i = 0; i < kernels.size(); ++i)
        if (kernels.name[i] < 0 || static_cast<size_t>(kernels.name[i]) >= trace.strings.size())
            report.problems.push_back(
                {"unknown-string", "kernels", kernels.id[i],
                 "name refers to string " + std::to_string(kernels.name[i]) + ", which does not exist"});
}

void check_accesses(const TraceData& trace, CheckReport& report) {
    for (const auto& dangling : trace.dangling_accesses) {
        bool kernel_known = trace.kernel_at(dangling.kernel) >= 0;
        report.problems.push_back(
            {"unknown-id", "accesses", dangling.kernel,
             kernel_known ? "refers to allocation " + std::to_string(dangling.allocation) + ", which does not exist"
                          : "refers to kernel " + std::to_string(dangling.kernel) + ", which does not exist"});
    }
    // An access row is named by its kernel id (the table's key is kernel, allocation).
    const auto& kernels = trace.kernels;
    const auto& allocs = trace.allocations;
    for (size_t i = 0; i < kernels.size(); ++i) {
        for (int64_t j = kernels.access_begin[i]; j < kernels.access_begin[i + 1]; ++j) {
            size_t al = static_cast<size_t>(trace.accesses.allocation[static_cast<size_t>(j)]);
            if (kernels.t_start[i] < allocs.t_alloc[al] || kernels.t_end[i] > allocs.t_free[al])
                report.problems.push_back(
                    {"access-outside-lifetime", "accesses", kernels.id[i],
                     "kernel " + std::to_string(kernels.id[i]) + " [" + t_str(kernels.t_start[i]) + ", " +
                         t_str(kernels.t_end[i]) + "] accesses allocation " + std::to_string(allocs.id[al]) +
                         ", alive only over [" + t_str(allocs.t_alloc[al]) + ", " +
                         (allocs.t_free[al] == kNoTime ? std::string("end") : t_str(allocs.t_free[al])) + "]"});
        }
    }
}

void check_copies_markers(const TraceData& trace, CheckReport& report) {
    const auto& copies = trace.copies;
    for (size_t i = 0; i < copies.size(); ++i) {
        if (copies.t_end[i] < copies.t_start[i])
            report.problems.push_back(
                {"end-before-start", "copies", copies.id[i],
                 "ends at " + t_str(copies.t_end[i]) + ", before it starts at " + t_str(copies.t_start[i])});
        if (copies.bytes[i] < 0)
            report.problems.push_back(
                {"size", "copies", copies.id[i], "size is " + std::to_string(copies.bytes[i]) + " bytes"});
    }
    const auto& markers = trace.markers;
    for (size_t i = 0; i < markers.size(); ++i)
        if (markers.t_end[i] < markers.t_start[i])
            report.problems.push_back(
                {"end-before-start", "markers", markers.id[i],
                 "ends at " + t_str(markers.t_end[i]) + ", before it starts at " + t_str(markers.t_start[i])});
}

std::string hex(int64_t value) {
    char text[32];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
    return text;
}

std::string seg_str(const Segment& segment) {
    return "segment " + std::to_string(segment.id) + " (" + std::to_string(segment.bytes) + " bytes at " +
           hex(segment.address) + " on device " + std::to_string(segment.device) + ", [" + t_str(segment.t_alloc) +
           ", " + (segment.t_free == kNoTime ? std::string("end") : t_str(segment.t_free)) + "))";
}

// Segments: freed before allocated, and two segments holding the same bytes of one device at
// once (one cudaMalloc recorded twice doubles the reserved bytes). At one time, frees first:
// a segment freed at t and one allocated at t in its place do not overlap.
void check_segments(const TraceData& trace, CheckReport& report) {
    const auto& segments = trace.segments;
    struct Ev { int64_t time; int kind; size_t i; };   // kind 0: free, 1: allocation
    std::vector<Ev> ev;
    for (size_t i = 0; i < segments.size(); ++i) {
        if (segments[i].t_free != kNoTime && segments[i].t_free < segments[i].t_alloc) {
            report.problems.push_back({"free-before-alloc", "segments", segments[i].id,
                                       "freed at " + t_str(segments[i].t_free) + ", before it was allocated at " +
                                           t_str(segments[i].t_alloc)});
            continue;
        }
        ev.push_back({segments[i].t_alloc, 1, i});
        if (segments[i].t_free != kNoTime) ev.push_back({segments[i].t_free, 0, i});
    }
    std::sort(ev.begin(), ev.end(), [](const Ev& lhs, const Ev& rhs) {
        return lhs.time != rhs.time ? lhs.time < rhs.time : lhs.kind != rhs.kind ? lhs.kind < rhs.kind : lhs.i < rhs.i;
    });
    std::map<std::pair<int32_t, int64_t>, size_t> live;   // (device, address) -> segment, disjoint per device
    for (const Ev& event : ev) {
        const Segment& segment = segments[event.i];
        const std::pair<int32_t, int64_t> key{segment.device, segment.address};
        if (event.kind == 0) {
            auto it = live.find(key);
            if (it != live.end() && it->second == event.i) live.erase(it);
            continue;
        }
        // The live segment starting at or before this one's start, and the first after it.
        auto next = live.lower_bound(key);
        const Segment* clash = nullptr;
        if (next != live.end() && next->first.first == segment.device &&
            next->first.second < segment.address + segment.bytes)
            clash = &segments[next->second];
        if (!clash && next != live.begin()) {
            const Segment& before = segments[std::prev(next)->second];
            if (before.device == segment.device && before.address + before.bytes > segment.address) clash = &before;
        }
        if (clash) {
            report.problems.push_back({"overlap", "segments", segment.id,
                                       std::to_string(segment.bytes) + " bytes at " + hex(segment.address) +
                                           " allocated at " + t_str(segment.t_alloc) + " overlap " + seg_str(*clash) +
                                           ", alive then"});
            continue;   // the first keeps the place
        }
        live.emplace(key, event.i);
    }
}

// Only where the trace says its segments hold its allocations (a PyTorch snapshot): the
// recorder's segments are the driver's allocations, and pool allocations lie outside them.
void check_allocations_in_segments(const TraceData& trace, CheckReport& report) {
    if (trace.meta_or("segments.hold_allocations", "") != "true") return;
    const auto& allocs = trace.allocations;
    for (size_t row : allocations_outside_segments(trace))
        report.problems.push_back({"outside-segment", "allocations", allocs.id[row],
                                   std::to_string(allocs.bytes[row]) + " bytes at " + hex(allocs.address[row]) +
                                       " allocated at " + t_str(allocs.t_alloc[row]) + " lie in no segment of device " +
                                       std::to_string(allocs.device[row]) + " alive then"});
}

}  // namespace

// Allocations on a device that has segments lie inside a segment alive when they are made
// (adjacent segments, such as an expandable segment's mapped pages, count as one range): a
// block outside every segment cannot come from the allocator the segments describe. At one
// time: segment allocations, then the blocks made, then segment frees.
std::vector<size_t> allocations_outside_segments(const TraceData& trace) {
    const auto& segments = trace.segments;
    const auto& allocs = trace.allocations;
    std::vector<size_t> out;
    if (segments.empty()) return out;
    std::set<int32_t> with_segments;
    for (const auto& segment : segments) with_segments.insert(segment.device);
    struct Ev { int64_t time; int kind; size_t i; };   // 0: segment allocated, 1: block made, 2: segment freed
    std::vector<Ev> ev;
    for (size_t i = 0; i < segments.size(); ++i) {
        if (segments[i].t_free != kNoTime && segments[i].t_free < segments[i].t_alloc)
            continue;   // free-before-alloc, reported apart
        ev.push_back({segments[i].t_alloc, 0, i});
        if (segments[i].t_free != kNoTime) ev.push_back({segments[i].t_free, 2, i});
    }
    for (size_t i = 0; i < allocs.size(); ++i)
        if (allocs.address[i] != 0 && with_segments.count(allocs.device[i])) ev.push_back({allocs.t_alloc[i], 1, i});
    std::sort(ev.begin(), ev.end(), [](const Ev& lhs, const Ev& rhs) {
        return lhs.time != rhs.time ? lhs.time < rhs.time : lhs.kind != rhs.kind ? lhs.kind < rhs.kind : lhs.i < rhs.i;
    });
    // (device, start) -> segment; a segment freed at t and one made at t in its place are both
    // there while the blocks of t are judged.
    std::multimap<std::pair<int32_t, int64_t>, size_t> live;
    // e.i is a segment's row for kinds 0 and 2, an allocation's for kind 1: a block's row past the
    // segments' count made S[e.i] an out-of-range reference (_GLIBCXX_ASSERTIONS: every snapshot).
    for (const Ev& event : ev) {
        if (event.kind == 0) {
            live.emplace(std::make_pair(segments[event.i].device, segments[event.i].address), event.i);
            continue;
        }
        if (event.kind == 2) {
            auto [b, f] = live.equal_range({segments[event.i].device, segments[event.i].address});
            for (auto it = b; it != f; ++it)
                if (it->second == event.i) {
                    live.erase(it);
                    break;
                }
            continue;
        }
        const int32_t dev = allocs.device[event.i];
        const int64_t lo = allocs.address[event.i], hi = lo + allocs.bytes[event.i];
        // From the last live segment starting at or before `lo` (segments of a device are
        // disjoint, or rule `overlap` says otherwise), extend the covered range while the next
        // ones touch it.
        int64_t covered = lo;
        auto it = live.upper_bound({dev, lo});
        if (it != live.begin() && std::prev(it)->first.first == dev) --it;
        for (; it != live.end() && it->first.first == dev && it->first.second <= covered && covered < hi; ++it)
            covered = std::max(covered, segments[it->second].address + segments[it->second].bytes);
        if (covered < hi) out.push_back(event.i);
    }
    std::sort(out.begin(), out.end());
    return out;
}

CheckReport check_trace(const TraceData& trace) {
    CheckReport report;
    check_ranges(trace, report);
    check_span(trace, report);
    check_allocations(trace, report);
    check_kernels(trace, report);
    check_accesses(trace, report);
    check_copies_markers(trace, report);
    check_segments(trace, report);
    check_allocations_in_segments(trace, report);
    return report;
}

}  // namespace mhc::trace
