// Screenshots of the compare view: runs' curves overlaid, the run picker at 70 runs.
// (shots.hpp: how a screenshot is taken and read.)
#include "shots.hpp"

using mhc::viewer::series_color;

TEST_CASE("compare screenshot: both runs' curves overlaid") {
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    Shot shot = shoot(db.path, "--view compare --run 1 --run 2");
    REQUIRE(shot.rc == 0);
    const auto& cmp = shot.layout["compare"];
    REQUIRE(cmp["runs"].size() == 2);
    const auto& curve_rect = cmp["curve"];
    // Each run's line at its own peak height in the middle of its peak (500 us).
    double xpos = x_at(curve_rect, cmp, 500 * us);
    double y1 = curve_rect["y1"], tall = y1 - curve_rect["y0"].get<double>(), y_max = cmp["y_max"];
    for (int k = 0; k < 2; ++k) {
        double peak = cmp["runs"][k]["peak"];
        double ypos = y1 - peak / y_max * tall;
        bool found = false;
        for (double dy = -2; dy <= 2; ++dy)
            found = found || near(shot.img.at(xpos, ypos + dy), series_color(static_cast<size_t>(k)), 6);
        CHECK(found);
    }
    // The metrics table: readable names, values in the key's unit.
    std::map<std::string, nlohmann::json> rows;
    for (const auto& area : cmp["metrics"]) rows[area["key"].get<std::string>()] = area;
    REQUIRE(rows.count("stall_ns"));
    CHECK(rows["stall_ns"]["label"] == "stall time");
    CHECK(rows["stall_ns"]["values"][0] == "50.00 us");
    CHECK(rows["stall_ns"]["values"][1] == "10.00 us");
    for (const auto& [key, area] : rows) CHECK(area["label"].get<std::string>().find('_') == std::string::npos);
    // The timelines take the height they need (the recording's block and two runs'), the table the
    // rest: an empty band of 100 px and more lay between them at 1400x700 (2026-12-05).
    const auto& timelines = cmp["timelines"];
    const double list_h = timelines["rect"]["y1"].get<double>() - timelines["rect"]["y0"].get<double>();
    CHECK(list_h <= timelines["content_height"].get<double>() + 1);
    CHECK(cmp["metrics_rect"]["y0"].get<double>() - timelines["rect"]["y1"].get<double>() < 12);
    // "recorded (grey)" sits over the plot's top left, clear of every byte label (it was drawn in
    // the label column, over the top one).
    const auto& cap = cmp["caption"];
    CHECK(cap["x0"].get<double>() >= curve_rect["x0"].get<double>());
    CHECK(cap["y0"].get<double>() >= curve_rect["y0"].get<double>());
    REQUIRE(cmp["axis_labels"].size() >= 2);
    for (const auto& label : cmp["axis_labels"])
        CHECK(!(label["x0"].get<double>() < cap["x1"].get<double>() &&
                cap["x0"].get<double>() < label["x1"].get<double>() &&
                label["y0"].get<double>() < cap["y1"].get<double>() &&
                cap["y0"].get<double>() < label["y1"].get<double>()));
}

namespace {

// 68 more runs on the known trace (70 in all, as a sweep of the demo stores): five policies,
// three prefetchers, two links; kernels shifted by 10 us x (i % 7); the last one is slow (its
// kernels 5 ms later: it ends near 5.9 ms on a 1 ms trace).
void add_sweep_runs(const std::string& path) {
    using mhc::trace::add_runs;
    using mhc::trace::Run;
    const char* policies[] = {"lru", "largest", "belady", "dtr", "cost_aware"};
    const char* prefetchers[] = {"none", "periodic", "lookahead:500"};
    std::vector<Run> runs;
    for (int i = 0; i < 68; ++i) {
        Run sweep_run;
        int64_t shift = i == 67 ? 5000 * us : 10 * us * (i % 7);
        std::string pol = policies[i % 5], pre = prefetchers[i % 3], link = i % 2 ? "pcie5" : "pcie4";
        sweep_run.name = pol + "+" + pre + "@" + std::to_string(50 + i % 4 * 10) + "%/" + link + "/caching";
        sweep_run.config = {{"eviction", pol}, {"prefetch", pre}, {"link", link}};
        sweep_run.metrics = {{"capacity_bytes", (900.0 + i) * MiB},
                             {"simulated_peak_bytes", (890.0 + i) * MiB},
                             {"peak_reduction", 0.3 + 0.001 * i},
                             {"throughput_loss", 0.01 * i},
                             {"simulated_makespan_ns", 1e6 + static_cast<double>(shift)}};
        for (int k = 1; k <= 202; ++k) {
            int64_t when = k == 1 ? 100 * us : k == 2 ? 500 * us : 800 * us + (k - 3) * 500;
            int64_t delta = k == 1 || k == 2 ? 200 * us : 100;
            sweep_run.kernel_times.push_back({k, when + (k > 1 ? shift : 0), when + delta + (k > 1 ? shift : 0)});
        }
        sweep_run.memory = {{0, 400 * MiB, 0}, {600 * us + shift, 500 * MiB, 0}};
        runs.push_back(std::move(sweep_run));
    }
    add_runs(path, runs);
}

}   // namespace

TEST_CASE("compare at scale: 70 runs in a table, timelines scroll, the axis reaches the slowest ticked run") {
    fixture::TempPath db("sweep.db");
    fixture::write_known_trace(db.path);
    add_sweep_runs(db.path);
    // Default: the first six ticked; none is the slow run (#70), so the axis ends near 1.06 ms.
    Shot shot = shoot(db.path, "--view compare --size 1400x900");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& cmp = shot.layout["compare"];
    const auto& picker = cmp["picker"];
    CHECK(picker["total"] == 70);
    CHECK(picker["shown"] == 70);
    REQUIRE(picker["rows"].size() >= 6);
    for (size_t i = 0; i < picker["rows"].size(); ++i) {
        CHECK(picker["rows"][i]["id"] == static_cast<int64_t>(i) + 1);   // by id
        CHECK(picker["rows"][i]["ticked"] == (i < 6));
    }
    // Row #3: the sweep's first run: lru, none, pcie4, its figures.
    CHECK(picker["rows"][2]["cells"] == nlohmann::json({"3", "lru", "none", "pcie4", "900.00 MiB", "890.00 MiB",
                                                        "30.0%", "0.00%", "1.00 ms", "complete"}));
    // The picker takes a part of the window, the plots the rest; nothing runs off the window.
    double pick_h = picker["rect"]["y1"].get<double>() - picker["rect"]["y0"].get<double>();
    CHECK(pick_h < 0.35 * shot.img.h);
    CHECK(cmp["curve"]["y0"].get<double>() > picker["rect"]["y1"].get<double>());
    CHECK(cmp["timelines"]["rect"]["y1"].get<double>() < shot.layout["status"]["y0"].get<double>());
    CHECK(cmp["t1"].get<int64_t>() < 2000 * us);

    // Nine runs ticked, the slow one among them: the axis reaches its end; the list scrolls.
    std::string ticks;
    for (int id : {70, 1, 2, 3, 4, 5, 6, 7, 8}) ticks += " --run " + std::to_string(id);
    Shot ticked_shot = shoot(db.path, "--view compare --size 1400x900" + ticks);
    REQUIRE(ticked_shot.rc == 0);
    const auto& c9 = ticked_shot.layout["compare"];
    REQUIRE(c9["runs"].size() == 9);
    int64_t slowest = 0;
    for (const auto& run_json : c9["runs"]) slowest = std::max(slowest, run_json["t_end"].get<int64_t>());
    CHECK(slowest > 5800 * us);
    CHECK(c9["t1"].get<int64_t>() >= slowest);
    const auto& tl = c9["timelines"];
    REQUIRE(tl["runs"].size() == 9);
    double visible_h = tl["rect"]["y1"].get<double>() - tl["rect"]["y0"].get<double>();
    CHECK(tl["content_height"].get<double>() > visible_h);   // more than fit: a scrolling list
    int visible = 0;
    for (const auto& area : tl["runs"]) visible += area["visible"].get<bool>();
    CHECK(visible >= 2);
    CHECK(visible < 9);
    // The slow run's curve (the ninth colour) runs on at 500 MiB to the right of the others' ends.
    const auto& curve_rect = c9["curve"];
    double ypos = curve_rect["y1"].get<double>() -
                  500.0 * MiB / c9["y_max"].get<double>() *
                      (curve_rect["y1"].get<double>() - curve_rect["y0"].get<double>());
    bool found = false;
    for (double dy = -2; dy <= 2; ++dy)
        found |= near(ticked_shot.img.at(x_at(curve_rect, c9, 5700 * us), ypos + dy), series_color(8), 6);
    CHECK(found);
}

TEST_CASE("compare: the recording's kernels first, in their own block, on the same axis as the runs'") {
    // The known trace's "beta" kernel ran at [500, 700) us; run #1 moved it to [550, 750) us. The
    // compare view drew only the runs' kernels: where the recording had them took a switch to the
    // timeline without a run.
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    Shot shot = shoot(db.path, "--view compare --run 1 --size 1400x900");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& cmp = shot.layout["compare"];
    const auto& tl = cmp["timelines"];
    REQUIRE(tl["recorded"].is_object());
    CHECK(tl["recorded"]["tracks"] == 2);   // streams 7 and 8
    REQUIRE(tl["runs"].size() == 1);
    CHECK(tl["recorded"]["y1"].get<double>() <= tl["runs"][0]["y0"].get<double>());
    // Stream 7 is each block's first row, under its 18 px title; its top pixel row is clear of
    // the boxes' centred labels.
    const double rec_y = tl["recorded"]["y0"].get<double>() + 18 + 1,
                 run_y = tl["runs"][0]["y0"].get<double>() + 18 + 1;
    const auto& curve = cmp["curve"];
    auto rec = [&](int64_t when) { return shot.img.at(x_at(curve, cmp, when), rec_y); };
    auto ran = [&](int64_t when) { return shot.img.at(x_at(curve, cmp, when), run_y); };
    CHECK(near(rec(505 * us), rec(690 * us)));        // beta, recorded: [500, 700) us
    CHECK(near(ran(560 * us), rec(505 * us)));        // beta, run #1: from 550 us, the same colour
    CHECK(!near(ran(520 * us), rec(505 * us), 10));   // not yet started in the run
    CHECK(!near(rec(720 * us), rec(505 * us), 10));   // over in the recording
}

TEST_CASE("compare on an execution trace: runs aligned by op, the axis counts ops, hover names the op") {
    // param's PT2 execution trace (4 ops, order only). Run 1 stalls 2 ms of link time before op 3 (ops
    // at 1, 2, 2000003, 2000004 on its clock) and holds 300 MiB during the stall; run 2 goes straight
    // on (ops at 1..4). Before, compare drew each run on its own clock: the axis reached 2000005 and
    // read "op #1000000" on a trace of 4 ops, run 1's op 3 lay 2 million "ops" right of run 2's.
    fixture::TempPath db("pt2-compare.db");
    import_public("chakra/param-pt2-et-1.1.1.json.gz", db.path);
    std::vector<int64_t> ops;   // kernel ids by recorded start
    std::vector<std::string> names;
    int64_t trace_end = 0;
    {
        const ViewTrace view = load_view_trace(db.path);
        std::vector<std::tuple<int64_t, int64_t, std::string>> by_start;
        for (const auto& lane : view.kernel_lanes)
            for (size_t i = 0; i < lane.size(); ++i)
                by_start.emplace_back(lane.t_start[i], lane.ref[i], view.str(lane.key[i]));
        std::sort(by_start.begin(), by_start.end());
        for (const auto& [start, id, name] : by_start) {
            ops.push_back(id);
            names.push_back(name);
        }
        trace_end = view.t_end;
    }
    REQUIRE(ops.size() == 4);
    mhc::trace::Run stalled, straight;
    stalled.name = "lru@50%";
    straight.name = "lru@90%";
    const std::vector<int64_t> starts{1, 2, 2000003, 2000004};
    for (size_t k = 0; k < 4; ++k) {
        stalled.kernel_times.push_back({ops[k], starts[k], starts[k] + 1});
        straight.kernel_times.push_back({ops[k], static_cast<int64_t>(k) + 1, static_cast<int64_t>(k) + 2});
    }
    stalled.events.push_back({mhc::trace::EventKind::Stall, 3, 2000003, 0, ops[2], 0});
    stalled.memory = {{0, 100 * MiB, 0}, {5, 300 * MiB, 0}, {1000000, 150 * MiB, 0}, {2000003, 200 * MiB, 0}};
    straight.memory = {{0, 100 * MiB, 0}, {3, 250 * MiB, 0}};
    mhc::trace::add_run(db.path, stalled);
    mhc::trace::add_run(db.path, straight);
    Shot shot = shoot(db.path, "--view compare --run 1 --run 2 --size 1400x800");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& cmp = shot.layout["compare"];
    // The trace's op axis, not run 1's clock: it ends with the trace.
    CHECK(cmp["t1"].get<int64_t>() <= trace_end);
    REQUIRE(cmp["runs"].size() == 2);
    for (const auto& each : cmp["runs"]) {
        CHECK(each["by_op"] == true);
        CHECK(each["t_end"].get<int64_t>() <= trace_end);
    }
    // Run 1's peak (300 MiB, during the stall) is drawn, at op 2.
    CHECK(cmp["runs"][0]["peak"].get<double>() == Approx(300.0 * MiB));
    const auto& axis = shot.layout["axis"];
    CHECK(axis["title"] == "op order, runs by op");
    REQUIRE(!axis["labels"].empty());
    for (const auto& label : axis["labels"]) {
        const std::string text = label["text"];
        INFO(text);
        REQUIRE(text.rfind("op #", 0) == 0);
        CHECK(std::stoll(text.substr(4)) <= trace_end);
    }
    // Hovering the curves at op 2: its number and name, and what each run did there.
    const auto& curve = cmp["curve"];
    const int hx = static_cast<int>(x_at(curve, cmp, starts[1]) + 3);
    const int hy = static_cast<int>((curve["y0"].get<double>() + curve["y1"].get<double>()) / 2);
    Shot hover = shoot(db.path, "--view compare --run 1 --run 2 --size 1400x800 --hover " + std::to_string(hx) + "," +
                                    std::to_string(hy));
    REQUIRE(hover.rc == 0);
    const auto& lines = hover.layout["compare"]["hover_op"];
    INFO(lines.dump());
    REQUIRE(lines.size() >= 3);   // the op, (the recording's bytes when it has allocations), each run
    CHECK(lines[0] == "op #2 " + names[1]);
    // Run 1 held 300 MiB during its stall after op 2; run 2 went on to op 3 before it held 250 MiB.
    CHECK(lines[lines.size() - 2] == "#1 lru@50%: 300.00 MiB on the device, 2.00 ms of link time here");
    CHECK(lines[lines.size() - 1] == "#2 lru@90%: 100.00 MiB on the device");
}

TEST_CASE("a run of another device than the memory shown is said, not drawn over its recording") {
    // Two runs of one setting: #3 simulated GPU 0 (the known trace's memory), #4 the host (mhc simulate
    // --device -1; its config says device -1) at 4 GiB. Before, compare drew #4's host bytes over GPU 0's
    // recording as if GPU 0 held them (nsys's con_kernel sample: a host run's 2 MiB under GPU 0's 40 MiB),
    // its axis reached 4 GiB, and both runs read "lru+none@70%/pcie4/caching" everywhere.
    fixture::TempPath db("devices.db");
    fixture::write_known_trace(db.path);
    std::vector<mhc::trace::Run> runs(2);
    for (int k = 0; k < 2; ++k) {
        runs[k].name = "lru+none@70%/pcie4/caching";
        runs[k].config = {
            {"eviction", "lru"}, {"prefetch", "none"}, {"link", "pcie4"}, {"device", k == 0 ? "0" : "-1"}};
        runs[k].metrics = {{"capacity_bytes", (k == 0 ? 900.0 : 4000.0) * MiB}, {"simulated_peak_bytes", 100.0 * MiB}};
        runs[k].memory = {{0, (k == 0 ? 300 : 4000) * MiB, 0}, {900 * us, (k == 0 ? 300 : 4000) * MiB, 0}};
    }
    mhc::trace::add_runs(db.path, runs);
    Shot shot = shoot(db.path, "--view compare --run 3 --run 4");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& cmp = shot.layout["compare"];
    REQUIRE(cmp["runs"].size() == 2);
    CHECK_FALSE(cmp["runs"][0].contains("other_device"));
    const std::string note = "#4 simulated the host's memory, not GPU 0's: pick host in 'memory of' to see its curve";
    CHECK(cmp["runs"][1]["other_device"] == note);
    CHECK(cmp["y_max"].get<double>() < 2000.0 * MiB);   // the host run's 4 GiB no longer sets the axis
    // Its colour nowhere in the curves' plot.
    const auto& curve = cmp["curve"];
    size_t host_pixels = 0;
    for (int y = static_cast<int>(curve["y0"].get<double>()) + 1; y < static_cast<int>(curve["y1"].get<double>()); ++y)
        for (int x = static_cast<int>(curve["x0"].get<double>()) + 1; x < static_cast<int>(curve["x1"].get<double>());
             ++x)
            host_pixels += near(shot.img.at(x, y), series_color(1), 4);
    CHECK(host_pixels == 0);
    // Said in its timeline's header, after its name, which names the device.
    const auto& timelines = cmp["timelines"]["runs"];
    REQUIRE(timelines.size() == 2);
    CHECK(timelines[1]["header_note"] == note);
    CHECK_FALSE(timelines[0].contains("header_note"));
    // Selected in the memory view and the timeline: the recording's memory, the note in the legend and
    // the strip's title; the run field names its device.
    Shot memory = shoot(db.path, "--view memory --run 4");
    REQUIRE(memory.rc == 0);
    bool said = false;
    for (const auto& entry : memory.layout["memory"]["legend"]) said = said || entry["text"] == note;
    CHECK(said);
    CHECK(memory.layout["toolbar"]["run_combo"]["text"] == "lru+none@70%/pcie4/caching (host)");
    Shot timeline = shoot(db.path, "--run 4");
    REQUIRE(timeline.rc == 0);
    CHECK(timeline.layout["timeline"]["memory_strip"]["device_note"] == note);
    Shot same = shoot(db.path, "--run 3");
    REQUIRE(same.rc == 0);
    CHECK(same.layout["timeline"]["memory_strip"]["device_note"].get<std::string>().empty());
    CHECK(same.layout["toolbar"]["run_combo"]["text"] == "lru+none@70%/pcie4/caching");
}

TEST_CASE("the run simulator says whose memory a run keeps: the device the memory views show") {
    // A trace with GPU 0's memory and the host's: opened on the host (--device -1), Run simulation
    // simulates the host (LaunchFields::device), and the tab says so; it simulated GPU 0 in silence.
    fixture::TempPath db("gpu-and-host.db");
    fixture::write_gpu_and_host_trace(db.path);
    Shot host = shoot(db.path, "--view run --device -1");
    INFO(host.err);
    REQUIRE(host.rc == 0);
    CHECK(host.layout["run"]["device"] == -1);
    CHECK(host.layout["run"]["device_line"] ==
          "simulates the host's memory, the one the memory views show (the toolbar's 'memory of' picks another)");
    Shot gpu = shoot(db.path, "--view run");
    REQUIRE(gpu.rc == 0);
    CHECK(gpu.layout["run"]["device"] == 0);   // auto: the GPU with the largest peak, as mhc simulate
    CHECK(gpu.layout["run"]["device_line"].get<std::string>().rfind("simulates GPU 0's memory", 0) == 0);
}

TEST_CASE("compare: a kernel clicked in one block is placed in every block, each on its own clock") {
    // The known trace's "beta" (kernel #2) ran at [500, 700) us; run #1 moved it to 550 us, run #2 to
    // 510 us. Viewing [0, 540) us, a click on the recorded beta showed it outlined where it lay in
    // view and nowhere else: run #1's beta was out of view, and no block said where it was.
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    const std::string args = "--view compare --run 1 --run 2 --range 0:540us --size 1400x900";
    Shot first = shoot(db.path, args);
    INFO(first.err);
    REQUIRE(first.rc == 0);
    const auto& tl0 = first.layout["compare"]["timelines"];
    CHECK_FALSE(tl0["recorded"].contains("selected"));   // nothing selected, nothing said
    const double click_x = x_at(first.layout["compare"]["curve"], first.layout["compare"], 520 * us);
    const double click_y = tl0["recorded"]["y0"].get<double>() + 18 + 6;   // the recording's stream 7
    const std::string click = " --click " + std::to_string(static_cast<int>(click_x)) + "," +
                              std::to_string(static_cast<int>(click_y));
    Shot shot = shoot(db.path, args + click);
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& cmp = shot.layout["compare"];
    const auto& tl = cmp["timelines"];
    REQUIRE(tl["recorded"].contains("selected"));
    REQUIRE(tl["runs"].size() == 2);
    CHECK(tl["recorded"]["selected"]["text"] == "kernel #2 at 500.00 us");
    CHECK(tl["recorded"]["selected"]["where"] == "in view");
    const auto& late = tl["runs"][0]["selected"];
    CHECK(late["text"] == "kernel #2 at 550.00 us (+50.00 us) >");   // past the view's end: an arrow
    CHECK(late["where"] == "right");
    const auto& near_run = tl["runs"][1]["selected"];
    CHECK(near_run["text"] == "kernel #2 at 510.00 us (+10.00 us)");
    CHECK(near_run["where"] == "in view");
    // Run #2's place is marked across its block, below its stream (in the event rows, where the
    // kernel's own outline is not): a white line at 510 us.
    CHECK(std::abs(near_run["x"].get<double>() - x_at(cmp["curve"], cmp, 510 * us)) < 1.5);
    const double line_y = tl["runs"][1]["y1"].get<double>() - 12;
    bool line = false;
    for (int dx = -1; dx <= 1; ++dx)
        line |= near(shot.img.at(near_run["x"].get<double>() + dx, line_y), mhc::viewer::kSelected, 40);
    CHECK(line);
    // The arrow's words are drawn in the title bar, right-aligned, on a tag that says it is a button.
    const auto& tag = late["rect"];
    CHECK(tag["x1"].get<double>() <= cmp["curve"]["x1"].get<double>() + 1);
    CHECK(near(shot.img.at(tag["x0"].get<double>() + 1, tag["y0"].get<double>() + 1), rgb(70, 70, 85), 6));
    // A click on it brings run #1's beta into view, a third from the left, the zoom kept.
    const std::string on_tag = " --click " + std::to_string(static_cast<int>(tag["x0"].get<double>() + 20)) + "," +
                               std::to_string(static_cast<int>(tag["y0"].get<double>() + 8));
    Shot moved = shoot(db.path, args + click + on_tag);
    INFO(moved.err);
    REQUIRE(moved.rc == 0);
    const auto& after = moved.layout["compare"];
    CHECK(after["t1"].get<int64_t>() - after["t0"].get<int64_t>() == 540 * us);
    CHECK(after["t0"].get<int64_t>() == 550 * us - 180 * us);
    CHECK(after["timelines"]["runs"][0]["selected"]["where"] == "in view");
    CHECK(after["timelines"]["recorded"]["selected"]["where"] == "in view");
}
