// The compare view's run picker (filter words, sort columns, cells) and the axis that follows
// what is shown (follow_limits), on hand-made run lists.
#include <catch2/catch.hpp>

#include "mhc/viewer/data.hpp"
#include "mhc/viewer/run_table.hpp"

using namespace mhc::viewer;

namespace {

mhc::trace::RunInfo info(int64_t id, const std::string& eviction, const std::string& prefetch, const std::string& link,
                         double loss, mhc::trace::RunStatus status = mhc::trace::RunStatus::Complete) {
    mhc::trace::RunInfo r;
    r.id = id;
    r.kind = mhc::trace::RunKind::Simulated;
    r.name = eviction + "+" + prefetch + "@70%/" + link + "/caching";
    r.status = status;
    r.config = {{"eviction", eviction}, {"prefetch", prefetch}, {"link", link}};
    r.metrics = {{"capacity_bytes", 70.0 * (1 << 30)}, {"simulated_peak_bytes", 69.5 * (1 << 30)},
                 {"peak_reduction", 0.3}, {"simulated_makespan_ns", 5.659e9}};
    if (loss >= 0) r.metrics["throughput_loss"] = loss;
    return r;
}

std::vector<int64_t> ids(const std::vector<RunRow>& rows, const std::vector<size_t>& order) {
    std::vector<int64_t> out;
    for (size_t i : order) out.push_back(rows[i].id);
    return out;
}

}  // namespace

TEST_CASE("run picker: cells from the run's config and metrics, words filter, any column sorts") {
    std::vector<mhc::trace::RunInfo> runs = {
        info(1, "lru", "none", "pcie4", 4.7079), info(2, "cost_aware", "forecast", "pcie4", 0.06),
        info(3, "cost_aware", "periodic", "pcie5", 0.031), info(4, "belady", "lookahead:500", "pcie4", 0.0249),
        info(5, "lru", "none", "nvlink-c2c", -1, mhc::trace::RunStatus::Oom),
    };
    runs.push_back({});   // a replayed run: no config, no metrics
    runs.back().id = 6;
    runs.back().kind = mhc::trace::RunKind::Replayed;
    runs.back().name = "replay of #2";
    runs.back().status = mhc::trace::RunStatus::Complete;
    std::vector<RunRow> rows = run_rows(runs);
    REQUIRE(rows.size() == 6);
    CHECK(run_cell(rows[1], RunColumn::Policy) == "cost_aware");
    CHECK(run_cell(rows[1], RunColumn::Prefetch) == "forecast");
    CHECK(run_cell(rows[1], RunColumn::Capacity) == "70.00 GiB");
    CHECK(run_cell(rows[1], RunColumn::Peak) == "69.50 GiB");
    CHECK(run_cell(rows[1], RunColumn::Reduction) == "30.0%");   // as mhc simulate and info say it
    CHECK(run_cell(rows[1], RunColumn::Loss) == "6.00%");
    // Headed as mhc simulate, sweep and the metrics table under the picker name them (it said
    // "reduction" and "loss" above a table whose rows said "peak reduction", "throughput loss").
    CHECK(std::string(run_column_name(RunColumn::Reduction)) == "peak reduction");
    CHECK(std::string(run_column_name(RunColumn::Loss)) == "throughput loss");
    CHECK(run_cell(rows[1], RunColumn::Makespan) == "5.659 s");
    CHECK(run_cell(rows[4], RunColumn::Loss) == "-");
    CHECK(run_cell(rows[4], RunColumn::Status) == "oom");
    // an OOM run did not finish: its stored peak and makespan are no figures of a run (mhc info: "-")
    CHECK(run_cell(rows[4], RunColumn::Peak) == "-");
    CHECK(run_cell(rows[4], RunColumn::Makespan) == "-");
    CHECK(run_cell(rows[5], RunColumn::Policy) == "-");
    CHECK(run_cell(rows[5], RunColumn::Capacity) == "-");

    // Every word must match somewhere, in any case.
    CHECK(ids(rows, filter_runs(rows, "", RunColumn::Id, true)) == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
    CHECK(ids(rows, filter_runs(rows, "COST_aware pcie4", RunColumn::Id, true)) == std::vector<int64_t>{2});
    CHECK(ids(rows, filter_runs(rows, "oom", RunColumn::Id, true)) == std::vector<int64_t>{5});
    CHECK(ids(rows, filter_runs(rows, "replayed", RunColumn::Id, true)) == std::vector<int64_t>{6});
    CHECK(filter_runs(rows, "lru pcie5", RunColumn::Id, true).empty());
    // Sorting: absent values last in both directions; equal values by id.
    CHECK(ids(rows, filter_runs(rows, "", RunColumn::Loss, true)) == std::vector<int64_t>{4, 3, 2, 1, 5, 6});
    CHECK(ids(rows, filter_runs(rows, "", RunColumn::Loss, false)) == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
    CHECK(ids(rows, filter_runs(rows, "", RunColumn::Policy, true)) == std::vector<int64_t>{4, 2, 3, 1, 5, 6});
    CHECK(ids(rows, filter_runs(rows, "", RunColumn::Id, false)) == std::vector<int64_t>{6, 5, 4, 3, 2, 1});
    CHECK(ids(rows, filter_runs(rows, "", RunColumn::Capacity, true)) == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("the axis follows the slowest run when it showed everything, else keeps the zoom") {
    TimeRange recorded{0, 7'980'000'000}, with_slow{0, 51'500'000'000};
    // Showing all of 0-7.98 s: a 51.5 s run ticked takes the axis to 51.5 s, and back.
    CHECK(follow_limits(recorded, recorded, with_slow).t1 == with_slow.t1);
    CHECK(follow_limits(with_slow, with_slow, recorded).t1 == recorded.t1);
    // Zoomed on 1-2 s: the zoom stays.
    TimeRange zoomed{1'000'000'000, 2'000'000'000};
    CHECK(follow_limits(zoomed, recorded, with_slow).t0 == zoomed.t0);
    CHECK(follow_limits(zoomed, recorded, with_slow).t1 == zoomed.t1);
    // A zoom past the new limits (the slow run unticked) is clamped into them.
    TimeRange late{45'000'000'000, 50'000'000'000};
    TimeRange c = follow_limits(late, with_slow, recorded);
    CHECK(c.t0 == recorded.t1 - late.span());
    CHECK(c.t1 == recorded.t1);
}

TEST_CASE("a run's device: its name says it when not GPU 0, and a run of another device than the one shown is said") {
    // mhc simulate --device stores `device` in the run's config: -1 the host, N a GPU.
    mhc::trace::RunInfo host = info(2, "lru", "none", "pcie4", 0.1);
    host.name = "lru+none@70%/pcie4/caching";
    host.config["device"] = "-1";
    mhc::trace::RunInfo gpu0 = host, gpu1 = host, unsaid = host, garbled = host;
    gpu0.id = 3;
    gpu0.config["device"] = "0";
    gpu1.config["device"] = "1";
    unsaid.config.erase("device");
    garbled.config["device"] = "1x";
    CHECK(mhc::trace::run_device(host) == -1);
    CHECK(mhc::trace::run_device(gpu0) == 0);
    CHECK_FALSE(mhc::trace::run_device(unsaid).has_value());
    CHECK_FALSE(mhc::trace::run_device(garbled).has_value());
    CHECK(mhc::trace::run_name_with_device(host) == "lru+none@70%/pcie4/caching (host)");
    CHECK(mhc::trace::run_name_with_device(gpu1) == "lru+none@70%/pcie4/caching (GPU 1)");
    CHECK(mhc::trace::run_name_with_device(gpu0) == "lru+none@70%/pcie4/caching");
    CHECK(mhc::trace::run_name_with_device(unsaid) == "lru+none@70%/pcie4/caching");
    // The device and what else is said of a run share one pair of brackets ("(host) (oom)" read as two names).
    CHECK(mhc::trace::run_name_notes(host, "out of memory, short by 8.75 MiB") == " (host; out of memory, short by 8.75 MiB)");
    CHECK(mhc::trace::run_name_notes(gpu0, "oom") == " (oom)");
    CHECK(mhc::trace::run_name_notes(gpu0).empty());
    host.status = mhc::trace::RunStatus::Oom;
    CHECK(run_list_entry(host) == "#2 lru+none@70%/pcie4/caching (host; oom)");
    CHECK(run_list_entry(gpu1) == "#2 lru+none@70%/pcie4/caching (GPU 1; complete)");
    host.status = mhc::trace::RunStatus::Complete;
    // mhc-view --run ID: found, or refused naming the file that holds the runs and how to list them.
    CHECK(run_index({gpu0, host}, 2, "t.db", "") == 1);
    CHECK_THROWS_WITH(run_index({gpu0, host}, 9, "t.db", ""),
                      "t.db: run 9 does not exist (2 runs in the file: mhc info t.db lists them)");
    CHECK_THROWS_WITH(run_index({}, 9, "t.db", "r.db"),
                      "r.db: run 9 does not exist (0 runs in the file: mhc info t.db --runs-db r.db lists them)");
    CHECK(run_device_note(host, 0) ==
          "#2 simulated the host's memory, not GPU 0's: pick host in 'memory of' to see its curve");
    CHECK(run_device_note(gpu0, -1) ==
          "#3 simulated GPU 0's memory, not the host's: pick GPU 0 in 'memory of' to see its curve");
    CHECK(run_device_note(host, -1).empty());
    CHECK(run_device_note(unsaid, 0).empty());   // a run that does not say is drawn as before
    // The picker's words find a run by its device.
    const std::vector<RunRow> rows = run_rows({gpu0, host});
    CHECK(filter_runs(rows, "host", RunColumn::Id, true) == std::vector<size_t>{1});
}
