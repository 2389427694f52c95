// The keyboard's Tab ring past the toolbar (2026-12-07; each case fails with the viewer before it):
// the statistics' and the details pane's table rows, the options menu's entries, the plots, and the
// stops of the compare, statistics and launcher views, each driven by --keys as a user presses them.
#include "shots.hpp"

namespace {

// --keys: printf's escapes (shoot runs the command through sh): \t Tab, \033[Z Shift+Tab, \033[A..D
// the arrows up, down, right, left, \n Enter (a q after it keeps it from sh's $(...)).
std::string keys(const std::string& printf_text) { return " --keys \"$(printf '" + printf_text + "')\""; }
const std::string kDown = "\\033[B", kUp = "\\033[A", kRight = "\\033[C", kLeft = "\\033[D", kBack = "\\033[Z";

// The Tabs from none to `stop` in `order` (the layout's "keyboard" "order").
std::string tabs_to(const nlohmann::json& order, const std::string& stop) {
    std::string tabs;
    for (const auto& name : order) {
        tabs += "\\t";
        if (name == stop) return tabs;
    }
    FAIL("no stop " << stop << " in " << order.dump());
    return tabs;
}

std::string focused(const Shot& shot) {
    return shot.layout.contains("keyboard") ? shot.layout["keyboard"].value("focused", "") : "";
}

Shot shot_ok(const std::string& db, const std::string& args) {
    Shot shot = shoot(db, "--size 1400x700 " + args);
    INFO(args << ": " << shot.err);
    REQUIRE(shot.rc == 0);
    return shot;
}

}   // namespace

TEST_CASE("Tab reaches the statistics' rows: arrows row to row, Enter uses the row, Tab goes on past the table") {
    // Before, the rows were no stop: Tab went from the "Kernels" tab to "Allocations", a kernel's row
    // took no key (nor a click), and Enter on an allocation's or a step's row did nothing.
    fixture::TempPath db("keys-stats.db");
    fixture::write_known_trace(db.path);
    const std::string stats = "--view statistics";
    Shot first = shot_ok(db.path, stats);
    const auto order = first.layout["keyboard"]["order"];
    INFO(order.dump());
    REQUIRE(std::find(order.begin(), order.end(), "kernel_rows") != order.end());
    // The rows come right after their tab.
    CHECK(tabs_to(order, "kernel_rows") == tabs_to(order, "stats_kernels") + "\\t");
    Shot on_rows = shot_ok(db.path, stats + keys(tabs_to(order, "kernel_rows")));
    CHECK(focused(on_rows) == "kernel_rows");
    CHECK(on_rows.layout["keyboard"]["row"] == 0);
    Shot down = shot_ok(db.path, stats + keys(tabs_to(order, "kernel_rows") + kDown + kDown));
    CHECK(focused(down) == "kernel_rows");
    CHECK(down.layout["keyboard"]["row"] == 2);
    Shot up = shot_ok(db.path, stats + keys(tabs_to(order, "kernel_rows") + kDown + kDown + kUp));
    CHECK(up.layout["keyboard"]["row"] == 1);
    // Tab from any row goes on to the next stop, Shift+Tab back to the tab before the rows.
    CHECK(focused(shot_ok(db.path, stats + keys(tabs_to(order, "kernel_rows") + kDown + "\\t"))) ==
          "stats_allocations");
    CHECK(focused(shot_ok(db.path, stats + keys(tabs_to(order, "kernel_rows") + kDown + kBack))) == "stats_kernels");
    // Enter on the second kernel's row: the timeline, that kernel found and selected.
    const std::string second = down.layout["statistics"]["kernels"]["names"][1]["name"];
    Shot found = shot_ok(db.path, stats + keys(tabs_to(order, "kernel_rows") + kDown + "\\nq"));
    REQUIRE(found.layout.contains("timeline"));
    CHECK_FALSE(found.layout.contains("statistics"));
    CHECK(found.layout["timeline"]["find"]["text"] == second);
    CHECK(found.layout["timeline"]["selected_kernel"] != 0);
    CHECK(found.layout["timeline"]["details"]["title"].get<std::string>().find(second) != std::string::npos);
    CHECK(found.layout["status"]["text"].get<std::string>().rfind("match 1 of 1: ", 0) == 0);

    // The Allocations tab (Space opens it): Tab enters its rows, Enter selects the allocation.
    Shot allocations = shot_ok(db.path, stats + keys(tabs_to(order, "stats_allocations") + " "));
    const auto alloc_order = allocations.layout["keyboard"]["order"];
    INFO(alloc_order.dump());
    const std::string to_rows = tabs_to(order, "stats_allocations") + " \\t";
    Shot alloc_row = shot_ok(db.path, stats + keys(to_rows));
    CHECK(focused(alloc_row) == "allocation_rows");
    CHECK(alloc_row.layout["keyboard"]["row"] == 0);
    // Largest first: "act_big" (1024 MiB) then "weights" (400 MiB, allocation #1).
    Shot chosen = shot_ok(db.path, stats + keys(to_rows + kDown + "\\nq"));
    CHECK(chosen.layout["status"]["text"].get<std::string>().rfind("allocation #1: ", 0) == 0);

    // The Steps tab: Enter on the step's row goes to it, as a click does.
    const std::string to_steps = tabs_to(order, "stats_steps") + " \\t";
    Shot step_row = shot_ok(db.path, stats + keys(to_steps));
    CHECK(focused(step_row) == "step_rows");
    Shot went = shot_ok(db.path, stats + keys(to_steps + "\\nq"));
    CHECK(went.layout["status"]["text"] == "step 0");

    // The Categories tab's rows are reached too (they do nothing pressed).
    Shot category = shot_ok(db.path, stats + keys(tabs_to(order, "stats_categories") + " \\t" + kDown));
    CHECK(focused(category) == "category_rows");
    CHECK(category.layout["keyboard"]["row"] == 1);
}

TEST_CASE("Tab reaches the details pane's rows, the arrows move among them, Tab goes on to the view tabs") {
    // Before, the pane's table was text: no key reached a row or scrolled it.
    fixture::TempPath db("keys-details.db");
    fixture::write_known_trace(db.path, false);
    // Find "alpha" (Enter in the field selects it): its pane lists the allocations it accessed, two rows.
    const std::string alpha = "--find ampere";
    Shot selected = shot_ok(db.path, alpha);
    REQUIRE(selected.layout["timeline"]["details"]["row_count"] == 2);
    const auto order = selected.layout["keyboard"]["order"];
    INFO(order.dump());
    CHECK(tabs_to(order, "details_rows") == tabs_to(order, "details_close") + "\\t");
    Shot row0 = shot_ok(db.path, alpha + keys(tabs_to(order, "details_rows")));
    CHECK(focused(row0) == "details_rows");
    CHECK(row0.layout["keyboard"]["row"] == 0);
    Shot row1 = shot_ok(db.path, alpha + keys(tabs_to(order, "details_rows") + kDown));
    CHECK(row1.layout["keyboard"]["row"] == 1);
    Shot past = shot_ok(db.path, alpha + keys(tabs_to(order, "details_rows") + kDown + "\\t"));
    CHECK(focused(past) == "view_timeline");
    // Enter on a row presses nothing: the kernel stays selected, its pane open.
    Shot entered = shot_ok(db.path, alpha + keys(tabs_to(order, "details_rows") + "\\nq"));
    CHECK(entered.layout["timeline"]["selected_kernel"] == selected.layout["timeline"]["selected_kernel"]);
}

TEST_CASE("the options menu's entries are stops while it is open: Tab down the menu, Enter ticks, Tab past closes it") {
    // Before, Tab from the open menu went on along the toolbar under it, and Enter on "fit y" did
    // nothing (Space alone ticked it).
    fixture::TempPath db("keys-options.db");
    fixture::write_known_trace(db.path, false);
    Shot closed = shot_ok(db.path, "");
    const auto order = closed.layout["keyboard"]["order"];
    INFO(order.dump());
    CHECK(std::find(order.begin(), order.end(), "fit_y") == order.end());   // closed: no entries
    const std::string options = tabs_to(order, "options");
    // Space opens it with the keyboard on its first entry; the entries follow the field in the ring.
    Shot open = shot_ok(db.path, keys(options + " "));
    CHECK(focused(open) == "fit_y");
    CHECK(open.layout["toolbar"].contains("fit_y"));
    const auto open_order = open.layout["keyboard"]["order"];
    CHECK(tabs_to(open_order, "fit_y") == options + "\\t");
    CHECK(tabs_to(open_order, "memory_strip") == options + "\\t\\t");
    // Enter ticks "fit y" (the menu stays open); Tab to "memory strip", Space unticks it.
    Shot fit = shot_ok(db.path, keys(options + " \\nq"));
    CHECK(fit.layout["toolbar"]["options"]["fit_y"] == true);
    CHECK(fit.layout["toolbar"].contains("fit_y"));
    Shot strip = shot_ok(db.path, keys(options + " \\t "));
    CHECK(focused(strip) == "memory_strip");
    REQUIRE(closed.layout["timeline"]["memory_strip"].is_object());
    CHECK(strip.layout["timeline"]["memory_strip"].is_null());
    // Tab past the last entry: the menu closes and the keyboard is on the next field ("find").
    Shot past = shot_ok(db.path, keys(options + " \\t\\t"));
    CHECK(focused(past) == "find");
    CHECK_FALSE(past.layout["toolbar"].contains("fit_y"));
    // Shift+Tab from the first entry: back on the field, the menu closed.
    Shot back = shot_ok(db.path, keys(options + " " + kBack));
    CHECK(focused(back) == "options");
    CHECK_FALSE(back.layout["toolbar"].contains("fit_y"));
    // The memory view's menu: its band colour choices, Enter picks one.
    Shot memory = shot_ok(db.path, "--view memory" + keys(options + " "));
    const auto memory_order = memory.layout["keyboard"]["order"];
    INFO(memory_order.dump());
    // Open ("fit y" focused), then Tab past "category" and "source frame" to "size".
    CHECK(tabs_to(memory_order, "band_colour_size") == options + "\\t\\t\\t\\t");
    Shot size = shot_ok(db.path, "--view memory" + keys(options + " \\t\\t\\t\\nq"));
    CHECK(focused(size) == "band_colour_size");
    REQUIRE(size.layout["toolbar"].contains("band_colour"));
    CHECK(size.layout["memory"]["coloring"] == "size");
}

TEST_CASE("the plot is a stop: the arrows pan and zoom it, Tab goes on") {
    // Before, no Tab reached a plot: the arrows moved between buttons and the view moved by W/S/A/D
    // alone (letters that a user on the plot's frame does not try first).
    fixture::TempPath db("keys-plot.db");
    fixture::write_known_trace(db.path);
    Shot whole = shot_ok(db.path, "");
    const auto order = whole.layout["keyboard"]["order"];
    INFO(order.dump());
    const std::string plot = tabs_to(order, "plot");
    const auto t0 = whole.layout["timeline"]["t0"].get<int64_t>(), t1 = whole.layout["timeline"]["t1"].get<int64_t>();
    const int64_t span = t1 - t0;
    Shot on = shot_ok(db.path, keys(plot));
    CHECK(focused(on) == "plot");
    CHECK(on.layout["timeline"]["t0"] == t0);
    // Up zooms in about the middle (a fifth of the span off), down out again.
    Shot in = shot_ok(db.path, keys(plot + kUp));
    CHECK(focused(in) == "plot");
    const int64_t in_span = in.layout["timeline"]["t1"].get<int64_t>() - in.layout["timeline"]["t0"].get<int64_t>();
    CHECK(std::abs(static_cast<double>(in_span) - 0.8 * static_cast<double>(span)) < 0.01 * static_cast<double>(span));
    Shot out = shot_ok(db.path, keys(plot + kUp + kDown));
    CHECK(out.layout["timeline"]["t1"].get<int64_t>() - out.layout["timeline"]["t0"].get<int64_t>() ==
          Approx(static_cast<double>(span)).epsilon(0.01));
    // Right pans later by a tenth of the span, left back; the keyboard stays on the plot.
    Shot right = shot_ok(db.path, keys(plot + kUp + kRight));
    CHECK(right.layout["timeline"]["t0"].get<int64_t>() > in.layout["timeline"]["t0"].get<int64_t>());
    CHECK(focused(right) == "plot");
    Shot left = shot_ok(db.path, keys(plot + kUp + kLeft));
    CHECK(left.layout["timeline"]["t0"].get<int64_t>() < in.layout["timeline"]["t0"].get<int64_t>());
    // Tab goes on past it; the view stays where the arrows left it.
    Shot past = shot_ok(db.path, keys(plot + kUp + "\\t"));
    CHECK(focused(past) != "plot");
    CHECK(past.layout["timeline"]["t0"] == in.layout["timeline"]["t0"]);
    // The memory and compare views have theirs.
    for (const char* view : {"memory", "compare"}) {
        Shot other = shot_ok(db.path, std::string("--view ") + view);
        const auto each = other.layout["keyboard"]["order"];
        INFO(view << ": " << each.dump());
        Shot zoomed = shot_ok(db.path, std::string("--view ") + view + keys(tabs_to(each, "plot") + kUp));
        CHECK(focused(zoomed) == "plot");
        CHECK(zoomed.layout[view]["t1"].get<int64_t>() - zoomed.layout[view]["t0"].get<int64_t>() <
              other.layout[view]["t1"].get<int64_t>() - other.layout[view]["t0"].get<int64_t>());
    }
}

TEST_CASE("compare's and the launcher's stops: the filter, the ticks and each field in turn, Space or Enter uses them") {
    fixture::TempPath db("keys-compare.db");
    fixture::write_known_trace(db.path);
    // Compare: the filter, "tick shown", "untick all", the runs' rows (one stop), the plot, the metrics' rows.
    Shot compare = shot_ok(db.path, "--view compare");
    const auto order = compare.layout["keyboard"]["order"];
    INFO(order.dump());
    const std::vector<std::string> first{"run_filter", "tick_shown", "untick_all", "run_rows", "plot", "metric_rows"};
    for (size_t i = 0; i < first.size(); ++i) CHECK(order[i] == first[i]);
    REQUIRE(compare.layout["compare"]["runs"].size() == 2);
    // Space on the first run's row unticks it: one run compared.
    Shot unticked = shot_ok(db.path, "--view compare" + keys(tabs_to(order, "run_rows") + " "));
    CHECK(focused(unticked) == "run_rows");
    CHECK(unticked.layout["compare"]["runs"].size() == 1);
    // Enter on "untick all": none.
    Shot none = shot_ok(db.path, "--view compare" + keys(tabs_to(order, "untick_all") + "\\nq"));
    CHECK(none.layout["compare"]["runs"].empty());

    // The launcher: each field in the order drawn, named as the others are.
    Shot run = shot_ok(db.path, "--view run");
    const auto fields = run.layout["keyboard"]["order"];
    INFO(fields.dump());
    const std::vector<std::string> expected{"eviction_policy", "prefetch_policy", "capacity_share", "capacity_bytes",
                                            "capacity", "link_profile_file", "link_preset", "allocator_model",
                                            "record_events", "run_simulation"};
    for (size_t i = 0; i < expected.size(); ++i) CHECK(fields[i] == expected[i]);
    // Space opens the eviction policy's list (its entries stops then), Down and Enter pick the second.
    Shot listed = shot_ok(db.path, "--view run" + keys("\\t "));
    CHECK(focused(listed) == "eviction_policy_lru");
    Shot picked = shot_ok(db.path, "--view run" + keys("\\t " + kDown + "\\nq"));
    CHECK(focused(picked) == "eviction_policy");
    CHECK(picked.layout["run"]["fields"]["eviction"] != "lru");
    // Enter on "record events" unticks it; on "bytes" the capacity is a size.
    Shot record = shot_ok(db.path, "--view run" + keys(tabs_to(fields, "record_events") + "\\nq"));
    CHECK(record.layout["run"]["fields"]["record_events"] == false);
    Shot bytes = shot_ok(db.path, "--view run" + keys(tabs_to(fields, "capacity_bytes") + " "));
    CHECK(bytes.layout["run"]["fields"]["capacity_is_percent"] == false);
}

TEST_CASE("compare's run picker and metrics table are stops: Tab enters a table, the arrows go row to row") {
    // Before, each run's tick was a stop of its own (a list of 40 runs took 40 Tabs to pass) and the
    // metrics table's rows took no key: a table taller than its pane scrolled with the mouse alone.
    fixture::TempPath db("keys-compare-rows.db");
    fixture::write_known_trace(db.path);
    const std::string compare = "--view compare";
    const auto order = shot_ok(db.path, compare).layout["keyboard"]["order"];
    INFO(order.dump());
    REQUIRE(std::find(order.begin(), order.end(), "run_rows") != order.end());
    REQUIRE(std::find(order.begin(), order.end(), "metric_rows") != order.end());
    CHECK(std::find(order.begin(), order.end(), "tick_run_1") == order.end());
    // The picker's rows: Tab enters at the first (no run selected), Down goes to the second, Space
    // unticks that one (run 2: run 1 is left compared), Tab goes on to the plot.
    const std::string rows = tabs_to(order, "run_rows");
    Shot first = shot_ok(db.path, compare + keys(rows));
    CHECK(focused(first) == "run_rows");
    CHECK(first.layout["keyboard"]["row"] == 0);
    Shot second = shot_ok(db.path, compare + keys(rows + kDown + " "));
    CHECK(focused(second) == "run_rows");
    CHECK(second.layout["keyboard"]["row"] == 1);
    REQUIRE(second.layout["compare"]["runs"].size() == 1);
    CHECK(second.layout["compare"]["runs"][0]["id"] == 1);
    Shot entered = shot_ok(db.path, compare + keys(rows + kDown + "\\nq"));
    CHECK(entered.layout["compare"]["runs"].size() == 1);
    CHECK(focused(shot_ok(db.path, compare + keys(rows + kDown + "\\t"))) == "plot");
    // The metrics' rows: status first, then a row a metric; Down twice is the third row.
    const std::string metrics = tabs_to(order, "metric_rows");
    Shot metric = shot_ok(db.path, compare + keys(metrics + kDown + kDown));
    CHECK(focused(metric) == "metric_rows");
    CHECK(metric.layout["keyboard"]["row"] == 2);
    // Shift+Tab from a row goes back to the plot; Enter on a row changes nothing.
    CHECK(focused(shot_ok(db.path, compare + keys(metrics + kDown + kBack))) == "plot");
    Shot pressed = shot_ok(db.path, compare + keys(metrics + "\\nq"));
    CHECK(pressed.layout["compare"]["runs"].size() == 2);
    CHECK(focused(pressed) == "metric_rows");
}

TEST_CASE("Enter on a kernel's row leaves the keyboard on the timeline's plot, where the kernel found lies") {
    // Before, the keyboard was left on the statistics' row, gone with its view: nothing was outlined,
    // and the next Tab went to the toolbar's first field, the arrows moved nothing.
    fixture::TempPath db("keys-kernel-place.db");
    fixture::write_known_trace(db.path);
    const std::string stats = "--view statistics";
    const auto order = shot_ok(db.path, stats).layout["keyboard"]["order"];
    INFO(order.dump());
    // Then two presses of q (no key of the views) as the time a user takes before the next key:
    // the timeline opens on the frame after Enter, its plot is focused on the one after that.
    const std::string enter = tabs_to(order, "kernel_rows") + kDown + "\\nqq";
    Shot found = shot_ok(db.path, stats + keys(enter));
    REQUIRE(found.layout.contains("timeline"));
    CHECK(focused(found) == "plot");
    // The arrows work the plot at once: up zooms in about the kernel found's range.
    const auto span = [](const Shot& shot) {
        return shot.layout["timeline"]["t1"].get<int64_t>() - shot.layout["timeline"]["t0"].get<int64_t>();
    };
    Shot zoomed = shot_ok(db.path, stats + keys(enter + kUp));
    CHECK(focused(zoomed) == "plot");
    CHECK(static_cast<double>(span(zoomed)) == Approx(0.8 * static_cast<double>(span(found))).epsilon(0.02));
    // Tab goes on from the plot (the stop after it), Shift+Tab to the stop before it: not the toolbar's first.
    const auto timeline_order = found.layout["keyboard"]["order"];
    INFO(timeline_order.dump());
    const auto at = std::find(timeline_order.begin(), timeline_order.end(), "plot");
    REQUIRE(at != timeline_order.end());
    REQUIRE(at != timeline_order.begin());
    REQUIRE(at + 1 != timeline_order.end());
    CHECK(focused(shot_ok(db.path, stats + keys(enter + "\\t"))) == *(at + 1));
    CHECK(focused(shot_ok(db.path, stats + keys(enter + kBack))) == *(at - 1));
}
