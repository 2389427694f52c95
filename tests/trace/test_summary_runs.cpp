#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

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
    CHECK(runs[0].status == "complete");
    Run back = load_run(p.path, id);
    CHECK(back.config.at("policy") == "lru");
    CHECK(back.metrics.at("peak_bytes") == 32);
    REQUIRE(back.events.size() == 2);
    CHECK(back.events[0].kind == EventKind::SwapOut);
    CHECK(back.events[1].kernel == 3);
    CHECK(back.kernel_times.at(0).t_start == 12);
    CHECK_THROWS_WITH(load_run(p.path, 999), Catch::Contains("run 999 does not exist"));
}

TEST_CASE("a begun run stays marked incomplete until finished", "[runs]") {
    TempPath p("incomplete.db");
    {
        Writer w(p.path);
        w.finish();
    }
    int64_t id = begin_run(p.path, "replayed", "host replay");
    CHECK(list_runs(p.path).at(0).status == "incomplete");
    Run r;
    r.kind = "replayed";
    r.name = "host replay";
    r.metrics["measured_peak_bytes"] = 10;
    finish_run(p.path, id, r);
    CHECK(list_runs(p.path).at(0).status == "complete");
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
