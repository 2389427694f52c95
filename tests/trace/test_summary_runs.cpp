#include <catch2/catch.hpp>

#include <array>
#include <sstream>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "mhc/trace/event_order.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/store.hpp"
#include "mhc/trace/summary.hpp"
#include "mhc/test/temp.hpp"

using namespace mhc::trace;
using mhc::test::TempPath;

TEST_CASE("live peak counts frees before allocations at the same instant", "[summary]") {
    TempPath p("peak.db");
    {
        Writer w(p.path);
        // 100 B over [0,10), 50 B over [10,20), 30 B over [5,30), 20 B alive to the end from 25.
        w.add(Allocation{1, 0, 0, 100, 0, 10, 0, Category::Activation, 0});
        w.add(Allocation{2, 0, 0, 50, 10, 20, 0, Category::Grad, 0});
        w.add(Allocation{3, 0, 0, 30, 5, 30, 0, Category::Param, 0});
        w.add(Allocation{4, 0, 0, 20, 25, kNoTime, 0, Category::Optimizer, 0});
        w.add(Allocation{5, 1, 0, 1000, 0, 1, 0, Category::Other, 0});  // other device
        w.finish();
    }
    TraceData t = load_trace(p.path);
    LivePeak peak = live_peak(t, 0);
    CHECK(peak.bytes == 130);   // 100 + 30 at t=5; at t=10 the 100 B go before the 50 B come
    CHECK(peak.time == 5);
    CHECK(peak.by_category[static_cast<size_t>(Category::Activation)] == 100);
    CHECK(peak.by_category[static_cast<size_t>(Category::Param)] == 30);
    CHECK(live_peak(t, 1).bytes == 1000);

    Summary s = summarize(t);
    CHECK(s.peak.bytes == 1000);
    CHECK(s.peak_device == 1);
    auto j = nlohmann::json::parse(to_json(s));
    CHECK(j["counts"]["allocations"] == 5);
    CHECK(j["has_accesses"] == false);
    CHECK(to_text(s).find("accesses    none") != std::string::npos);
}

TEST_CASE("events at one instant: earlier frees, then allocations by id, each briefly live block freed at once",
          "[summary][event-order]") {
    TempPath p("instant.db");
    {
        Writer w(p.path);
        // At t = 10: A (100 B, since 0) is freed; B (50 B) lives only at 10; C (30 B) stays; D (1000 B)
        // lives only at 10. The order: free A, alloc B, free B, alloc C, alloc D, free D.
        w.add(Allocation{1, 0, 0, 100, 0, 10, 0, Category::Activation, 0});
        w.add(Allocation{2, 0, 0, 50, 10, 10, 0, Category::Grad, 0});
        w.add(Allocation{3, 0, 0, 30, 10, 20, 0, Category::Param, 0});
        w.add(Allocation{4, 0, 0, 1000, 10, 10, 0, Category::Workspace, 0});
        w.finish();
    }
    TraceData t = load_trace(p.path);
    auto ev = memory_events(t.allocations, 0);
    std::vector<std::pair<int64_t, bool>> got;
    for (const auto& e : ev) got.push_back({e.row, e.free});
    std::vector<std::pair<int64_t, bool>> want{{0, false}, {0, true},  {1, false}, {1, true},
                                               {2, false}, {3, false}, {3, true},  {2, true}};
    CHECK(got == want);
    // D counts with C, alive when D was made: 30 + 1000. (Frees first at an instant gave 1080 and
    // never freed B and D: their free came before their allocation.)
    LivePeak peak = live_peak(t, 0);
    CHECK(peak.bytes == 1030);
    CHECK(peak.time == 10);
    CHECK(peak.by_category[static_cast<size_t>(Category::Workspace)] == 1000);
    CHECK(peak.by_category[static_cast<size_t>(Category::Param)] == 30);
    CHECK(peak.by_category[static_cast<size_t>(Category::Grad)] == 0);
    CHECK(peak.by_category[static_cast<size_t>(Category::Activation)] == 0);
}

TEST_CASE("summary lists kernels by total time and steps", "[summary]") {
    TempPath p("sum.db");
    {
        Writer w(p.path);
        int64_t a = w.intern("a"), b = w.intern("b");
        Kernel k{};
        k.id = 1; k.name = a; k.t_start = 0; k.t_end = 10; w.add(k);
        k.id = 2; k.name = b; k.t_start = 10; k.t_end = 40; w.add(k);
        k.id = 3; k.name = a; k.t_start = 40; k.t_end = 45; w.add(k);
        w.add(Marker{1, 0, 0, 20, MarkerKind::Step, 0});
        w.add(Marker{2, 0, 20, 45, MarkerKind::Step, 1});
        w.finish();
    }
    Summary s = summarize(load_trace(p.path));
    REQUIRE(s.top_kernels.size() == 2);
    CHECK(s.top_kernels[0].name == "b");
    CHECK(s.top_kernels[0].total == 30);
    CHECK(s.top_kernels[1].count == 2);
    CHECK(s.top_kernels[1].total == 15);
    CHECK(s.steps == 2);
    CHECK(s.step_durations == std::vector<int64_t>{20, 25});
    CHECK(s.kernel_time == 45);
}

// A name past the room is cut with "..." so that its line is exactly 100 columns, its columns
// where the short names' are: the kernels' room was one column short, and mhc info's 100-column
// wrap then squeezed the line's spaces ("     591.53 ms 1024x sm90_xmma_...").
TEST_CASE("summary text keeps long names within 100 columns", "[summary]") {
    TempPath path("sum-long.db");
    const std::string long_name(200, 'k');
    {
        Writer writer(path.path);
        int64_t name = writer.intern(long_name), short_name = writer.intern("s");
        Kernel kernel{};
        kernel.id = 1; kernel.name = name; kernel.t_start = 0; kernel.t_end = 10; writer.add(kernel);
        kernel.id = 2; kernel.name = short_name; kernel.t_start = 10; kernel.t_end = 15; writer.add(kernel);
        writer.add(Allocation{1, 0, 0, 64, 0, 10, 0, Category::Activation, name});
        writer.finish();
    }
    const std::string text = to_text(summarize(load_trace(path.path)));
    std::istringstream lines(text);
    std::vector<std::string> kernel_lines, allocation_lines;
    std::string section;
    for (std::string line; std::getline(lines, line);) {
        CHECK(line.size() <= 100);
        if (line.rfind("  ", 0) != 0) section = line;
        else if (section == "kernels by total time") kernel_lines.push_back(line);
        else if (section == "largest allocations") allocation_lines.push_back(line);
    }
    REQUIRE(kernel_lines.size() == 2);
    CHECK(kernel_lines[0].size() == 100);
    CHECK(kernel_lines[0].substr(97) == "...");
    CHECK(kernel_lines[1].substr(27) == "s");   // the names start in one column
    CHECK(kernel_lines[0].substr(26, 4) == " kkk");
    REQUIRE(allocation_lines.size() == 1);
    CHECK(allocation_lines[0].size() == 100);
}

TEST_CASE("runs are added to a trace and read back whole", "[runs]") {
    TempPath p("runs.db");
    {
        Writer w(p.path);
        w.add(Allocation{1, 0, 0, 64, 0, 50, 0, Category::Other, 0});
        w.finish();
    }
    Run r;
    r.name = "lru@50%";
    r.config["policy"] = "lru";
    r.metrics["peak_bytes"] = 32;
    r.events.push_back({EventKind::SwapOut, 5, 9, 1, 0, 64});
    r.events.push_back({EventKind::Stall, 10, 12, 0, 3, 0});
    r.kernel_times.push_back({3, 12, 20});
    r.memory.push_back({0, 64, 0});
    int64_t id = add_run(p.path, r);
    int64_t id2 = add_run(p.path, r);
    CHECK(id2 == id + 1);
    auto runs = list_runs(p.path);
    REQUIRE(runs.size() == 2);
    CHECK(runs[0].name == "lru@50%");
    CHECK(to_string(runs[0].status) == "complete");
    Run back = load_run(p.path, id);
    CHECK(back.config.at("policy") == "lru");
    CHECK(back.metrics.at("peak_bytes") == 32);
    REQUIRE(back.events.size() == 2);
    CHECK(back.events[0].kind == EventKind::SwapOut);
    CHECK(back.events[1].kernel == 3);
    CHECK(back.kernel_times.at(0).t_start == 12);
    // An unknown run said as trace::no_such_run says it (mhc export, mhc-view, prune): before, load_run
    // said "T.db: run 999 does not exist" alone, with no count and no way to list them.
    CHECK_THROWS_WITH(load_run(p.path, 999),
                      p.path + ": run 999 does not exist (2 runs in the file: mhc info " + p.path + " lists them)");
}

namespace {
// Kernel ids and times of a loaded run, in id order.
std::vector<std::array<int64_t, 3>> times_of(const Run& r) {
    std::vector<std::array<int64_t, 3>> v;
    for (const RunKernelTime& k : r.kernel_times) v.push_back({k.kernel, k.t_start, k.t_end});
    return v;
}
}  // namespace

TEST_CASE("every reader of a run gets every kernel it reached, runs stored before that too", "[runs]") {
    TempPath p("kernel-times.db");
    {
        Writer w(p.path);
        Kernel k;
        for (int64_t i = 1; i <= 4; ++i) {   // kernels 1..4 at [10 i, 10 i + 10)
            k.id = i; k.t_start = 10 * i; k.t_end = 10 * i + 10;
            w.add(k);
        }
        w.finish();
    }
    using V = std::vector<std::array<int64_t, 3>>;
    // Stored now: every kernel reached, with the reach in the metrics; read as stored (kernels
    // 3 and 4 were never reached by this OOM run).
    Run now;
    now.status = RunStatus::Oom;
    now.metrics = {{"kernels_reached", 2}, {"last_kernel_reached", 2}, {"stall_ns", 5}};
    now.kernel_times = {{1, 10, 20}, {2, 25, 35}};
    CHECK(times_of(load_run(p.path, add_run(p.path, now))) == V{{1, 10, 20}, {2, 25, 35}});
    // Stored before (no kernels_reached): only kernels that moved. The shift never decreases, so
    // kernels 1 and 2 (up to the first moved one, kernel 3) ran at their recorded times.
    Run before;
    before.metrics = {{"stall_ns", 5}};
    before.kernel_times = {{3, 35, 45}, {4, 45, 55}};
    CHECK(times_of(load_run(p.path, add_run(p.path, before))) == V{{1, 10, 20}, {2, 20, 30}, {3, 35, 45}, {4, 45, 55}});
    // ... none moved and no stall: complete, every kernel at its recorded time ...
    before.metrics = {{"stall_ns", 0}};
    before.kernel_times.clear();
    CHECK(times_of(load_run(p.path, add_run(p.path, before))) == V{{1, 10, 20}, {2, 20, 30}, {3, 30, 40}, {4, 40, 50}});
    // ... an OOM at 35 ns with none moved: the kernels that started before it ...
    before.status = RunStatus::Oom;
    before.metrics = {{"stall_ns", 0}, {"oom_time_ns", 35}};
    CHECK(times_of(load_run(p.path, add_run(p.path, before))) == V{{1, 10, 20}, {2, 20, 30}, {3, 30, 40}});
    // ... and stalls without kernel times: stored without its timeline, nothing to fill.
    before.status = RunStatus::Complete;
    before.metrics = {{"stall_ns", 7}};
    CHECK(load_run(p.path, add_run(p.path, before)).kernel_times.empty());
    // Replayed runs store every kernel they measured: read as stored.
    Run replayed;
    replayed.kind = RunKind::Replayed;
    replayed.kernel_times = {{4, 41, 51}};
    CHECK(times_of(load_run(p.path, add_run(p.path, replayed))) == V{{4, 41, 51}});
}

TEST_CASE("a begun run stays marked incomplete until finished", "[runs]") {
    TempPath p("incomplete.db");
    {
        Writer w(p.path);
        w.finish();
    }
    int64_t id = begin_run(p.path, RunKind::Replayed, "host replay");
    CHECK(to_string(list_runs(p.path).at(0).status) == "incomplete");
    Run r;
    r.kind = RunKind::Replayed;
    r.name = "host replay";
    r.metrics["measured_peak_bytes"] = 10;
    finish_run(p.path, id, r);
    CHECK(to_string(list_runs(p.path).at(0).status) == "complete");
    CHECK(load_run(p.path, id).metrics.at("measured_peak_bytes") == 10);
}

TEST_CASE("info on an order-only trace: times are event numbers, memory figures stand", "[summary][order-only]") {
    TempPath p("order.db");
    {
        Writer w(p.path);
        w.set_meta("timing", "order-only");
        w.add(Allocation{1, 0, 0, 100, 1, 7, 0, Category::Other, 0});
        w.add(Allocation{2, 0, 0, 50, 3, kNoTime, 0, Category::Other, 0});
        w.finish();
    }
    Summary s = summarize(load_trace(p.path));
    std::string text = to_text(s);
    CHECK(text.find("timing      order only") != std::string::npos);
    CHECK(text.find("duration    6 events") != std::string::npos);
    CHECK(text.find("peak        150 B live on device 0 at event #3") != std::string::npos);
    CHECK(text.find("kernel time") == std::string::npos);   // a time: not said
    CHECK(nlohmann::json::parse(to_json(s))["timing"] == "order-only");
    CHECK(order_only_timing("order"));   // read the same
    CHECK_FALSE(order_only_timing("exact"));
}

TEST_CASE("info names the versions a captured trace was made with, a mix of versions is said", "[summary]") {
    TempPath p("versions.db");
    {
        Writer w(p.path);
        w.set_meta("source", "captured");
        w.set_meta("torch_version", "2.15.0+cu132");
        w.set_meta("transformers_version", "5.24.0");
        w.finish();
    }
    TraceData t = load_trace(p.path);
    CHECK(capture_versions(t.meta) == "torch 2.15.0+cu132, transformers 5.24.0");
    CHECK(to_text(summarize(t)).find("captured    with torch 2.15.0+cu132, transformers 5.24.0\n") !=
          std::string::npos);
    CHECK(capture_versions({{"source", "generated"}}).empty());
    CHECK(capture_versions({{"torch_version", "2.14.1"}}) == "torch 2.14.1");

    CHECK(version_mismatch({{"a.db", "torch 2.15.0"}, {"b.db", ""}, {"c.db", "torch 2.15.0"}}).empty());
    CHECK(version_mismatch({{"a.db", ""}, {"b.db", "torch 2.15.0"}, {"c.db", "torch 2.14.1"}}) ==
          "traces captured with different versions are compared: b.db (torch 2.15.0) and c.db (torch 2.14.1)");
}

namespace {
// The first column of every row of query `sql`, as text.
std::vector<std::string> column_text(const std::string& path, const char* sql) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) == SQLITE_OK);
    std::vector<std::string> out;
    while (sqlite3_step(stmt) == SQLITE_ROW) out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)));
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return out;
}

void exec(const std::string& path, const char* sql) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
}
}  // namespace

TEST_CASE("a run's kind and status are stored as their words, another word is refused on reading", "[runs]") {
    TempPath file("kinds.db");
    {
        Writer writer(file.path);
        writer.finish();
    }
    Run run;
    for (RunStatus status : {RunStatus::Complete, RunStatus::Oom, RunStatus::Incomplete, RunStatus::Failed}) {
        run.status = status;
        add_run(file.path, run);
    }
    run.kind = RunKind::Replayed;
    add_run(file.path, run);
    using Words = std::vector<std::string>;
    CHECK(column_text(file.path, "SELECT kind FROM runs ORDER BY id") ==
          Words{"simulated", "simulated", "simulated", "simulated", "replayed"});
    CHECK(column_text(file.path, "SELECT status FROM runs ORDER BY id") ==
          Words{"complete", "oom", "incomplete", "failed", "failed"});
    auto runs = list_runs(file.path);
    REQUIRE(runs.size() == 5);
    CHECK(runs[1].status == RunStatus::Oom);
    CHECK(runs[4].kind == RunKind::Replayed);
    CHECK(load_run(file.path, runs[2].id).status == RunStatus::Incomplete);

    // A damaged or foreign file: the words are the contract, anything else is named and refused.
    exec(file.path, "UPDATE runs SET status = 'finished' WHERE id = 2");
    CHECK_THROWS_WITH(list_runs(file.path), Catch::Contains("kinds.db: runs row 2: status 'finished' is not one of "
                                                         "complete, oom, incomplete, failed [invalid-code]"));
    CHECK_THROWS_WITH(load_run(file.path, 2), Catch::Contains("runs row 2: status 'finished'"));
    exec(file.path, "UPDATE runs SET status = 'oom', kind = 'measured' WHERE id = 2");
    CHECK_THROWS_WITH(load_run(file.path, 2), Catch::Contains("runs row 2: kind 'measured' is not one of simulated, replayed"));
    CHECK(load_run(file.path, 1).kind == RunKind::Simulated);
}

TEST_CASE("info: a Kineto trace's recorded reserved peak where it has no segments", "[summary]") {
    TempPath path("kineto.db");
    {
        Writer writer(path.path);
        writer.add(Allocation{1, 0, 0, 100, 0, 10, 0, Category::Other, 0});
        writer.set_meta("kineto.reserved_peak.device0", "2097152");
        writer.set_meta("kineto.reserved_peak.device-1", "0");
        writer.finish();
    }
    Summary sum = summarize(load_trace(path.path));
    REQUIRE(sum.memory.size() == 1);
    CHECK(sum.memory[0].reserved == -1);
    CHECK(sum.memory[0].profiler_reserved == 2097152);
    CHECK(to_text(sum).find("reserved    2.00 MiB peak (the profiler's Total Reserved; no segments recorded)") !=
          std::string::npos);
    auto doc = nlohmann::json::parse(to_json(sum));
    CHECK(doc["memory"][0]["profiler_reserved_peak_bytes"] == 2097152);
    CHECK(doc["memory"][0]["reserved_peak_bytes"].is_null());
}

TEST_CASE("info: the profiler's reserved bytes at its first memory event beside the peak", "[summary]") {
    auto summary_with = [](const std::string& first, const std::string& peak) {
        TempPath path("kineto-first.db");
        {
            Writer writer(path.path);
            writer.add(Allocation{1, 0, 0, 100, 0, 10, 0, Category::Other, 0});
            writer.set_meta("kineto.reserved_peak.device0", peak);
            writer.set_meta("kineto.reserved_first.device0", first);
            writer.finish();
        }
        return summarize(load_trace(path.path));
    };
    // all of the peak held at the first event (TraceLens's MI300X TimeSformer: 6.21 GiB throughout)
    Summary held = summary_with("2097152", "2097152");
    CHECK(held.memory[0].profiler_reserved_first == 2097152);
    CHECK(to_text(held).find("reserved    2.00 MiB peak (the profiler's Total Reserved, all of it at its first memory "
                             "event: reserved before profiling; no segments recorded)") != std::string::npos);
    CHECK(nlohmann::json::parse(to_json(held))["memory"][0]["profiler_reserved_first_bytes"] == 2097152);
    // grown from 2 to 8 MiB during the trace (TraceLens's MI300X normalization test)
    Summary grown = summary_with("2097152", "8388608");
    CHECK(to_text(grown).find("reserved    8.00 MiB peak (the profiler's Total Reserved, 2.00 MiB at its first memory "
                              "event; no segments recorded)") != std::string::npos);
    // a first figure above the peak, or not a number, is not one to print
    CHECK(summary_with("9000000", "8388608").memory[0].profiler_reserved_first == -1);
    CHECK(summary_with("2x", "8388608").memory[0].profiler_reserved_first == -1);
}

// docs/trace-format.md, "The summary (mhc info)": the lists are ordered whatever the order the rows or
// names were read in. Found by tests/sim/reference_info_compare.py: equal sizes came out of
// std::partial_sort (not stable) in no stated order, and kernels of equal total time in the order of
// an unordered_map.
TEST_CASE("mhc info lists equal allocations by row and kernels of equal time by name", "[summary]") {
    TempPath file("ties.db");
    {
        Writer writer(file.path);
        // 20 allocations of 64 B (ids 1..20) and one of 128 B (id 21): the largest 5 are 21, then 1..4.
        for (int64_t id = 1; id <= 20; ++id)
            writer.add(Allocation{id, 0, 0, 64, id, id + 100, 0, Category::Activation, 0});
        writer.add(Allocation{21, 0, 0, 128, 50, 60, 0, Category::Activation, 0});
        // Kernels named in the order zeta, mu, alpha, beta, each 10 ns in all (zeta 2 x 5 ns): equal totals,
        // listed by name. 'big' (30 ns) comes first.
        const std::array<const char*, 5> names{"zeta", "mu", "alpha", "beta", "big"};
        int64_t id = 0, start = 0;
        for (const char* text : names) {
            const int64_t name = writer.intern(text);
            const int parts = std::string(text) == "zeta" ? 2 : 1;
            const int64_t len = std::string(text) == "big" ? 30 : 10 / parts;
            for (int i = 0; i < parts; ++i, start += 100) writer.add(Kernel{++id, 0, 7, name, start, start + len});
        }
        writer.finish();
    }
    Summary summary = summarize(load_trace(file.path), 5);
    std::vector<std::string> labels;
    for (const auto& entry : summary.top_allocations) labels.push_back(entry.name);
    CHECK(labels ==
          std::vector<std::string>{"allocation 21", "allocation 1", "allocation 2", "allocation 3", "allocation 4"});
    std::vector<std::string> kernels;
    for (const auto& entry : summary.top_kernels) kernels.push_back(entry.name);
    CHECK(kernels == std::vector<std::string>{"big", "alpha", "beta", "mu", "zeta"});
}

// An OOM's time is a time on the trace's clock, which may lie below 0 (docs/trace-format.md, "Value
// ranges"): mhc simulate stored oom_time_ns = -4.6e18 for a trace near -2^62 ns, and mhc export, mhc
// info and the viewer then refused the run as out of its domain (found by reference_perfetto_compare.py).
TEST_CASE("a stored OOM time below 0 is read back", "[runs]") {
    TempPath file("oom_negative.db");
    {
        Writer writer(file.path);
        writer.add(Allocation{1, 0, 0, 64, -4000, -1000, 0, Category::Other, 0});
        writer.finish();
    }
    Run run;
    run.name = "lru+none@50%/pcie4";
    run.metrics["oom"] = 1;
    run.metrics["oom_time_ns"] = -3000;
    const int64_t id = add_run(file.path, run);
    CHECK(load_run(file.path, id).metrics.at("oom_time_ns") == -3000);
    CHECK(metric_domain("oom_time_ns") == MetricDomain::Signed);
    CHECK(metric_domain("stall_ns") == MetricDomain::Amount);
}
