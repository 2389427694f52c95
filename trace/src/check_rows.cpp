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

std::string t_str(int64_t t) { return std::to_string(t) + " ns"; }

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
    // Segments too: mhc allocator and the viewer's reserved curve take differences of their times
    // (before 2026-12-06 a segment 2^63 ns from the rows passed).
    for (const Segment& seg : trace.segments) {
        see(seg.t_alloc, "segments", seg.id, "t_alloc");
        see(seg.t_free, "segments", seg.id, "t_free");
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
void check_ranges(const TraceData& t, CheckReport& r) {
    auto time = [&](const char* table, int64_t id, const char* col, int64_t v) {
        if (v < -limits::kMaxAbsTime || v > limits::kMaxAbsTime)
            r.problems.push_back({"range", table, id, std::string(col) + " is " + std::to_string(v) +
                                                          ", outside [-2^62, 2^62] (a time in ns)"});
    };
    auto bytes = [&](const char* table, int64_t id, int64_t v) {
        if (v > limits::kMaxBytes)
            r.problems.push_back({"range", table, id, "bytes is " + std::to_string(v) +
                                                          ", more than 2^56 (a size in bytes)"});
    };
    // As the Reader's rule says it (rules.cpp): rows an importer made (a snapshot's stream of 2^62)
    // are held to it before the trace is written, not refused by every command afterwards.
    auto stream = [&](const char* table, int64_t id, int64_t v) {
        if (v < -limits::kMaxAbsStream || v > limits::kMaxAbsStream)
            r.problems.push_back(
                {"range", table, id, "stream is " + std::to_string(v) + ", outside [-2^60, 2^60] (a stream)"});
    };
    const auto& a = t.allocations;
    for (size_t i = 0; i < a.size(); ++i) {
        time("allocations", a.id[i], "t_alloc", a.t_alloc[i]);
        if (a.t_free[i] != kNoTime) time("allocations", a.id[i], "t_free", a.t_free[i]);
        bytes("allocations", a.id[i], a.bytes[i]);
        stream("allocations", a.id[i], a.stream[i]);
    }
    const auto& k = t.kernels;
    for (size_t i = 0; i < k.size(); ++i) {
        time("kernels", k.id[i], "t_start", k.t_start[i]);
        time("kernels", k.id[i], "t_end", k.t_end[i]);
        stream("kernels", k.id[i], k.stream[i]);
    }
    const auto& c = t.copies;
    for (size_t i = 0; i < c.size(); ++i) {
        time("copies", c.id[i], "t_start", c.t_start[i]);
        time("copies", c.id[i], "t_end", c.t_end[i]);
        bytes("copies", c.id[i], c.bytes[i]);
        stream("copies", c.id[i], c.stream[i]);
    }
    for (const Segment& s : t.segments) stream("segments", s.id, s.stream);
    const auto& m = t.markers;
    for (size_t i = 0; i < m.size(); ++i) {
        time("markers", m.id[i], "t_start", m.t_start[i]);
        time("markers", m.id[i], "t_end", m.t_end[i]);
    }
}

void check_allocations(const TraceData& t, CheckReport& r) {
    const auto& a = t.allocations;
    int64_t total = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (a.bytes[i] > 0 && a.bytes[i] <= limits::kMaxBytes) {
            if (total > limits::kMaxTotalBytes - a.bytes[i]) {
                r.problems.push_back({"total-size", "allocations", a.id[i],
                                      "the allocations up to this one hold more than 2^62 bytes together"});
                total = 0;
            }
            total += a.bytes[i];
        }
        if (a.label[i] < 0 || static_cast<size_t>(a.label[i]) >= t.strings.size())
            r.problems.push_back({"unknown-string", "allocations", a.id[i],
                                  "label refers to string " + std::to_string(a.label[i]) + ", which does not exist"});
        if (a.bytes[i] <= 0)
            r.problems.push_back({"size", "allocations", a.id[i],
                                  "size is " + std::to_string(a.bytes[i]) +
                                      " bytes; an allocation must have a positive size"});
        // An allocator gives at least what is asked (every public snapshot keeps requested <=
        // bytes); more asked than given was read as is: info's "requested 3.32 GiB peak" over a
        // block peak of 849 MiB.
        if (const int64_t asked = a.requested_at(i); asked != kNoBytes && a.bytes[i] > 0 && asked > a.bytes[i])
            r.problems.push_back({"requested-over-block", "allocations", a.id[i],
                                  "requested_bytes is " + std::to_string(asked) + ", more than the block's " +
                                      std::to_string(a.bytes[i]) +
                                      " bytes (an allocator gives at least what is asked)"});
        if (a.t_free[i] != kNoTime && a.t_free[i] < a.t_alloc[i])
            r.problems.push_back({"free-before-alloc", "allocations", a.id[i],
                                  "freed at " + t_str(a.t_free[i]) + ", before it was allocated at " +
                                      t_str(a.t_alloc[i])});
    }
    // Live ranges at one address on one device must not overlap. Two overlapping ranges that
    // end at the same time are one free applied twice: reported as a double free.
    std::vector<size_t> order;
    for (size_t i = 0; i < a.size(); ++i)
        if (a.address[i] != 0) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
        if (a.device[x] != a.device[y]) return a.device[x] < a.device[y];
        if (a.address[x] != a.address[y]) return a.address[x] < a.address[y];
        if (a.t_alloc[x] != a.t_alloc[y]) return a.t_alloc[x] < a.t_alloc[y];
        return a.id[x] < a.id[y];
    });
    // Each allocation is held against every earlier one at its address still held when it is made
    // (not only the one just before it: after an overlap was freed, the first holder may still
    // live). `held` keeps those earlier ones of the current (device, address) by their t_free,
    // each dropped once freed (frees at t come before the allocations made at t).
    std::multimap<int64_t, size_t> held;
    for (size_t k = 0; k < order.size(); ++k) {
        const size_t row = order[k];
        if (k > 0 && (a.device[order[k - 1]] != a.device[row] || a.address[order[k - 1]] != a.address[row]))
            held.clear();
        held.erase(held.begin(), held.upper_bound(a.t_alloc[row]));
        if (!held.empty()) {
            const auto twice = a.t_free[row] != kNoTime ? held.find(a.t_free[row]) : held.end();
            if (twice != held.end()) {
                char hex[32];
                snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(a.address[row]));
                r.problems.push_back({"double-free", "allocations", a.id[row],
                                      std::string("address 0x") + hex + " is freed twice at " + t_str(a.t_free[row]) +
                                          " (also by allocation " + std::to_string(a.id[twice->second]) + ")"});
            } else {
                // The one held longest names the clash (the first made of them).
                const size_t holder = held.lower_bound(held.rbegin()->first)->second;
                r.problems.push_back({"overlap", "allocations", a.id[row],
                                      "allocated at " + t_str(a.t_alloc[row]) + " at an address still held by allocation " +
                                          std::to_string(a.id[holder]) + " on device " + std::to_string(a.device[row]) +
                                          " (freed at " +
                                          (a.t_free[holder] == kNoTime ? std::string("the end") : t_str(a.t_free[holder])) + ")"});
            }
        }
        held.emplace(a.t_free[row], row);
    }
}

void check_kernels(const TraceData& t, CheckReport& r) {
    const auto& k = t.kernels;
    for (size_t i = 0; i < k.size(); ++i)
        if (k.t_end[i] < k.t_start[i])
            r.problems.push_back({"end-before-start", "kernels", k.id[i],
                                  "ends at " + t_str(k.t_end[i]) + ", before it starts at " +
                                      t_str(k.t_start[i])});
    // Kernels on one stream run one after another.
    std::vector<size_t> order(k.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
        if (k.device[x] != k.device[y]) return k.device[x] < k.device[y];
        if (k.stream[x] != k.stream[y]) return k.stream[x] < k.stream[y];
        if (k.t_start[x] != k.t_start[y]) return k.t_start[x] < k.t_start[y];
        return k.id[x] < k.id[y];
    });
    for (size_t j = 1; j < order.size(); ++j) {
        size_t p = order[j - 1], i = order[j];
        if (k.device[p] != k.device[i] || k.stream[p] != k.stream[i]) continue;
        if (k.t_start[i] < k.t_end[p])
            r.problems.push_back({"stream-overlap", "kernels", k.id[i],
                                  "starts at " + t_str(k.t_start[i]) + " while kernel " +
                                      std::to_string(k.id[p]) + " still runs on stream " +
                                      std::to_string(k.stream[i]) + " (until " + t_str(k.t_end[p]) + ")"});
    }
    for (size_t i = 0; i < k.size(); ++i)
        if (k.name[i] < 0 || static_cast<size_t>(k.name[i]) >= t.strings.size())
            r.problems.push_back({"unknown-string", "kernels", k.id[i],
                                  "name refers to string " + std::to_string(k.name[i]) +
                                      ", which does not exist"});
}

void check_accesses(const TraceData& t, CheckReport& r) {
    for (const auto& d : t.dangling_accesses) {
        bool kernel_known = t.kernel_at(d.kernel) >= 0;
        r.problems.push_back({"unknown-id", "accesses", d.kernel,
                              kernel_known ? "refers to allocation " + std::to_string(d.allocation) +
                                                 ", which does not exist"
                                           : "refers to kernel " + std::to_string(d.kernel) +
                                                 ", which does not exist"});
    }
    // An access row is named by its kernel id (the table's key is kernel, allocation).
    const auto& k = t.kernels;
    const auto& a = t.allocations;
    for (size_t i = 0; i < k.size(); ++i) {
        for (int64_t j = k.access_begin[i]; j < k.access_begin[i + 1]; ++j) {
            size_t al = static_cast<size_t>(t.accesses.allocation[static_cast<size_t>(j)]);
            if (k.t_start[i] < a.t_alloc[al] || k.t_end[i] > a.t_free[al])
                r.problems.push_back(
                    {"access-outside-lifetime", "accesses", k.id[i],
                     "kernel " + std::to_string(k.id[i]) + " [" + t_str(k.t_start[i]) + ", " +
                         t_str(k.t_end[i]) + "] accesses allocation " + std::to_string(a.id[al]) +
                         ", alive only over [" + t_str(a.t_alloc[al]) + ", " +
                         (a.t_free[al] == kNoTime ? std::string("end") : t_str(a.t_free[al])) + "]"});
        }
    }
}

void check_copies_markers(const TraceData& t, CheckReport& r) {
    const auto& c = t.copies;
    for (size_t i = 0; i < c.size(); ++i) {
        if (c.t_end[i] < c.t_start[i])
            r.problems.push_back({"end-before-start", "copies", c.id[i],
                                  "ends at " + t_str(c.t_end[i]) + ", before it starts at " + t_str(c.t_start[i])});
        if (c.bytes[i] < 0)
            r.problems.push_back({"size", "copies", c.id[i],
                                  "size is " + std::to_string(c.bytes[i]) + " bytes"});
    }
    const auto& m = t.markers;
    for (size_t i = 0; i < m.size(); ++i)
        if (m.t_end[i] < m.t_start[i])
            r.problems.push_back({"end-before-start", "markers", m.id[i],
                                  "ends at " + t_str(m.t_end[i]) + ", before it starts at " + t_str(m.t_start[i])});
}

std::string hex(int64_t v) {
    char b[32];
    std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
    return b;
}

std::string seg_str(const Segment& s) {
    return "segment " + std::to_string(s.id) + " (" + std::to_string(s.bytes) + " bytes at " + hex(s.address) +
           " on device " + std::to_string(s.device) + ", [" + t_str(s.t_alloc) + ", " +
           (s.t_free == kNoTime ? std::string("end") : t_str(s.t_free)) + "))";
}

// Segments: freed before allocated, and two segments holding the same bytes of one device at
// once (one cudaMalloc recorded twice doubles the reserved bytes). At one time, frees first:
// a segment freed at t and one allocated at t in its place do not overlap.
void check_segments(const TraceData& t, CheckReport& r) {
    const auto& S = t.segments;
    struct Ev { int64_t time; int kind; size_t i; };   // kind 0: free, 1: allocation
    std::vector<Ev> ev;
    for (size_t i = 0; i < S.size(); ++i) {
        if (S[i].t_free != kNoTime && S[i].t_free < S[i].t_alloc) {
            r.problems.push_back({"free-before-alloc", "segments", S[i].id,
                                  "freed at " + t_str(S[i].t_free) + ", before it was allocated at " + t_str(S[i].t_alloc)});
            continue;
        }
        ev.push_back({S[i].t_alloc, 1, i});
        if (S[i].t_free != kNoTime) ev.push_back({S[i].t_free, 0, i});
    }
    std::sort(ev.begin(), ev.end(), [](const Ev& a, const Ev& b) {
        return a.time != b.time ? a.time < b.time : a.kind != b.kind ? a.kind < b.kind : a.i < b.i;
    });
    std::map<std::pair<int32_t, int64_t>, size_t> live;   // (device, address) -> segment, disjoint per device
    // Live segments that overlapped one when they were made (listed then): kept apart so that
    // `live` stays disjoint, and held against the segments made after them (before 2026-12-06 they
    // were dropped, and a third segment over such a one went unlisted). Only a faulty trace has any.
    std::vector<size_t> clashed;
    for (const Ev& e : ev) {
        const Segment& s = S[e.i];
        const std::pair<int32_t, int64_t> key{s.device, s.address};
        if (e.kind == 0) {
            auto it = live.find(key);
            if (it != live.end() && it->second == e.i) live.erase(it);
            clashed.erase(std::remove(clashed.begin(), clashed.end(), e.i), clashed.end());
            continue;
        }
        // The live segment starting at or before this one's start, and the first after it.
        auto next = live.lower_bound(key);
        const Segment* clash = nullptr;
        if (next != live.end() && next->first.first == s.device && next->first.second < s.address + s.bytes)
            clash = &S[next->second];
        if (!clash && next != live.begin()) {
            const Segment& p = S[std::prev(next)->second];
            if (p.device == s.device && p.address + p.bytes > s.address) clash = &p;
        }
        for (size_t k = 0; !clash && k < clashed.size(); ++k) {
            const Segment& other = S[clashed[k]];
            if (other.device == s.device && other.address < s.address + s.bytes && s.address < other.address + other.bytes)
                clash = &other;
        }
        if (clash) {
            r.problems.push_back({"overlap", "segments", s.id,
                                  std::to_string(s.bytes) + " bytes at " + hex(s.address) + " allocated at " +
                                      t_str(s.t_alloc) + " overlap " + seg_str(*clash) + ", alive then"});
            clashed.push_back(e.i);   // the first keeps the place in `live`
            continue;
        }
        live.emplace(key, e.i);
    }
}

// Only where the trace says its segments hold its allocations (a PyTorch snapshot): the
// recorder's segments are the driver's allocations, and pool allocations lie outside them.
void check_allocations_in_segments(const TraceData& t, CheckReport& r) {
    if (t.meta_or("segments.hold_allocations", "") != "true") return;
    const auto& a = t.allocations;
    for (size_t i : allocations_outside_segments(t))
        r.problems.push_back({"outside-segment", "allocations", a.id[i],
                              std::to_string(a.bytes[i]) + " bytes at " + hex(a.address[i]) + " allocated at " +
                                  t_str(a.t_alloc[i]) + " lie in no segment of device " + std::to_string(a.device[i]) +
                                  " alive then"});
}

}  // namespace

// Allocations on a device that has segments lie inside a segment alive when they are made
// (adjacent segments, such as an expandable segment's mapped pages, count as one range): a
// block outside every segment cannot come from the allocator the segments describe. At one
// time: segment allocations, then the blocks made, then segment frees.
std::vector<size_t> allocations_outside_segments(const TraceData& t) {
    const auto& S = t.segments;
    const auto& a = t.allocations;
    std::vector<size_t> out;
    if (S.empty()) return out;
    std::set<int32_t> with_segments;
    for (const auto& s : S) with_segments.insert(s.device);
    struct Ev { int64_t time; int kind; size_t i; };   // 0: segment allocated, 1: block made, 2: segment freed
    std::vector<Ev> ev;
    for (size_t i = 0; i < S.size(); ++i) {
        if (S[i].t_free != kNoTime && S[i].t_free < S[i].t_alloc) continue;   // free-before-alloc, reported apart
        ev.push_back({S[i].t_alloc, 0, i});
        if (S[i].t_free != kNoTime) ev.push_back({S[i].t_free, 2, i});
    }
    for (size_t i = 0; i < a.size(); ++i)
        if (a.address[i] != 0 && with_segments.count(a.device[i])) ev.push_back({a.t_alloc[i], 1, i});
    std::sort(ev.begin(), ev.end(), [](const Ev& x, const Ev& y) {
        return x.time != y.time ? x.time < y.time : x.kind != y.kind ? x.kind < y.kind : x.i < y.i;
    });
    // (device, start) -> segment; a segment freed at t and one made at t in its place are both
    // there while the blocks of t are judged.
    std::multimap<std::pair<int32_t, int64_t>, size_t> live;
    // e.i is a segment's row for kinds 0 and 2, an allocation's for kind 1: a block's row past the
    // segments' count made S[e.i] an out-of-range reference (_GLIBCXX_ASSERTIONS: every snapshot).
    for (const Ev& e : ev) {
        if (e.kind == 0) {
            live.emplace(std::make_pair(S[e.i].device, S[e.i].address), e.i);
            continue;
        }
        if (e.kind == 2) {
            auto [b, f] = live.equal_range({S[e.i].device, S[e.i].address});
            for (auto it = b; it != f; ++it)
                if (it->second == e.i) { live.erase(it); break; }
            continue;
        }
        const int32_t dev = a.device[e.i];
        const int64_t lo = a.address[e.i], hi = lo + a.bytes[e.i];
        // From the last live segment starting at or before `lo` (segments of a device are
        // disjoint, or rule `overlap` says otherwise), extend the covered range while the next
        // ones touch it.
        int64_t covered = lo;
        auto it = live.upper_bound({dev, lo});
        if (it != live.begin() && std::prev(it)->first.first == dev) --it;
        for (; it != live.end() && it->first.first == dev && it->first.second <= covered && covered < hi; ++it)
            covered = std::max(covered, S[it->second].address + S[it->second].bytes);
        if (covered < hi) {
            // Segments that overlap (rule `overlap`) can hide one that covers the block behind the
            // last start at or before it (two at one address, or a long one starting earlier):
            // every live segment of the device, in order of start, says it then. Only a block
            // found outside pays for it.
            covered = lo;
            for (it = live.lower_bound({dev, INT64_MIN}); it != live.end() && it->first.first == dev &&
                                                          it->first.second <= covered && covered < hi;
                 ++it)
                covered = std::max(covered, S[it->second].address + S[it->second].bytes);
        }
        if (covered < hi) out.push_back(e.i);
    }
    std::sort(out.begin(), out.end());
    return out;
}

CheckReport check_trace(const TraceData& t) {
    CheckReport r;
    check_ranges(t, r);
    check_span(t, r);
    check_allocations(t, r);
    check_kernels(t, r);
    check_accesses(t, r);
    check_copies_markers(t, r);
    check_segments(t, r);
    check_allocations_in_segments(t, r);
    return r;
}

}  // namespace mhc::trace
