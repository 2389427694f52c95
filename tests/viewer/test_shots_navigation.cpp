// What a Perfetto or Tracy user reaches for first on a trace (2026-12-05; each fails with the viewer
// before it): the find field marking its matches as the text is typed, a click on a kernel then "Zoom
// to selection" (F) zooming to it, and "copy" putting its details on the clipboard.
#include <catch2/catch.hpp>

#include "fixtures.hpp"
#include "mhc/viewer/colors.hpp"
#include "shots.hpp"

namespace {

// Whether any pixel of the row's top 4 px between x0 and x1 is the find marks' lime.
bool marked(const Image& img, const nlohmann::json& row, double x0, double x1) {
    const double top = row["y0"].get<double>() + 1;
    for (double x = x0; x <= x1; x += 1)
        if (near(img.at(x, top), mhc::viewer::kFindMark, 12)) return true;
    return false;
}

}   // namespace

TEST_CASE("find: the matches are marked and counted as the text is typed, the view kept, nothing selected") {
    // The known trace: 200 kTiny kernels ("...vectorized_elementwise_kernel...", 100 ns every 500 ns
    // from 800 us on stream 8), one kAlpha and one kBeta on stream 7. Typed "vec" a letter a frame
    // into the field (no Enter) with 790-1000 us in view: every kTiny is a match, all in view. Before,
    // nothing was marked or counted until Enter, which also moved the view to the first match.
    fixture::TempPath db("find-typed.db");
    fixture::write_known_trace(db.path);
    Shot shot = shoot(db.path, "--size 1400x700 --range 790us:1000us --type vec");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& tl = shot.layout["timeline"];
    const auto& find = tl["find"];
    INFO(find.dump());
    CHECK(find["text"] == "vec");   // typed through ImGui's text field, a letter a frame
    CHECK(find["matches"] == 200);
    CHECK(find["index"] == -1);
    CHECK(find["count"] == "200 matches");
    CHECK(find["said"].get<std::string>().rfind("200 matches (Enter or F3: the first from the view's start", 0) == 0);
    // "v" searched every kernel; "ve" and "vec" re-checked the matches before them.
    CHECK(find["searches"] == 1);
    CHECK(find["refinements"] == 2);
    CHECK(tl["find_marked"] == 200);
    CHECK(tl["selected_kernel"] == 0);
    CHECK(tl["t0"] == 790 * us);
    CHECK(tl["t1"] == 1000 * us);
    // The lime marks on stream 8 over the matches (800-900 us), none on stream 7.
    const auto& row = track(tl, "stream 8");
    const auto& plot = tl["plot"];
    CHECK(marked(shot.img, row, x_at(plot, tl, 820 * us), x_at(plot, tl, 880 * us)));
    CHECK_FALSE(marked(shot.img, track(tl, "stream 7"), x_at(plot, tl, 790 * us) + 2, x_at(plot, tl, 1000 * us) - 2));
    // One more letter that no name has: "no match", nothing marked.
    Shot none = shoot(db.path, "--size 1400x700 --range 790us:1000us --type vecq");
    REQUIRE(none.rc == 0);
    CHECK(none.layout["timeline"]["find"]["count"] == "no match");
    CHECK(none.layout["timeline"]["find_marks"] == 0);
}

TEST_CASE("find: typed again after Enter, the text replaced, '1 of 1' while the selected kernel still matches") {
    // Enter on "flash" selects kBeta (#2), the one match. The field taking the keyboard again (Ctrl+F,
    // /) selects its text, as a browser's does, so typing "flash_f" replaces it: "f" is searched whole
    // (it does not contain "flash"), each letter after it re-checks the matches before; kBeta still
    // matches, "1 of 1", still selected. Typing "flashx" instead: no match, the kernel stays selected
    // (the selection is the user's), the count says so.
    fixture::TempPath db("find-typed-on.db");
    fixture::write_known_trace(db.path);
    Shot on = shoot(db.path, "--size 1400x700 --find flash --type flash_f");
    INFO(on.err);
    REQUIRE(on.rc == 0);
    const auto& find = on.layout["timeline"]["find"];
    INFO(find.dump());
    CHECK(find["text"] == "flash_f");
    CHECK(find["count"] == "1 of 1");
    CHECK(find["searches"] == 2);
    CHECK(find["refinements"] == 6);
    CHECK(on.layout["timeline"]["selected_kernel"] == 2);
    Shot off = shoot(db.path, "--size 1400x700 --find flash --type flashx");
    REQUIRE(off.rc == 0);
    CHECK(off.layout["timeline"]["find"]["count"] == "no match");
    CHECK(off.layout["timeline"]["selected_kernel"] == 2);
}

TEST_CASE("find: Enter in the field goes to the first match and typing on narrows the text, not replaces it") {
    // "vec" typed, Enter (the field's own, pressed on its frame), then "t": the text reads "vect" and
    // the first match (#3) stays selected, "1 of 200" (the field keeps the keyboard after Enter with
    // its text not selected, unlike Ctrl+F or /, which select it).
    fixture::TempPath db("find-enter-typed.db");
    fixture::write_known_trace(db.path);
    Shot shot = shoot(db.path, "--size 1400x700 --range 790us:1000us --type \"$(printf 'vec\\nt')\"");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& find = shot.layout["timeline"]["find"];
    INFO(find.dump());
    CHECK(find["text"] == "vect");
    CHECK(find["count"] == "1 of 200");
    CHECK(find["searches"] == 1);
    CHECK(find["refinements"] == 3);
    CHECK(shot.layout["timeline"]["selected_kernel"] == 3);
}

TEST_CASE("a clicked kernel: Zoom to selection (F) zooms to it, copy puts its details on the clipboard") {
    // kBeta (#2) on stream 7 at [500, 700) us: zoomed to it with a tenth of its length either side,
    // [480, 720) us. Before, "Zoom to selection" and Z zoomed to a right-dragged range only and did
    // nothing after a click on a kernel; the details pane had no way to copy its text.
    fixture::TempPath db("zoom-to-kernel.db");
    fixture::write_known_trace(db.path, false);
    Shot whole = shoot(db.path, "--size 1400x700");
    REQUIRE(whole.rc == 0);
    const auto& tl = whole.layout["timeline"];
    const std::string kernel = click_at(box_of(track(tl, "stream 7"), 2));
    const std::string zoom = " --click " + centre_of(whole.layout["toolbar"]["zoom_selection"]);
    Shot zoomed = shoot(db.path, "--size 1400x700" + kernel + zoom);
    INFO(zoomed.err);
    REQUIRE(zoomed.rc == 0);
    CHECK(zoomed.layout["timeline"]["selected_kernel"] == 2);
    CHECK(zoomed.layout["timeline"]["t0"] == 480 * us);
    CHECK(zoomed.layout["timeline"]["t1"] == 720 * us);
    // "copy" in the details pane: its text, title first, and the status bar says so.
    Shot selected = shoot(db.path, "--size 1400x700" + kernel);
    REQUIRE(selected.rc == 0);
    const auto& details = selected.layout["timeline"]["details"];
    REQUIRE(details.contains("copy"));
    Shot copied = shoot(db.path, "--size 1400x700" + kernel + " --click " + centre_of(details["copy"]));
    REQUIRE(copied.rc == 0);
    const auto& pane = copied.layout["timeline"]["details"];
    INFO(pane.dump());
    const std::string text = copied.layout["status"]["copied"];
    CHECK(text.rfind(pane["title"].get<std::string>() + "\n", 0) == 0);
    CHECK(text.find(pane["fields"][0][0].get<std::string>() + ": ") != std::string::npos);
    CHECK(copied.layout["status"]["text"] == "copied kernel #2's details to the clipboard");
}

namespace {
// --type's keys: Esc is printf's \033 (shoot runs the command through sh).
const std::string kEsc = " --type \"$(printf '\\033')\"";
const std::string kEscEsc = " --type \"$(printf '\\033\\033')\"";

// A kernel box at least 6 px wide on a stream's track: its centre (a click selects it).
std::pair<double, double> some_kernel(const nlohmann::json& tl) {
    for (const auto& each : tl["tracks"]) {
        if (each["title"].get<std::string>().rfind("stream", 0) != 0) continue;
        for (const auto& box : each["boxes"])
            if (box[2].get<int64_t>() > 0 && box[1].get<double>() - box[0].get<double>() >= 6)
                return box_of(each, box[2].get<int64_t>());
    }
    FAIL("no kernel box 6 px wide");
    return {0, 0};
}
}   // namespace

TEST_CASE("Esc closes the innermost thing open, one a press: the notes' window, then the details pane") {
    // Before, Esc closed the notes' window only: a details pane closed by its "close" alone, and the
    // (?) help named no key for either. --type focuses the find field first: there the first Esc
    // leaves the field (ImGui's own), as a user's does, and the next one closes the pane.
    fixture::TempPath db("esc-known.db");
    fixture::write_known_trace(db.path, false);
    Shot whole = shoot(db.path, "--size 1400x700");
    REQUIRE(whole.rc == 0);
    const std::string kernel = click_at(box_of(track(whole.layout["timeline"], "stream 7"), 2));
    Shot left_field = shoot(db.path, "--size 1400x700" + kernel + kEsc);
    INFO(left_field.err);
    REQUIRE(left_field.rc == 0);
    CHECK(left_field.layout["timeline"]["selected_kernel"] == 2);
    CHECK(left_field.layout["timeline"]["details"].contains("title"));
    Shot closed = shoot(db.path, "--size 1400x700" + kernel + kEscEsc);
    REQUIRE(closed.rc == 0);
    CHECK(closed.layout["timeline"]["selected_kernel"] == 0);
    CHECK(closed.layout["timeline"]["details"].is_null());
    CHECK(closed.layout["status"]["text"] == "kernel details closed (Esc)");

    // The memory view has no find field: one Esc closes an allocation's details.
    fixture::TempPath runs_db("esc-known-runs.db");
    fixture::write_known_trace(runs_db.path);
    Shot memory = shoot(runs_db.path, "--view memory --run 1");
    REQUIRE(memory.rc == 0);
    const auto& bands = memory.layout["memory"]["bands"];
    const std::string band = click_at({x_at(bands, memory.layout["memory"], 500 * us), bands["y1"].get<double>() - 6});
    Shot picked = shoot(runs_db.path, "--view memory --run 1" + band);
    REQUIRE(picked.rc == 0);
    CHECK(picked.layout["memory"]["selected_allocation"] == 1);
    Shot unpicked = shoot(runs_db.path, "--view memory --run 1" + band + kEsc);
    REQUIRE(unpicked.rc == 0);
    CHECK(unpicked.layout["memory"]["selected_allocation"] == 0);
    CHECK(unpicked.layout["status"]["text"] == "allocation details closed (Esc)");

    // con_kernel has notes: with its notes' window open over a kernel's details, the first Esc
    // closes the window only, the second the details.
    fixture::TempPath con("esc-con.db");
    import_public("nsys/con_kernel.sqlite", con.path);
    Shot first = shoot(con.path, "--size 1400x700");
    REQUIRE(first.rc == 0);
    REQUIRE(first.layout.contains("notes"));
    const std::string both = "--size 1400x700" + click_at(some_kernel(first.layout["timeline"])) + " --click " +
                             centre_of(first.layout["notes"]["rect"]);
    Shot open = shoot(con.path, both);
    REQUIRE(open.rc == 0);
    REQUIRE(open.layout["notes"].contains("window"));
    REQUIRE(open.layout["timeline"]["selected_kernel"] != 0);
    Shot once = shoot(con.path, both + kEsc);
    REQUIRE(once.rc == 0);
    CHECK_FALSE(once.layout["notes"].contains("window"));
    CHECK(once.layout["timeline"]["selected_kernel"] == open.layout["timeline"]["selected_kernel"]);
    Shot twice = shoot(con.path, both + kEscEsc);
    REQUIRE(twice.rc == 0);
    CHECK(twice.layout["timeline"]["selected_kernel"] == 0);

    // The (?) help says so, and that Ctrl+C copies the details.
    Shot help = shoot(db.path, "--size 1400x700 --hover " + centre_of(whole.layout["toolbar"]["help"]));
    REQUIRE(help.rc == 0);
    const std::string keys =
        "Ctrl+C: copy the details; Esc: close the notes, else clear the range selected, else close the details";
    CHECK(help.layout["toolbar"].value("tooltip", "").find(keys) != std::string::npos);
}

namespace {
// --keys: printf's escapes (shoot runs the command through sh); \t is Tab.
std::string keys(const std::string& printf_text) { return " --keys \"$(printf '" + printf_text + "')\""; }
}   // namespace

TEST_CASE("0 shows the whole trace, and Tab reaches the toolbar's fields in turn, Space uses the one focused") {
    // Before, no key reset the zoom ("Reset zoom" was a button alone), and Tab reached no field of
    // the toolbar (ImGui's keyboard navigation was off): the keyboard could not choose a run.
    fixture::TempPath db("keys-known.db");
    fixture::write_known_trace(db.path, false);
    Shot whole = shoot(db.path, "--size 1400x700");
    REQUIRE(whole.rc == 0);
    const std::string all = whole.layout["toolbar"]["range_text"];
    Shot narrow = shoot(db.path, "--size 1400x700 --range 100us:200us");
    REQUIRE(narrow.rc == 0);
    REQUIRE(narrow.layout["toolbar"]["range_text"] != all);
    Shot zero = shoot(db.path, "--size 1400x700 --range 100us:200us" + keys("0"));
    INFO(zero.err);
    REQUIRE(zero.rc == 0);
    CHECK(zero.layout["toolbar"]["range_text"] == all);
    CHECK(zero.layout["status"]["text"] == "zoom reset: the whole trace (0)");
    // Nothing focused before a Tab; each Tab the next field, left to right.
    CHECK_FALSE(whole.layout["toolbar"].contains("focused"));
    const std::vector<std::string> order{"run", "step", "go", "zoom_selection", "reset_zoom", "options"};
    std::string tabs;
    for (const std::string& field : order) {
        tabs += "\\t";
        Shot tabbed = shoot(db.path, "--size 1400x700" + keys(tabs));
        REQUIRE(tabbed.rc == 0);
        INFO(tabs << ": " << tabbed.layout["toolbar"].dump());
        CHECK(tabbed.layout["toolbar"].value("focused", "") == field);
    }
    // Tab to "Reset zoom", Space presses it: the whole trace again.
    Shot pressed = shoot(db.path, "--size 1400x700 --range 100us:200us" + keys("\\t\\t\\t\\t\\t "));
    REQUIRE(pressed.rc == 0);
    CHECK(pressed.layout["toolbar"]["range_text"] == all);
    // The (?) help names both.
    Shot help = shoot(db.path, "--size 1400x700 --hover " + centre_of(whole.layout["toolbar"]["help"]));
    REQUIRE(help.rc == 0);
    const std::string tooltip = help.layout["toolbar"].value("tooltip", "");
    CHECK(tooltip.find("0: the whole trace") != std::string::npos);
    CHECK(tooltip.find("Tab (Shift+Tab): the toolbar's fields in turn") != std::string::npos);
}

TEST_CASE("Shift+Tab goes back, the arrows move between the fields, Enter presses the one focused") {
    // --keys sends them as a terminal does (ESC [ Z Shift+Tab, ESC [ C and D right and left); before
    // 2026-12-06 it pressed Tab, Esc, Space, letters and digits only (ESC [ Z was Esc, then Z), and
    // Enter on a button did nothing (ImGui 1.86's Enter edits text fields alone).
    fixture::TempPath db("keys-back.db");
    fixture::write_known_trace(db.path, false);
    auto focused = [&](const std::string& printf_text, const std::string& more = "") {
        Shot shot = shoot(db.path, "--size 1400x700" + more + keys(printf_text));
        INFO(printf_text << ": " << shot.err);
        REQUIRE(shot.rc == 0);
        return shot;
    };
    CHECK(focused("\\t\\t\\t\\033[Z").layout["toolbar"].value("focused", "") == "step");
    CHECK(focused("\\t\\t\\t\\033[Z\\033[Z").layout["toolbar"].value("focused", "") == "run");
    // From none Shift+Tab goes to the last stop, round the ring backwards.
    Shot last = focused("\\033[Z");
    REQUIRE(last.layout.contains("keyboard"));
    const auto& order = last.layout["keyboard"]["order"];
    REQUIRE(order.size() > 6);
    CHECK(last.layout["keyboard"].value("focused", "") == order.back());
    // The arrows: right from "Zoom to selection" to "Reset zoom", left back.
    CHECK(focused("\\t\\t\\t\\t\\033[C").layout["toolbar"].value("focused", "") == "reset_zoom");
    CHECK(focused("\\t\\t\\t\\t\\t\\033[D").layout["toolbar"].value("focused", "") == "zoom_selection");
    // Enter on "Reset zoom" presses it (the q after it keeps the newline from sh's $(...)).
    Shot whole = shoot(db.path, "--size 1400x700");
    REQUIRE(whole.rc == 0);
    const std::string all = whole.layout["toolbar"]["range_text"];
    Shot entered = focused("\\t\\t\\t\\t\\t\\nq", " --range 100us:200us");
    CHECK(entered.layout["toolbar"]["range_text"] == all);
    CHECK(entered.layout["status"]["text"] == "zoom reset: the whole trace (0)");
    // What no key sends is refused in the one form, before the window.
    Shot refused = shoot(db.path, "--keys 'a%'");
    CHECK(refused.rc == 2);
    CHECK(refused.err.rfind("mhc-view: --keys: 'a%': '%' is no key --keys presses", 0) == 0);
}

TEST_CASE("Tab reaches the details pane, the notes and the view tabs, and Space or Enter uses them") {
    // Before 2026-12-06 the notes' window, the details panes and the view tabs were no Tab stops:
    // a mouse alone opened the notes, closed a pane (Esc aside) or changed the view.
    fixture::TempPath con("tab-con.db");
    import_public("nsys/con_kernel.sqlite", con.path);
    Shot first = shoot(con.path, "--size 1400x700");
    REQUIRE(first.rc == 0);
    const std::string kernel = "--size 1400x700" + click_at(some_kernel(first.layout["timeline"]));
    Shot selected = shoot(con.path, kernel);
    REQUIRE(selected.rc == 0);
    REQUIRE(selected.layout.contains("keyboard"));
    const auto& order = selected.layout["keyboard"]["order"];
    INFO(order.dump());
    auto tabs_to = [&](const std::string& stop) {
        std::string tabs;
        for (const auto& name : order) {
            tabs += "\\t";
            if (name == stop) return tabs;
        }
        FAIL("no stop " << stop);
        return tabs;
    };
    // The toolbar first, then the view's own, then the notes and the view tabs.
    CHECK(order[0] == "run");
    for (const char* stop : {"find", "details_copy", "details_close", "notes", "view_timeline", "view_statistics"}) {
        INFO(stop);
        CHECK(std::find(order.begin(), order.end(), stop) != order.end());
    }
    // Space on the pane's "close" closes it.
    Shot closed = shoot(con.path, kernel + keys(tabs_to("details_close") + " "));
    REQUIRE(closed.rc == 0);
    CHECK(closed.layout["timeline"]["selected_kernel"] == 0);
    // Space on the notes line opens the notes' window and puts the keyboard on its "close"; Space
    // again closes it.
    Shot notes = shoot(con.path, kernel + keys(tabs_to("notes") + " "));
    REQUIRE(notes.rc == 0);
    CHECK(notes.layout["notes"].contains("window"));
    CHECK(notes.layout["keyboard"].value("focused", "") == "notes_close");
    Shot notes_closed = shoot(con.path, kernel + keys(tabs_to("notes") + "  "));
    REQUIRE(notes_closed.rc == 0);
    CHECK_FALSE(notes_closed.layout["notes"].contains("window"));
    // Enter on the view tab "Statistics" opens that view.
    Shot statistics = shoot(con.path, kernel + keys(tabs_to("view_statistics") + "\\nq"));
    REQUIRE(statistics.rc == 0);
    CHECK(statistics.layout.contains("statistics"));
    CHECK_FALSE(statistics.layout.contains("timeline"));
}
