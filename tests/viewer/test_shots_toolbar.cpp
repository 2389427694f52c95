// Screenshots of the toolbar and the notes: import warnings, (?) help, the notes window, the
// toolbar on one line at 1400 and 1024 px.
// (shots.hpp: how a screenshot is taken and read.)
#include "shots.hpp"
#include "mhc/test/paths.hpp"

TEST_CASE("an import's warnings are said by the header, the strip's one line ends inside the view") {
    // nvFuser's 2025.1 Nsight export: no CUDA_GPU_MEMORY_USAGE_EVENTS (an import warning and
    // meta allocations' reason). Nothing in the window said so, and the strip's line "no
    // allocations in this trace: no memory curve" ran 6 px under the status bar, its descenders
    // cut ("no memoru curve").
    fixture::TempPath db("fuser-notes.db");
    mhc::trace::import::Options opt;
    opt.warn = false;
    mhc::trace::import::import_file(std::string(mhc::test::public_datasets()) + "/nsys/fuser-h200-nsys-2025.1.sqlite", db.path,
                                    opt);
    Shot shot = shoot(db.path, "--size 1400x700");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& notes = shot.layout["notes"];
    REQUIRE(notes.contains("text"));
    CHECK(notes["text"] == "notes: import: missing tables CUDA_GPU_MEMORY_USAGE_EVENTS (imported without them)");
    REQUIRE(notes["lines"].size() == 1);
    // Drawn in the notes' amber on the header's line.
    const auto& rect = notes["rect"];
    CHECK(rect["y1"].get<double>() < shot.layout["view"]["y0"].get<double>());
    size_t amber = 0;
    for (double y = rect["y0"]; y < rect["y1"].get<double>(); ++y)
        for (double x = rect["x0"]; x < rect["x1"].get<double>(); ++x)
            amber += near(shot.img.at(x, y), rgb(242, 204, 102), 12) ? 1 : 0;
    CHECK(amber > 200);
    // The strip: inside the view, with the importer's reason, its background on its last rows.
    const auto& strip = shot.layout["timeline"]["memory_strip"];
    REQUIRE(strip["empty"] == true);
    CHECK(strip["text"].get<std::string>().find("--cuda-memory-usage=true") != std::string::npos);
    const auto& sr = strip["rect"];
    CHECK(sr["y1"].get<double>() <= shot.layout["view"]["y1"].get<double>());
    CHECK(near(shot.img.at(sr["x1"].get<double>() - 6, sr["y1"].get<double>() - 1), rgb(36, 36, 42)));
    // At 1400 px the line is longer than the strip: cut with "..." inside it (it ran off the
    // window mid-word, "--cuda-memory-u"), whole when hovered. No text in its last 4 px.
    const std::string shown = strip.value("shown", "");
    CHECK(shown.size() > 3);
    CHECK(shown.substr(shown.size() - 3) == "...");
    for (double y = sr["y0"]; y < sr["y0"].get<double>() + 16; ++y)
        for (double x = sr["x1"].get<double>() - 4; x < sr["x1"].get<double>(); ++x)
            CHECK(near(shot.img.at(x, y), rgb(36, 36, 42), 30));
    Shot hover = shoot(db.path, "--size 1400x700 --hover " + centre_of(sr));
    REQUIRE(hover.rc == 0);
    CHECK(hover.layout["timeline"]["memory_strip"].value("tooltip", "") == strip["text"]);
}

TEST_CASE("(?) shows the help on an order-only trace, the notes show every note on hover") {
    // FlexGen's out-of-memory snapshot: order only, so a yellow note followed (?) (now it titles the
    // axis). The help was the tooltip of the last item, that note: (?) showed nothing there.
    fixture::TempPath db("flexgen-help.db");
    mhc::trace::import::Options opt;
    opt.warn = false;
    mhc::trace::import::import_file(std::string(mhc::test::public_datasets()) + "/torch-snapshot/flexgen-oom-snapshot.pickle",
                                    db.path, opt);
    Shot first = shoot(db.path, "--size 1400x700");
    INFO(first.err);
    REQUIRE(first.rc == 0);
    const auto& tb = first.layout["toolbar"];
    REQUIRE(first.layout["axis"]["title"] == "event order");   // the order-only note, by the axis
    CHECK(!tb.contains("tooltip"));
    auto centre = [](const nlohmann::json& rect) {
        return std::to_string(static_cast<int>((rect["x0"].get<double>() + rect["x1"].get<double>()) / 2)) + "," +
               std::to_string(static_cast<int>((rect["y0"].get<double>() + rect["y1"].get<double>()) / 2));
    };
    Shot help = shoot(db.path, "--size 1400x700 --hover " + centre(tb["help"]));
    REQUIRE(help.rc == 0);
    CHECK(help.layout["toolbar"].value("tooltip", "").rfind("wheel or W/S: zoom", 0) == 0);
    // The keys of find are said there too (they were in the field's tooltip only, 2026-12-05).
    CHECK(help.layout["toolbar"].value("tooltip", "").find("Ctrl+F or /: find a kernel by name; Enter or F3: the next "
                                                          "match, Shift: the one before") != std::string::npos);
    // The notes line: each note whole in its tooltip.
    REQUIRE(first.layout.contains("notes"));
    Shot notes = shoot(db.path, "--size 1400x700 --hover " + centre(first.layout["notes"]["rect"]));
    REQUIRE(notes.rc == 0);
    CHECK(notes.layout["notes"]["tooltip"] == first.layout["notes"]["lines"]);
    CHECK(!notes.layout["toolbar"].contains("tooltip"));
}

TEST_CASE("a click on the notes line opens a window with every note") {
    // con_kernel: accesses none and three import warnings; the line names two and "(+2 more)".
    fixture::TempPath db("con-notes-window.db");
    import_public("nsys/con_kernel.sqlite", db.path);
    Shot first = shoot(db.path, "--size 1400x700");
    REQUIRE(first.rc == 0);
    const auto& notes = first.layout["notes"];
    REQUIRE(notes["lines"].size() == 4);
    // (cut with "..." when the header's path leaves less room)
    const std::string text = notes["text"];
    CHECK((text.find("(+2 more)") != std::string::npos || text.substr(text.size() - 3) == "..."));
    CHECK(!notes.contains("window"));
    Shot open = shoot(db.path, "--size 1400x700 --click " + centre_of(notes["rect"]));
    REQUIRE(open.rc == 0);
    const auto& window = open.layout["notes"]["window"];
    CHECK(window["lines"] == notes["lines"]);
    // Below the line, inside the window, its notes drawn in amber.
    const auto& rect = window["rect"];
    CHECK(rect["y0"].get<double>() >= notes["rect"]["y1"].get<double>());
    CHECK(rect["x1"].get<double>() <= 1400);
    CHECK(rect["y1"].get<double>() - rect["y0"].get<double>() > 4 * 13);
    size_t amber = 0;
    for (double y = rect["y0"]; y < rect["y1"].get<double>(); ++y)
        for (double x = rect["x0"]; x < rect["x1"].get<double>(); ++x)
            amber += near(open.img.at(x, y), rgb(242, 204, 102), 12) ? 1 : 0;
    CHECK(amber > 1000);
    // A second click on the line closes it.
    Shot closed = shoot(db.path,
                        "--size 1400x700 --click " + centre_of(notes["rect"]) + " --click " + centre_of(notes["rect"]));
    REQUIRE(closed.rc == 0);
    CHECK(!closed.layout["notes"].contains("window"));
}

TEST_CASE("the toolbar keeps to one line at 1400 px with several devices, in the timeline and memory views") {
    // con_kernel: GPU 0 and the host, so the toolbar has its "memory of" field. At 1400 px its
    // line was full and the timeline's "memory strip" and the memory view's "band colour" went
    // to a second line, pushing the plots down. The view starts where it does on a window wide
    // enough for anything (2400 px), and every toolbar item lies on the first line, inside.
    fixture::TempPath db("con-toolbar.db");
    import_public("nsys/con_kernel.sqlite", db.path);
    for (const std::string view : {"timeline", "memory"}) {
        INFO(view);
        Shot narrow = shoot(db.path, "--view " + view + " --size 1400x700");
        Shot wide = shoot(db.path, "--view " + view + " --size 2400x700");
        REQUIRE(narrow.rc == 0);
        REQUIRE(wide.rc == 0);
        const char* plot = view == "timeline" ? "plot" : "curve";
        CHECK(narrow.layout[view][plot]["y0"] == wide.layout[view][plot]["y0"]);
        const auto& tb = narrow.layout["toolbar"];
        REQUIRE(tb.contains("device"));
        const double line_y0 = tb["run_combo"]["y0"], line_y1 = tb["run_combo"]["y1"];
        for (const auto& [name, rect] : tb.items()) {
            if (!rect.is_object() || !rect.contains("x0")) continue;
            INFO(name);
            CHECK(rect["y0"].get<double>() >= line_y0);
            CHECK(rect["y1"].get<double>() <= line_y1);
            CHECK(rect["x1"].get<double>() <= 1400 - 8);
        }
    }
    // What left the line is one click away, in the toolbar's options: "memory strip" there hides
    // the strip, and a band colour there recolours the bands.
    Shot timeline = shoot(db.path, "--view timeline --size 1400x700");
    REQUIRE(timeline.rc == 0);
    CHECK(timeline.layout["timeline"]["memory_strip"].is_object());
    const std::string options = " --click " + centre_of(timeline.layout["toolbar"]["options"]);
    Shot menu = shoot(db.path, "--view timeline --size 1400x700" + options);
    REQUIRE(menu.rc == 0);
    REQUIRE(menu.layout["toolbar"].contains("memory_strip"));
    CHECK(menu.layout["toolbar"]["memory_strip"]["y0"].get<double>() >
          menu.layout["toolbar"]["options"]["y1"].get<double>());
    Shot hidden = shoot(db.path, "--view timeline --size 1400x700" + options + " --click " +
                                     centre_of(menu.layout["toolbar"]["memory_strip"]));
    REQUIRE(hidden.rc == 0);
    CHECK(hidden.layout["timeline"]["memory_strip"].is_null());
    Shot memory = shoot(db.path, "--view memory --size 1400x700" + options);
    REQUIRE(memory.rc == 0);
    const auto& choices = memory.layout["toolbar"]["band_colour"];
    REQUIRE(choices.size() == 3);
    CHECK(memory.layout["memory"]["coloring"] == "size");   // an import: by size class, as chosen at load
    CHECK(choices[2]["text"] == "size (this trace)");
    Shot recoloured = shoot(db.path, "--view memory --size 1400x700" + options + " --click " + centre_of(choices[1]));
    REQUIRE(recoloured.rc == 0);
    CHECK(recoloured.layout["memory"]["coloring"] == "source frame");
}

TEST_CASE("the toolbar keeps to one line at 1024 px with a run and two devices, the device one click away below") {
    // con_kernel (GPU 0 and the host) with a run of a long name: under about 1300 px "memory of"
    // went to a second line (the plots 13 px lower at 1024 px) and the range text ran off the window.
    fixture::TempPath db("con-1024.db");
    import_public("nsys/con_kernel.sqlite", db.path);
    mhc::trace::Run run;
    run.name = "lru+none@70%/pcie4/caching";
    run.config = {{"policy", "lru"}};
    mhc::trace::add_run(db.path, run);
    for (const std::string view : {"timeline", "memory"}) {
        INFO(view);
        Shot narrow = shoot(db.path, "--view " + view + " --run 1 --size 1024x700");
        Shot wide = shoot(db.path, "--view " + view + " --run 1 --size 2400x700");
        REQUIRE(narrow.rc == 0);
        REQUIRE(wide.rc == 0);
        // The plot starts as far under the toolbar's line as in a window wide enough for anything
        // (the header's notes may take a line of their own in the narrow one: the test's long path).
        const char* plot = view == "timeline" ? "plot" : "curve";
        auto below_toolbar = [&](const Shot& shot) {
            return shot.layout[view][plot]["y0"].get<double>() -
                   shot.layout["toolbar"]["run_combo"]["y1"].get<double>();
        };
        CHECK(below_toolbar(narrow) == below_toolbar(wide));
        const auto& tb = narrow.layout["toolbar"];
        CHECK(tb["form"] == "compact");
        CHECK(wide.layout["toolbar"]["form"] == "full");
        REQUIRE(tb.contains("device"));   // still on the line, with its label
        check_one_line(tb, 1024);
        // The range in view, whole, is in (?)'s tooltip.
        Shot help = shoot(db.path, "--view " + view + " --run 1 --size 1024x700 --hover " + centre_of(tb["help"]));
        REQUIRE(help.rc == 0);
        CHECK(help.layout["toolbar"].value("tooltip", "").find("in view: 0 us .. ") != std::string::npos);
    }
    // Narrower (860 px), "memory of" is in the options menu: the host is two clicks away there.
    Shot narrow = shoot(db.path, "--run 1 --size 860x700");
    REQUIRE(narrow.rc == 0);
    CHECK(narrow.layout["toolbar"]["form"] == "narrow");
    CHECK(!narrow.layout["toolbar"].contains("device"));
    check_one_line(narrow.layout["toolbar"], 860);
    const std::string options = " --click " + centre_of(narrow.layout["toolbar"]["options"]);
    Shot menu = shoot(db.path, "--run 1 --size 860x700" + options);
    REQUIRE(menu.rc == 0);
    const auto& entries = menu.layout["toolbar"]["device_entries"];
    REQUIRE(entries.size() == 2);
    const nlohmann::json* host = nullptr;
    for (const auto& entry : entries)
        if (entry["device"] == -1) host = &entry;
    REQUIRE(host);
    Shot picked = shoot(db.path, "--run 1 --size 860x700" + options + " --click " + centre_of(*host));
    INFO(picked.err);
    REQUIRE(picked.rc == 0);
    CHECK(picked.layout["toolbar"]["device_in_options"]["current"] == -1);
    CHECK(picked.layout["timeline"]["memory_strip"]["title"].get<std::string>().find("host") != std::string::npos);
}
