// What the compare view, the find field and "At the OOM" draw from (2026-12-05; each fails before):
// runs of an order-only trace aligned by op (align.hpp), every find match marked (find.hpp), and the
// allocations alive at an OOM grouped by where they were allocated (stats.hpp); a run's curve from
// its first sample (curve.hpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "fixtures.hpp"
#include "mhc/test/paths.hpp"
#include "mhc/trace/import/import.hpp"
#include "mhc/viewer/align.hpp"
#include "mhc/viewer/data.hpp"
#include "mhc/viewer/find.hpp"
#include "mhc/viewer/stats.hpp"

using mhc::viewer::align_curve;
using mhc::viewer::align_lane;
using mhc::viewer::Curve;
using mhc::viewer::KernelMatch;
using mhc::viewer::Lane;
using mhc::viewer::LaneKind;
using mhc::viewer::match_count_text;
using mhc::viewer::match_marks;
using mhc::viewer::OpAlignment;

namespace {

// Ops 1..4 recorded at 1..4 (op k on [k, k + 1)); the run reaches op 1 at 1, op 2 at 2, then stalls
// 2 ms (2,000,000 ns of link time) before op 3 at 2,000,003 and op 4 at 2,000,004 (as test_run_times).
OpAlignment four_ops() { return OpAlignment({{1, 1}, {2, 2}, {2000003, 3}, {2000004, 4}}); }

}   // namespace

TEST_CASE("compare by op: a run's clock maps onto the trace's op axis, its stall inside the op it delayed") {
    const OpAlignment align = four_ops();
    CHECK(align.at(0) == 1);   // before the first op: at it
    CHECK(align.at(1) == 1);
    CHECK(align.at(2) == 2);
    CHECK(align.at(3) == 2);         // the stall after op 2 lies in op 2's place, [2, 3)
    CHECK(align.at(1000000) == 2);   // on the run's clock this read "op #1000000" on a trace of 4 ops
    CHECK(align.at(2000002) == 2);
    CHECK(align.at(2000003) == 3);
    CHECK(align.at(2000004) == 4);
    CHECK(align.at(2000005) == 5);   // the last op's end
    CHECK(align.at(9000000) == 5);   // nothing past it
    // The link time spent at each op: (2000003 - 2) - (3 - 2) after op 2, none elsewhere.
    CHECK(align.link_time_at(1) == 0);
    CHECK(align.link_time_at(2) == 2000000);
    CHECK(align.link_time_at(3) == 0);
    CHECK(align.link_time_at(4) == 0);
    CHECK(align.link_time_at(0) == 0);
    // Over a range of ops (a zoomed-out column): the sum of theirs.
    CHECK(align.link_time_between(1, 5) == 2000000);
    CHECK(align.link_time_between(2, 3) == 2000000);
    CHECK(align.link_time_between(3, 5) == 0);
    CHECK(align.link_time_between(1, 2) == 0);
    for (int64_t op = 1; op < 4; ++op) CHECK(align.link_time_between(op, op + 1) == align.link_time_at(op));
    // The stall [3, 2000003) in op 2's place; op 3's kernel [2000003, 2000004) at [3, 4).
    Lane events;
    events.kind = LaneKind::Events;
    events.push(3, 2000003, 0, 0);
    events.push(2000003, 2000004, 0, 1);
    events.finish();
    const Lane mapped = align_lane(events, align);
    REQUIRE(mapped.size() == 2);
    CHECK(mapped.t_start[0] == 2);
    CHECK(mapped.t_end[0] == 3);
    CHECK(mapped.t_start[1] == 3);
    CHECK(mapped.t_end[1] == 4);
    CHECK(mapped.ref[0] == 0);   // the run's event row, for the tooltip
    // Device bytes: 100 B to op 2, a swap-in to 300 B during the stall and back to 150 B, 200 B at op
    // 3, 120 B at op 4. By op: 100 at op 1, 300 at op 2 (the most the run held there), 200, 120.
    Curve curve;
    curve.assign({0, 1, 5, 1500000, 2000003, 2000004}, {100, 100, 300, 150, 200, 120});
    const Curve by_op = align_curve(curve, align);
    CHECK(by_op.value_at(1) == 100);
    CHECK(by_op.value_at(2) == 300);
    CHECK(by_op.value_at(3) == 200);
    CHECK(by_op.value_at(4) == 120);
    CHECK(by_op.peak() == 300);
    CHECK(by_op.peak_time() == 2);
    // Without alignment, op 3's place (run clock 3) held 100 B, the curve of the stall's first ns.
    CHECK(curve.value_at(3) == 100);
}

TEST_CASE("compare by op: over generated runs, the mapped curve keeps the run's peak and every op's most") {
    std::mt19937 random(7);
    for (int round = 0; round < 40; ++round) {
        // n ops on [k, k + 1), each reached 1 ns after the one before plus a random link time.
        const int ops = 2 + static_cast<int>(random() % 50);
        std::vector<std::pair<int64_t, int64_t>> reached;
        int64_t clock = static_cast<int64_t>(random() % 100);
        for (int k = 1; k <= ops; ++k) {
            reached.emplace_back(clock, k);
            clock += 1 + (random() % 3 == 0 ? static_cast<int64_t>(random() % 100000) : 0);
        }
        const OpAlignment align(reached);
        std::vector<int64_t> times;
        std::vector<double> values;
        for (int64_t t = 0; t < clock; t += 1 + static_cast<int64_t>(random() % 5000)) {
            times.push_back(t);
            values.push_back(static_cast<double>(random() % 1000));
        }
        Curve curve;
        curve.assign(times, values);
        const Curve by_op = align_curve(curve, align);
        INFO("round " << round);
        CHECK(by_op.peak() == curve.peak());
        REQUIRE(std::is_sorted(by_op.times().begin(), by_op.times().end()));
        // Each op's place holds the most of the samples the run took while at it (from its start to
        // the next op's), where it took some.
        // (Op 1's place also takes what came before it.)
        for (size_t k = 1; k + 1 < reached.size(); ++k) {
            double most = -1;
            for (size_t i = 0; i < times.size(); ++i)
                if (times[i] >= reached[k].first && times[i] < reached[k + 1].first) most = std::max(most, values[i]);
            if (most >= 0) CHECK(by_op.value_at(reached[k].second) == most);
        }
    }
}

TEST_CASE("compare by op: the op under the mouse by its number and name on param's PT2 execution trace") {
    fixture::TempPath db("pt2-op-at.db");
    mhc::trace::import::Options options;
    options.warn = false;
    mhc::trace::import::import_file(std::string(mhc::test::public_datasets()) + "/chakra/param-pt2-et-1.1.1.json.gz", db.path,
                                    options);
    const mhc::viewer::ViewTrace view = mhc::viewer::load_view_trace(db.path);
    REQUIRE(view.order_only());
    std::vector<std::pair<int64_t, std::string>> ops;
    for (const Lane& lane : view.kernel_lanes)
        for (size_t i = 0; i < lane.size(); ++i) ops.emplace_back(lane.t_start[i], view.str(lane.key[i]));
    std::sort(ops.begin(), ops.end());
    REQUIRE(ops.size() == 4);
    for (const auto& [at, name] : ops) {
        CHECK(mhc::viewer::op_at_text(view, at) == "op #" + std::to_string(at) + " " + name);
    }
    CHECK(mhc::viewer::op_at_text(view, ops.back().first + 5) == "op #" + std::to_string(ops.back().first + 5));
}

TEST_CASE("find marks every match, merged per pixel, and counts them") {
    // Lane 0: matches at 100..110 and 5000..5100; lane 1: 200 matches of 1 ns from 2000, 1 ns apart.
    std::vector<KernelMatch> matches{{100, 110, 1, 0}, {5000, 5100, 2, 0}};
    for (int k = 0; k < 200; ++k) matches.push_back({2000 + k, 2001 + k, 10 + k, 1});
    std::sort(matches.begin(), matches.end(),
              [](const KernelMatch& one, const KernelMatch& other) { return one.t_start < other.t_start; });
    const int64_t longest = mhc::viewer::longest_match(matches);
    CHECK(longest == 100);
    // 10 ns a pixel over [0, 10000): 1000 px.
    const auto marks = match_marks(matches, 2, {0, 10000}, 1000.f, longest);
    REQUIRE(marks.size() == 2);
    REQUIRE(marks[0].size() == 2);        // both matches of lane 0 marked, not only the one selected
    CHECK(marks[0][0].x0 == Approx(9));   // 1 px wide, widened to 3 around its middle (10.5 px)
    CHECK(marks[0][0].x1 == Approx(12));
    CHECK(marks[0][1].x0 == Approx(500));
    CHECK(marks[0][1].x1 == Approx(510));
    REQUIRE(marks[1].size() == 1);   // 200 in 20 px: one mark counting them
    CHECK(marks[1][0].count == 200);
    size_t counted = 0;
    for (const auto& lane : marks)
        for (const auto& mark : lane) counted += mark.count;
    CHECK(counted == matches.size());
    // Zoomed to [5050, 5060): the long match reaching into it from before is marked; the others are not.
    const auto zoomed = match_marks(matches, 2, {5050, 5060}, 1000.f, longest);
    REQUIRE(zoomed[0].size() == 1);
    CHECK(zoomed[0][0].x0 == 0);
    CHECK(zoomed[0][0].x1 == 1000);
    CHECK(zoomed[1].empty());
    // The count beside the field.
    CHECK(match_count_text(2, 17) == "3 of 17");
    CHECK(match_count_text(-1, 17) == "17 matches");
    CHECK(match_count_text(-1, 1) == "1 match");
    CHECK(match_count_text(-1, 0) == "no match");
}

TEST_CASE("At the OOM: the allocations alive grouped by where they were allocated, sizes summed, largest first") {
    // A hand-made trace: 600 activations of 1 MiB from "forward (model.py:12)", 2 weights of 100 MiB
    // from "load (model.py:3)", one 50 MiB buffer without a label, and one 300 MiB allocation of
    // "forward" the run could not place. The groups: forward 600 allocations (600 MiB on the device,
    // the needed 300 MiB apart), load 2 (200 MiB), no label 1 (50 MiB): by bytes on the device.
    mhc::viewer::ViewTrace view;
    view.strings = {"forward (model.py:12)", "load (model.py:3)"};
    mhc::viewer::AllocationTable& allocs = view.allocations;
    auto add = [&](int64_t id, int64_t bytes, int64_t label) {
        allocs.id.push_back(id);
        allocs.bytes.push_back(bytes);
        allocs.t_alloc.push_back(0);
        allocs.t_free.push_back(mhc::trace::kNoTime);
        allocs.label.push_back(label);
        allocs.device.push_back(0);
        allocs.category.push_back(mhc::trace::Category::Other);
    };
    constexpr int64_t MiB = fixture::MiB;
    for (int k = 0; k < 600; ++k) add(k + 1, MiB, 0);
    add(601, 100 * MiB, 1);
    add(602, 100 * MiB, 1);
    add(603, 50 * MiB, -1);
    add(604, 300 * MiB, 0);
    mhc::viewer::RunOom oom;
    for (uint32_t row = 0; row < allocs.id.size(); ++row) oom.live.rows.push_back({row});
    oom.live.rows[600].where = mhc::viewer::Residence::Host;   // one weight swapped out
    oom.needed = 603;                                          // allocation 604
    oom.operand.assign(oom.live.rows.size(), false);
    oom.operand[601] = true;
    const auto groups = mhc::viewer::group_live_by_label(view, oom.live, &oom);
    REQUIRE(groups.size() == 3);
    CHECK(view.str(groups[0].label) == "forward (model.py:12)");
    CHECK(groups[0].count == 601);
    CHECK(groups[0].on_device == 600 * MiB);
    CHECK(groups[0].bytes == 900 * MiB);
    CHECK(groups[0].needed);
    CHECK(groups[0].needed_bytes == 300 * MiB);
    CHECK(groups[0].largest == 300 * MiB);
    CHECK(groups[0].rows.front() == 603);   // its largest first
    CHECK(view.str(groups[1].label) == "load (model.py:3)");
    CHECK(groups[1].count == 2);
    CHECK(groups[1].on_device == 100 * MiB);
    CHECK(groups[1].on_host == 100 * MiB);
    CHECK(groups[1].operands == 1);
    CHECK(groups[1].operand_bytes == 100 * MiB);
    CHECK(groups[2].label == -1);
    CHECK(groups[2].name.empty());
    CHECK(groups[2].on_device == 50 * MiB);
    // Every row in one group.
    size_t rows = 0;
    for (const auto& group : groups) rows += group.count;
    CHECK(rows == oom.live.rows.size());
}

TEST_CASE("At the OOM: a generated trace's tensor of every layer is one group") {
    using mhc::viewer::live_group_name;
    CHECK(live_group_name("L3.attn.probs") == "L*.attn.probs");
    CHECK(live_group_name("L11.mlp.fc1.weight.grad") == "L*.mlp.fc1.weight.grad");
    CHECK(live_group_name("logits") == "logits");
    CHECK(live_group_name("L.x") == "L.x");
    CHECK(live_group_name("L3") == "L3");
    CHECK(live_group_name("Linear.forward (model.py:12)") == "Linear.forward (model.py:12)");
    CHECK(live_group_name("L3.") == "L3.");
    // 12 layers' attention probabilities (192 MiB each, on the host) and the logits (on the device):
    // two groups, the logits first (on the device), then 12 x 192 MiB. A 100 MiB allocation the run
    // could not place comes before them: after what is on the device, before the larger groups.
    mhc::viewer::ViewTrace view;
    mhc::viewer::AllocationTable& allocs = view.allocations;
    constexpr int64_t MiB = fixture::MiB;
    mhc::viewer::RunPeakLive live;
    for (int layer = 0; layer < 12; ++layer) {
        view.strings.push_back("L" + std::to_string(layer) + ".attn.probs");
        allocs.label.push_back(layer);
        allocs.bytes.push_back(192 * MiB);
        live.rows.push_back({static_cast<uint32_t>(layer), mhc::viewer::Residence::Host});
    }
    view.strings.emplace_back("logits");
    allocs.label.push_back(12);
    allocs.bytes.push_back(785 * MiB);
    const mhc::viewer::RunPeakRow logits_row{12};
    live.rows.push_back(logits_row);
    view.strings.emplace_back("act");
    allocs.label.push_back(13);
    allocs.bytes.push_back(100 * MiB);
    const mhc::viewer::RunPeakRow act_row{13};
    live.rows.push_back(act_row);
    mhc::viewer::RunOom oom;
    oom.needed = 13;
    oom.operand.assign(live.rows.size(), false);
    const auto groups = mhc::viewer::group_live_by_label(view, live, &oom);
    REQUIRE(groups.size() == 3);
    CHECK(groups[0].name == "logits");
    CHECK(groups[0].on_device == 785 * MiB);
    CHECK(groups[1].name == "act");
    CHECK(groups[1].needed_bytes == 100 * MiB);
    CHECK(groups[2].name == "L*.attn.probs");
    CHECK(groups[2].count == 12);
    CHECK(groups[2].on_host == 12 * 192 * MiB);
}

TEST_CASE("a run's curve is drawn from its first sample, not from 0 B before it") {
    // A run that stored its first device-bytes sample at 50 ms (it moved what was allocated before
    // recording first): on a 100 ms view 1000 columns wide, the 500 columns before it are not drawn.
    Curve curve;
    curve.assign({50000000, 60000000}, {2.0e9, 1.5e9});
    CHECK(mhc::viewer::columns_before_first_sample(curve, {0, 100000000}, 1000) == 500);
    CHECK(mhc::viewer::columns_before_first_sample(curve, {50000000, 100000000}, 1000) == 0);
    CHECK(mhc::viewer::columns_before_first_sample(curve, {0, 40000000}, 1000) == 1000);   // all before it
    CHECK(mhc::viewer::columns_before_first_sample(curve, {0, 100000000}, 999) == 499);    // 499.5: its column drawn
    CHECK(mhc::viewer::columns_before_first_sample(Curve{}, {0, 100}, 10) == 0);
}
