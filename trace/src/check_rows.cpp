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

std::string exact_ns(int64_t time_ns) { return std::to_string(time_ns) + " ns"; }

}  // namespace checks

namespace {

using checks::exact_ns;

// An address as check prints it: 0x and lowercase hex digits.
std::string hex(int64_t value) {
    char text[32];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
    return text;
}

// The times of a trace lie within 2^62 ns of one another (146 years): each lies within
// [-2^62, 2^62] (check_ranges), and what computes on a trace takes differences of them (the
// advise plan counts from the first; a span of 2^63 would not fit in 64 bits). The latest time
// is named, with the first.
void check_span(const TraceData& trace, CheckReport& report) {
    struct At {
        int64_t time;
        const char* table;
        int64_t id;
        const char* column;
    };
    At first{INT64_MAX, "", 0, ""}, last{INT64_MIN, "", 0, ""};
    auto see = [&](int64_t value, const char* table, int64_t id, const char* column) {
        if (value == kNoTime) return;
        if (value < first.time) first = {value, table, id, column};
        if (value > last.time) last = {value, table, id, column};
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
    // Segments too: mhc allocator and the viewer's reserved curve take differences of their times
    // (before 2026-12-06 a segment 2^63 ns from the rows passed).
    for (const Segment& segment : trace.segments) {
        see(segment.t_alloc, "segments", segment.id, "t_alloc");
        see(segment.t_free, "segments", segment.id, "t_free");
    }
    if (first.time > last.time) return;
    if (static_cast<__int128>(last.time) - first.time <= limits::kMaxAbsTime) return;
    report.problems.push_back({"range", last.table, last.id,
                               std::string(last.column) + " is " + std::to_string(last.time) +
                                   ", more than 2^62 ns after the trace's first time, " + first.column + " " +
                                   std::to_string(first.time) + " of " + first.table + " row " +
                                   std::to_string(first.id)});
}

// The value ranges of limits.hpp on rows built in memory (importers check before writing);
// rows read from a file were held to them by the Reader already.
void check_ranges(const TraceData& trace, CheckReport& report) {
    auto check_time = [&](const char* table, int64_t id, const char* column, int64_t value) {
        if (value < -limits::kMaxAbsTime || value > limits::kMaxAbsTime)
            report.problems.push_back(
                {"range", table, id,
                 std::string(column) + " is " + std::to_string(value) + ", outside [-2^62, 2^62] (a time in ns)"});
    };
    auto check_bytes = [&](const char* table, int64_t id, int64_t value) {
        if (value > limits::kMaxBytes)
            report.problems.push_back(
                {"range", table, id, "bytes is " + std::to_string(value) + ", more than 2^56 (a size in bytes)"});
    };
    // As the Reader's rule says it (rules.cpp): rows an importer made (a snapshot's stream of 2^62)
    // are held to it before the trace is written, not refused by every command afterwards.
    auto check_stream = [&](const char* table, int64_t id, int64_t value) {
        if (value < -limits::kMaxAbsStream || value > limits::kMaxAbsStream)
            report.problems.push_back(
                {"range", table, id, "stream is " + std::to_string(value) + ", outside [-2^60, 2^60] (a stream)"});
    };
    const auto& allocs = trace.allocations;
    for (size_t i = 0; i < allocs.size(); ++i) {
        check_time("allocations", allocs.id[i], "t_alloc", allocs.t_alloc[i]);
        if (allocs.t_free[i] != kNoTime) check_time("allocations", allocs.id[i], "t_free", allocs.t_free[i]);
        check_bytes("allocations", allocs.id[i], allocs.bytes[i]);
        check_stream("allocations", allocs.id[i], allocs.stream[i]);
    }
    const auto& kernels = trace.kernels;
    for (size_t i = 0; i < kernels.size(); ++i) {
        check_time("kernels", kernels.id[i], "t_start", kernels.t_start[i]);
        check_time("kernels", kernels.id[i], "t_end", kernels.t_end[i]);
        check_stream("kernels", kernels.id[i], kernels.stream[i]);
    }
    const auto& copies = trace.copies;
    for (size_t i = 0; i < copies.size(); ++i) {
        check_time("copies", copies.id[i], "t_start", copies.t_start[i]);
        check_time("copies", copies.id[i], "t_end", copies.t_end[i]);
        check_bytes("copies", copies.id[i], copies.bytes[i]);
        check_stream("copies", copies.id[i], copies.stream[i]);
    }
    for (const Segment& segment : trace.segments) check_stream("segments", segment.id, segment.stream);
    const auto& markers = trace.markers;
    for (size_t i = 0; i < markers.size(); ++i) {
        check_time("markers", markers.id[i], "t_start", markers.t_start[i]);
        check_time("markers", markers.id[i], "t_end", markers.t_end[i]);
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
            report.problems.push_back({"free-before-alloc", "allocations", allocs.id[i],
                                       "freed at " + exact_ns(allocs.t_free[i]) + ", before it was allocated at " +
                                           exact_ns(allocs.t_alloc[i])});
    }
    // Live ranges at one address on one device must not overlap. Two overlapping ranges that
    // end at the same time are one free applied twice: reported as a double free.
    std::vector<size_t> order;
    for (size_t i = 0; i < allocs.size(); ++i)
        if (allocs.address[i] != 0) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](size_t left, size_t right) {
        if (allocs.device[left] != allocs.device[right]) return allocs.device[left] < allocs.device[right];
        if (allocs.address[left] != allocs.address[right]) return allocs.address[left] < allocs.address[right];
        if (allocs.t_alloc[left] != allocs.t_alloc[right]) return allocs.t_alloc[left] < allocs.t_alloc[right];
        return allocs.id[left] < allocs.id[right];
    });
    // Each allocation is held against every earlier one at its address still held when it is made
    // (not only the one just before it: after an overlap was freed, the first holder may still
    // live). `held` keeps those earlier ones of the current (device, address) by their t_free,
    // each dropped once freed (frees at t come before the allocations made at t).
    std::multimap<int64_t, size_t> held;
    for (size_t position = 0; position < order.size(); ++position) {
        const size_t row = order[position];
        if (position > 0 && (allocs.device[order[position - 1]] != allocs.device[row] ||
                             allocs.address[order[position - 1]] != allocs.address[row]))
            held.clear();
        held.erase(held.begin(), held.upper_bound(allocs.t_alloc[row]));
        if (!held.empty()) {
            const auto twice = allocs.t_free[row] != kNoTime ? held.find(allocs.t_free[row]) : held.end();
            if (twice != held.end()) {
                report.problems.push_back({"double-free", "allocations", allocs.id[row],
                                           "address " + hex(allocs.address[row]) + " is freed twice at " +
                                               exact_ns(allocs.t_free[row]) + " (also by allocation " +
                                               std::to_string(allocs.id[twice->second]) + ")"});
            } else {
                // The one held longest names the clash (the first made of them).
                const size_t holder = held.lower_bound(held.rbegin()->first)->second;
                report.problems.push_back(
                    {"overlap", "allocations", allocs.id[row],
                     "allocated at " + exact_ns(allocs.t_alloc[row]) + " at an address still held by allocation " +
                         std::to_string(allocs.id[holder]) + " on device " + std::to_string(allocs.device[row]) +
                         " (freed at " +
                         (allocs.t_free[holder] == kNoTime ? std::string("the end") : exact_ns(allocs.t_free[holder])) +
                         ")"});
            }
        }
        held.emplace(allocs.t_free[row], row);
    }
}

void check_kernels(const TraceData& trace, CheckReport& report) {
    const auto& kernels = trace.kernels;
    for (size_t row = 0; row < kernels.size(); ++row)
        if (kernels.t_end[row] < kernels.t_start[row])
            report.problems.push_back({"end-before-start", "kernels", kernels.id[row],
                                       "ends at " + exact_ns(kernels.t_end[row]) + ", before it starts at " +
                                           exact_ns(kernels.t_start[row])});
    // Kernels on one stream run one after another.
    std::vector<size_t> order(kernels.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t left, size_t right) {
        if (kernels.device[left] != kernels.device[right]) return kernels.device[left] < kernels.device[right];
        if (kernels.stream[left] != kernels.stream[right]) return kernels.stream[left] < kernels.stream[right];
        if (kernels.t_start[left] != kernels.t_start[right]) return kernels.t_start[left] < kernels.t_start[right];
        return kernels.id[left] < kernels.id[right];
    });
    for (size_t position = 1; position < order.size(); ++position) {
        size_t before = order[position - 1], row = order[position];
        if (kernels.device[before] != kernels.device[row] || kernels.stream[before] != kernels.stream[row]) continue;
        if (kernels.t_start[row] < kernels.t_end[before])
            report.problems.push_back({"stream-overlap", "kernels", kernels.id[row],
                                       "starts at " + exact_ns(kernels.t_start[row]) + " while kernel " +
                                           std::to_string(kernels.id[before]) + " still runs on stream " +
                                           std::to_string(kernels.stream[row]) + " (until " +
                                           exact_ns(kernels.t_end[before]) + ")"});
    }
    for (size_t row = 0; row < kernels.size(); ++row)
        if (kernels.name[row] < 0 || static_cast<size_t>(kernels.name[row]) >= trace.strings.size())
            report.problems.push_back(
                {"unknown-string", "kernels", kernels.id[row],
                 "name refers to string " + std::to_string(kernels.name[row]) + ", which does not exist"});
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
    for (size_t kernel_row = 0; kernel_row < kernels.size(); ++kernel_row) {
        for (int64_t access = kernels.access_begin[kernel_row]; access < kernels.access_begin[kernel_row + 1];
             ++access) {
            size_t alloc_row = static_cast<size_t>(trace.accesses.allocation[static_cast<size_t>(access)]);
            if (kernels.t_start[kernel_row] < allocs.t_alloc[alloc_row] ||
                kernels.t_end[kernel_row] > allocs.t_free[alloc_row])
                report.problems.push_back(
                    {"access-outside-lifetime", "accesses", kernels.id[kernel_row],
                     "kernel " + std::to_string(kernels.id[kernel_row]) + " [" + exact_ns(kernels.t_start[kernel_row]) +
                         ", " + exact_ns(kernels.t_end[kernel_row]) + "] accesses allocation " +
                         std::to_string(allocs.id[alloc_row]) + ", alive only over [" +
                         exact_ns(allocs.t_alloc[alloc_row]) + ", " +
                         (allocs.t_free[alloc_row] == kNoTime ? std::string("end")
                                                              : exact_ns(allocs.t_free[alloc_row])) +
                         "]"});
        }
    }
}

void check_copies_markers(const TraceData& trace, CheckReport& report) {
    const auto& copies = trace.copies;
    for (size_t i = 0; i < copies.size(); ++i) {
        if (copies.t_end[i] < copies.t_start[i])
            report.problems.push_back(
                {"end-before-start", "copies", copies.id[i],
                 "ends at " + exact_ns(copies.t_end[i]) + ", before it starts at " + exact_ns(copies.t_start[i])});
        if (copies.bytes[i] < 0)
            report.problems.push_back(
                {"size", "copies", copies.id[i], "size is " + std::to_string(copies.bytes[i]) + " bytes"});
    }
    const auto& markers = trace.markers;
    for (size_t i = 0; i < markers.size(); ++i)
        if (markers.t_end[i] < markers.t_start[i])
            report.problems.push_back(
                {"end-before-start", "markers", markers.id[i],
                 "ends at " + exact_ns(markers.t_end[i]) + ", before it starts at " + exact_ns(markers.t_start[i])});
}

std::string describe_segment(const Segment& segment) {
    return "segment " + std::to_string(segment.id) + " (" + std::to_string(segment.bytes) + " bytes at " +
           hex(segment.address) + " on device " + std::to_string(segment.device) + ", [" + exact_ns(segment.t_alloc) +
           ", " + (segment.t_free == kNoTime ? std::string("end") : exact_ns(segment.t_free)) + "))";
}

// Segments: freed before allocated, and two segments holding the same bytes of one device at
// once (one cudaMalloc recorded twice doubles the reserved bytes). At one time, frees first:
// a segment freed at t and one allocated at t in its place do not overlap.
void check_segments(const TraceData& trace, CheckReport& report) {
    const auto& segments = trace.segments;
    struct Event {
        int64_t time;
        int kind;
        size_t row;
    };   // kind 0: free, 1: allocation
    std::vector<Event> events;
    for (size_t row = 0; row < segments.size(); ++row) {
        if (segments[row].t_free != kNoTime && segments[row].t_free < segments[row].t_alloc) {
            report.problems.push_back({"free-before-alloc", "segments", segments[row].id,
                                       "freed at " + exact_ns(segments[row].t_free) + ", before it was allocated at " +
                                           exact_ns(segments[row].t_alloc)});
            continue;
        }
        events.push_back({segments[row].t_alloc, 1, row});
        if (segments[row].t_free != kNoTime) events.push_back({segments[row].t_free, 0, row});
    }
    std::sort(events.begin(), events.end(), [](const Event& left, const Event& right) {
        return left.time != right.time   ? left.time < right.time
               : left.kind != right.kind ? left.kind < right.kind
                                         : left.row < right.row;
    });
    std::map<std::pair<int32_t, int64_t>, size_t> live;   // (device, address) -> segment, disjoint per device
    // Live segments that overlapped one when they were made (listed then): kept apart so that
    // `live` stays disjoint, and held against the segments made after them (before 2026-12-06 they
    // were dropped, and a third segment over such a one went unlisted). Only a faulty trace has any.
    std::vector<size_t> clashed;
    for (const Event& event : events) {
        const Segment& segment = segments[event.row];
        const std::pair<int32_t, int64_t> key{segment.device, segment.address};
        if (event.kind == 0) {
            auto it = live.find(key);
            if (it != live.end() && it->second == event.row) live.erase(it);
            clashed.erase(std::remove(clashed.begin(), clashed.end(), event.row), clashed.end());
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
        for (size_t index = 0; !clash && index < clashed.size(); ++index) {
            const Segment& other = segments[clashed[index]];
            if (other.device == segment.device && other.address < segment.address + segment.bytes &&
                segment.address < other.address + other.bytes)
                clash = &other;
        }
        if (clash) {
            report.problems.push_back({"overlap", "segments", segment.id,
                                       std::to_string(segment.bytes) + " bytes at " + hex(segment.address) +
                                           " allocated at " + exact_ns(segment.t_alloc) + " overlap " +
                                           describe_segment(*clash) + ", alive then"});
            clashed.push_back(event.row);   // the first keeps the place in `live`
            continue;
        }
        live.emplace(key, event.row);
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
                                       " allocated at " + exact_ns(allocs.t_alloc[row]) +
                                       " lie in no segment of device " + std::to_string(allocs.device[row]) +
                                       " alive then"});
}

}  // namespace

// Allocations on a device that has segments lie inside a segment alive when they are made
// (adjacent segments, such as an expandable segment's mapped pages, count as one range): a
// block outside every segment cannot come from the allocator the segments describe. At one
// time: segment allocations, then the blocks made, then segment frees.
std::vector<size_t> allocations_outside_segments(const TraceData& trace) {
    return allocations_outside_segments(trace.allocations, trace.segments);
}

std::vector<size_t> allocations_outside_segments(const AllocationColumns& allocs, const std::vector<Segment>& segments) {
    std::vector<size_t> outside;
    if (segments.empty()) return outside;
    std::set<int32_t> with_segments;
    for (const auto& segment : segments) with_segments.insert(segment.device);
    struct Event {
        int64_t time;
        int kind;
        size_t row;
    };   // 0: segment allocated, 1: block made, 2: segment freed
    std::vector<Event> events;
    for (size_t row = 0; row < segments.size(); ++row) {
        if (segments[row].t_free != kNoTime && segments[row].t_free < segments[row].t_alloc)
            continue;   // free-before-alloc, reported apart
        events.push_back({segments[row].t_alloc, 0, row});
        if (segments[row].t_free != kNoTime) events.push_back({segments[row].t_free, 2, row});
    }
    for (size_t row = 0; row < allocs.size(); ++row)
        if (allocs.address[row] != 0 && with_segments.count(allocs.device[row]))
            events.push_back({allocs.t_alloc[row], 1, row});
    std::sort(events.begin(), events.end(), [](const Event& left, const Event& right) {
        return left.time != right.time   ? left.time < right.time
               : left.kind != right.kind ? left.kind < right.kind
                                         : left.row < right.row;
    });
    // (device, start) -> segment; a segment freed at t and one made at t in its place are both
    // there while the blocks of t are judged.
    std::multimap<std::pair<int32_t, int64_t>, size_t> live;
    // e.row is a segment's row for kinds 0 and 2, an allocation's for kind 1: a block's row past the
    // segments' count made S[e.row] an out-of-range reference (_GLIBCXX_ASSERTIONS: every snapshot).
    for (const Event& event : events) {
        if (event.kind == 0) {
            live.emplace(std::make_pair(segments[event.row].device, segments[event.row].address), event.row);
            continue;
        }
        if (event.kind == 2) {
            auto [first, last] = live.equal_range({segments[event.row].device, segments[event.row].address});
            for (auto it = first; it != last; ++it)
                if (it->second == event.row) {
                    live.erase(it);
                    break;
                }
            continue;
        }
        const int32_t device = allocs.device[event.row];
        const int64_t block_begin = allocs.address[event.row], block_end = block_begin + allocs.bytes[event.row];
        // From the last live segment starting at or before `lo` (segments of a device are
        // disjoint, or rule `overlap` says otherwise), extend the covered range while the next
        // ones touch it.
        int64_t covered = block_begin;
        auto it = live.upper_bound({device, block_begin});
        if (it != live.begin() && std::prev(it)->first.first == device) --it;
        for (; it != live.end() && it->first.first == device && it->first.second <= covered && covered < block_end;
             ++it)
            covered = std::max(covered, segments[it->second].address + segments[it->second].bytes);
        if (covered < block_end) {
            // Segments that overlap (rule `overlap`) can hide one that covers the block behind the
            // last start at or before it (two at one address, or a long one starting earlier):
            // every live segment of the device, in order of start, says it then. Only a block
            // found outside pays for it.
            covered = block_begin;
            for (it = live.lower_bound({device, INT64_MIN});
                 it != live.end() && it->first.first == device && it->first.second <= covered && covered < block_end;
                 ++it)
                covered = std::max(covered, segments[it->second].address + segments[it->second].bytes);
        }
        if (covered < block_end) outside.push_back(event.row);
    }
    std::sort(outside.begin(), outside.end());
    return outside;
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
