// Screenshots after input: clicks on kernels, folded boxes and bands, Go to step, the step field,
// and the idle window's CPU cost.
// (shots.hpp: how a screenshot is taken and read.)
#include "shots.hpp"
#include "mhc/test/paths.hpp"

using mhc::viewer::kSelected;

TEST_CASE("a click on a kernel selects it: outlined, its details pane with both clocks and what the run did") {
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    const std::string args = "--view timeline --run 1 --size 1400x800";
    Shot before = shoot(db.path, args);
    REQUIRE(before.rc == 0);
    auto at = box_of(track(before.layout["timeline"], "stream 7"), 2);   // beta, at [550, 750) us in run 1
    CHECK(before.layout["timeline"]["selected_kernel"] == 0);
    CHECK(before.layout["timeline"]["details"].is_null());

    Shot shot = shoot(db.path, args + click_at(at));
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& tl = shot.layout["timeline"];
    CHECK(tl["selected_kernel"] == 2);
    const auto& details_json = tl["details"];
    CHECK(details_json["title"] == fixture::kBeta);
    CHECK(field_of(details_json, "family") == "attention");
    CHECK(field_of(details_json, "recorded") == "start 500.000 us, end 700.000 us (200.00 us)");
    CHECK(field_of(details_json, "run #1 lru@1GiB") == "start 550.000 us (+50.00 us), end 750.000 us");
    CHECK(field_of(details_json, "stalled") == "50.00 us waiting for its operands");
    REQUIRE(details_json["rows"].size() == 2);
    CHECK(details_json["rows"][0][1] == "weights");
    CHECK(details_json["rows"][0][2] == "400.00 MiB");
    CHECK(details_json["rows"][0][3] == "param");
    CHECK(details_json["rows"][0][5] ==
          "swapped out 40.00 us of 400.00 MiB, 110.00 us before; swapped in 50.00 us of 400.00 MiB, up to the start");
    CHECK(details_json["rows"][1][1] == "act_big");
    CHECK(details_json["rows"][1][4] == "write");
    // The pane sits under the plots, above the status bar, inside the window.
    CHECK(details_json["rect"]["y0"].get<double>() >= tl["plot"]["y1"].get<double>());
    CHECK(details_json["rect"]["y1"].get<double>() <= shot.layout["status"]["y0"].get<double>());
    // The selected box is outlined in white, just outside its left edge.
    const auto& st7 = track(tl, "stream 7");
    auto box = box_of(st7, 2);
    double left = 0;
    for (const auto& band_rect : st7["boxes"])
        if (band_rect[2] == 2) left = band_rect[0].get<double>();
    // (the line is antialiased over the pixel columns around the edge)
    auto outlined = [&](const Image& img) {
        bool white = false;
        for (double dx = -2; dx <= 1; ++dx) white |= near(img.at(left + dx, box.second), kSelected, 30);
        return white;
    };
    CHECK(outlined(shot.img));
    CHECK(!outlined(before.img));
    CHECK(shot.layout["status"]["text"] == "kernel #2 selected");
}

TEST_CASE("a click on a folded box zooms to it, a click on a band shows the allocation's details") {
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    Shot shot = shoot(db.path, "--view timeline");
    REQUIRE(shot.rc == 0);
    const auto& st8 = track(shot.layout["timeline"], "stream 8");
    REQUIRE(st8["boxes"].size() == 1);
    CHECK(st8["boxes"][0][2] == -200);   // 200 kernels folded
    auto fold = std::pair<double, double>{(st8["boxes"][0][0].get<double>() + st8["boxes"][0][1].get<double>()) / 2,
                                          (st8["y0"].get<double>() + st8["y1"].get<double>()) / 2};
    Shot zoomed = shoot(db.path, "--view timeline" + click_at(fold));
    REQUIRE(zoomed.rc == 0);
    // The 200 kernels span [800, 899.6] us; the view pads by a twentieth.
    CHECK(zoomed.layout["timeline"]["t0"].get<int64_t>() == Approx(800 * us - 4980).margin(2));
    CHECK(zoomed.layout["timeline"]["t1"].get<int64_t>() == Approx(899.6 * us + 4980).margin(2));
    CHECK(track(zoomed.layout["timeline"], "stream 8")["items"] == 200);

    // Memory view: "weights" is the bottom band at 500 us.
    Shot shot2 = shoot(db.path, "--view memory --run 1");
    REQUIRE(shot2.rc == 0);
    const auto& band_rect = shot2.layout["memory"]["bands"];
    double xpos = x_at(band_rect, shot2.layout["memory"], 500 * us), ypos = band_rect["y1"].get<double>() - 6;
    Shot clicked = shoot(db.path, "--view memory --run 1 --click " + std::to_string(static_cast<int>(xpos)) + "," +
                                      std::to_string(static_cast<int>(ypos)));
    REQUIRE(clicked.rc == 0);
    const auto& mem = clicked.layout["memory"];
    CHECK(mem["selected_allocation"] == 1);
    const auto& pane = mem["details"];
    CHECK(pane["title"] == "weights");
    CHECK(field_of(pane, "allocation") == "#1, 400.00 MiB, param, GPU 0, stream 7");
    CHECK(field_of(pane, "lifetime") == "allocated 0 ns, alive at the end of the trace (1.00 ms)");
    CHECK(field_of(pane, "label (source frame)") == "weights");
    CHECK(field_of(pane, "accesses") == "2: 2 reading, 0 writing");
    CHECK(field_of(pane, "run #1 lru@1GiB") == "swap-out x1, swap-in x1; first at 400.000 us");
    REQUIRE(pane["rows"].size() == 2);
    CHECK(pane["rows"][1][1] == fixture::kBeta);
    CHECK(pane["rows"][1][3] == "500.000 us");
    CHECK(pane["rows"][1][4] == "550.000 us");
}

TEST_CASE("Go does not move the toolbar or the plots, statistics give names the width") {
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    Shot plain = shoot(db.path, "--view timeline --range 100us:200us");
    Shot go = shoot(db.path, "--view timeline --range 100us:200us --step 0");
    REQUIRE(plain.rc == 0);
    REQUIRE(go.rc == 0);
    // The step's range is shown and said in the status bar; nothing under the toolbar moved.
    CHECK(go.layout["status"]["text"] == "step 0");
    // The status bar shows the frame time, as Tracy does: "frame 1.2 ms (mean 1.0, worst 3.4)".
    const std::string frame = go.layout["status"]["frame"];
    CHECK(frame.rfind("frame ", 0) == 0);
    CHECK(frame.find(" ms (mean ") != std::string::npos);
    CHECK(go.layout["status"]["frame_ms"].get<double>() > 0);
    CHECK(go.layout["timeline"]["t0"] != plain.layout["timeline"]["t0"]);
    CHECK(go.layout["timeline"]["plot"]["y0"] == plain.layout["timeline"]["plot"]["y0"]);
    CHECK(go.layout["toolbar"]["step_input"]["y0"] == plain.layout["toolbar"]["step_input"]["y0"]);
    for (const auto& when : go.layout["timeline"]["tracks"])
        CHECK(when["y0"] == track(plain.layout["timeline"], when["title"])["y0"]);

    Shot st = shoot(db.path, "--view statistics --size 1400x500");
    REQUIRE(st.rc == 0);
    const auto& kernel_table = st.layout["statistics"]["kernels"];
    REQUIRE(kernel_table["column_widths"].size() == 5);
    double name_w = kernel_table["column_widths"][0], numbers = 0;
    for (size_t curve_rect = 1; curve_rect < 5; ++curve_rect) {
        CHECK(kernel_table["column_widths"][curve_rect].get<double>() < 160);   // as wide as their figures
        numbers += kernel_table["column_widths"][curve_rect].get<double>();
    }
    CHECK(name_w > 2.5 * numbers);
    // Every name ends inside the name column (none cut): beta's 70 characters included.
    bool beta = false;
    for (const auto& count : kernel_table["names"]) {
        CHECK(count["x1"].get<double>() < kernel_table["table_x0"].get<double>() + name_w + 30);
        beta |= count["name"] == fixture::kBeta;
    }
    CHECK(beta);
}

namespace {

// CPU time (user + system) of process `pid` so far, in seconds (/proc/PID/stat, fields 14-15).
double cpu_seconds(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));   // after "pid (comm) "
    std::string field;
    std::vector<std::string> texts;
    while (rest >> field) texts.push_back(field);
    REQUIRE(texts.size() > 13);
    return static_cast<double>(std::stoll(texts[11]) + std::stoll(texts[12])) /
           static_cast<double>(sysconf(_SC_CLK_TCK));
}

}   // namespace

TEST_CASE("an idle window waits for events: it costs (almost) no CPU") {
    // The interactive viewer on the known trace, in this test's X server (xvfb-run): once loaded
    // and settled it must sleep in the event wait, not draw frames in a loop (a polling loop took
    // 73-98% of a core).
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        execl(mhc::test::mhc_view_exe(), mhc::test::mhc_view_exe(), db.path.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    // Start, load on the worker thread, settle: waited for until a second passes with under 20 ms
    // of CPU in each half (at most 30 s), not for a fixed time that a loaded machine's slow start
    // outlasted. A window that draws in a loop never settles and fails the check below.
    int status = 0;
    double before = cpu_seconds(pid);
    for (int i = 0, quiet = 0; i < 60 && quiet < 2; ++i) {
        usleep(500'000);
        REQUIRE(waitpid(pid, &status, WNOHANG) == 0);   // still running
        const double now = cpu_seconds(pid);
        quiet = i >= 2 && now - before < 0.02 ? quiet + 1 : 0;
        before = now;
    }
    usleep(3'000'000);
    double used = cpu_seconds(pid) - before;
    kill(pid, SIGTERM);
    waitpid(pid, &status, 0);
    INFO("CPU seconds over 3 s idle: " << used);
    CHECK(used < 0.15);   // under 5% of one core
}

TEST_CASE("the step field of a trace without steps is off and says why, one with steps starts at its first") {
    // con_kernel's Nsight export has no steps: the field read 0, its buttons stayed on and Go said
    // "no step 0 in this trace".
    fixture::TempPath db("con-steps.db");
    import_public("nsys/con_kernel.sqlite", db.path);
    Shot shot = shoot(db.path, "--size 1400x700");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& tb = shot.layout["toolbar"];
    REQUIRE(tb.contains("step"));
    CHECK(tb["step"]["enabled"] == false);
    CHECK(!tb["step"].contains("tooltip"));
    Shot hover = shoot(db.path, "--size 1400x700 --hover " + centre_of(tb["step_input"]));
    REQUIRE(hover.rc == 0);
    CHECK(hover.layout["toolbar"]["step"].value("tooltip", "").rfind("no steps in this trace", 0) == 0);
    // --step on a trace with no steps is refused before the window opens (exit 2, no picture),
    // as a step the trace lacks is (docs/viewer.md): it said so only in the status line.
    Shot go = shoot(db.path, "--size 1400x700 --step 0");
    CHECK(go.rc == 2);
    CHECK(go.err.find("--step: '0': not a step of") != std::string::npos);
    CHECK(go.err.find("(it marks no steps)") != std::string::npos);
    // SGLang's decode capture starts at step 134: the field reads 134, on.
    fixture::TempPath sg("sglang-steps.db");
    import_public("kineto/tracelens-mi300x-sglang-decode-capture-bs32.json.gz", sg.path);
    Shot late = shoot(sg.path, "--size 1400x700");
    REQUIRE(late.rc == 0);
    CHECK(late.layout["toolbar"]["step"]["enabled"] == true);
    CHECK(late.layout["toolbar"]["step"]["first"] == 134);
    CHECK(late.layout["toolbar"]["step"]["value"] == 134);
}

TEST_CASE("the statistics' At the peak tab lists what is live at the recorded peak, largest first") {
    // The known trace peaks at 1424 MiB from 450 us: act_big (1024 MiB, id 2) and weights (400
    // MiB, id 1) are live; ws (64 MiB) was freed at 300 us. Before, no view said what was live at
    // the peak: a user hovered bands one by one.
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    Shot first = shoot(db.path, "--view statistics --size 1400x700");
    INFO(first.err);
    REQUIRE(first.rc == 0);
    Shot shot = shoot(db.path, "--view statistics --size 1400x700 --click " +
                                   centre_of(first.layout["statistics"]["tabs"]["at_peak"]));
    REQUIRE(shot.rc == 0);
    const auto& peak = shot.layout["statistics"]["at_peak"];
    REQUIRE(peak.contains("rows"));
    CHECK(peak["rows"] == 2);
    CHECK(peak["bytes"].get<double>() == 1424.0 * MiB);
    CHECK(peak["time"] == 450 * us);
    REQUIRE(peak["first"].size() == 2);
    CHECK(peak["first"][0]["id"] == 2);   // act_big
    CHECK(peak["first"][1]["id"] == 1);   // weights
    CHECK(peak["head"].get<std::string>().rfind("2 allocations live at the recorded peak: 1.39 GiB at 450", 0) == 0);
}

TEST_CASE("the At the peak tab with a run selected: the run's peak, on the device and on the host") {
    // The known trace's run #1 (lru@1GiB) peaks at 1000 MiB of device bytes at 450 us on its
    // clock: act_big (id 2, 1024 MiB, [450, 600) us on the run's clock) on the device, weights (id 1,
    // 400 MiB) on the host (swapped out [400, 440) us, swapped in from 500 us). (The fixture's samples
    // are not its rows' sum: the rows say 1024 MiB, the head says both.) Before, the tab showed the
    // recording's peak (1424 MiB, both on the device) with the run selected.
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    Shot first = shoot(db.path, "--view statistics --run 1 --size 1400x700");
    INFO(first.err);
    REQUIRE(first.rc == 0);
    Shot shot = shoot(db.path, "--view statistics --run 1 --size 1400x700 --click " +
                                   centre_of(first.layout["statistics"]["tabs"]["at_peak"]));
    REQUIRE(shot.rc == 0);
    const auto& peak = shot.layout["statistics"]["at_peak"];
    INFO(peak.dump());
    CHECK(peak["run"] == 1);
    CHECK(peak["bytes"].get<double>() == 1000.0 * MiB);
    CHECK(peak["time"] == 450 * us);
    CHECK(peak["on_device"] == 1024 * MiB);
    CHECK(peak["on_host"] == 400 * MiB);
    REQUIRE(peak["first"].size() == 2);
    CHECK(peak["first"][0]["id"] == 2);
    CHECK(peak["first"][0]["where"] == "device");
    CHECK(peak["first"][1]["id"] == 1);
    CHECK(peak["first"][1]["where"] == "host");
    CHECK(peak["head"].get<std::string>().rfind("#1 lru@1GiB at its peak: 1000.00 MiB on GPU 0 at 450", 0) == 0);
    // The rows are drawn: the first (act_big) is a row of the table, under the tab bar.
    REQUIRE(peak.contains("first_row"));
    CHECK(peak["first_row"]["y0"].get<double>() > first.layout["statistics"]["tabs"]["at_peak"]["y1"].get<double>());
}

TEST_CASE("a Kineto trace without step markers: steps from its optimizer's ranges, and Go goes there") {
    // TraceLens's MI300X ResNet-18 DDP trace has no ProfilerStep#N, only 10 Optimizer.step#SGD.step
    // ranges nested in pairs: steps 0..4. Before, the step field read "none" and was greyed out.
    fixture::TempPath db("ddp-steps.db");
    import_public("kineto/tracelens-mi300x-ddp-resnet18-no-pool-pid1.json.gz", db.path);
    const ViewTrace view = load_view_trace(db.path);
    REQUIRE(view.steps.size() == 5);
    Shot shot = shoot(db.path, "--size 1400x700 --step 2");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& step = shot.layout["toolbar"]["step"];
    INFO(step.dump());
    CHECK(step["enabled"] == true);
    CHECK(step["first"] == 0);
    CHECK(step["last"] == 4);
    CHECK(step["origin"].get<std::string>().find("Optimizer.step#SGD.step") != std::string::npos);
    // Go to step 2: the view spans step 2 (with its 2% margins).
    const auto& axis = shot.layout["timeline"];
    const double t0 = axis["t0"], t1 = axis["t1"];
    CHECK(t0 <= static_cast<double>(view.steps[2].t0));
    CHECK(t1 >= static_cast<double>(view.steps[2].t1));
    CHECK(t1 - t0 < 1.1 * static_cast<double>(view.steps[2].t1 - view.steps[2].t0));
}

TEST_CASE("from a run's out-of-memory line or mark to what was alive then, where each was allocated") {
    // The known trace with a run that stops when kernel #2 (beta, 500 us) needs allocation 2 (act_big,
    // 1 GiB, allocated at 450 us) and 1 GiB holds only the weights (400 MiB, read by beta). Just before
    // beta, act_big was to be made (not placed), the weights were on the device as beta's operand, and
    // ws was freed (300 us). Before, the OOM line said where and why, and a user found what was alive
    // by hovering the recording's bands one at a time (the "At the peak" tab showed the run's peak).
    fixture::TempPath db("oom-click.db");
    fixture::write_known_trace(db.path, false);
    mhc::trace::Run run;
    run.name = "lru@1GiB";
    run.status = mhc::trace::RunStatus::Oom;
    run.config = {{"oom_where", "kernel 2 (beta) needs allocation 2 (act_big)"}, {"oom_why", "short by 624.00 MiB"}};
    run.metrics = {{"oom_time_ns", 450e3}, {"kernels_reached", 1}};
    run.kernel_times.push_back({1, 100 * us, 300 * us});
    run.events.push_back({mhc::trace::EventKind::Oom, 450 * us, 450 * us, 2, 2, 1024 * MiB});
    run.memory = {{0, 400 * MiB, 0}, {100 * us, 464 * MiB, 0}, {300 * us, 400 * MiB, 0}};
    mhc::trace::add_run(db.path, run);
    Shot first = shoot(db.path, "--run 1 --size 1400x700");
    INFO(first.err);
    REQUIRE(first.rc == 0);
    const auto& tl = first.layout["timeline"];
    REQUIRE(tl["run_outcome_rect"].is_object());
    auto check_oom = [](const Shot& shot) {
        REQUIRE(shot.rc == 0);
        REQUIRE(shot.layout.contains("statistics"));
        const auto& oom = shot.layout["statistics"]["at_peak"];
        INFO(oom.dump());
        CHECK(oom["oom"] == true);
        CHECK(oom["allocation"] == 2);
        CHECK(oom["kernel"] == 2);
        CHECK(oom["on_device"] == 400 * MiB);
        CHECK(oom["operand_bytes"] == 400 * MiB);
        CHECK(
            oom["head"].get<std::string>().rfind("it could not place allocation #2 (act_big, 1.00 GiB) for kernel #2; "
                                                 "on GPU 0 then: 1 allocation (400.00 MiB), of which the kernel's "
                                                 "operands 400.00 MiB",
                                                 0) == 0);
        REQUIRE(oom["first"].size() == 2);
        CHECK(oom["first"][0]["id"] == 2);
        CHECK(oom["first"][0]["needed"] == true);
        CHECK(oom["first"][1]["id"] == 1);
        CHECK(oom["first"][1]["label"] == "weights");   // where it was allocated
        CHECK(oom["first"][1]["operand"] == true);
        CHECK(oom["first"][1]["where"] == "device");
        // Grouped by where each was allocated (2026-12-05; one row per allocation before): the
        // weights' 400 MiB on the device first, then act_big, needed and not placed.
        CHECK(oom["each"] == false);
        REQUIRE(oom["group_count"] == 2);
        CHECK(oom["groups"][0]["label"] == "weights");
        CHECK(oom["groups"][0]["count"] == 1);
        CHECK(oom["groups"][0]["on_device"] == 400 * MiB);
        CHECK(oom["groups"][1]["label"] == "act_big");
        CHECK(oom["groups"][1]["needed"] == true);
        CHECK(oom["groups"][1]["on_device"] == 0);
        // The tab says what it is.
        CHECK(shot.layout["statistics"]["tabs"]["at_peak"]["x1"].get<double>() >
              shot.layout["statistics"]["tabs"]["at_peak"]["x0"].get<double>());
    };
    // A click on the OOM line over the timeline.
    check_oom(shoot(db.path, "--run 1 --size 1400x700 --click " + centre_of(tl["run_outcome_rect"])));
    // A click on the run's oom mark.
    const auto& mark = track(tl, "oom");
    REQUIRE(!mark["boxes"].empty());
    const double mark_x = (mark["boxes"][0][0].get<double>() + mark["boxes"][0][1].get<double>()) / 2;
    check_oom(shoot(db.path, "--run 1 --size 1400x700" + click_at({mark_x, row_y(mark)})));
}

TEST_CASE("find a kernel by name: Enter goes to the next, zooms to it and selects it, on the clock shown") {
    // The known trace: 200 kernels named kTiny (100 ns every 500 ns from 800 us on stream 8), one kAlpha
    // (100 us) and one kBeta (500 us; 550 us on run 1's clock, shifted by 50 us). Before, a kernel was
    // found by reading the statistics' names, then panning the timeline for it.
    fixture::TempPath db("find.db");
    fixture::write_known_trace(db.path);
    // "vectorized" (part of kTiny, any case) twice: the second of 200, at 800.5 us, 100 ns long, so the
    // view narrows to 20 times that (2 us) around it.
    Shot shot = shoot(db.path, "--size 1400x700 --find VECTORIZED --find vectorized");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& tl = shot.layout["timeline"];
    const auto& find = tl["find"];
    INFO(find.dump());
    CHECK(find["matches"] == 200);
    CHECK(find["index"] == 1);
    CHECK(find["said"] == "match 2 of 200 (Enter or F3: the next, Shift+Enter or Shift+F3: the one before)");
    CHECK(tl["selected_kernel"] == 4);
    CHECK(tl["t1"].get<int64_t>() - tl["t0"].get<int64_t>() == 2000);
    CHECK(tl["t0"].get<int64_t>() <= 800500);
    CHECK(tl["t1"].get<int64_t>() >= 800600);
    const auto box = box_of(track(tl, "stream 8"), 4);   // drawn, one box of its own
    CHECK(box.first > tl["plot"]["x0"].get<double>());
    CHECK(field_of(tl["details"], "kernel").rfind("#4, ", 0) == 0);
    // The field lies in the label column, on the family legend's row, above the tracks.
    CHECK(find["x1"].get<double>() <= tl["plot"]["x0"].get<double>());
    CHECK(find["y1"].get<double>() <= tl["plot"]["y0"].get<double>() + 1);
    // With run 1 selected, on its clock: the flash kernel at 550 us, the view kept (it shows it whole).
    Shot run = shoot(db.path, "--size 1400x700 --run 1 --find flash");
    REQUIRE(run.rc == 0);
    const auto& on_run = run.layout["timeline"];
    CHECK(on_run["find"]["t_start"] == 550 * us);
    CHECK(on_run["selected_kernel"] == 2);
    CHECK(on_run["t0"] == 0);
    // A name nobody has: said, nothing selected.
    Shot none = shoot(db.path, "--size 1400x700 --find nosuchkernel");
    REQUIRE(none.rc == 0);
    CHECK(none.layout["timeline"]["find"]["said"] == "no kernel name contains 'nosuchkernel'");
    CHECK(none.layout["timeline"]["selected_kernel"] == 0);
}

TEST_CASE("find marks every match on its row, says '1 of 200' beside the legend, and goes back") {
    // The known trace's 200 kTiny kernels (100 ns every 500 ns from 800 us, stream 8). Enter on
    // "vectorized" selects the first (#3 at 800 us) and narrows the view to 2 us around it, where the
    // matches at 800, 800.5 and 801 us lie. Before, only the selected one was outlined: the others
    // looked like any kernel, and the count was in the field's tooltip and the status bar only.
    fixture::TempPath db("find-marks.db");
    fixture::write_known_trace(db.path);
    Shot shot = shoot(db.path, "--size 1400x700 --find vectorized");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& tl = shot.layout["timeline"];
    const auto& find = tl["find"];
    INFO(find.dump());
    CHECK(find["index"] == 0);
    CHECK(find["count"] == "1 of 200");
    // Every match in view marked: those overlapping [t0, t1).
    const int64_t t0 = tl["t0"], t1 = tl["t1"];
    size_t in_view = 0;
    for (int k = 0; k < 200; ++k) {
        const int64_t start = 800 * us + k * 500;
        if (start < t1 && start + 100 > t0) ++in_view;
    }
    CHECK(in_view == 3);
    CHECK(tl["find_marked"] == in_view);
    CHECK(tl["find_marks"] == in_view);
    // The mark's bar on the top of the row, in amber, over match #4 (not the one selected).
    const auto& row = track(tl, "stream 8");
    const auto box = box_of(row, 4);
    CHECK(near(shot.img.at(box.first, row["y0"].get<double>() + 1), mhc::viewer::kFindMark, 12));
    // The one selected (#3, "1 of 200") has its bar in white, told apart from the other marks.
    CHECK(near(shot.img.at(box_of(row, 3).first, row["y0"].get<double>() + 1), kSelected, 12));
    // The count at the legend row's right end, inside the plot, the legend before it.
    const auto& count = find["count_rect"];
    CHECK(count["x1"].get<double>() <= tl["plot"]["x1"].get<double>());
    CHECK(find["previous"]["x1"].get<double>() <= count["x0"].get<double>());
    for (const auto& entry : tl["legend"]) CHECK(entry["end"].get<double>() <= find["previous"]["x0"].get<double>());
    // Shift+Enter from the first: the last (200 of 200); after two Enters, back to the first.
    Shot back = shoot(db.path, "--size 1400x700 --find vectorized --find-back 1");
    REQUIRE(back.rc == 0);
    CHECK(back.layout["timeline"]["find"]["count"] == "200 of 200");
    CHECK(back.layout["timeline"]["selected_kernel"] == 202);
    Shot again = shoot(db.path, "--size 1400x700 --find vectorized --find vectorized --find-back 1");
    REQUIRE(again.rc == 0);
    CHECK(again.layout["timeline"]["find"]["count"] == "1 of 200");
    // Nothing found: said beside the legend too, the arrows off.
    Shot none = shoot(db.path, "--size 1400x700 --find nosuchkernel");
    REQUIRE(none.rc == 0);
    CHECK(none.layout["timeline"]["find"]["count"] == "no match");
    CHECK(none.layout["timeline"]["find_marks"] == 0);
}
