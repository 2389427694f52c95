#include "mhc/trace/check.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "mhc/common/error.hpp"
#include "mhc/common/json.hpp"

#include "mhc/common/numbers.hpp"
#include "mhc/trace/capture_timing.hpp"
#include "mhc/trace/data_parallel.hpp"
#include "mhc/trace/limits.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/store.hpp"
#include "rules.hpp"
#include "run_files.hpp"
#include "sqlite_util.hpp"
#include "trace_tables.hpp"

namespace mhc::trace {

namespace {

constexpr size_t kMaxCaptureJsonNesting = 64;

// Rows of run tables whose run has no `runs` row, one problem per run; `why` ends the message.
void report_orphan_rows(sqlite3* db, const std::string& path, std::initializer_list<const char*> tables,
                        const std::function<bool(const char*)>& has_table, const std::string& why, CheckReport& report) {
    for (const char* table : tables) {
        if (!has_table(table)) continue;
        sql::Stmt orphans(db, path,
                          ("SELECT run, count(*) FROM " + std::string(table) +
                           " WHERE run NOT IN (SELECT id FROM runs) GROUP BY run ORDER BY run")
                              .c_str());
        while (orphans.step())
            report.problems.push_back({"unknown-run", table, orphans.i64(0),
                                       std::to_string(orphans.i64(1)) + " row(s) of run " +
                                           std::to_string(orphans.i64(0)) + ", which has no runs row" + why});
    }
}

std::string t_str(int64_t t) { return std::to_string(t) + " ns"; }

// A meta value quoted in a problem: its first 40 bytes, a control byte shown as '?'.
std::string quoted(const std::string& value) {
    return "'" + printable(value.substr(0, 40)) + (value.size() > 40 ? "...'" : "'");
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
    for (size_t k = 1; k < order.size(); ++k) {
        size_t p = order[k - 1], i = order[k];
        if (a.device[p] != a.device[i] || a.address[p] != a.address[i]) continue;
        if (a.t_alloc[i] < a.t_free[p]) {
            if (a.t_free[i] == a.t_free[p] && a.t_free[i] != kNoTime)
                r.problems.push_back({"double-free", "allocations", a.id[i],
                                      "address 0x" + [&] { char b[32]; snprintf(b, sizeof b, "%llx", (unsigned long long)a.address[i]); return std::string(b); }() +
                                          " is freed twice at " + t_str(a.t_free[i]) +
                                          " (also by allocation " + std::to_string(a.id[p]) + ")"});
            else
                r.problems.push_back({"overlap", "allocations", a.id[i],
                                      "allocated at " + t_str(a.t_alloc[i]) + " at an address still held by allocation " +
                                          std::to_string(a.id[p]) + " on device " +
                                          std::to_string(a.device[i]) + " (freed at " +
                                          (a.t_free[p] == kNoTime ? std::string("the end") : t_str(a.t_free[p])) + ")"});
        }
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
    for (const Ev& e : ev) {
        const Segment& s = S[e.i];
        const std::pair<int32_t, int64_t> key{s.device, s.address};
        if (e.kind == 0) {
            auto it = live.find(key);
            if (it != live.end() && it->second == e.i) live.erase(it);
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
        if (clash) {
            r.problems.push_back({"overlap", "segments", s.id,
                                  std::to_string(s.bytes) + " bytes at " + hex(s.address) + " allocated at " +
                                      t_str(s.t_alloc) + " overlap " + seg_str(*clash) + ", alive then"});
            continue;   // the first keeps the place
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

// The value rules (rules.hpp) on the file itself: every row that breaks one is listed, where
// the Reader stops at the first.
void check_values(const Reader& reader, CheckReport& r) {
    std::vector<const rules::Table*> tables = rules::all();
    if (reader.has_requested_bytes()) tables.front() = &rules::allocations_with_requested();
    if (reader.has_segments()) tables.push_back(&rules::segments());   // absent from older traces
    for (const rules::Table* c : {&rules::modules(), &rules::kernel_info()})
        if (reader.has_table(c->name)) tables.push_back(c);
    if (reader.has_table("saved_tensors")) {
        sql::Stmt c(reader.handle(), reader.path(), "SELECT count(*) FROM pragma_table_info('saved_tensors') WHERE name='packs'");
        tables.push_back(c.step() && c.i64(0) > 0 ? &rules::saved_tensors_packs() : &rules::saved_tensors());
    }
    for (const rules::Table* t : tables) {
        sql::Stmt s(reader.handle(), reader.path(), rules::violations_sql(*t).c_str());
        while (s.step()) {
            int64_t row = s.i64(0);
            for (size_t i = 0; i < t->columns.size(); ++i) {
                std::string p = rules::value_problem(t->columns[i], s.get(), static_cast<int>(i));
                if (p.empty()) continue;
                bool range = p.find("outside") != std::string::npos;
                r.problems.push_back({range ? t->columns[i].rule : "type", t->name, row, p});
            }
        }
        if (!t->unique_first) continue;
        std::string dup = std::string("SELECT ") + t->columns[0].name + ", count(*) FROM " + t->name +
                          " GROUP BY 1 HAVING count(*) > 1";
        sql::Stmt d(reader.handle(), reader.path(), dup.c_str());
        while (d.step())
            r.problems.push_back({"duplicate-id", t->name, d.i64(0),
                                  "id appears " + std::to_string(d.i64(1)) + " times"});
    }
    // String ids index an array: they must run densely from 1 to the row count.
    sql::Stmt s(reader.handle(), reader.path(),
                "SELECT id, typeof(id), typeof(text), (SELECT count(*) FROM strings) FROM strings "
                "WHERE typeof(id) != 'integer' OR typeof(text) != 'text' OR id < 0 OR "
                "id > (SELECT count(*) FROM strings)");
    while (s.step()) {
        std::string msg = s.text(1) != "integer" ? "id holds " + s.text(1) + ", not an integer"
                          : s.text(2) != "text"  ? "text is " + s.text(2) + ", not text"
                                                 : "id is outside [0, " + std::to_string(s.i64(3)) +
                                                       "]: string ids run densely from 1 to the row count";
        r.problems.push_back({s.text(1) != "integer" || s.text(2) != "text" ? "type" : "range", "strings",
                              s.i64(0), msg});
    }
    sql::Stmt d(reader.handle(), reader.path(),
                "SELECT id, count(*) FROM strings GROUP BY id HAVING count(*) > 1");
    while (d.step())
        r.problems.push_back({"duplicate-id", "strings", d.i64(0), "id appears " + std::to_string(d.i64(1)) + " times"});
    // All allocations together (total() is a real: it cannot overflow): the row where the sum
    // passes 2^62 is named, as loading would.
    sql::Stmt tot(reader.handle(), reader.path(), "SELECT total(bytes) FROM allocations");
    if (r.ok() && tot.step() && tot.f64(0) > static_cast<double>(limits::kMaxTotalBytes) * 0.999) {
        sql::Stmt rows(reader.handle(), reader.path(), "SELECT id, bytes FROM allocations ORDER BY id");
        int64_t total = 0;
        while (rows.step()) {
            if (total > limits::kMaxTotalBytes - rows.i64(1)) {
                r.problems.push_back({"total-size", "allocations", rows.i64(0),
                                      "the allocations up to this one hold more than 2^62 bytes together"});
                break;
            }
            total += rows.i64(1);
        }
    }
}

// The runs stored in the trace, read as `mhc info`, `mhc export` and the viewer read them (kinds,
// statuses, finite metrics, event, kernel and memory rows in range): a run they would refuse is a
// problem of the trace. So are rows of a run table whose run has no `runs` row, which a store
// cut short or a run deleted by hand leaves, and a run's events outside its range.
// Run ids below 1, which no command names (--run takes 1 or more; base_run 0 is "none"): an older
// mhc stored a run past the largest id as -9223372036854775808.
void report_run_ids(sqlite3* db, const std::string& file, CheckReport& report) {
    sql::Stmt low(db, file, "SELECT id FROM runs WHERE id < 1 ORDER BY id");
    while (low.step())
        report.problems.push_back(
            {"range", "runs", low.i64(0),
             "id is " + std::to_string(low.i64(0)) + ": run ids are 1 or more, which --run names"});
}

void check_runs(const std::string& path, Reader& reader, CheckReport& report) {
    if (!reader.has_table("runs")) return;
    report_run_ids(reader.handle(), path, report);
    try {
        for (const RunInfo& run : list_runs(path)) {
            try {
                load_run(path, run.id);
            } catch (const Error& e) { report.problems.push_back({"run", "file", 0, e.what()}); }
        }
    } catch (const Error& e) { report.problems.push_back({"run", "file", 0, e.what()}); }
    report_orphan_rows(reader.handle(), path,
                       {"run_config", "run_metrics", "run_events", "run_kernels", "run_memory", "run_event_rows"},
                       [&](const char* table) { return reader.has_table(table); },
                       " (a store cut short, or a run deleted in part)", report);
    // A run's events are one range of rowids (run_event_rows): events of the run outside it are
    // another run's, left under an id the store gave again.
    if (!reader.has_table("run_event_rows")) return;
    sql::Stmt outside(reader.handle(), path,
                      "SELECT e.run, count(*) FROM run_events e JOIN run_event_rows x ON e.run = x.run "
                      "WHERE e.rowid NOT BETWEEN x.first_row AND x.last_row GROUP BY e.run ORDER BY e.run");
    while (outside.step())
        report.problems.push_back({"unknown-run", "run_events", outside.i64(0),
                                   std::to_string(outside.i64(1)) + " event(s) of run " +
                                       std::to_string(outside.i64(0)) +
                                       " outside its rows in run_event_rows (left by another run of that id)"});
}

// Every reference between tables: a row that names another table's row (a string, a kernel, an
// allocation, a module, a run) names one that exists. Tables are judged where the file has them
// (older files lack some); 0 means "none" where the schema says so (a root module, a run event of
// no kernel, a run that is no replay). Each row that breaks one is a problem naming its table,
// row (the table's id; for a table keyed otherwise, its first key, the whole key in the message)
// and field. A value that is no integer is left to the value rules (check_values, load_run), and
// accesses are judged as the trace is loaded (dangling_accesses).
struct Reference {
    const char* table;
    const char* field;
    const char* target;   // the table whose `id` it names
    const char* noun;     // what a row of it is, in the message
    bool zero_is_none;
    const char* row;       // SQL: the row's number in the report
    const char* context;   // SQL: text after the message ('' for none)
};

constexpr int64_t kMaxListedPerReference = 10000;

// Where references are judged: a connection, the file named in errors, the schema of the trace's
// tables ("" when they are in the same file, "tr." for a trace attached to its runs database) and
// which runs count ("" for all; else a condition on `run`, the runs of this trace).
struct Scope {
    sqlite3* db;
    std::string file;
    std::string trace_schema;
    std::string runs_filter;
};

bool is_trace_table(const std::string& name) { return name != "runs" && name.rfind("run_", 0) != 0 && name != "traces"; }

void check_reference(const Scope& where, const Reference& ref, CheckReport& report) {
    const std::string field = ref.field;
    const std::string target = (is_trace_table(ref.target) ? where.trace_schema : "") + ref.target;
    std::string filter;
    if (!where.runs_filter.empty() && !is_trace_table(ref.table))
        filter = " AND " + std::string(std::string(ref.table) == "runs" ? "id" : "run") + " IN " + where.runs_filter;
    const std::string sql = "SELECT " + std::string(ref.row) + ", " + field + ", " + ref.context + " FROM " +
                            ref.table + " WHERE typeof(" + field + ") = 'integer' AND " +
                            (ref.zero_is_none ? field + " IS NOT 0 AND " : "") + field + " NOT IN (SELECT id FROM " +
                            target + ")" + filter + " ORDER BY 1 LIMIT " + std::to_string(kMaxListedPerReference + 1);
    sql::Stmt rows(where.db, where.file, sql.c_str());
    int64_t listed = 0;
    while (rows.step()) {
        if (++listed > kMaxListedPerReference) {
            report.problems.push_back({"unknown-id", ref.table, 0,
                                  "more rows than the " + std::to_string(kMaxListedPerReference) + " above have a " +
                                      field + " that is no row of " + ref.target});
            break;
        }
        const std::string context = rows.text(2);
        report.problems.push_back({"unknown-id", ref.table, rows.i64(0),
                              field + " refers to " + ref.noun + " " + std::to_string(rows.i64(1)) +
                                  ", which does not exist" + (context.empty() ? "" : " (" + context + ")")});
    }
}

// The references of the run tables, and what a base run must be: the simulated run a replay
// executed (a replay of itself, of another replay, or a simulated run with a base is no result
// mhc stores).
void check_run_references(const Scope& where, const std::function<bool(const char*)>& has_table, CheckReport& report) {
    static const Reference kRefs[] = {
        {"runs", "base_run", "runs", "run", true, "id", "''"},
        {"run_events", "allocation", "allocations", "allocation", true, "rowid", "'run ' || run"},
        {"run_events", "kernel", "kernels", "kernel", true, "rowid", "'run ' || run"},
        {"run_kernels", "kernel", "kernels", "kernel", false, "run",
         "'the row of run ' || run || ' and kernel ' || kernel"},
    };
    if (!has_table("runs")) return;
    for (const Reference& ref : kRefs)
        if (has_table(ref.table)) check_reference(where, ref, report);
    sql::Stmt base(where.db, where.file,
                   ("SELECT r.id, r.kind, b.id, b.kind FROM runs r JOIN runs b ON b.id = r.base_run "
                    "WHERE r.base_run IS NOT 0 AND (r.kind IS NOT 'replayed' OR b.kind IS NOT 'simulated' OR b.id = r.id)" +
                    (where.runs_filter.empty() ? "" : " AND r.id IN " + where.runs_filter) + " ORDER BY r.id")
                       .c_str());
    while (base.step())
        report.problems.push_back({"base-run", "runs", base.i64(0),
                              base.i64(0) == base.i64(2)
                                  ? "base_run refers to the run itself"
                                  : "base_run refers to run " + std::to_string(base.i64(2)) + " (" + base.text(3) +
                                        ") from a " + base.text(1) +
                                        " run; only a replayed run has a base run, the simulated run it executed"});
}

void check_references(const Reader& reader, CheckReport& report) {
    static const Reference kRefs[] = {
        {"markers", "name", "strings", "string", true, "id", "''"},
        {"modules", "name", "strings", "string", true, "id", "''"},
        {"modules", "type", "strings", "string", true, "id", "''"},
        {"modules", "parent", "modules", "module", true, "id", "''"},
        {"kernel_info", "kernel", "kernels", "kernel", false, "kernel", "''"},
        {"kernel_info", "module", "modules", "module", true, "kernel", "''"},
        {"saved_tensors", "allocation", "allocations", "allocation", false, "kernel",
         "'the row of allocation ' || allocation || ' and kernel ' || kernel"},
        {"saved_tensors", "kernel", "kernels", "kernel", false, "kernel",
         "'the row of allocation ' || allocation || ' and kernel ' || kernel"},
    };
    const Scope here{reader.handle(), reader.path(), "", ""};
    for (const Reference& ref : kRefs)
        if (reader.has_table(ref.table) && reader.has_table(ref.target)) check_reference(here, ref, report);
    check_run_references(here, [&](const char* name) { return reader.has_table(name); }, report);
}

// Meta `key`, a JSON list of [allocation id, kernel id] (capture.frame_holds, capture.unpacks):
// its first entry that is no pair, or names a row the trace lacks.
void check_pairs_meta(const TraceData& trace, const char* key, CheckReport& report) {
    const std::string text = trace.meta_or(key, "");
    if (text.empty()) return;
    const nlohmann::json rows = nlohmann::json::parse(text, nullptr, false);
    auto bad = [&](const std::string& why) {
        report.problems.push_back({"meta", "meta", 0, std::string(key) + ": " + why});
    };
    if (!rows.is_array()) return bad("not a JSON list of [allocation id, kernel id] pairs");
    for (size_t i = 0; i < rows.size(); ++i) {
        const auto& row = rows[i];
        const std::string entry = "entry " + std::to_string(i + 1) + " ";
        if (!row.is_array() || row.size() != 2 || !row[0].is_number_integer() || !row[1].is_number_integer())
            return bad(entry + row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).substr(0, 40) +
                       " is not an [allocation id, kernel id] pair");
        if (trace.allocation_at(row[0].get<int64_t>()) < 0)
            return bad(entry + "names allocation " + std::to_string(row[0].get<int64_t>()) + ", which does not exist");
        if (trace.kernel_at(row[1].get<int64_t>()) < 0)
            return bad(entry + "names kernel " + std::to_string(row[1].get<int64_t>()) + ", which does not exist");
    }
}

// The other capture.* meta `mhc advise` reads (python/mhc_torch writes them): their forms.
void check_capture_meta(const TraceData& trace, CheckReport& report) {
    // The JSON a capture writes nests a few levels. What nests deeper is no capture's, and code
    // that walks it recursively (nlohmann's dump(), advise's printer of Python literals) overflowed
    // the stack: a list nested 200,000 deep in capture.unpacks made mhc check and advise segfault.
    // Said here, before anything parses it; check and advise alike.
    bool too_deep = false;
    for (const auto& [key, value] : trace.meta)
        if (key.rfind("capture.", 0) == 0 && json_nesting(value) > kMaxCaptureJsonNesting) {
            report.problems.push_back({"meta", "meta", 0,
                                       key + ": JSON nested deeper than " + std::to_string(kMaxCaptureJsonNesting) +
                                           " levels (a capture writes a few)"});
            too_deep = true;
        }
    if (too_deep) return;
    check_pairs_meta(trace, "capture.frame_holds", report);
    check_pairs_meta(trace, "capture.unpacks", report);
    auto bad = [&](const std::string& key, const std::string& why) {
        report.problems.push_back({"meta", "meta", 0, key + ": " + why});
    };
    // As advise reads them: an empty value is no value; the call is read only beside layers.
    const std::string layers = trace.meta_or("capture.hf_checkpoint_layers", "");
    if (!layers.empty()) {
        const auto names = nlohmann::json::parse(layers, nullptr, false);
        if (!names.is_array() || std::any_of(names.begin(), names.end(), [](const auto& n) { return !n.is_string(); }))
            bad("capture.hf_checkpoint_layers", "not a JSON list of module names");
        const std::string call = trace.meta_or("capture.hf_checkpoint_call", "gradient_checkpointing_enable");
        if (call != "gradient_checkpointing_enable" && call != "activation_checkpointing_enable")
            bad("capture.hf_checkpoint_call", quoted(call) +
                                                  " is not a Hugging Face checkpointing call "
                                                  "(gradient_checkpointing_enable, activation_checkpointing_enable)");
    }
    if (const CaptureTiming timing = capture_timing(trace.meta); !timing.error.empty())
        report.problems.push_back({"meta", "meta", 0, timing.error});
    const std::string defaults = trace.meta_or("capture.optimizer_defaults", "");
    if (!defaults.empty() && !nlohmann::json::parse(defaults, nullptr, false).is_object())
        bad("capture.optimizer_defaults", "not a JSON object");
    const std::string dp = trace.meta_or("capture.data_parallel", "");
    if (!dp.empty() && dp != "ddp" && dp != "fsdp2" && dp != "ddp+fsdp2")
        bad("capture.data_parallel", quoted(dp) + " is not ddp, fsdp2 or ddp+fsdp2");
    // Its sizes, as advise reads them: capture.ddp under DDP alone, else capture.fsdp2.
    if (dp == "ddp" || dp == "fsdp2" || dp == "ddp+fsdp2") {
        const std::string key = dp == "ddp" ? "capture.ddp" : "capture.fsdp2";
        const DataParallelSizes sizes = data_parallel_sizes(trace.meta_or(key, ""));
        if (!sizes.error.empty()) bad(key, sizes.error);
    }
}

// The job meta of a rank's trace (docs/trace-format.md, "Multi-rank traces"), which a coupled
// run (`mhc simulate --ranks`) reads: rank and world_size are whole numbers >= 0, the rank below
// the world size, time_origin_ns a time in ns.
void check_job_meta(const TraceData& trace, CheckReport& report) {
    auto number = [&](const char* key, bool negative_ok) -> std::optional<int64_t> {
        auto it = trace.meta.find(key);
        if (it == trace.meta.end()) return std::nullopt;
        const std::optional<int64_t> value = parse_integer<int64_t>(it->second);
        if (!value || (!negative_ok && *value < 0)) {
            report.problems.push_back({"meta", "meta", 0,
                                       std::string(key) + ": " + quoted(it->second) + " is not " +
                                           (negative_ok ? "a time in ns" : "a whole number >= 0")});
            return std::nullopt;
        }
        return value;
    };
    const auto rank = number("rank", false), world = number("world_size", false);
    number("time_origin_ns", true);
    // The device's memory in bytes (mhc info prints it): "1e400" read as 1 B, "abc" as nothing.
    if (auto it = trace.meta.find("device_memory"); it != trace.meta.end()) {
        const std::optional<int64_t> bytes = parse_integer<int64_t>(it->second);
        if (!bytes || *bytes < 0 || *bytes > limits::kMaxBytes)
            report.problems.push_back(
                {"meta", "meta", 0, "device_memory: " + quoted(it->second) + " is not a size in bytes in [0, 2^56]"});
    }
    if (rank && world && *rank >= *world)
        report.problems.push_back(
            {"meta", "meta", 0,
             "rank: " + std::to_string(*rank) + " is not below world_size " + std::to_string(*world)});
}

// A model capture's kernels run one after another on each device (mhc-torch puts every op on
// one compute stream; `mhc advise` plans the step as that one sequence): two that overlap, on
// any streams, are listed as `stream-overlap` lists them on one stream.
void check_capture_kernels(const TraceData& trace, CheckReport& report) {
    const auto& kernels = trace.kernels;
    std::vector<size_t> order(kernels.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t lhs, size_t rhs) {
        if (kernels.device[lhs] != kernels.device[rhs]) return kernels.device[lhs] < kernels.device[rhs];
        if (kernels.t_start[lhs] != kernels.t_start[rhs]) return kernels.t_start[lhs] < kernels.t_start[rhs];
        return kernels.id[lhs] < kernels.id[rhs];
    });
    size_t last = SIZE_MAX;   // the kernel ending latest so far on this device
    for (size_t row : order) {
        if (last != SIZE_MAX && kernels.device[last] == kernels.device[row] &&
            kernels.t_start[row] < kernels.t_end[last] &&
            kernels.stream[last] != kernels.stream[row])   // on one stream: rule stream-overlap says it
            report.problems.push_back(
                {"capture-overlap", "kernels", kernels.id[row],
                 "starts at " + t_str(kernels.t_start[row]) + " on stream " + std::to_string(kernels.stream[row]) +
                     " while kernel " + std::to_string(kernels.id[last]) + " still runs on stream " +
                     std::to_string(kernels.stream[last]) + " (until " + t_str(kernels.t_end[last]) +
                     "): a model capture runs its kernels one after another on device " +
                     std::to_string(kernels.device[row])});
        if (last == SIZE_MAX || kernels.device[last] != kernels.device[row] || kernels.t_end[row] > kernels.t_end[last])
            last = row;
    }
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
        if (covered < hi) out.push_back(e.i);
    }
    std::sort(out.begin(), out.end());
    return out;
}

CheckReport check_capture(const TraceData& trace) {
    CheckReport report;
    check_capture_meta(trace, report);
    if (trace.path.empty()) return report;
    Reader reader(trace.path);
    auto count = [&](const std::string& sql) {
        sql::Stmt stmt(reader.handle(), reader.path(), sql.c_str());
        return stmt.step() ? stmt.i64(0) : 0;
    };
    if (!reader.has_table("modules") || count("SELECT count(*) FROM modules") == 0) return report;   // not a capture
    check_capture_kernels(trace, report);
    if (!reader.has_table("kernel_info")) return report;
    // Each kernel's module and phase: what the planner groups and moves. One problem, at the first
    // kernel without a row, with how many lack one (a capture cut short lacks thousands).
    sql::Stmt lacking(reader.handle(), reader.path(),
                      "SELECT min(id), count(*) FROM kernels WHERE id NOT IN (SELECT kernel FROM kernel_info)");
    if (lacking.step() && lacking.i64(1) > 0) {
        const int64_t others = lacking.i64(1) - 1;
        report.problems.push_back(
            {"kernel-info", "kernels", lacking.i64(0),
             "has no kernel_info row (its module and phase)" +
                 (others > 0 ? ", nor have " + std::to_string(others) + " later kernels" : std::string()) +
                 "; every kernel of a model capture has one"});
    }
    return report;
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

// The content digest in meta is the rows' (trace_tables.hpp): a row changed with the digest
// triggers dropped, or a digest written by hand, would let runs stored for the old rows pass as
// this trace's. A digest the triggers marked edited says so itself (the identity changed).
void check_content_digest(const Reader& reader, CheckReport& r) {
    const auto meta = reader.meta();
    auto it = meta.find(kContentDigestKey);
    if (it == meta.end() || it->second.rfind(kEditedDigestPrefix, 0) == 0) return;
    const std::string now = content_digest_of(reader.handle(), reader.path(), it->second);
    if (now != it->second)
        r.problems.push_back({"content-digest", "meta", 0,
                              std::string("meta ") + kContentDigestKey + " is " + quoted(it->second) +
                                  " but the rows give " + now +
                                  ": a row was changed without the trace's triggers, so runs stored for it "
                                  "elsewhere (--runs-db) may be of other rows"});
}

CheckReport check_file(const std::string& path, bool full) {
    CheckReport r;
    std::string problem = open_problem(path);   // throws sql::Busy: a locked file is not a damaged one
    if (!problem.empty()) {
        r.problems.push_back({"file", "file", 0, problem});
        return r;
    }
    try {
        Reader reader(path);
        {
            // quick_check reads every page: a truncated or corrupt file shows up here. The full
            // integrity_check also matches every index entry with its row (an index damaged by
            // a half-written transaction: "row 99825 missing from index").
            for (const std::string& damage : sql::quick_check(reader.handle(), path, "", full)) {
                const bool index = damage.find("index") != std::string::npos;
                r.problems.push_back(
                    {"corrupt", "file", 0,
                     path + (index ? ": an index is damaged: " : ": the file is truncated or corrupt: ") + damage});
            }
        }
        if (!r.ok()) return r;
        // Run tables a store cannot write (simulate refuses them before its work): said alone, as
        // the reads of the runs would stop at a missing column ("no such column: base_run").
        for (const std::string& why : runfiles::run_table_problems(reader.handle(), path, "main", false))
            r.problems.push_back({"run-tables", "file", 0, path + ": " + why});
        if (!r.ok()) return r;
        check_values(reader, r);
        if (!r.ok()) return r;   // loading would stop at the first of them
        check_content_digest(reader, r);
        TraceData t = load_trace(path, "", LoadFrom::Rows);   // the rows themselves, never a cached copy
        CheckReport rows = check_trace(t);
        r.problems.insert(r.problems.end(), rows.problems.begin(), rows.problems.end());
        check_references(reader, r);
        check_job_meta(t, r);
        CheckReport capture = check_capture(t);
        r.problems.insert(r.problems.end(), capture.problems.begin(), capture.problems.end());
        check_runs(path, reader, r);
    } catch (const sql::Busy&) {
        throw;
    } catch (const Error& e) {
        r.problems.push_back({"corrupt", "file", 0, e.what()});
    }
    return r;
}

CheckReport check_runs_db(const std::string& trace, const std::string& runs_db) {
    CheckReport report;
    std::vector<RunInfo> runs;
    try {
        {
            // Every page first, as check_file does for the trace: a damaged one is listed by its
            // number (reading the runs would stop at it, saying only "malformed").
            RunsDbReader pages(trace, runs_db);   // refuses another trace's runs (fingerprint), a non-runs database
            for (const std::string& damage : sql::quick_check(pages.handle(), runs_db))
                report.problems.push_back(
                    {"corrupt", "file", 0, runs_db + ": the file is truncated or corrupt: " + damage});
            // Then run tables a store cannot write (as check_file says them for a trace's).
            if (report.ok())
                for (const std::string& why : runfiles::run_table_problems(pages.handle(), runs_db, "main", true))
                    report.problems.push_back({"run-tables", "file", 0, runs_db + ": " + why});
        }
        if (!report.ok()) return report;
        runs = list_runs(trace, runs_db);
        for (const RunInfo& run : runs) {
            try {
                load_run(trace, run.id, runs_db);
            } catch (const Error& e) { report.problems.push_back({"run", "file", 0, e.what()}); }
        }
    } catch (const sql::Busy&) {
        throw;
    } catch (const Error& e) {
        report.problems.push_back({"file", "file", 0, e.what()});
        return report;
    }
    std::string problem;
    sqlite3* db = sql::open_existing(runs_db, false, problem);
    if (!db) {
        report.problems.push_back({"file", "file", 0, problem});
        return report;
    }
    struct Close {
        sqlite3* db;
        ~Close() { sqlite3_close(db); }
    } close{db};
    try {
        sql::Stmt attach(db, runs_db, "ATTACH ? AS tr");
        attach.bind(1, trace);
        attach.run();
        // This trace's runs (a job's database also holds the other ranks'), by id.
        sql::exec(db, runs_db, "CREATE TEMP TABLE mine (id INTEGER PRIMARY KEY)");
        sql::Stmt ins(db, runs_db, "INSERT INTO temp.mine VALUES (?)");
        for (const RunInfo& run : runs) {
            ins.bind(1, run.id);
            ins.run();
        }
        auto has = [&](const char* name) { return runfiles::has_table(db, runs_db, name, "main"); };
        if (has("runs")) report_run_ids(db, runs_db, report);
        check_run_references({db, runs_db, "tr.", "temp.mine"}, has, report);
        report_orphan_rows(db, runs_db,
                           {"run_config", "run_metrics", "run_events", "run_kernels", "run_memory", "run_event_rows",
                            "run_trace"},
                           has, "", report);
        if (has("run_trace") && has("traces")) {
            sql::Stmt lost(db, runs_db,
                           "SELECT run, trace FROM run_trace WHERE trace NOT IN (SELECT id FROM traces) ORDER BY run");
            while (lost.step())
                report.problems.push_back({"unknown-id", "run_trace", lost.i64(0),
                                      "trace refers to trace " + std::to_string(lost.i64(1)) +
                                          ", which does not exist: run " + std::to_string(lost.i64(0)) +
                                          " belongs to no trace of this database"});
        }
    } catch (const sql::Busy&) {
        throw;
    } catch (const Error& e) {
        report.problems.push_back({"corrupt", "file", 0, e.what()});
    }
    return report;
}

void require_ok(const CheckReport& report, const std::string& path) {
    if (report.ok()) return;
    const Problem& p = report.problems.front();
    std::string msg = p.table == "file"   ? p.message
                      : p.table == "meta" ? path + ": meta " + p.message + " [" + p.rule + "]"
                                          : where_row(path, p.table, p.row, p.message + " [" + p.rule + "]");
    if (report.problems.size() > 1)
        msg += " (and " + std::to_string(report.problems.size() - 1) +
               (report.problems.size() == 2 ? " more problem" : " more problems") + "; run `mhc check` for the list)";
    throw Error(msg);
}

TraceData load_checked_trace(const std::string& path) {
    TraceData t = load_trace(path);
    require_ok(check_trace(t), path);
    return t;
}

}  // namespace mhc::trace
