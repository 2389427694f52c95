// Replay on the host backend: small generated traces (a tiny llama and a tiny mHC model), a
// time scale that keeps each replay to well under a second.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <sqlite3.h>
#include <string>

#include "mhc/common/error.hpp"
#include "mhc/common/units.hpp"
#include "mhc/datasets/generate.hpp"
#include "mhc/replay/arena.hpp"
#include "mhc/replay/pages.hpp"
#include "mhc/replay/plan.hpp"
#include "mhc/replay/replay.hpp"
#include "mhc/replay/validate.hpp"
#include "mhc/sim/simulate.hpp"
#include "mhc/test/temp.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/store.hpp"

using namespace mhc;
namespace fs = std::filesystem;

namespace {

// A small trace: 2 layers, 2 steps, short sequences, one GPU; mHC (n = 4) when hc. `hidden`
// sets the width (heads of 64 or 32 wide, the FFN at 11/4 of it).
std::string small_trace(const std::string& name, bool hc, int hidden = 256) {
    fs::path dir = mhc::test::scratch_dir("mhc_replay_tests");
    fs::path p = dir / (name + ".db");
    fs::remove(p);
    datasets::GeneratorConfig c = datasets::preset(hc ? "mhc-27b" : "llama2-7b");
    c.layers = 2;
    c.steps = 2;
    c.seq = 128;
    c.hidden = hidden;
    c.heads = c.kv_heads = hidden / 128 > 4 ? hidden / 128 : 4;
    c.ffn = hidden * 11 / 4;
    c.vocab = 1000;
    c.tp = c.pp = c.dp = 1;
    c.zero1 = false;
    datasets::generate_file(c, p.string());
    return p.string();
}

sim::Result simulate(const trace::TraceData& t, double fraction, const std::string& allocator = "ideal",
                     const std::string& policy = "lru") {
    sim::Config c;
    c.capacity.fraction = fraction;
    c.eviction = policy;
    c.allocator = allocator;
    c.check_invariants = true;
    c.link = replay::scaled_link(sim::link_from_spec("pcie4"), 1.0);
    return sim::simulate(t, c);
}

replay::Options fast() {
    replay::Options o;
    o.time_scale = 0.05;   // kernels and gaps 20x shorter than recorded: functional checks only
    o.chunk_bytes = 64 << 10;
    return o;
}

// Validation at 70% on PCIe 4 with the caching allocator, each configuration replayed 3 times
// (fast(), not stored).
replay::ValidateSpec repeated() {
    replay::ValidateSpec spec;
    spec.base.link = sim::link_from_spec("pcie4");
    spec.base.allocator = "caching";
    spec.capacities = {sim::parse_capacity("70%")};
    spec.replay = fast();
    spec.repeat = 3;
    spec.store = false;
    return spec;
}

}  // namespace

TEST_CASE("the plan keeps every dependency the simulator kept", "[replay][plan]") {
    for (bool hc : {false, true}) {
        auto t = trace::load_trace(small_trace(hc ? "plan_hc" : "plan", hc));
        for (const char* pol : {"lru", "belady", "dtr"}) {
            sim::Result r = simulate(t, 0.6, "ideal", pol);
            REQUIRE_FALSE(r.oom.happened);
            REQUIRE(r.swap_out_count + r.drop_count > 0);   // the capacity bites
            replay::Plan p = replay::make_plan(t, r);
            INFO(pol << (hc ? " mhc" : " llama"));
            CHECK(replay::check_plan(t, p).empty());
            // Every recorded kernel start and end is in it once, starts before ends.
            size_t starts = 0, ends = 0;
            for (const auto& x : p.actions) {
                starts += x.op == replay::Op::KernelStart;
                ends += x.op == replay::Op::KernelEnd;
            }
            CHECK(starts == t.kernels.size());
            CHECK(ends == t.kernels.size());
            // The checker is not vacuous: launching a kernel before its swap-in is caught.
            for (size_t i = 0; i + 1 < p.actions.size(); ++i)
                if (p.actions[i].op == replay::Op::SwapIn && !p.actions[i].prefetch) {
                    replay::Plan bad = p;
                    size_t k = i + 1;
                    while (k < bad.actions.size() && bad.actions[k].op != replay::Op::KernelStart) ++k;
                    REQUIRE(k < bad.actions.size());
                    std::swap(bad.actions[i], bad.actions[k]);
                    CHECK_FALSE(replay::check_plan(t, bad).empty());
                    break;
                }
        }
    }
}

TEST_CASE("replay stays within the capacity and every swap comes back intact", "[replay][host]") {
    for (bool hc : {false, true}) {
        auto t = trace::load_trace(small_trace(hc ? "run_hc" : "run", hc));
        for (const char* alloc : {"ideal", "caching"}) {
            INFO(alloc << (hc ? " mhc" : " llama"));
            sim::Result r = simulate(t, 0.7, alloc);
            REQUIRE_FALSE(r.oom.happened);
            replay::Measured m = replay::replay(t, replay::make_plan(t, r), fast());
            INFO(to_string(m.status) << " " << m.failure);
            // Paged device memory does not fragment between segments: the caching model never
            // runs out where the simulator did not. ideal counts bytes only, and rounding them
            // to pages (shared pages for small ones) may not fit a capacity the simulator filled
            // to the byte; then it says so.
            if (std::string(alloc) == "ideal" && m.oom) {
                CHECK(m.oom_fragmentation);
                continue;
            }
            REQUIRE_FALSE(m.oom);
            CHECK(to_string(m.status) == "complete");
            CHECK(m.peak <= r.capacity);
            CHECK(m.high_water <= r.capacity);
            CHECK(m.mismatches == 0);
            CHECK(m.swap_outs > 0);
            CHECK(m.checksums >= m.swap_outs + 2 * m.swap_ins);
            if (std::string(alloc) == "caching") CHECK(m.peak == r.simulated_peak);   // same model, same segments
            if (hc) CHECK(m.sinkhorn_kernels > 0);
        }
    }
}

TEST_CASE("a caching replay whose arena peaks elsewhere than the model fails, naming both peaks", "[replay][host]") {
    // The measured peak is the arena's pages in use, which replay the caching model's segments:
    // equal to its reserved peak. It was printed beside the prediction and never judged, so a
    // replay that placed other segments than the model still read "complete". A plan claiming
    // 2 MiB more than its segments reach stands for such a replay.
    auto trace_data = trace::load_trace(small_trace("peak_check", false));
    sim::Result run = simulate(trace_data, 0.7, "caching");
    REQUIRE_FALSE(run.oom.happened);
    replay::Plan plan = replay::make_plan(trace_data, run);
    replay::Measured same = replay::replay(trace_data, plan, fast());
    CHECK(to_string(same.status) == "complete");
    CHECK(same.failure.empty());
    CHECK(same.peak == run.simulated_peak);
    plan.predicted_peak += 2 << 20;
    replay::Measured other = replay::replay(trace_data, plan, fast());
    CHECK(to_string(other.status) == "failed");
    CHECK(other.failure == "the arena's pages in use peaked at " + format_bytes(same.peak) + " (" + std::to_string(same.peak) +
                               " bytes), the caching model's reserved peak is " + format_bytes(same.peak + (2 << 20)) +
                               " (" + std::to_string(same.peak + (2 << 20)) + " bytes)");
    // ideal's pages round its bytes up: its peak is not the model's, and not judged.
    replay::Plan ideal = replay::make_plan(trace_data, simulate(trace_data, 0.7, "ideal"));
    ideal.predicted_peak += 2 << 20;
    CHECK(replay::replay(trace_data, ideal, fast()).failure.find("peaked at") == std::string::npos);
}

TEST_CASE("validate judges the swap traffic each way to the byte, as it does the peak", "[replay][host][traffic]") {
    // A replay executes the plan's transfers whole: one that ran to its end moved the bytes the
    // simulator predicted, each way. The figures were printed side by side and never judged.
    auto trace_data = trace::load_trace(small_trace("traffic_check", false));
    sim::Result run = simulate(trace_data, 0.7, "caching");
    REQUIRE_FALSE(run.oom.happened);
    REQUIRE(run.swap_in_bytes > 0);
    replay::Measured measured = replay::replay(trace_data, replay::make_plan(trace_data, run), fast());
    REQUIRE(to_string(measured.status) == "complete");
    CHECK(measured.swap_in_bytes == run.swap_in_bytes);
    CHECK(measured.swap_out_bytes == run.swap_out_bytes);
    CHECK(replay::traffic_mismatch(run, measured).empty());
    // One byte more predicted out than moved: failed, naming both figures each way.
    sim::Result claimed = run;
    claimed.swap_out_bytes += 1;
    const std::string why = replay::traffic_mismatch(claimed, measured);
    CHECK_THAT(why, Catch::StartsWith("the replay moved swap-in " + format_bytes(measured.swap_in_bytes) + " (" +
                                      std::to_string(measured.swap_in_bytes) + " bytes), swap-out "));
    CHECK_THAT(why,
               Catch::Contains("swap-out " + format_bytes(claimed.swap_out_bytes) + " (" +
                               std::to_string(claimed.swap_out_bytes) + " bytes) (traffic is judged to the byte)"));
    // The verdict says it as a failure, as it says a peak that differs.
    replay::Row row;
    row.predicted = claimed;
    row.measured = measured;
    row.measured.failure = why;
    row.measured.status = trace::RunStatus::Failed;
    CHECK(replay::verdict(row, 5, replay::Load{}).rfind("FAILED: the replay moved swap-in", 0) == 0);
    // A replay that ran out of memory stopped early: its traffic is not judged.
    measured.oom = true;
    CHECK(replay::traffic_mismatch(claimed, measured).empty());
}

TEST_CASE("an unlimited caching replay on a premapped pool maps no page itself", "[replay][host][arena]") {
    // The unlimited caching model keeps every segment, so its virtual ranges and pool pages are
    // taken lowest first and never given back: the premapped pool (what validate shares) already
    // shows them, and the baseline's first replay builds no page tables.
    auto trace_data = trace::load_trace(small_trace("premap", false));
    sim::Config config;
    config.allocator = "caching";
    config.link = replay::scaled_link(sim::link_from_spec("pcie4"), 1.0);
    const sim::Result run = sim::simulate(trace_data, config);
    const replay::Plan plan = replay::make_plan(trace_data, run);
    const int64_t cap = replay::replay_capacity(plan.capacity, plan.predicted_peak, plan.allocator);
    for (bool premap : {true, false}) {
        auto pool = replay::make_host_mapper(replay::Arena::pool_pages(cap), replay::Arena::default_va(cap), premap);
        replay::Options options = fast();
        options.mapper = pool.get();
        replay::Measured measured = replay::replay(trace_data, plan, options);
        REQUIRE(to_string(measured.status) == "complete");
        CHECK(measured.peak == run.simulated_peak);
        if (premap) CHECK(pool->pages_remapped() == 0);
        else CHECK(pool->pages_remapped() > 0);
    }
    // A pool whose pages alias serves the baseline, which reads nothing back, and a replay that
    // swaps only when its pages are all distinct; otherwise that one makes a pool of its own.
    config.capacity.fraction = 0.7;
    const sim::Result limited = sim::simulate(trace_data, config);
    const replay::Plan limited_plan = replay::make_plan(trace_data, limited);
    const int64_t limited_pages = replay::Arena::pool_pages(limited.capacity);
    for (int64_t distinct : {limited_pages - 1, limited_pages}) {
        auto aliased = replay::make_host_mapper(replay::Arena::pool_pages(cap), replay::Arena::default_va(cap), true, distinct);
        replay::Options options = fast();
        options.mapper = aliased.get();
        replay::Measured base = replay::replay(trace_data, plan, options);
        CHECK(to_string(base.status) == "complete");
        CHECK(base.peak == run.simulated_peak);
        replay::Measured measured = replay::replay(trace_data, limited_plan, options);
        REQUIRE(to_string(measured.status) == "complete");
        CHECK(measured.swap_outs > 0);
        CHECK(measured.mismatches == 0);
        if (distinct < limited_pages) CHECK(aliased->pages_remapped() == 0);   // not used
        else CHECK(aliased->pages_remapped() > 0);
    }
}

TEST_CASE("replays on a shared pool take the pages its mappings show, and remap less", "[replay][host][arena]") {
    // validate replays every configuration, several times, on one premapped pool: a segment
    // that takes the pool page its virtual range shows already needs no new page tables.
    for (bool hc : {false, true}) {
        auto trace_data = trace::load_trace(small_trace(hc ? "remap_hc" : "remap", hc));
        sim::Config config;
        config.allocator = "caching";
        config.link = replay::scaled_link(sim::link_from_spec("pcie4"), 1.0);
        const sim::Result unlimited = sim::simulate(trace_data, config);
        config.capacity.fraction = 0.7;
        const sim::Result limited = sim::simulate(trace_data, config);
        const replay::Plan base_plan = replay::make_plan(trace_data, unlimited), plan = replay::make_plan(trace_data, limited);
        const int64_t cap = replay::replay_capacity(base_plan.capacity, base_plan.predicted_peak, base_plan.allocator);
        auto pool = replay::make_host_mapper(replay::Arena::pool_pages(cap), replay::Arena::default_va(cap), true);
        replay::Options options = fast();
        options.mapper = pool.get();
        std::vector<int64_t> remapped;
        for (int i = 0; i < 3; ++i) {
            const int64_t before = pool->pages_remapped();
            replay::Measured measured = replay::replay(trace_data, plan, options);
            REQUIRE(to_string(measured.status) == "complete");
            CHECK(measured.mismatches == 0);                  // the data still comes back intact
            CHECK(measured.peak == limited.simulated_peak);   // pages are where they are, the count is the model's
            remapped.push_back(pool->pages_remapped() - before);
        }
        INFO((hc ? "mhc" : "llama") << ": pages remapped per replay " << remapped[0] << ", " << remapped[1] << ", " << remapped[2]);
        CHECK(remapped[1] <= remapped[0]);
        CHECK(remapped[2] <= remapped[0]);
        CHECK(remapped[0] < static_cast<int64_t>(replay::Arena::pool_pages(limited.capacity)));
    }
}

TEST_CASE("an impossible capacity fails where the simulator fails", "[replay][oom]") {
    auto t = trace::load_trace(small_trace("oom", false));
    for (const char* alloc : {"ideal", "caching"}) {
        sim::Result r = simulate(t, 0.05, alloc);
        REQUIRE(r.oom.happened);
        replay::Plan p = replay::make_plan(t, r);
        REQUIRE(p.oom);
        replay::Measured m = replay::replay(t, p, fast());
        INFO(alloc);
        CHECK(m.oom);
        CHECK(to_string(m.status) == "oom");
        if (std::string(alloc) == "caching") {   // the same model places the same blocks
            CHECK(m.oom_allocation == p.oom_allocation);
            CHECK(m.oom_kernel == p.oom_kernel);
            CHECK(m.oom_bytes == r.oom.bytes_needed);
        } else if (m.oom_allocation != p.oom_allocation) {
            // ideal counts bytes only: placing them may fail earlier, and then says why
            CHECK(m.oom_fragmentation);
        }
    }
}

TEST_CASE("a corrupted or dropped swap is detected", "[replay][checksum]") {
    auto t = trace::load_trace(small_trace("fault", false));
    sim::Result r = simulate(t, 0.6, "caching");
    REQUIRE(r.swap_out_count > 0);
    replay::Plan p = replay::make_plan(t, r);
    using F = kernels::SwapEngine::Fault;
    for (auto [f, dir] : {std::pair{F::Corrupt, kernels::SwapDir::DeviceToHost},
                          std::pair{F::Drop, kernels::SwapDir::DeviceToHost},
                          std::pair{F::Corrupt, kernels::SwapDir::HostToDevice}}) {
        replay::Options o = fast();
        o.fault = f;
        o.fault_dir = dir;
        replay::Measured m = replay::replay(t, p, o);
        INFO(int(f) << " " << kernels::to_string(dir) << " " << to_string(m.status) << " " << m.failure << " swaps " << m.swap_outs << "/" << m.swap_ins);
        CHECK(m.mismatches >= 1);
        CHECK(to_string(m.status) == "failed");
        CHECK(m.failure.find("allocation") != std::string::npos);
    }
    replay::Measured clean = replay::replay(t, p, fast());
    CHECK(clean.mismatches == 0);
}

namespace {
// Every row of the trace tables (not the run tables), as text.
std::string dump_trace_tables(const std::string& path) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
    std::string out;
    for (const char* table : {"allocations", "kernels", "accesses", "copies", "markers", "meta", "strings"}) {
        std::string q = std::string("SELECT * FROM ") + table + " ORDER BY 1, 2";
        sqlite3_stmt* s = nullptr;
        if (sqlite3_prepare_v2(db, q.c_str(), -1, &s, nullptr) != SQLITE_OK) continue;   // table absent
        while (sqlite3_step(s) == SQLITE_ROW) {
            for (int c = 0; c < sqlite3_column_count(s); ++c) {
                const unsigned char* v = sqlite3_column_text(s, c);
                out += v ? reinterpret_cast<const char*>(v) : "NULL";
                out += '|';
            }
            out += '\n';
        }
        sqlite3_finalize(s);
    }
    sqlite3_close(db);
    return out;
}
}  // namespace

TEST_CASE("an interrupted validation leaves one run marked incomplete and nothing else", "[replay][interrupt]") {
    std::string path = small_trace("interrupt", false);
    std::string before = dump_trace_tables(path);
    REQUIRE(trace::list_runs(path).empty());
    replay::ValidateSpec spec;
    spec.base.link = sim::link_from_spec("pcie4");
    spec.base.allocator = "caching";
    spec.capacities.push_back(sim::parse_capacity("60%"));
    spec.replay = fast();
    spec.replay.cancel = [](size_t done) { return done == 200; };
    CHECK_THROWS_AS(replay::validate(path, spec), replay::Cancelled);
    auto runs = trace::list_runs(path);
    REQUIRE(runs.size() == 1);
    CHECK(to_string(runs[0].kind) == "replayed");
    CHECK(to_string(runs[0].status) == "incomplete");
    CHECK(dump_trace_tables(path) == before);

    // Uninterrupted: each replayed run points at its simulated run.
    spec.replay.cancel = {};
    spec.capacities = {sim::parse_capacity("85%")};
    replay::Report rep = replay::validate(path, spec);
    INFO(replay::to_text(rep));
    REQUIRE(rep.ok());
    for (const auto& row : {rep.baseline, rep.rows[0]}) {
        trace::Run run = trace::load_run(path, row.replay_run);
        CHECK(to_string(run.kind) == "replayed");
        CHECK(run.base_run == row.sim_run);
        CHECK(to_string(trace::load_run(path, row.sim_run).kind) == "simulated");
        CHECK(run.metrics.at("checksum_mismatches") == 0);
        // Both runs hold every kernel they reached (all of them: neither ran out of memory).
        const auto kernels = static_cast<double>(trace::Reader(path).counts().kernels);
        CHECK(run.metrics.at("kernels_reached") == kernels);
        CHECK(static_cast<double>(run.kernel_times.size()) == kernels);
        CHECK(static_cast<double>(trace::load_run(path, row.sim_run).kernel_times.size()) == kernels);
    }
    CHECK(dump_trace_tables(path) == before);
}

TEST_CASE("replay repeats the simulator's failed allocations and keeps its allocator in step", "[replay][caching]") {
    // A caching-model allocation that fails still gives the cached free segments back (as
    // PyTorch's allocator does before its retry). The simulator tries, fails, waits for a
    // swap-out, tries again; replay reaches that point with the swap-out's release already
    // in its plan and, without the failed call, placed the block in another segment and later
    // ran out where the simulator had not (this 2-layer llama slice at 70% and 80%, and a
    // 2-layer llama2-7b slice at 80%). The plan carries the failed call (FailedAlloc).
    auto t = trace::load_trace(small_trace("failed_alloc", false, 1024));
    int with_failed = 0;
    for (double fraction : {0.7, 0.8})
        for (const char* policy : {"lru", "belady"}) {
            sim::Result r = simulate(t, fraction, "caching", policy);
            REQUIRE_FALSE(r.oom.happened);
            replay::Plan plan = replay::make_plan(t, r);
            int failed = 0;
            for (const auto& x : plan.actions) failed += x.op == replay::Op::FailedAlloc;
            with_failed += failed > 0;
            replay::Measured m = replay::replay(t, plan, fast());
            INFO(fraction << " " << policy << ": " << to_string(m.status) << " " << m.failure << ", " << failed << " failed allocations");
            CHECK(to_string(m.status) == "complete");
            CHECK(m.diverged_allocations == 0);
            CHECK(m.peak == r.simulated_peak);
            CHECK(m.swap_out_bytes == r.swap_out_bytes);
            CHECK(m.swap_in_bytes == r.swap_in_bytes);
            CHECK(m.mismatches == 0);
        }
    CHECK(with_failed > 0);   // the trace must exercise the case
}

TEST_CASE("retime moves the trace onto the baseline replay's clock and keeps every order", "[replay][retime]") {
    auto t = trace::load_trace(small_trace("retime", true));
    sim::Result r = simulate(t, 10.0, "caching");   // unlimited: the baseline
    replay::Options o = fast();
    o.time_scale = 0.5;
    replay::Measured m = replay::replay(t, replay::make_plan(t, r), o);
    REQUIRE(to_string(m.status) == "complete");
    replay::RetimeSummary s;
    trace::TraceData x = replay::retime(t, m, &s);
    CHECK(trace::check_trace(x).problems.empty());   // lifetimes still cover every access
    CHECK(s.kernels_moved == static_cast<int64_t>(t.kernels.size()));
    CHECK(s.span_before_ns == t.t_end() - t.t_begin());
    CHECK(s.span_after_ns >= s.span_before_ns);
    // Every timestamp moves by a lag that never decreases: recorded orders are kept, and each
    // kernel ends no earlier, relative to its start, than measured minus the lag before it.
    auto order_kept = [](const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
        for (size_t i = 0; i < a.size(); ++i)
            for (size_t j : {i + 1, a.size() / 2})
                if (j < a.size() && (a[i] < a[j]) != (b[i] < b[j]) && a[i] != a[j]) return false;
        return true;
    };
    CHECK(order_kept(t.kernels.t_start, x.kernels.t_start));
    CHECK(order_kept(t.allocations.t_alloc, x.allocations.t_alloc));
    for (size_t k = 0; k < t.kernels.size(); ++k) {
        CHECK(x.kernels.t_start[k] >= t.kernels.t_start[k]);
        CHECK(x.kernels.t_end[k] - x.kernels.t_start[k] >= t.kernels.t_end[k] - t.kernels.t_start[k]);
    }
    for (const auto& kt : m.kernel_times) {   // a kernel's retimed end is at least its measured end
        const int64_t k = t.kernel_at(kt.kernel);
        CHECK(x.kernels.t_end[k] >= kt.t_end);
    }
    // The simulator takes the retimed trace like any other, and its baseline spans it.
    sim::Result rb = simulate(x, 10.0, "caching");
    CHECK(rb.invariant_violation.empty());
    CHECK(rb.throughput_loss == 0);
}

TEST_CASE("validation predicts with the calibrated rate of the replay's chunk size", "[replay][link]") {
    sim::LinkModel l = sim::link_from_spec("pcie4");
    CHECK(replay::link_at_chunk(l, 2 << 20).h2d.bandwidth_Bps == l.h2d.bandwidth_Bps);   // no rows: unchanged
    l.by_chunk = {{1 << 20, 4e9, 5e9}, {4 << 20, 8e9, 6e9}};
    auto at = [&](int64_t chunk) { return replay::link_at_chunk(l, chunk); };
    CHECK(at(1 << 20).h2d.bandwidth_Bps == 4e9);
    CHECK(at(4 << 20).d2h.bandwidth_Bps == 6e9);
    CHECK(at(2 << 20).h2d.bandwidth_Bps == Approx(6e9));    // halfway in log size
    CHECK(at(2 << 20).d2h.bandwidth_Bps == Approx(5.5e9));
    CHECK(at(64 << 10).h2d.bandwidth_Bps == 4e9);           // below the rows: the first
    CHECK(at(1 << 30).h2d.bandwidth_Bps == 8e9);            // above: the last
    CHECK(at(2 << 20).name.find("@2.00 MiB chunks") != std::string::npos);
    CHECK(at(2 << 20).h2d.latency_s == l.h2d.latency_s);
    // A rate of 0 is "not measured": no rate between it and a measured one (halfway it gave 3e9,
    // half the measured rate, and near the unmeasured row a rate down to 0), the profile's own.
    l.by_chunk = {{1 << 20, 4e9, 0}, {4 << 20, 8e9, 6e9}};
    CHECK(at(2 << 20).h2d.bandwidth_Bps == Approx(6e9));
    CHECK(at(2 << 20).d2h.bandwidth_Bps == l.d2h.bandwidth_Bps);
    CHECK(at((1 << 20) + 1).d2h.bandwidth_Bps == l.d2h.bandwidth_Bps);
    CHECK(at(4 << 20).d2h.bandwidth_Bps == 6e9);
}

TEST_CASE("a replay spread is the range of the makespans, the extremes dropped from 5 on", "[replay][repeat]") {
    CHECK(replay::makespan_spread({}) == 0);
    CHECK(replay::makespan_spread({7}) == 0);
    CHECK(replay::makespan_spread({10, 13, 11}) == 3);
    CHECK(replay::makespan_spread({10, 13, 11, 12}) == 3);
    CHECK(replay::makespan_spread({100, 10, 13, 11, 12}) == 2);   // 11..13: one hiccup is not the spread
}

TEST_CASE("adaptive repeats stop once the replays agree within the bound, as the verdict counts the spread",
          "[replay][repeat]") {
    const int64_t ms = 1'000'000;
    // The baseline (loss factor 1 + 4 = 5: its noise reaches every loss five times), bound 1.25 pp.
    // 100.0 .. 101.0 ms: 1 ms / 100 ms x 5 = 5 pp, disagree; 100.0 .. 100.2 ms: 1 pp, agree.
    CHECK_FALSE(replay::repeats_agree({100 * ms, 101 * ms, 100 * ms + ms / 2}, 100 * ms, 5, 0, 1.25, 3));
    CHECK(replay::repeats_agree({100 * ms, 100 * ms + ms / 5, 100 * ms + ms / 10}, 100 * ms, 5, 0, 1.25, 3));
    // Two identical replays are not enough where three are asked for, nor one anywhere.
    CHECK_FALSE(replay::repeats_agree({100 * ms, 100 * ms}, 100 * ms, 5, 0, 1.25, 3));
    CHECK_FALSE(replay::repeats_agree({100 * ms}, 100 * ms, 1, 0, 100, 1));
    // Five replays: the extremes are dropped (makespan_spread), so one hiccup does not keep it going:
    // 100.1 .. 100.2 ms remain, 0.1 ms x 5 / 100 ms = 0.5 pp.
    CHECK(replay::repeats_agree({100 * ms, 100 * ms + ms / 10, 100 * ms + ms / 5, 103 * ms, 100 * ms + 3 * ms / 20}, 100 * ms, 5,
                                0, 1.25, 3));
    // A limited configuration (baseline median 100 ms, bound 2.5 pp): its own spread plus the
    // baseline's part carried in. 400 .. 404 ms: 4 pp + 0.5 > 2.5; 400 .. 401.5 ms: 1.5 + 0.5 = 2.0
    // agrees, and no longer with 1.2 pp carried (2.7).
    CHECK_FALSE(replay::repeats_agree({400 * ms, 404 * ms}, 100 * ms, 1, 0.5, 2.5, 2));
    CHECK(replay::repeats_agree({400 * ms, 401 * ms + ms / 2}, 100 * ms, 1, 0.5, 2.5, 2));
    CHECK_FALSE(replay::repeats_agree({400 * ms, 401 * ms + ms / 2}, 100 * ms, 1, 1.2, 2.5, 2));
    CHECK_FALSE(replay::repeats_agree({400 * ms, 400 * ms}, 0, 1, 0, 2.5, 2));   // no baseline to measure against
}

TEST_CASE("adaptive repeats replay each configuration between the least and the most", "[replay][repeat]") {
    std::string path = small_trace("adaptive", false);
    replay::ValidateSpec spec = repeated();
    spec.adaptive_repeat = true;
    // A target no noise reaches: the least replays, 3 of the baseline and 2 of the configuration.
    spec.target_pp = 1e9;
    replay::Report rep = replay::validate(path, spec);
    REQUIRE(rep.ok());
    CHECK(rep.adaptive_repeat);
    CHECK(rep.baseline.makespans.size() == replay::kBaselineMinReplays);
    CHECK(rep.rows.at(0).makespans.size() == replay::kConfigMinReplays);
    CHECK(rep.rows.at(0).replay_seconds.size() == replay::kConfigMinReplays);
    // A target nothing meets: the most, 2N - 1 and N, as without adaptive repeats.
    spec.target_pp = 0;
    rep = replay::validate(path, spec);
    REQUIRE(rep.ok());
    CHECK(rep.baseline.makespans.size() == 5);
    CHECK(rep.rows.at(0).makespans.size() == 3);
    // Where the time went: the phases in order, none negative; the page pool and host arena
    // each time they were allocated or grown (here before the baseline, and the host arena
    // for the limited run), adding up to pool_seconds.
    std::vector<std::string> names;
    double pool = 0;
    for (const replay::Report::Phase& phase : rep.phases) {
        CHECK(phase.seconds >= 0);
        CHECK(phase.cpu_seconds >= 0);
        if (phase.name == "page pool and host arena") pool += phase.seconds;
        else names.push_back(phase.name);
    }
    CHECK(names == std::vector<std::string>{"load and prepare", "predict", "baseline replays", "retime", "limited replays"});
    CHECK(pool == Approx(rep.pool_seconds));
}

TEST_CASE("validation with repeats reports the median replay and keeps every makespan", "[replay][repeat]") {
    std::string path = small_trace("repeat", false);
    replay::ValidateSpec spec = repeated();
    replay::Report rep = replay::validate(path, spec);
    REQUIRE(rep.ok());
    // The baseline, whose noise every loss carries, 2N - 1 times; the configurations N times.
    REQUIRE(rep.baseline.makespans.size() == 5);
    REQUIRE(rep.rows.at(0).makespans.size() == 3);
    for (const replay::Row* row : {&rep.baseline, &rep.rows.at(0)}) {
        auto sorted = row->makespans;
        std::sort(sorted.begin(), sorted.end());
        CHECK(row->measured.makespan_ns == sorted[(sorted.size() - 1) / 2]);
        CHECK(to_string(row->measured.status) == "complete");
    }
    CHECK(rep.retimed);   // limited runs predicted on the baseline replay's clock
    CHECK(rep.retime.span_after_ns >= rep.retime.span_before_ns);
}

namespace {
// A link of `Bps` each way with `latency_s` per transfer, two copy engines, no duplex slowdown.
sim::LinkModel link_of(double Bps, double latency_s) {
    sim::LinkModel l = sim::link_from_spec("pcie4");
    l.name = "test-link";
    l.by_chunk.clear();
    l.h2d = l.d2h = sim::Direction{Bps, latency_s};
    l.duplex_factor = 1.0;
    return l;
}
}  // namespace

TEST_CASE("the paced host replay emulates the link's latency, as the prediction counts it", "[replay][link][latency]") {
    // 2 ms per transfer dominates the tiny llama's 70% run (tens of transfers, ~1 ms of compute):
    // without the emulation the measured makespan stayed near the zero-latency one while the
    // prediction grew with the latency.
    std::string path = small_trace("latency", false);
    replay::ValidateSpec spec;
    spec.base.link = link_of(2e9, 0.002);
    spec.base.allocator = "caching";
    spec.capacities = {sim::parse_capacity("70%")};
    spec.replay.time_scale = 1;
    spec.store = false;
    // Several replays, compared by the fastest: other work on the machine only adds to a replay's
    // makespan (a scheduler delay never shortens an emulated latency), so the least of them is the
    // one that says what the emulation does (one replay, under load, measured 1.08 to 1.26 x the
    // prediction and once past the 1.5 x bound). The bounds are the same: a replay whose emulation
    // is missing stays at 0.17 x in all of them, and one that doubles a latency passes 1.5 x in
    // all of them.
    spec.repeat = 3;
    replay::Report rep = replay::validate(path, spec);
    REQUIRE(rep.ok());
    const replay::Row& x = rep.rows.at(0);
    REQUIRE(to_string(x.measured.status) == "complete");
    REQUIRE(x.makespans.size() == 3);
    const double fastest = static_cast<double>(*std::min_element(x.makespans.begin(), x.makespans.end()));
    const double predicted = static_cast<double>(x.predicted.simulated_makespan);
    const double latency_part = 0.002e9 * static_cast<double>(x.predicted.swap_in_count + x.predicted.swap_out_count);
    INFO("predicted " << predicted << " ns, measured " << fastest << " ns at the fastest of 3");
    CHECK(predicted > 2 * static_cast<double>(x.predicted.baseline_makespan));   // the latency matters here
    CHECK(latency_part > 0.2 * predicted);
    // Without the emulation the measurement was 0.17 x the prediction; with it, 1.298 s predicted
    // and 1.312 s measured in one `mhc validate` of this trace at 10 ms per transfer (a loaded
    // machine adds its own delays: +22% seen here at load average 10 on 2 cores).
    CHECK(fastest >= 0.85 * predicted);
    CHECK(fastest <= 1.5 * predicted);

    // A replay whose copies are the machine's own cannot honour such a latency: refused.
    spec.base.link = link_of(2e9, 0.010);
    spec.pace = false;
    CHECK_THROWS_WITH(replay::validate(path, spec), Catch::Contains("latency of 10.00 ms would be predicted but not measured"));
}

TEST_CASE("validation estimates the replays' duration first and refuses or warns", "[replay][estimate]") {
    std::vector<sim::Result> p(3);
    p[0].simulated_makespan = 1'000'000'000;
    p[1].simulated_makespan = 2'000'000'000;
    p[2].simulated_makespan = 3'000'000'000;
    // The baseline 2N - 1 = 5 times, the others 3: (5 x 1 + 3 x 2 + 3 x 3) s x 10.
    CHECK(replay::estimated_replay_seconds(p, 10, 3) == Approx(200));
    CHECK(replay::estimated_replay_seconds(p, 10, 1) == Approx(60));

    // A 1 kB/s link: the 70% run's tens of MiB of swaps take hours. Refused before any replay
    // (nothing stored), in one line naming the estimate.
    std::string path = small_trace("estimate", false);
    replay::ValidateSpec spec;
    spec.base.link = link_of(1e3, 0);
    spec.base.allocator = "caching";
    spec.capacities = {sim::parse_capacity("70%")};
    spec.replay.time_scale = 1;
    spec.replay.cancel = [](size_t) { return true; };   // a replay that starts stops at once (and fails this test)
    try {
        replay::validate(path, spec);
        FAIL("a validation of hours started");
    } catch (const mhc::Error& e) {
        const std::string what = e.what();
        CHECK_THAT(what, Catch::Contains("the replays would take at least") && Catch::Contains(" h (2 configurations, 1 replay each, at time scale x1;") &&
                             Catch::Contains("more than the 1.0 h allowed"));
        CHECK(what.find('\n') == std::string::npos);
    }
    CHECK(trace::list_runs(path).empty());
    // Without a limit it warns, in one line, before the first replay (the test stops it there).
    spec.max_replay_seconds = 0;
    std::string said;
    spec.warn = [&](const std::string& line) {
        said = line;
        throw std::runtime_error("stopped by the test");
    };
    CHECK_THROWS_WITH(replay::validate(path, spec), "stopped by the test");
    CHECK_THAT(said, Catch::StartsWith("the replays will take at least"));
    CHECK(trace::list_runs(path).empty());
}
