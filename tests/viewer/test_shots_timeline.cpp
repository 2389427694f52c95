// Screenshots of the timeline: kernels on their lanes in their family's colour, folding, rows of
// nested ranges, a run's clock and event tracks, the memory strip, labels that fit their boxes,
// axis labels.
// (shots.hpp: how a screenshot is taken and read.)
#include "shots.hpp"
#include "mhc/test/paths.hpp"

using mhc::viewer::copy_color;
using mhc::viewer::event_color;
using mhc::viewer::family_color;
using mhc::viewer::kCurve;
using mhc::viewer::kernel_color;
using mhc::viewer::KernelFamily;
using mhc::viewer::kFolded;
using mhc::viewer::kRecorded;
using mhc::viewer::LaneKind;
using mhc::viewer::marker_color;

TEST_CASE("timeline screenshot: kernels where they belong, in their family's colour, the dense stream folded") {
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    Shot shot = shoot(db.path, "--view timeline");
    REQUIRE(shot.rc == 0);
    CHECK(shot.img.w == 1400);
    CHECK(distinct_colours(shot.img) > 15);
    const auto& tl = shot.layout["timeline"];
    const auto& st7 = track(tl, "stream 7");
    double y7 = row_y(st7);
    CHECK(near(shot.img.at(x_at(tl["plot"], tl, 110 * us), y7), kernel_color(fixture::kAlpha)));
    CHECK(near(shot.img.at(x_at(tl["plot"], tl, 690 * us), y7), kernel_color(fixture::kBeta)));
    uint32_t gap = shot.img.at(x_at(tl["plot"], tl, 400 * us), y7);
    CHECK(!near(gap, kernel_color(fixture::kAlpha), 20));
    CHECK(!near(gap, kernel_color(fixture::kBeta), 20));
    // GEMM is blue, attention red: families, not hashes of the name.
    CHECK(blue(kernel_color(fixture::kAlpha)) > red(kernel_color(fixture::kAlpha)));
    CHECK(red(kernel_color(fixture::kBeta)) > blue(kernel_color(fixture::kBeta)));
    // 200 kernels of 100 ns every 500 ns: one folded run at full zoom-out, in the colour of its
    // dominant family (elementwise), not a grey count box.
    const auto& st8 = track(tl, "stream 8");
    CHECK(st8["items"] == 1);
    double y8 = row_y(st8);
    CHECK(near(shot.img.at(x_at(tl["plot"], tl, 805 * us), y8), family_color(KernelFamily::Elementwise)));
    CHECK(!near(shot.img.at(x_at(tl["plot"], tl, 805 * us), y8), kFolded, 20));
    CHECK(!near(shot.img.at(x_at(tl["plot"], tl, 700 * us), y8), family_color(KernelFamily::Elementwise), 20));
    // The legend names the families present, each swatch in its colour.
    std::set<std::string> fams;
    for (const auto& entry : tl["legend"]) {
        fams.insert(entry["family"].get<std::string>());
        double xpos = (entry["x0"].get<double>() + entry["x1"].get<double>()) / 2,
               ypos = (entry["y0"].get<double>() + entry["y1"].get<double>()) / 2;
        CHECK(near(shot.img.at(xpos, ypos), entry["color"].get<uint32_t>()));
    }
    CHECK(fams == std::set<std::string>{"GEMM", "attention", "elementwise"});

    // Zoomed in on them, every kernel is drawn alone.
    Shot zoomed = shoot(db.path, "--view timeline --range 800us:900us");
    REQUIRE(zoomed.rc == 0);
    CHECK(track(zoomed.layout["timeline"], "stream 8")["items"] == 200);
}

TEST_CASE("timeline screenshot: rows and the memory strip fill the window") {
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    Shot shot = shoot(db.path, "--view timeline");
    REQUIRE(shot.rc == 0);
    const auto& tl = shot.layout["timeline"];
    // Kernel rows grow past the old fixed 20 px.
    const auto& st7 = track(tl, "stream 7");
    CHECK(st7["y1"].get<double>() - st7["y0"].get<double>() > 40);
    // The strip ends near the status bar at the window's bottom edge: no empty two thirds.
    const auto& strip = tl["memory_strip"];
    REQUIRE(strip.contains("rect"));
    CHECK(strip["rect"]["y1"].get<double>() > shot.layout["status"]["y0"].get<double>() - 12);
    CHECK(shot.layout["status"]["y1"].get<double>() > shot.img.h - 12);
    CHECK(strip["rect"]["y0"].get<double>() >= tl["tracks"].back()["y1"].get<double>());
    // Its curve: the recorded peak (1424 MiB) at 500 us, at its height (+-2.5 px).
    const auto& strip_rect = strip["rect"];
    double tall = strip_rect["y1"].get<double>() - strip_rect["y0"].get<double>();
    double xpos = x_at(strip_rect, tl, 500 * us);
    double expect = strip_rect["y1"].get<double>() - 1424.0 * MiB / strip["y_max"].get<double>() * tall;
    double top = strip_rect["y1"];
    for (double y = strip_rect["y0"].get<double>() + 1; y < strip_rect["y1"].get<double>(); ++y)
        if (near(shot.img.at(xpos, y), kCurve, 6)) {
            top = y;
            break;
        }
    CHECK(top == Approx(expect).margin(2.5));
    // Without the strip's area taken, no strip.
}

TEST_CASE("the memory strip with a run: the run's device bytes and the recorded live bytes, both") {
    // The known trace's run #1 holds 1000 MiB from 450 us where the recording held 1424 MiB (act_big
    // and weights; the run swapped weights out): at 500 us the strip's blue fill tops at 1000 MiB and
    // the grey recorded line runs at 1424 MiB above it. Before, the strip drew the run's curve
    // alone, with its y axis up to the 1 GiB capacity: 1424 MiB was off the strip.
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    Shot shot = shoot(db.path, "--view timeline --run 1");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& tl = shot.layout["timeline"];
    const auto& strip = tl["memory_strip"];
    INFO(strip.dump());
    CHECK(strip["recorded"] == true);
    CHECK(strip["recorded_peak_bytes"].get<double>() == 1424.0 * MiB);
    CHECK(strip["peak_bytes"].get<double>() == 1000.0 * MiB);
    CHECK(strip["y_max"].get<double>() >= 1424.0 * MiB);
    const auto& rect = strip["rect"];
    const double y0 = rect["y0"], y1 = rect["y1"], tall = y1 - y0, y_max = strip["y_max"];
    auto y_of = [&](double bytes) { return y1 - bytes / y_max * tall; };
    const double xpos = x_at(rect, tl, 500 * us);
    // From the top down (the title ends left of 500 us): the first grey pixel, the first blue one.
    double grey = y1, blue_top = y1;
    for (double y = y0 + 1; y < y1; ++y) {
        if (grey == y1 && near(shot.img.at(xpos, y), kRecorded, 8)) grey = y;
        if (blue_top == y1 && near(shot.img.at(xpos, y), kCurve, 6)) blue_top = y;
    }
    CHECK(grey == Approx(y_of(1424.0 * MiB)).margin(2.5));
    CHECK(blue_top == Approx(y_of(1000.0 * MiB)).margin(2.5));
    // The title names both, each in its curve's colour.
    CHECK(strip["title"] == "device bytes, #1 lru@1GiB");
    CHECK(strip["recorded_title"] == "  recorded live bytes");
    // Without a run, the recorded curve alone, as before.
    Shot plain = shoot(db.path, "--view timeline");
    REQUIRE(plain.rc == 0);
    CHECK(plain.layout["timeline"]["memory_strip"]["recorded"] == false);
}

TEST_CASE("timeline screenshot of a run: run kernel times and event tracks") {
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    Shot shot = shoot(db.path, "--view timeline --run 1");
    REQUIRE(shot.rc == 0);
    const auto& tl = shot.layout["timeline"];
    const auto& st7 = track(tl, "stream 7");
    double y7 = row_y(st7);
    // Run 1 delays "beta" by 50 us: it starts at 550 us, not 500 us.
    CHECK(!near(shot.img.at(x_at(tl["plot"], tl, 520 * us), y7), kernel_color(fixture::kBeta), 20));
    CHECK(near(shot.img.at(x_at(tl["plot"], tl, 560 * us), y7), kernel_color(fixture::kBeta)));
    const auto& stall = track(tl, "stall");
    double ys = row_y(stall);
    CHECK(near(shot.img.at(x_at(tl["plot"], tl, 545 * us), ys), event_color(mhc::trace::EventKind::Stall)));
}

TEST_CASE("timeline screenshot: markers and copies move with a selected run's kernels") {
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    uint32_t layer_c = marker_color(mhc::trace::MarkerKind::Layer), h2d = copy_color(mhc::trace::CopyKind::H2D);
    // Recorded: layer 3 at [720, 780) us, the second H2D copy at [750, 790) us.
    Shot rec = shoot(db.path, "--view timeline --range 600us:1100us");
    REQUIRE(rec.rc == 0);
    const auto& rec_tl = rec.layout["timeline"];
    double ly = row_y(track(rec_tl, "layer markers")), cy = row_y(track(rec_tl, "copies H2D"));
    CHECK(near(rec.img.at(x_at(rec_tl["plot"], rec_tl, 740 * us), ly), layer_c));
    CHECK(!near(rec.img.at(x_at(rec_tl["plot"], rec_tl, 810 * us), ly), layer_c, 20));
    CHECK(near(rec.img.at(x_at(rec_tl["plot"], rec_tl, 760 * us), cy), h2d));
    CHECK(!near(rec.img.at(x_at(rec_tl["plot"], rec_tl, 820 * us), cy), h2d, 20));
    // Run 1 moved beta (the kernel before both) by 50 us: [770, 830) and [800, 840) us.
    Shot run = shoot(db.path, "--view timeline --run 1 --range 600us:1100us");
    REQUIRE(run.rc == 0);
    const auto& run_tl = run.layout["timeline"];
    ly = row_y(track(run_tl, "layer markers"));
    cy = row_y(track(run_tl, "copies H2D"));
    CHECK(!near(run.img.at(x_at(run_tl["plot"], run_tl, 740 * us), ly), layer_c, 20));
    CHECK(near(run.img.at(x_at(run_tl["plot"], run_tl, 810 * us), ly), layer_c));
    CHECK(!near(run.img.at(x_at(run_tl["plot"], run_tl, 780 * us), cy), h2d, 20));
    CHECK(near(run.img.at(x_at(run_tl["plot"], run_tl, 820 * us), cy), h2d));
    // The step marker ends at 1050 us on the run's clock (past the recording's 1 ms).
    CHECK(run_tl["t1"].get<int64_t>() >= 1050 * us);
    double sy = row_y(track(run_tl, "step markers"));
    CHECK(near(run.img.at(x_at(run_tl["plot"], run_tl, 1030 * us), sy), marker_color(mhc::trace::MarkerKind::Step)));
}

TEST_CASE("timeline screenshot: nested ranges on rows of their own, the toolbar's labels before their fields") {
    fixture::TempPath db("imported.db");
    fixture::write_imported_trace(db.path);
    Shot shot = shoot(db.path, "--view timeline");
    REQUIRE(shot.rc == 0);
    const auto& tl = shot.layout["timeline"];
    std::vector<nlohmann::json> rows;
    for (const auto& when : tl["tracks"])
        if (when["kind"] == 2) rows.push_back(when);   // LaneKind::Markers
    REQUIRE(rows.size() == 3);
    uint32_t range_c = marker_color(mhc::trace::MarkerKind::Range);
    for (size_t i = 0; i < rows.size(); ++i) {
        CHECK(rows[i]["row"] == i);
        if (i > 0) CHECK(rows[i]["y0"].get<double>() >= rows[i - 1]["y1"].get<double>());   // no row over another
    }
    // At 250 us: forward (row 0), layer.0 (row 1), attention (row 2), each in its own row; at
    // 475 us only forward; at 600 us forward and layer.1.
    double x250 = x_at(tl["plot"], tl, 250 * us), x475 = x_at(tl["plot"], tl, 475 * us);
    for (size_t i = 0; i < 3; ++i) CHECK(near(shot.img.at(x250, rows[i]["y1"].get<double>() - 2), range_c));
    CHECK(near(shot.img.at(x475, rows[0]["y1"].get<double>() - 2), range_c));
    CHECK(!near(shot.img.at(x475, rows[1]["y1"].get<double>() - 2), range_c, 20));

    // Toolbar: "run" [combo]  "step" [field]: each label left of its own field, in that order.
    const auto& tb = shot.layout["toolbar"];
    CHECK(tb["run_label"]["x1"].get<double>() <= tb["run_combo"]["x0"].get<double>());
    CHECK(tb["run_combo"]["x1"].get<double>() < tb["step_label"]["x0"].get<double>());
    CHECK(tb["step_label"]["x1"].get<double>() <= tb["step_input"]["x0"].get<double>());
    CHECK(tb["step_label"]["x0"].get<double>() - tb["run_combo"]["x1"].get<double>() >= 16);   // a gap, not "run 0"
}

TEST_CASE(
    "a timeline-only trace (vLLM's decode graph on an MI300X): the strip is one line, the tracks keep the window") {
    // No allocations: the strip said so in a box of 60% of the window under two 64 px rows.
    fixture::TempPath db("vllm.db");
    mhc::trace::import::Options opt;
    opt.warn = false;
    mhc::trace::import::import_file(
        std::string(mhc::test::public_datasets()) + "/kineto/tracelens-mi300x-vllm-decode-full-graph.json.gz", db.path, opt);
    Shot shot = shoot(db.path, "--size 1400x700");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& tl = shot.layout["timeline"];
    REQUIRE(tl["memory_strip"]["empty"] == true);
    const auto& rect = tl["memory_strip"]["rect"];
    CHECK(rect["y1"].get<double>() - rect["y0"].get<double>() < 30);
    CHECK(track(tl, "GPU2 stream 0")["items"].get<int>() > 0);   // the device the kernels ran on, named
    // The rows share the window down to the strip's line: their two 64 px rows left 390 px empty
    // under them (2026-12-05). Now the last row ends within 30 px of the line.
    const double rows_end = tl["tracks"].back()["y1"].get<double>();
    CHECK(rect["y0"].get<double>() - rows_end < 30);
    CHECK(track(tl, "GPU2 stream 0")["y1"].get<double>() - track(tl, "GPU2 stream 0")["y0"].get<double>() > 150);
    // A narrow window keeps them at least 20 px, the strip inside the view.
    Shot low = shoot(db.path, "--size 1400x300");
    REQUIRE(low.rc == 0);
    CHECK(low.layout["timeline"]["memory_strip"]["rect"]["y1"].get<double>() <= 300);
}

TEST_CASE("a run that stopped out of memory says why over the timeline") {
    fixture::TempPath db("oom-shot.db");
    fixture::write_known_trace(db.path, false);
    mhc::trace::Run run;
    run.name = "lru@1GiB";
    run.status = mhc::trace::RunStatus::Oom;
    run.config = {{"oom_where", "allocation 2 (act_big)"}, {"oom_why", "short by 424.00 MiB"}};
    run.metrics = {{"oom_time_ns", 450e3}, {"kernels_reached", 1}};
    run.kernel_times.push_back({1, 100 * fixture::us, 300 * fixture::us});
    mhc::trace::add_run(db.path, run);
    Shot shot = shoot(db.path, "--run 1");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    CHECK(shot.layout["timeline"]["run_outcome"] ==
          "out of memory at 450.000 us: allocation 2 (act_big): short by 424.00 MiB");
    // The run reached one kernel (stream 7's first): its streams 8 and 9 have none, and say why
    // (their rows were blank); stream 7's row has its kernel and no note.
    size_t noted = 0;
    for (const auto& row : shot.layout["timeline"]["tracks"]) {
        if (row["kind"] != static_cast<int>(LaneKind::Kernels)) continue;
        INFO(row["title"]);
        if (row["items"] == 0) {
            CHECK(row.value("note", "") == "no kernel reached: the run stopped before this stream's first");
            ++noted;
        } else {
            CHECK(!row.contains("note"));
        }
    }
    CHECK(noted >= 1);
}

TEST_CASE("byte labels of a short memory plot never overlap (16 streams fold the strip to 70 px)") {
    // nsys's 16-stream sample (tests/data/public): its stream rows leave the timeline's memory
    // strip 70 px in a 1200x420 window; 7 labels 13 px tall were drawn 10.4 px apart, over each
    // other. The memory view in a window 300 px tall, the same.
    fixture::TempPath db("streams16.db");
    mhc::trace::import::Options opt;
    opt.warn = false;
    mhc::trace::import::import_file(std::string(mhc::test::public_datasets()) + "/nsys/extrap-concurrent-16-streams.sqlite",
                                    db.path, opt);
    auto overlap = [](const nlohmann::json& upper, const nlohmann::json& lower) {
        return upper["y0"].get<double>() < lower["y1"].get<double>() &&
               lower["y0"].get<double>() < upper["y1"].get<double>();
    };
    for (const std::string& args : {std::string("--size 1200x420"), std::string("--view memory --size 1200x300"),
                                    std::string("--size 1600x900")}) {
        Shot shot = shoot(db.path, args);
        INFO(args << ": " << shot.err);
        REQUIRE(shot.rc == 0);
        const auto& plot = args.find("memory") != std::string::npos ? shot.layout["memory"]
                                                                    : shot.layout["timeline"]["memory_strip"];
        const auto& labels = plot["axis_labels"];
        // The memory view has two plots (curve, bands), the strip one; each label lies in one.
        std::vector<nlohmann::json> rects;
        for (const char* key : {"curve", "bands", "rect"})
            if (plot.contains(key)) rects.push_back(plot[key]);
        REQUIRE(!labels.empty());
        for (size_t i = 0; i < labels.size(); ++i) {
            bool inside = false;
            for (const auto& rect : rects)
                inside = inside || (labels[i]["y0"].get<double>() >= rect["y0"].get<double>() - 1 &&
                                    labels[i]["y1"].get<double>() <= rect["y1"].get<double>() + 1);
            CHECK(inside);
            for (size_t j = i + 1; j < labels.size(); ++j) CHECK(!overlap(labels[i], labels[j]));
            // In one unit, one decimal at most ("100 MiB", not "100.00 MiB"; byte_tick_labels).
            const std::string text = labels[i].value("text", ""), first = labels[0].value("text", "");
            INFO(text);
            REQUIRE(text.find(' ') != std::string::npos);
            CHECK(text.find(".00 ") == std::string::npos);
            CHECK(text.substr(text.find(' ')) == first.substr(first.find(' ')));
        }
    }
}

TEST_CASE("labels in timeline boxes fit their box, cut with '...', never clipped into the next box") {
    // nsys's 16-stream sample at 1400x700: stream 28's two test4 kernels lie side by side; the
    // first one's name was clipped at its box's edge and read on into the second's
    // ("test4(double *, urtest4(double *, u"), and range markers did the same ("mainmain->process").
    fixture::TempPath db("labels16.db");
    mhc::trace::import::Options opt;
    opt.warn = false;
    mhc::trace::import::import_file(std::string(mhc::test::public_datasets()) + "/nsys/extrap-concurrent-16-streams.sqlite",
                                    db.path, opt);
    Shot shot = shoot(db.path, "--size 1400x700");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const double char_width = 7;   // the viewer's monospaced font (ProggyClean 13 px)
    size_t drawn = 0, cut = 0;
    for (const auto& track_json : shot.layout["timeline"]["tracks"])
        for (const auto& box : track_json["boxes"]) {
            REQUIRE(box.size() == 4);   // x0, x1, what, the label drawn
            const std::string label = box[3];
            if (label.empty()) continue;
            ++drawn;
            const double room = box[1].get<double>() - box[0].get<double>() - 6;
            INFO(track_json["title"] << ": '" << label << "' in " << room << " px");
            CHECK(static_cast<double>(label.size()) * char_width <= room + 0.5);
            if (label.size() > 3 && label.compare(label.size() - 3, 3, "...") == 0) ++cut;
        }
    CHECK(drawn >= 5);
    CHECK(cut >= 2);   // test4's box and a range marker's at least
}

TEST_CASE("folded boxes say their count whole or not at all") {
    // Kineto's trace of CUDA graphs (HTA's trace-diff sample) at 1600 px: stream 7's folded
    // boxes read "47...", "32..." (4,744 and 327 kernels cut to fit), numbers the trace does not have.
    fixture::TempPath db("graphs-folded.db");
    mhc::trace::import::Options opt;
    opt.warn = false;
    mhc::trace::import::import_file(
        std::string(mhc::test::public_datasets()) + "/kineto/hta-trace-diff-cuda-graphs-rank-1.json.gz", db.path, opt);
    Shot shot = shoot(db.path, "--size 1600x900");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    size_t folded = 0, named = 0;
    for (const auto& track_json : shot.layout["timeline"]["tracks"])
        for (const auto& box : track_json["boxes"]) {
            const int64_t what = box[2];
            const std::string label = box[3];
            if (what >= 0 || label.empty()) continue;   // one item, or a folded box too narrow to say
            ++folded;
            const std::string count = std::to_string(-what);
            INFO(track_json["title"] << ": '" << label << "' for " << count << " items");
            CHECK(label.compare(0, count.size(), count) == 0);
            CHECK((label.size() == count.size() || label[count.size()] == ' '));
            named += label.size() > count.size() ? 1 : 0;
        }
    CHECK(folded >= 10);
    CHECK(named >= 5);   // "907 GEMM", and the copies and ranges say what they count
}

TEST_CASE("ranges nested deeper than the rows: no label runs under the next box") {
    // HTA's MTIA inference trace: CPU ranges nested more than six deep, the deeper ones all in the
    // last row, where boxes overlap. Each label took its whole box and was drawn over by the next
    // box's ("36 | 1 16 35"): a label now ends where the next box starts.
    fixture::TempPath db("mtia-rows.db");
    mhc::trace::import::Options opt;
    opt.warn = false;
    mhc::trace::import::import_file(std::string(mhc::test::public_datasets()) + "/kineto/hta-mtia-inference-rank-0.json.gz",
                                    db.path, opt);
    Shot shot = shoot(db.path, "--size 1600x900");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const double char_width = 7;   // ProggyClean 13 px, monospaced
    size_t checked = 0, overlapping = 0;
    for (const auto& track_json : shot.layout["timeline"]["tracks"]) {
        const auto& boxes = track_json["boxes"];
        for (size_t k = 0; k + 1 < boxes.size(); ++k) {
            const std::string label = boxes[k][3];
            const double x0 = boxes[k][0], next = boxes[k + 1][0];
            overlapping += next < boxes[k][1].get<double>() ? 1 : 0;
            if (label.empty()) continue;
            ++checked;
            INFO(track_json["title"] << " row " << track_json["row"] << ": '" << label << "' before a box at " << next);
            CHECK(static_cast<double>(label.size()) * char_width <= next - x0 - 6 + 0.5);
        }
    }
    CHECK(overlapping >= 5);   // the last row's boxes do overlap
    CHECK(checked >= 20);
}

TEST_CASE("time axis labels stay inside the plot") {
    // HTA's TorchRec trace (five streams, 1.23 s) at 1400 px: the last label read "1.2" (1.2 s cut
    // by the window's edge). Every label ends inside the plot, none over another.
    fixture::TempPath db("torchrec-axis.db");
    import_public("kineto/hta-torchrec-rank0-five-streams.json.gz", db.path);
    for (const std::string range : {"", " --range 0:1232ms", " --range 1ms:1229ms"}) {
        INFO(range);
        Shot shot = shoot(db.path, "--size 1400x700" + range);
        REQUIRE(shot.rc == 0);
        const auto& labels = shot.layout["axis"]["labels"];
        REQUIRE(labels.size() >= 5);
        double before = -1;
        for (const auto& label : labels) {
            INFO(label["text"]);
            CHECK(label["x1"].get<double>() <= 1400 - 8);
            CHECK(label["x0"].get<double>() > before);
            before = label["x1"].get<double>();
            CHECK(label["text"].get<std::string>().find(' ') != std::string::npos);   // a number and its unit
        }
    }
}

TEST_CASE("a snapshot's timeline at 900 px: the sentence for its missing kernels ends inside the plot") {
    // Stanford's CS336 snapshot has allocations and no kernel: the family legend's line says why
    // (756 px of text), and ran off the window under about 950 px.
    fixture::TempPath db("cs336-1024.db");
    import_public("torch-snapshot/stanford-cs336-training-step.pickle", db.path);
    Shot shot = shoot(db.path, "--size 900x600");
    REQUIRE(shot.rc == 0);
    const auto& legend = shot.layout["timeline"]["legend"];
    REQUIRE(legend.size() == 1);
    CHECK(legend[0]["text"].get<std::string>().rfind("no kernels in this trace: a PyTorch memory snapshot", 0) == 0);
    CHECK(legend[0]["x1"].get<double>() <= shot.layout["timeline"]["plot"]["x1"].get<double>());
    const std::string shown = legend[0]["shown"];
    CHECK(shown.substr(shown.size() - 3) == "...");
    check_one_line(shot.layout["toolbar"], 900);
}

TEST_CASE("an execution trace's folded boxes count ops, as its header and legend do") {
    // param's GPT-2 execution trace (14254 ops) at 1400 px: its folded boxes read "2841 kernels,
    // mostly memory/copy" under a header of "14254 ops" and a legend of "op families".
    fixture::TempPath db("et-folded.db");
    import_public("chakra/param-hf-gpt2-et-1.1.0.json.gz", db.path);
    Shot shot = shoot(db.path, "--size 1400x700");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    size_t ops = 0;
    for (const auto& track_json : shot.layout["timeline"]["tracks"])
        for (const auto& box : track_json["boxes"]) {
            const std::string label = box[3];
            INFO(track_json["title"] << ": '" << label << "'");
            CHECK(label.find("kernel") == std::string::npos);
            if (label.find(" ops") != std::string::npos) ++ops;
        }
    CHECK(ops >= 2);
}
