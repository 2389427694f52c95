// Screenshots of what a trace is: bad input refused in one line, an order-only execution trace
// drawn by op number.
// (shots.hpp: how a screenshot is taken and read.)
#include "shots.hpp"
#include "mhc/test/paths.hpp"

TEST_CASE("screenshot mode: bad trace, unknown run, bad range exit 2 with one line") {
    Shot missing = shoot("/nonexistent/none.db", "");
    CHECK(missing.rc == 2);
    CHECK(missing.err.find("/nonexistent/none.db") != std::string::npos);
    CHECK(std::count(missing.err.begin(), missing.err.end(), '\n') == 1);
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    Shot run = shoot(db.path, "--run 99");
    CHECK(run.rc == 2);
    CHECK(run.err.find("run 99 does not exist") != std::string::npos);
    CHECK(run.err.find("in the file: mhc info " + db.path + " lists them") != std::string::npos);
    Shot range = shoot(db.path, "--range 5ms:1ms");
    CHECK(range.rc == 2);
    CHECK(range.err.find("--range") != std::string::npos);
}

TEST_CASE("the window is not opened on a file that is no trace: one line naming mhc import, exit 2") {
    // A Kineto JSON passed to mhc-view as it is. Without --screenshot the window opened, said "not
    // an mhc trace (not an SQLite database)" and stayed open: no exit status, nothing on stderr,
    // and no word of `mhc import`. (timeout: the window, if it opens, is killed after 30 s.)
    fixture::TempPath json("kineto.json"), err("stderr.txt");
    std::ofstream(json.path) << R"({"traceEvents": []})";
    const std::string cmd = std::string("timeout 30 '") + mhc::test::mhc_view_exe() + "' '" + json.path + "' 2>'" + err.path + "'";
    const int st = std::system(cmd.c_str());
    REQUIRE(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 2);
    std::stringstream text;
    text << std::ifstream(err.path).rdbuf();
    const std::string line = text.str();
    CHECK(std::count(line.begin(), line.end(), '\n') == 1);
    CHECK(line.find("not an mhc trace") != std::string::npos);
    CHECK(line.find("`mhc import " + json.path + " -o TRACE.db`") != std::string::npos);
    // Screenshot mode says the same.
    Shot shot = shoot(json.path, "");
    CHECK(shot.rc == 2);
    CHECK(shot.err.find("mhc import") != std::string::npos);
    // A missing file: one line, no window, no hint (there is no file to import).
    fixture::TempPath none("none.db");
    const int missing = std::system(
        (std::string("timeout 30 '") + mhc::test::mhc_view_exe() + "' '" + none.path + "' 2>/dev/null").c_str());
    REQUIRE(WIFEXITED(missing));
    CHECK(WEXITSTATUS(missing) == 2);
}

TEST_CASE("an execution trace is drawn by op number: axis, range, hover and details say ops, no times") {
    // param's PT2 execution trace (4 ops, order only). The axis read "event #N", the order-only note
    // took a second line under the toolbar at 1400 px (the plots 19 px lower than at 2400 px), and
    // hovering an op said "start event #1, end event #2", "duration 1 event".
    fixture::TempPath db("pt2-et.db");
    import_public("chakra/param-pt2-et-1.1.1.json.gz", db.path);
    Shot shot = shoot(db.path, "--size 1400x700");
    Shot wide = shoot(db.path, "--size 2400x700");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    REQUIRE(wide.rc == 0);
    auto below_toolbar = [](const Shot& taken) {
        return taken.layout["timeline"]["plot"]["y0"].get<double>() -
               taken.layout["toolbar"]["run_combo"]["y1"].get<double>();
    };
    CHECK(below_toolbar(shot) == below_toolbar(wide));
    check_one_line(shot.layout["toolbar"], 1400);
    const auto& axis = shot.layout["axis"];
    CHECK(axis["title"] == "op order");
    const auto& plot = shot.layout["timeline"]["plot"];
    // The title lies in the label column, left of the plot.
    CHECK(axis["title_rect"]["x1"].get<double>() < plot["x0"].get<double>());
    REQUIRE(!axis["labels"].empty());
    for (const auto& label : axis["labels"]) {
        CHECK(label["text"].get<std::string>().rfind("op #", 0) == 0);
        CHECK(label["x1"].get<double>() <= plot["x1"].get<double>());
    }
    CHECK(shot.layout["toolbar"]["range_text"] == "op #1 .. #4 (4 ops)");
    // Hovering the op on the first kernel track: its name and number.
    const nlohmann::json* ops = nullptr;
    for (const auto& row : shot.layout["timeline"]["tracks"])
        if (row["title"].get<std::string>().find("stream") != std::string::npos && row["items"].get<int>() > 0) {
            ops = &row;
            break;
        }
    REQUIRE(ops);
    // The middle of op #2's box ([2, 3) on the axis).
    const auto& tl = shot.layout["timeline"];
    const int hover_x = static_cast<int>((x_at(plot, tl, 2) + x_at(plot, tl, 3)) / 2);
    Shot probe = shoot(db.path, "--size 1400x700 --hover " + std::to_string(hover_x) + "," +
                                    std::to_string(static_cast<int>(row_y(*ops))));
    REQUIRE(probe.rc == 0);
    REQUIRE(probe.layout.contains("hover"));
    CHECK(probe.layout["hover"]["when"] == "op #2");
    // Its "kernels" are ops: the header counts ops, the statistics give each op's count and share
    // (they gave "4 ops (100.0%)" as a total, "1 op" as a mean and a max).
    CHECK(shot.layout["header"].get<std::string>().find("  |  4 ops, ") != std::string::npos);
    Shot stats = shoot(db.path, "--view statistics --size 1400x700");
    REQUIRE(stats.rc == 0);
    CHECK(stats.layout["statistics"]["kernels"]["headers"] == nlohmann::json::array({"name", "count", "share"}));
    // A timed trace keeps its kernels' times.
    fixture::TempPath known("known-stats.db");
    fixture::write_known_trace(known.path);
    Shot timed = shoot(known.path, "--view statistics --size 1400x700");
    REQUIRE(timed.rc == 0);
    CHECK(timed.layout["statistics"]["kernels"]["headers"] ==
          nlohmann::json::array({"name", "count", "total", "mean", "max"}));
    CHECK(timed.layout["header"].get<std::string>().find(" kernels, ") != std::string::npos);
}

TEST_CASE("a run of an execution trace reads as ops and link time: axis, range, hover, details") {
    // param's PT2 execution trace (4 ops, order only) with a run that stalls 2 ms of link time before
    // op 3 (ops at 1, 2, 2000003, 2000004 on its clock). Before, the axis read "op #1000000" on a trace
    // of 4 ops and hovering the stall "op #3 .. #2000002 (2000000 ops)".
    fixture::TempPath db("pt2-run.db");
    import_public("chakra/param-pt2-et-1.1.1.json.gz", db.path);
    std::vector<int64_t> ops;   // kernel ids by recorded start
    {
        const ViewTrace view = load_view_trace(db.path);
        std::vector<std::pair<int64_t, int64_t>> by_start;
        for (const auto& lane : view.kernel_lanes)
            for (size_t i = 0; i < lane.size(); ++i) by_start.emplace_back(lane.t_start[i], lane.ref[i]);
        std::sort(by_start.begin(), by_start.end());
        for (const auto& each : by_start) ops.push_back(each.second);
    }
    REQUIRE(ops.size() == 4);
    mhc::trace::Run run;
    run.name = "lru@50%";
    const std::vector<int64_t> starts{1, 2, 2000003, 2000004};
    for (size_t k = 0; k < 4; ++k) run.kernel_times.push_back({ops[k], starts[k], starts[k] + 1});
    run.events.push_back({mhc::trace::EventKind::Stall, 3, 2000003, 0, ops[2], 0});
    mhc::trace::add_run(db.path, run);
    Shot shot = shoot(db.path, "--size 1400x600 --run 1");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& axis = shot.layout["axis"];
    CHECK(axis["title"] == "ops + link time");
    // Each label names an op the run reached by then, once: ops 1..4 only.
    REQUIRE(!axis["labels"].empty());
    std::set<std::string> seen;
    for (const auto& label : axis["labels"]) {
        const std::string text = label["text"];
        CHECK((text == "start" || text == "op #1" || text == "op #2" || text == "op #3" || text == "op #4"));
        CHECK(seen.insert(text).second);
    }
    CHECK(shot.layout["toolbar"]["range_text"].get<std::string>().find("of link time") != std::string::npos);
    // Hovering the stall's middle: where it lies by op and its link time.
    const auto& tl = shot.layout["timeline"];
    const auto& stall = track(tl, "stall");
    const int hx = static_cast<int>(x_at(tl["plot"], tl, 1000000));
    Shot probe = shoot(db.path, "--size 1400x600 --run 1 --hover " + std::to_string(hx) + "," +
                                    std::to_string(static_cast<int>(row_y(stall))));
    REQUIRE(probe.rc == 0);
    REQUIRE(probe.layout.contains("hover"));
    CHECK(probe.layout["hover"]["when"] == "op #2 + 1 ns .. op #3 (2.00 ms of link time)");
}
