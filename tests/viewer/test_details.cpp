// The details pane on the known trace (fixtures.hpp), worked by hand: kernel "beta" (#2) reads
// "weights" (#1) and writes "act_big" (#2); run 1 swaps the weights out at [400, 440) us and back
// in at [500, 550) us while beta stalls 50 us, so beta runs at [550, 750) us.
#include <catch2/catch.hpp>

#include <algorithm>

#include "fixtures.hpp"
#include "mhc/viewer/data.hpp"
#include "mhc/viewer/details.hpp"

using namespace mhc::viewer;
using fixture::MiB;
using fixture::us;
using mhc::trace::EventKind;

TEST_CASE("kernel details: recorded and run times, operands, what the policy did to them") {
    fixture::TempPath p("known.db");
    fixture::write_known_trace(p.path);
    ViewTrace t = load_view_trace(p.path);
    ViewRun run = load_view_run(t, 1);

    KernelDetails d = kernel_details(t, &run, 2);
    REQUIRE(d.found);
    CHECK(d.name == fixture::kBeta);
    CHECK(d.family == KernelFamily::Attention);
    CHECK(d.kernel.t_start == 500 * us);
    CHECK(d.kernel.t_end == 700 * us);
    CHECK(d.kernel.stream == 7);
    CHECK(d.reached);
    CHECK(d.run_start == 550 * us);
    CHECK(d.run_end == 750 * us);
    CHECK(d.stall_ns == 50 * us);
    REQUIRE(d.operands.size() == 2);
    const OperandDetail& w = d.operands[0];
    CHECK(w.allocation == 1);
    CHECK(w.label == "weights");
    CHECK(w.bytes == 400 * MiB);
    CHECK(w.category == mhc::trace::Category::Param);
    CHECK(w.mode == mhc::trace::AccessMode::Read);
    // Between kernel 1's read (ends 300 us) and beta: swapped out, then back in.
    REQUIRE(w.before.size() == 2);
    CHECK(w.before[0].kind == EventKind::SwapOut);
    CHECK(w.before[1].kind == EventKind::SwapIn);
    CHECK(w.after.empty());
    const OperandDetail& act = d.operands[1];
    CHECK(act.allocation == 2);
    CHECK(act.mode == mhc::trace::AccessMode::Write);
    CHECK(act.bytes == 1024 * MiB);
    CHECK(act.before.empty());

    // Kernel 1 (alpha) ran unmoved; the same two events come after it, before beta's read.
    KernelDetails a = kernel_details(t, &run, 1);
    CHECK(a.run_start == 100 * us);
    CHECK(a.stall_ns == 0);
    REQUIRE(a.operands.size() == 2);
    CHECK(a.operands[0].before.empty());
    REQUIRE(a.operands[0].after.size() == 2);

    // The pane: the run's clock with the shift, the stall, the policy's story in words.
    DetailsPane pane = kernel_pane(d, &run);
    CHECK(pane.title == fixture::kBeta);
    auto field = [&](const DetailsPane& pn, const std::string& k) {
        for (const auto& [key, v] : pn.fields)
            if (key == k) return v;
        FAIL("no field " << k);
        return std::string();
    };
    CHECK(field(pane, "family") == "attention");
    CHECK(field(pane, "recorded") == "start 500.000 us, end 700.000 us (200.00 us)");
    CHECK(field(pane, "run #1 lru@1GiB") == "start 550.000 us (+50.00 us), end 750.000 us");
    CHECK(field(pane, "stalled") == "50.00 us waiting for its operands");
    REQUIRE(pane.rows.size() == 2);
    REQUIRE(pane.columns.size() == 7);
    CHECK(pane.rows[0][0] == "#1");
    CHECK(pane.rows[0][2] == "400.00 MiB");
    CHECK(pane.rows[0][3] == "param");
    CHECK(pane.rows[0][5] == "swapped out 40.00 us of 400.00 MiB, 110.00 us before; swapped in 50.00 us of 400.00 MiB, up to the start");
    CHECK(pane.rows[0][6] == "-");
    CHECK(kernel_pane(a, &run).rows[0][6] == "swapped out 40.00 us of 400.00 MiB, 100.00 us after; swapped in 50.00 us of 400.00 MiB, 200.00 us after");

    // Without a run: recorded times only, no policy columns.
    KernelDetails plain = kernel_details(t, nullptr, 2);
    CHECK_FALSE(plain.has_run);
    CHECK(kernel_pane(plain, nullptr).columns.size() == 5);
    // An unknown id is said, not a crash.
    CHECK_FALSE(kernel_details(t, &run, 9999).found);
}

TEST_CASE("allocation details: lifetime, accesses on both clocks, the run's events") {
    fixture::TempPath p("known.db");
    fixture::write_known_trace(p.path);
    ViewTrace t = load_view_trace(p.path);
    ViewRun run = load_view_run(t, 1);

    AllocationDetails w = allocation_details(t, &run, 1);
    REQUIRE(w.found);
    CHECK(w.label == "weights");
    CHECK(w.allocation.bytes == 400 * MiB);
    CHECK(w.t_end == t.t_end);   // never freed
    CHECK(w.access_count == 2);
    CHECK(w.reads == 2);
    CHECK(w.writes == 0);
    REQUIRE(w.accesses.size() == 2);
    CHECK(w.accesses[0].name == fixture::kAlpha);
    CHECK(w.accesses[1].name == fixture::kBeta);
    CHECK(w.accesses[1].t_start == 500 * us);
    CHECK(w.accesses[1].run_start == 550 * us);   // on the run's clock
    REQUIRE(w.events.size() == 2);
    DetailsPane pane = allocation_pane(w, &run);
    bool run_line = false, life = false;
    for (const auto& [k, v] : pane.fields) {
        if (k == "run #1 lru@1GiB") run_line = v == "swap-out x1, swap-in x1; first at 400.000 us";
        if (k == "lifetime") life = v == "allocated 0 ns, alive at the end of the trace (1.00 ms)";
        if (k == "accesses") CHECK(v == "2: 2 reading, 0 writing");
    }
    CHECK(run_line);
    CHECK(life);
    CHECK(pane.rows.size() == 2);
    CHECK(pane.rows[1][4] == "550.000 us");

    AllocationDetails act = allocation_details(t, nullptr, 2);
    CHECK(act.allocation.category == mhc::trace::Category::Activation);
    CHECK(act.t_end == 550 * us);
    CHECK(act.writes == 1);
    CHECK_FALSE(act.has_run);
    CHECK(allocation_pane(act, nullptr).columns.size() == 4);
    CHECK_FALSE(allocation_details(t, nullptr, 77).found);
}

TEST_CASE("details: copied as text, fields a line each and the table's cells separated by tabs") {
    // The known trace's kernel #2 (kBeta) with run 1: what "copy" or Ctrl+C puts on the clipboard.
    fixture::TempPath db("details-copy.db");
    fixture::write_known_trace(db.path);
    ViewTrace view = load_view_trace(db.path);
    ViewRun run = load_view_run(view, 1);
    const DetailsPane pane = kernel_pane(kernel_details(view, &run, 2), &run);
    REQUIRE(!pane.fields.empty());
    REQUIRE(!pane.rows.empty());
    const std::string text = details_text(pane);
    std::vector<std::string> lines;
    for (size_t at = 0; at < text.size();) {
        const size_t end = text.find('\n', at);
        REQUIRE(end != std::string::npos);   // every line ends with a newline
        lines.push_back(text.substr(at, end - at));
        at = end + 1;
    }
    REQUIRE(lines.size() == 1 + pane.fields.size() + 1 + pane.rows.size());
    CHECK(lines[0] == pane.title);
    CHECK(lines[1] == pane.fields[0].first + ": " + pane.fields[0].second);
    const std::string& header = lines[1 + pane.fields.size()];
    CHECK(std::count(header.begin(), header.end(), '\t') == static_cast<long>(pane.columns.size()) - 1);
    CHECK(header.substr(0, pane.columns[0].size()) == pane.columns[0]);
    const std::string& first_row = lines[2 + pane.fields.size()];
    CHECK(first_row.rfind(pane.rows[0][0] + "\t" + pane.rows[0][1], 0) == 0);
    // A pane without rows says why instead of a table.
    DetailsPane empty{"kernel #9", {{"start", "1 us"}}, {"allocation", "bytes"}, {}, "no accesses recorded"};
    CHECK(details_text(empty) == "kernel #9\nstart: 1 us\nno accesses recorded\n");
}
