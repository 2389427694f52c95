// The run launcher's core, without a window: fields -> Config, and the worker that simulates
// and stores a run (checked against an independent sim::simulate of the same configuration).
#include <catch2/catch.hpp>

#include <fstream>

#include "fixtures.hpp"
#include "mhc/common/error.hpp"
#include "mhc/datasets/config.hpp"
#include "mhc/datasets/generate.hpp"
#include "mhc/sim/simulate.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/viewer/data.hpp"
#include "mhc/viewer/launch.hpp"
#include "mhc/viewer/stats.hpp"

using namespace mhc::viewer;

TEST_CASE("launcher: policy names from the registries", "[launch]") {
    CHECK(policy_base_name("lookahead:K") == "lookahead");
    CHECK(policy_base_name("periodic[:K]") == "periodic");
    CHECK(policy_base_name("forecast[:H]") == "forecast");
    CHECK(policy_base_name("cost_aware") == "cost_aware");
    CHECK(policy_takes_argument("periodic[:K]"));
    CHECK(policy_takes_argument("lookahead:K"));
    CHECK_FALSE(policy_takes_argument("capuchin"));
    // Every registry entry's base name makes a valid configuration on its own.
    for (const auto& p : mhc::sim::prefetch_policies()) {
        LaunchFields f;
        f.prefetch = policy_base_name(p.name);
        CHECK_NOTHROW(make_config(f));
    }
    for (const auto& p : mhc::sim::eviction_policies()) {
        LaunchFields f;
        f.eviction = p.name;
        CHECK(make_config(f).eviction == p.name);
    }
}

TEST_CASE("launcher: fields to Config", "[launch]") {
    LaunchFields f;
    f.eviction = "cost_aware";
    f.prefetch = "forecast";
    f.capacity_percent = 70;
    f.link = "pcie5";
    f.allocator = "caching";
    mhc::sim::Config c = make_config(f);
    CHECK(c.eviction == "cost_aware");
    CHECK(c.prefetch == "forecast");
    CHECK(c.capacity.fraction == Approx(0.70));
    CHECK(c.link.name == "pcie5");
    CHECK(c.allocator == "caching");
    CHECK(c.record_events);
    CHECK(mhc::sim::run_name(c) == "cost_aware+forecast@70%/pcie5/caching");

    f.prefetch = "lookahead";
    f.prefetch_arg = "4";
    CHECK(make_config(f).prefetch == "lookahead:4");

    f.capacity_is_percent = false;
    f.capacity_text = "40GiB";
    c = make_config(f);
    CHECK(c.capacity.fraction == 0);
    CHECK(c.capacity.bytes == (int64_t{40} << 30));
    f.capacity_text = "unlimited";
    CHECK(make_config(f).capacity.unlimited());
}

TEST_CASE("launcher: bad fields are one-line errors", "[launch]") {
    LaunchFields f;
    f.capacity_is_percent = false;
    for (const char* bad : {"", "-5GiB", "0", "lots", "12%%"}) {
        f.capacity_text = bad;
        CHECK_THROWS_AS(make_config(f), mhc::Error);
    }
    f = LaunchFields{};
    f.capacity_percent = 0;
    CHECK_THROWS_AS(make_config(f), mhc::Error);
    f = LaunchFields{};
    f.eviction = "fifo";
    CHECK_THROWS_AS(make_config(f), mhc::Error);
    f = LaunchFields{};
    f.prefetch = "capuchin";
    f.prefetch_arg = "3";   // capuchin takes no argument
    CHECK_THROWS_WITH(make_config(f), Catch::Contains("takes no argument"));
    f.prefetch = "lookahead";
    f.prefetch_arg = "0";
    CHECK_THROWS_AS(make_config(f), mhc::Error);
    f.prefetch_arg = "99999999999999999999";
    CHECK_THROWS_AS(make_config(f), mhc::Error);
    f = LaunchFields{};
    f.link = "pcie9";
    CHECK_THROWS_AS(make_config(f), mhc::Error);
    f = LaunchFields{};
    f.link_file = "/nonexistent/link.json";
    CHECK_THROWS_WITH(make_config(f), Catch::Contains("/nonexistent/link.json"));
}

namespace {

// gpt2-small, 2 layers, 2 steps: a trace that loads and simulates in milliseconds.
void write_small_gpt2(const std::string& path) {
    auto g = mhc::datasets::preset("gpt2-small");
    g.layers = 2;
    g.steps = 2;
    mhc::datasets::generate_file(g, path);
}

LaunchStatus run_to_end(Launcher& l, const mhc::sim::Config& c) {
    REQUIRE(l.start(c));
    l.wait();
    LaunchStatus s = l.status();
    REQUIRE_FALSE(l.busy());
    return s;
}

}  // namespace

TEST_CASE("launcher: simulates on the worker and stores the run", "[launch]") {
    fixture::TempPath path("launch.db");
    write_small_gpt2(path.path);

    LaunchFields f;
    f.capacity_percent = 60;
    mhc::sim::Config c = make_config(f);
    Launcher l(path.path);
    LaunchStatus s = run_to_end(l, c);
    INFO(s.message);
    REQUIRE(s.phase == LaunchPhase::Done);
    CHECK(s.generation == 1);
    CHECK(s.name == "lru+none@60%/pcie4/caching");   // the launcher defaults to the mhc commands' allocator
    CHECK_FALSE(s.summary.empty());

    auto runs = mhc::trace::list_runs(path.path);
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].id == s.run_id);
    CHECK(runs[0].name == s.name);
    mhc::trace::Run stored = mhc::trace::load_run(path.path, s.run_id);

    // The same configuration simulated directly, without the launcher.
    mhc::trace::TraceData t = mhc::trace::load_trace(path.path);
    mhc::sim::Result r = mhc::sim::simulate(t, c);
    CHECK(to_string(stored.status) == (r.oom.happened ? "oom" : "complete"));
    CHECK(stored.metrics.at("simulated_peak_bytes") == static_cast<double>(r.simulated_peak));
    CHECK(stored.metrics.at("baseline_peak_bytes") == static_cast<double>(r.baseline_peak));
    CHECK(stored.metrics.at("stall_ns") == static_cast<double>(r.stall_time));
    CHECK(stored.events.size() == r.events.size());
    CHECK(r.simulated_peak <= r.capacity);

    // A second launch reuses the prepared trace and adds a second run.
    f.eviction = "cost_aware";
    f.prefetch = "forecast";
    s = run_to_end(l, make_config(f));
    REQUIRE(s.phase == LaunchPhase::Done);
    CHECK(s.generation == 2);
    CHECK(mhc::trace::list_runs(path.path).size() == 2);
}

namespace {

// Valid trace: "weights" 400 MiB [0, end), "act" 1024 MiB [100, 900) us; kernel "k" [200, 300) us
// reads weights and writes act, so both must be resident together: 1424 MiB.
void write_two_allocations(const std::string& path) {
    using namespace mhc::trace;
    using fixture::MiB;
    using fixture::us;
    Writer w(path);
    w.add(Allocation{1, 0, 0, 400 * MiB, 0, kNoTime, 7, Category::Param, w.intern("weights")});
    w.add(Allocation{2, 0, 0, 1024 * MiB, 100 * us, 900 * us, 7, Category::Activation, w.intern("act")});
    Kernel k;
    k.id = 1; k.stream = 7; k.step = 0; k.name = w.intern("k"); k.t_start = 200 * us; k.t_end = 300 * us;
    w.add(k);
    w.add(Access{1, 1, AccessMode::Read});
    w.add(Access{1, 2, AccessMode::Write});
    w.finish();
}

}  // namespace

TEST_CASE("launcher: out of memory and broken files are reported, not thrown", "[launch]") {
    fixture::TempPath path("launch-oom.db");
    write_two_allocations(path.path);
    LaunchFields f;
    f.capacity_is_percent = false;
    f.capacity_text = "1GiB";
    Launcher l(path.path);
    LaunchStatus s = run_to_end(l, make_config(f));
    INFO(s.message);
    REQUIRE(s.phase == LaunchPhase::Done);
    CHECK(s.oom);
    CHECK_THAT(s.message, Catch::StartsWith("out of memory at "));
    auto runs = mhc::trace::list_runs(path.path);
    REQUIRE(runs.size() == 1);
    CHECK(to_string(runs[0].status) == "oom");
    // With room for both it completes, on the same (already prepared) trace.
    f.capacity_text = "1500MiB";
    s = run_to_end(l, make_config(f));
    CHECK(s.phase == LaunchPhase::Done);
    CHECK_FALSE(s.oom);
    CHECK(s.message.empty());

    // A trace that fails the checker (an access outside its allocation's lifetime): the
    // checker's line, naming the file, and no run stored.
    fixture::TempPath invalid("launch-invalid.db");
    fixture::write_known_trace(invalid.path, false);
    Launcher bad(invalid.path);
    s = run_to_end(bad, make_config(LaunchFields{}));
    CHECK(s.phase == LaunchPhase::Failed);
    CHECK_THAT(s.message, Catch::Contains(invalid.path) && Catch::Contains("access-outside-lifetime"));
    CHECK(s.generation == 1);
    CHECK(mhc::trace::list_runs(invalid.path).empty());

    fixture::TempPath junk("launch-junk.db");
    { std::ofstream(junk.path) << "not a trace"; }
    Launcher worse(junk.path);
    s = run_to_end(worse, make_config(LaunchFields{}));
    CHECK(s.phase == LaunchPhase::Failed);
    CHECK_THAT(s.message, Catch::Contains(junk.path));
}

namespace {
size_t items(const std::vector<Lane>& lanes) {
    size_t n = 0;
    for (const Lane& l : lanes) n += l.size();
    return n;
}
}  // namespace

TEST_CASE("a run's timeline holds every kernel it reached, moved or not", "[launch]") {
    fixture::TempPath path("launch-times.db");
    write_small_gpt2(path.path);
    // Belady at 99%: its one stall comes late in the trace, so most kernels run unmoved.
    LaunchFields f;
    f.eviction = "belady";
    f.capacity_percent = 99;
    Launcher l(path.path);
    LaunchStatus s = run_to_end(l, make_config(f));
    REQUIRE(s.phase == LaunchPhase::Done);
    ViewTrace t = load_view_trace(path.path);
    ViewRun r = load_view_run(t, s.run_id);
    REQUIRE(r.metrics.at("stalls") >= 1);
    CHECK(items(r.kernel_lanes) == static_cast<size_t>(t.kernel_count));
    CHECK(r.metrics.at("kernels_reached") == static_cast<double>(t.kernel_count));
    // Every kernel that started before the first stall sits at its recorded time.
    int64_t first_stall = INT64_MAX;
    for (const auto& e : r.events)
        if (e.kind == mhc::trace::EventKind::Stall) first_stall = std::min(first_stall, e.t_start);
    size_t unmoved = 0;
    for (size_t i = 0; i < t.kernel_lanes.size(); ++i)
        for (size_t k = 0; k < t.kernel_lanes[i].size(); ++k)
            if (t.kernel_lanes[i].t_start[k] < first_stall) {
                ++unmoved;
                CHECK(r.kernel_lanes[i].t_start[k] == t.kernel_lanes[i].t_start[k]);
            }
    CHECK(unmoved > static_cast<size_t>(t.kernel_count) / 2);

    // An OOM before the first kernel reaches none: the run draws no kernel (not the recorded ones).
    fixture::TempPath oom("launch-times-oom.db");
    write_two_allocations(oom.path);
    f = LaunchFields{};
    f.capacity_is_percent = false;
    f.capacity_text = "1GiB";
    Launcher lo(oom.path);
    s = run_to_end(lo, make_config(f));
    REQUIRE(s.oom);
    ViewTrace to = load_view_trace(oom.path);
    ViewRun ro = load_view_run(to, s.run_id);
    CHECK(ro.metrics.at("kernels_reached") == 0);
    CHECK_FALSE(ro.kernel_lanes.empty());
    CHECK(items(ro.kernel_lanes) == 0);
}

TEST_CASE("launcher: a cancelled simulation stops and stores nothing", "[launch]") {
    fixture::TempPath path("launch-cancel.db");
    write_small_gpt2(path.path);
    LaunchFields f;
    f.capacity_percent = 60;
    Launcher l(path.path);
    // Cancelled before the worker reaches the simulator (it loads and prepares the trace
    // first, milliseconds, while cancel() follows start() at once): the simulator stops at
    // its first check.
    // On a loaded machine the main thread may be descheduled long enough for the whole launch
    // to finish first: that attempt counts as done (its run stored) and the next one retries.
    LaunchStatus s;
    size_t stored = 0;
    for (int attempt = 0; attempt < 5; ++attempt) {
        REQUIRE(l.start(make_config(f)));
        l.cancel();
        l.wait();
        s = l.status();
        REQUIRE_FALSE(l.busy());
        CHECK(s.generation == attempt + 1);
        if (s.phase != LaunchPhase::Cancelled) {
            CHECK(s.phase == LaunchPhase::Done);
            ++stored;
            continue;
        }
        CHECK(s.message == "cancelled; nothing stored");
        break;
    }
    REQUIRE(s.phase == LaunchPhase::Cancelled);
    CHECK(mhc::trace::list_runs(path.path).size() == stored);
    // The next launch is not cancelled by the last one's request.
    s = run_to_end(l, make_config(f));
    CHECK(s.phase == LaunchPhase::Done);
    CHECK(mhc::trace::list_runs(path.path).size() == stored + 1);
}

TEST_CASE("live at a run's peak: the allocations on the device add up to the run's peak", "[launch][peak]") {
    // The simulator's device bytes (ideal allocator) are the bytes of the allocations resident or
    // reserved for a swap-in or a recomputation in flight: at the run's peak, the rows that
    // live_at_run_peak puts on the device (by their lifetimes on the run's clock and the run's events
    // on them) must add up to exactly that peak, whatever the policy moved; with the caching model
    // they add up to at most it (the rest is its cache). Before, the At the peak tab showed the
    // recording's peak whatever run was selected.
    fixture::TempPath path("runpeak.db");
    write_small_gpt2(path.path);
    Launcher launcher(path.path);
    const std::vector<std::pair<std::string, std::string>> policies{
        {"lru", "none"}, {"cost_aware", "forecast"}, {"largest", "lookahead"}, {"dtr", "none"}};
    int moved = 0;
    for (const std::string allocator : {"ideal", "caching"})
        for (const auto& [eviction, prefetch] : policies)
            for (double percent : {50.0, 70.0}) {
                LaunchFields fields;
                fields.eviction = eviction;
                fields.prefetch = prefetch;
                fields.capacity_percent = percent;
                fields.allocator = allocator;
                LaunchStatus status = run_to_end(launcher, make_config(fields));
                INFO(status.name << ": " << status.message);
                REQUIRE(status.phase == LaunchPhase::Done);
                const ViewTrace view = load_view_trace(path.path);
                const ViewRun run = load_view_run(view, status.run_id);
                const RunPeakLive peak = live_at_run_peak(view, run);
                REQUIRE(peak.has_peak);
                CHECK(peak.bytes == run.memory.peak());
                int64_t device = 0, host = 0;
                for (const RunPeakRow& row : peak.rows) {
                    const int64_t bytes = view.allocations.bytes[row.row];
                    (row.where == Residence::Device ? device : host) += bytes;
                    CHECK(row.t_alloc <= peak.time);
                    CHECK(row.t_free > peak.time);
                }
                CHECK(device == peak.on_device);
                CHECK(host == peak.on_host + peak.dropped);
                if (allocator == "ideal") CHECK(static_cast<double>(peak.on_device) == peak.bytes);
                else CHECK(static_cast<double>(peak.on_device) <= peak.bytes);
                if (peak.host_rows + peak.dropped_rows > 0) ++moved;
            }
    CHECK(moved >= 4);   // the policies did move allocations off the device at their peaks
}

TEST_CASE("launcher: a run keeps the memory the views show under the capacity, the host's included", "[launch]") {
    // mhc-view --device -1 (or "memory of: host") and Run simulation: the run simulated the GPU with the
    // largest peak whatever the views showed, and the user got a GPU 0 run of 100 MiB for the host's
    // 1 GiB (2026-12-06). The fields carry the device shown (draw_launcher sets it).
    fixture::TempPath path("gpu-and-host.db");
    fixture::write_gpu_and_host_trace(path.path);
    LaunchFields fields;
    CHECK(make_config(fields).device == mhc::sim::kAutoDevice);   // as mhc simulate without --device
    fields.capacity_percent = 50;
    fields.device = -1;
    CHECK(make_config(fields).device == -1);
    Launcher launcher(path.path);
    LaunchStatus status = run_to_end(launcher, make_config(fields));
    INFO(status.message);
    REQUIRE(status.phase == LaunchPhase::Done);
    mhc::trace::Run host = mhc::trace::load_run(path.path, status.run_id);
    CHECK(host.config.at("device") == "-1");
    CHECK(host.metrics.at("baseline_peak_bytes") >= 1024.0 * fixture::MiB);   // the host's 1 GiB, not GPU 0's 100 MiB
    // Then GPU 0 (the prepared trace is of the host: prepared again for it).
    fields.device = 0;
    status = run_to_end(launcher, make_config(fields));
    REQUIRE(status.phase == LaunchPhase::Done);
    mhc::trace::Run gpu = mhc::trace::load_run(path.path, status.run_id);
    CHECK(gpu.config.at("device") == "0");
    CHECK(gpu.metrics.at("baseline_peak_bytes") < 200.0 * fixture::MiB);
}
