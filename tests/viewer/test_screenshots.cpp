// Screenshot tests: run `mhc-view --screenshot` on the known trace (under xvfb-run, see
// CMakeLists) and check pixels where the known items must land. The viewer's --layout JSON
// gives the plot rectangles; the pixel colours are then checked independently.
#include <catch2/catch.hpp>
#include <stb_image.h>   // implementation compiled into Debian's libstb
#include <sqlite3.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <map>
#include <set>
#include <sstream>

#include "fixtures.hpp"
#include "mhc/trace/import/import.hpp"
#include "mhc/viewer/band_colors.hpp"
#include "mhc/viewer/colors.hpp"

using namespace mhc::viewer;
using fixture::MiB;
using fixture::us;

namespace {

struct Image {
    int w = 0, h = 0;
    std::vector<unsigned char> px;
    uint32_t at(double x, double y) const {
        int xi = static_cast<int>(x), yi = static_cast<int>(y);
        REQUIRE(xi >= 0); REQUIRE(xi < w); REQUIRE(yi >= 0); REQUIRE(yi < h);
        const unsigned char* p = &px[(static_cast<size_t>(yi) * static_cast<size_t>(w) + static_cast<size_t>(xi)) * 4];
        return rgb(p[0], p[1], p[2]);
    }
};

bool near(uint32_t a, uint32_t b, int tol = 3) {
    return std::abs(red(a) - red(b)) <= tol && std::abs(green(a) - green(b)) <= tol && std::abs(blue(a) - blue(b)) <= tol;
}

struct Shot {
    int rc = -1;
    std::string err;
    Image img;
    nlohmann::json layout;
};

Shot shoot(const std::string& trace, const std::string& args) {
    fixture::TempPath png("shot.png"), json("shot.json"), err("stderr.txt");
    std::string cmd = std::string("'") + MHC_VIEW_EXE + "' '" + trace + "' --screenshot '" + png.path +
                      "' --layout '" + json.path + "'" + (args.find("--size") == std::string::npos ? " --size 1400x700 " : " ") +
                      args + " 2>'" + err.path + "'";
    int st = std::system(cmd.c_str());
    Shot s;
    s.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    std::stringstream ss;
    ss << std::ifstream(err.path).rdbuf();
    s.err = ss.str();
    if (s.rc != 0) return s;
    int n = 0;
    unsigned char* data = stbi_load(png.path.c_str(), &s.img.w, &s.img.h, &n, 4);
    REQUIRE(data);
    s.img.px.assign(data, data + static_cast<size_t>(s.img.w) * static_cast<size_t>(s.img.h) * 4);
    stbi_image_free(data);
    s.layout = nlohmann::json::parse(std::ifstream(json.path));
    return s;
}

double x_at(const nlohmann::json& rect, const nlohmann::json& view, int64_t t) {
    double x0 = rect["x0"], x1 = rect["x1"];
    double t0 = view["t0"].get<double>(), t1 = view["t1"].get<double>();
    return x0 + (static_cast<double>(t) - t0) / (t1 - t0) * (x1 - x0);
}

const nlohmann::json& track(const nlohmann::json& tl, const std::string& title) {
    for (const auto& t : tl["tracks"])
        if (t["title"] == title) return t;
    FAIL("no track " << title);
    static nlohmann::json none;
    return none;
}

size_t distinct_colours(const Image& img) {
    std::set<uint32_t> c;
    for (size_t i = 0; i + 3 < img.px.size(); i += 4 * 7) c.insert(rgb(img.px[i], img.px[i + 1], img.px[i + 2]));
    return c.size();
}

}  // namespace

// The colour the memory view gives allocation `id`'s band under colouring `c` (computed by the
// core from the same trace, independently of the window).
uint32_t band_of(const std::string& db, BandColoring c, int64_t id) {
    ViewTrace t = load_view_trace(db);
    BandKeys keys = band_keys(t, c);
    int64_t i = t.allocations.index_of(id);
    REQUIRE(i >= 0);
    return band_color(keys, t.allocations, static_cast<size_t>(i));
}

// A point inside a track's boxes clear of their centred label text.
double row_y(const nlohmann::json& t) { return t["y1"].get<double>() - 4; }

TEST_CASE("timeline screenshot: kernels where they belong, in their family's colour, the dense stream folded") {
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    Shot s = shoot(db.path, "--view timeline");
    REQUIRE(s.rc == 0);
    CHECK(s.img.w == 1400);
    CHECK(distinct_colours(s.img) > 15);
    const auto& tl = s.layout["timeline"];
    const auto& st7 = track(tl, "stream 7");
    double y7 = row_y(st7);
    CHECK(near(s.img.at(x_at(tl["plot"], tl, 110 * us), y7), kernel_color(fixture::kAlpha)));
    CHECK(near(s.img.at(x_at(tl["plot"], tl, 690 * us), y7), kernel_color(fixture::kBeta)));
    uint32_t gap = s.img.at(x_at(tl["plot"], tl, 400 * us), y7);
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
    CHECK(near(s.img.at(x_at(tl["plot"], tl, 805 * us), y8), family_color(KernelFamily::Elementwise)));
    CHECK(!near(s.img.at(x_at(tl["plot"], tl, 805 * us), y8), kFolded, 20));
    CHECK(!near(s.img.at(x_at(tl["plot"], tl, 700 * us), y8), family_color(KernelFamily::Elementwise), 20));
    // The legend names the families present, each swatch in its colour.
    std::set<std::string> fams;
    for (const auto& e : tl["legend"]) {
        fams.insert(e["family"].get<std::string>());
        double x = (e["x0"].get<double>() + e["x1"].get<double>()) / 2, y = (e["y0"].get<double>() + e["y1"].get<double>()) / 2;
        CHECK(near(s.img.at(x, y), e["color"].get<uint32_t>()));
    }
    CHECK(fams == std::set<std::string>{"GEMM", "attention", "elementwise"});

    // Zoomed in on them, every kernel is drawn alone.
    Shot z = shoot(db.path, "--view timeline --range 800us:900us");
    REQUIRE(z.rc == 0);
    CHECK(track(z.layout["timeline"], "stream 8")["items"] == 200);
}

TEST_CASE("timeline screenshot: rows and the memory strip fill the window") {
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    Shot s = shoot(db.path, "--view timeline");
    REQUIRE(s.rc == 0);
    const auto& tl = s.layout["timeline"];
    // Kernel rows grow past the old fixed 20 px.
    const auto& st7 = track(tl, "stream 7");
    CHECK(st7["y1"].get<double>() - st7["y0"].get<double>() > 40);
    // The strip ends near the status bar at the window's bottom edge: no empty two thirds.
    const auto& strip = tl["memory_strip"];
    REQUIRE(strip.contains("rect"));
    CHECK(strip["rect"]["y1"].get<double>() > s.layout["status"]["y0"].get<double>() - 12);
    CHECK(s.layout["status"]["y1"].get<double>() > s.img.h - 12);
    CHECK(strip["rect"]["y0"].get<double>() >= tl["tracks"].back()["y1"].get<double>());
    // Its curve: the recorded peak (1424 MiB) at 500 us, at its height (+-2.5 px).
    const auto& r = strip["rect"];
    double h = r["y1"].get<double>() - r["y0"].get<double>();
    double x = x_at(r, tl, 500 * us);
    double expect = r["y1"].get<double>() - 1424.0 * MiB / strip["y_max"].get<double>() * h;
    double top = r["y1"];
    for (double y = r["y0"].get<double>() + 1; y < r["y1"].get<double>(); ++y)
        if (near(s.img.at(x, y), kCurve, 6)) { top = y; break; }
    CHECK(top == Approx(expect).margin(2.5));
    // Without the strip's area taken, no strip.
}

TEST_CASE("timeline screenshot of a run: run kernel times and event tracks") {
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    Shot s = shoot(db.path, "--view timeline --run 1");
    REQUIRE(s.rc == 0);
    const auto& tl = s.layout["timeline"];
    const auto& st7 = track(tl, "stream 7");
    double y7 = row_y(st7);
    // Run 1 delays "beta" by 50 us: it starts at 550 us, not 500 us.
    CHECK(!near(s.img.at(x_at(tl["plot"], tl, 520 * us), y7), kernel_color(fixture::kBeta), 20));
    CHECK(near(s.img.at(x_at(tl["plot"], tl, 560 * us), y7), kernel_color(fixture::kBeta)));
    const auto& stall = track(tl, "stall");
    double ys = row_y(stall);
    CHECK(near(s.img.at(x_at(tl["plot"], tl, 545 * us), ys), event_color(mhc::trace::EventKind::Stall)));
}

TEST_CASE("timeline screenshot: markers and copies move with a selected run's kernels") {
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    uint32_t layer_c = marker_color(mhc::trace::MarkerKind::Layer), h2d = copy_color(mhc::trace::CopyKind::H2D);
    // Recorded: layer 3 at [720, 780) us, the second H2D copy at [750, 790) us.
    Shot rec = shoot(db.path, "--view timeline --range 600us:1100us");
    REQUIRE(rec.rc == 0);
    const auto& a = rec.layout["timeline"];
    double ly = row_y(track(a, "layer markers")), cy = row_y(track(a, "copies H2D"));
    CHECK(near(rec.img.at(x_at(a["plot"], a, 740 * us), ly), layer_c));
    CHECK(!near(rec.img.at(x_at(a["plot"], a, 810 * us), ly), layer_c, 20));
    CHECK(near(rec.img.at(x_at(a["plot"], a, 760 * us), cy), h2d));
    CHECK(!near(rec.img.at(x_at(a["plot"], a, 820 * us), cy), h2d, 20));
    // Run 1 moved beta (the kernel before both) by 50 us: [770, 830) and [800, 840) us.
    Shot run = shoot(db.path, "--view timeline --run 1 --range 600us:1100us");
    REQUIRE(run.rc == 0);
    const auto& b = run.layout["timeline"];
    ly = row_y(track(b, "layer markers"));
    cy = row_y(track(b, "copies H2D"));
    CHECK(!near(run.img.at(x_at(b["plot"], b, 740 * us), ly), layer_c, 20));
    CHECK(near(run.img.at(x_at(b["plot"], b, 810 * us), ly), layer_c));
    CHECK(!near(run.img.at(x_at(b["plot"], b, 780 * us), cy), h2d, 20));
    CHECK(near(run.img.at(x_at(b["plot"], b, 820 * us), cy), h2d));
    // The step marker ends at 1050 us on the run's clock (past the recording's 1 ms).
    CHECK(b["t1"].get<int64_t>() >= 1050 * us);
    double sy = row_y(track(b, "step markers"));
    CHECK(near(run.img.at(x_at(b["plot"], b, 1030 * us), sy), marker_color(mhc::trace::MarkerKind::Step)));
}

TEST_CASE("timeline screenshot: nested ranges on rows of their own, the toolbar's labels before their fields") {
    fixture::TempPath db("imported.db");
    fixture::write_imported_trace(db.path);
    Shot s = shoot(db.path, "--view timeline");
    REQUIRE(s.rc == 0);
    const auto& tl = s.layout["timeline"];
    std::vector<nlohmann::json> rows;
    for (const auto& t : tl["tracks"])
        if (t["kind"] == 2) rows.push_back(t);   // LaneKind::Markers
    REQUIRE(rows.size() == 3);
    uint32_t range_c = marker_color(mhc::trace::MarkerKind::Range);
    for (size_t i = 0; i < rows.size(); ++i) {
        CHECK(rows[i]["row"] == i);
        if (i > 0) CHECK(rows[i]["y0"].get<double>() >= rows[i - 1]["y1"].get<double>());   // no row over another
    }
    // At 250 us: forward (row 0), layer.0 (row 1), attention (row 2), each in its own row; at
    // 475 us only forward; at 600 us forward and layer.1.
    double x250 = x_at(tl["plot"], tl, 250 * us), x475 = x_at(tl["plot"], tl, 475 * us);
    for (size_t i = 0; i < 3; ++i) CHECK(near(s.img.at(x250, rows[i]["y1"].get<double>() - 2), range_c));
    CHECK(near(s.img.at(x475, rows[0]["y1"].get<double>() - 2), range_c));
    CHECK(!near(s.img.at(x475, rows[1]["y1"].get<double>() - 2), range_c, 20));

    // Toolbar: "run" [combo]  "step" [field]: each label left of its own field, in that order.
    const auto& tb = s.layout["toolbar"];
    CHECK(tb["run_label"]["x1"].get<double>() <= tb["run_combo"]["x0"].get<double>());
    CHECK(tb["run_combo"]["x1"].get<double>() < tb["step_label"]["x0"].get<double>());
    CHECK(tb["step_label"]["x1"].get<double>() <= tb["step_input"]["x0"].get<double>());
    CHECK(tb["step_label"]["x0"].get<double>() - tb["run_combo"]["x1"].get<double>() >= 16);   // a gap, not "run 0"
}

TEST_CASE("memory screenshot: the peak's column, its height, and the bands") {
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    Shot s = shoot(db.path, "--view memory");
    REQUIRE(s.rc == 0);
    const auto& m = s.layout["memory"];
    const auto& c = m["curve"];
    CHECK(m["peak_bytes"] == Approx(1424.0 * MiB));
    // The peak starts at 450 us: its column is where 450 us falls.
    double w = c["x1"].get<double>() - c["x0"].get<double>();
    int expect_col = static_cast<int>(std::floor(450.0 / 1000.0 * static_cast<int>(w)));
    CHECK(std::abs(m["peak_col"].get<int>() - expect_col) <= 1);
    // Top of the filled curve (its opaque edge) in a column, searched from the top down.
    auto top = [&](int64_t t) {
        double x = x_at(c, m, t);
        for (double y = c["y0"].get<double>() + 1; y < c["y1"].get<double>(); ++y)
            if (near(s.img.at(x, y), kCurve, 6)) return y;
        return c["y1"].get<double>();
    };
    double h = c["y1"].get<double>() - c["y0"].get<double>();
    double y_max = m["y_max"];
    CHECK(top(500 * us) == Approx(c["y1"].get<double>() - 1424.0 * MiB / y_max * h).margin(2.5));
    CHECK(top(200 * us) == Approx(c["y1"].get<double>() - 464.0 * MiB / y_max * h).margin(2.5));
    // Bands: weights (param) at the bottom, act_big (activation) above it at 500 us.
    const auto& b = m["bands"];
    double by = b["y1"].get<double>(), bh = by - b["y0"].get<double>(), bmax = m["band_y_max"];
    double xb = x_at(b, m, 500 * us);
    CHECK(near(s.img.at(xb, by - 200.0 * MiB / bmax * bh), band_of(db.path, BandColoring::Category, 1)));   // weights
    CHECK(near(s.img.at(xb, by - 900.0 * MiB / bmax * bh), band_of(db.path, BandColoring::Category, 2)));   // act_big
    CHECK(near(s.img.at(x_at(b, m, 200 * us), by - 430.0 * MiB / bmax * bh), band_of(db.path, BandColoring::Category, 3)));
    // Bands keep their category's hue, a little lighter or darker each.
    CHECK(std::abs(blue(band_of(db.path, BandColoring::Category, 1)) - blue(category_color(mhc::trace::Category::Param))) < 40);
    CHECK(m["coloring"] == "category");
    // No legend entry overlaps a byte label of either axis.
    auto overlap = [](const nlohmann::json& p, const nlohmann::json& q) {
        return p["x0"].get<double>() < q["x1"].get<double>() && q["x0"].get<double>() < p["x1"].get<double>() &&
               p["y0"].get<double>() < q["y1"].get<double>() && q["y0"].get<double>() < p["y1"].get<double>();
    };
    REQUIRE(m["legend"].size() >= 4);
    REQUIRE(m["axis_labels"].size() >= 4);
    for (const auto& e : m["legend"])
        for (const auto& l : m["axis_labels"]) CHECK(!overlap(e, l));
    // Legends sit over the plots, right of the byte labels' column; also in a short window,
    // where a list down the label column would run into the labels.
    for (const auto& e : m["legend"]) CHECK(e["x0"].get<double>() >= c["x0"].get<double>() - 1);
    Shot small = shoot(db.path, "--view memory --size 1400x380");
    INFO(small.err);
    REQUIRE(small.rc == 0);
    const auto& sm = small.layout["memory"];
    for (const auto& e : sm["legend"])
        for (const auto& l : sm["axis_labels"]) CHECK(!overlap(e, l));
}

TEST_CASE("memory screenshot of an imported trace: bands by source frame, not one grey") {
    fixture::TempPath db("imported.db");
    fixture::write_imported_trace(db.path);
    Shot s = shoot(db.path, "--view memory");
    REQUIRE(s.rc == 0);
    const auto& m = s.layout["memory"];
    CHECK(m["coloring"] == "source frame");
    // Stacked in id order: A [0, 256), A [256, 512), B [512, 1024), C [1024, 1088) MiB.
    const auto& b = m["bands"];
    double by = b["y1"].get<double>(), bh = by - b["y0"].get<double>(), bmax = m["band_y_max"];
    double x = x_at(b, m, 500 * us);
    uint32_t a = s.img.at(x, by - 128.0 * MiB / bmax * bh), bb = s.img.at(x, by - 768.0 * MiB / bmax * bh),
             c = s.img.at(x, by - 1056.0 * MiB / bmax * bh);
    CHECK(near(a, band_of(db.path, BandColoring::Label, 1)));
    CHECK(near(bb, band_of(db.path, BandColoring::Label, 3)));
    CHECK(near(c, band_of(db.path, BandColoring::Label, 4)));
    CHECK(!near(a, bb, 20));
    for (uint32_t px : {a, bb, c}) {
        CHECK(!near(px, kSummary, 20));
        CHECK(!near(px, category_color(mhc::trace::Category::Other), 20));
    }
    // The legend names the frames with their bytes at the peak, in their colours.
    std::set<std::string> texts;
    for (const auto& e : m["legend"]) texts.insert(e["text"].get<std::string>());
    CHECK(texts.count(std::string(fixture::kFrameA) + ": 512 MiB"));
    CHECK(texts.count(std::string(fixture::kFrameB) + ": 512 MiB"));
    CHECK(texts.count(std::string(fixture::kFrameC) + ": 64 MiB"));
}

TEST_CASE("compare screenshot: both runs' curves overlaid") {
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    Shot s = shoot(db.path, "--view compare --run 1 --run 2");
    REQUIRE(s.rc == 0);
    const auto& cmp = s.layout["compare"];
    REQUIRE(cmp["runs"].size() == 2);
    const auto& c = cmp["curve"];
    // Each run's line at its own peak height in the middle of its peak (500 us).
    double x = x_at(c, cmp, 500 * us);
    double y1 = c["y1"], h = y1 - c["y0"].get<double>(), y_max = cmp["y_max"];
    for (int k = 0; k < 2; ++k) {
        double peak = cmp["runs"][k]["peak"];
        double y = y1 - peak / y_max * h;
        bool found = false;
        for (double dy = -2; dy <= 2; ++dy) found = found || near(s.img.at(x, y + dy), series_color(static_cast<size_t>(k)), 6);
        CHECK(found);
    }
    // The metrics table: readable names, values in the key's unit.
    std::map<std::string, nlohmann::json> rows;
    for (const auto& r : cmp["metrics"]) rows[r["key"].get<std::string>()] = r;
    REQUIRE(rows.count("stall_ns"));
    CHECK(rows["stall_ns"]["label"] == "stall time");
    CHECK(rows["stall_ns"]["values"][0] == "50.0 us");
    CHECK(rows["stall_ns"]["values"][1] == "10.0 us");
    for (const auto& [key, r] : rows) CHECK(r["label"].get<std::string>().find('_') == std::string::npos);
    // "recorded (grey)" sits over the plot's top left, clear of every byte label (it was drawn in
    // the label column, over the top one).
    const auto& cap = cmp["caption"];
    CHECK(cap["x0"].get<double>() >= c["x0"].get<double>());
    CHECK(cap["y0"].get<double>() >= c["y0"].get<double>());
    REQUIRE(cmp["axis_labels"].size() >= 2);
    for (const auto& label : cmp["axis_labels"])
        CHECK(!(label["x0"].get<double>() < cap["x1"].get<double>() && cap["x0"].get<double>() < label["x1"].get<double>() &&
                label["y0"].get<double>() < cap["y1"].get<double>() && cap["y0"].get<double>() < label["y1"].get<double>()));
}

TEST_CASE("screenshot mode: bad trace, unknown run, bad range exit 2 with one line") {
    Shot missing = shoot("/nonexistent/none.db", "");
    CHECK(missing.rc == 2);
    CHECK(missing.err.find("/nonexistent/none.db") != std::string::npos);
    CHECK(std::count(missing.err.begin(), missing.err.end(), '\n') == 1);
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    Shot run = shoot(db.path, "--run 99");
    CHECK(run.rc == 2);
    CHECK(run.err.find("no run with id 99") != std::string::npos);
    Shot range = shoot(db.path, "--range 5ms:1ms");
    CHECK(range.rc == 2);
    CHECK(range.err.find("--range") != std::string::npos);
}

TEST_CASE("memory screenshot of a trace with segments: recorded reserved over allocated") {
    // Segments (docs/viewer.md): 2 GiB of segments from 0 to the end over the imported fixture's 1088 MiB of
    // allocations; the upper plot scales to the reserved bytes and names the curve.
    fixture::TempPath db("segments.db");
    {
        using namespace mhc::trace;
        Writer w(db.path);
        w.set_meta("source", "viewer-test-segments");
        int64_t a = w.intern(fixture::kFrameA);
        w.add(Allocation{1, 0, 0x1000, 1088 * MiB, 0, 1000 * us, 1, Category::Other, a});
        Segment s;
        s.id = 1;
        s.address = 0x1000;
        s.bytes = 2048 * MiB;
        s.t_alloc = 0;
        s.reconstructed = true;
        w.add(s);
        w.finish();
    }
    Shot s = shoot(db.path, "--view memory");
    INFO(s.err);
    REQUIRE(s.rc == 0);
    const auto& m = s.layout["memory"];
    CHECK(m["y_max"].get<double>() == Approx(2048.0 * MiB * 1.08));
    bool named = false, model = false;
    for (const auto& e : m["legend"]) {
        named |= e["text"] == "recorded reserved (segments)";
        model |= e["text"] == "model reserved (caching allocator, device 0)";
    }
    CHECK(named);
    // The model, warm-started from the recorded 2 GiB segment, places the allocation in it:
    // its reserved curve is drawn (named) and reaches the same 2 GiB, not above.
    CHECK(model);
    CHECK(m["y_max"].get<double>() == Approx(2048.0 * MiB * 1.08));
}

TEST_CASE("memory screenshot: segments that cannot be read are said in the window, the rest drawn") {
    fixture::TempPath db("broken-segments.db");
    fixture::write_segments_trace(db.path);
    sqlite3* h = nullptr;
    REQUIRE(sqlite3_open(db.path.c_str(), &h) == SQLITE_OK);
    REQUIRE(sqlite3_exec(h, "UPDATE segments SET bytes = 'lots' WHERE id = 2", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(h);
    Shot s = shoot(db.path, "--view memory");
    INFO(s.err);
    REQUIRE(s.rc == 0);
    const auto& m = s.layout["memory"];
    const std::string message = m["message"];
    CHECK_THAT(message, Catch::StartsWith("reserved memory not shown: ") && Catch::Contains(db.path) &&
                            Catch::Contains("segments"));
    for (const auto& e : m["legend"]) CHECK(e["text"] != "recorded reserved (segments)");
    // The live bytes are drawn as without segments: 1088 MiB, the plot scaled to them.
    CHECK(m["peak_bytes"].get<double>() == 1088.0 * MiB);
    // The line is drawn over the plot: its warm text colour at the plot's top left.
    const auto& c = m["curve"];
    bool lit = false;
    for (double x = c["x0"].get<double>() + 6; x < c["x0"].get<double>() + 200; x += 1)
        for (double y = c["y0"].get<double>() + 4; y < c["y0"].get<double>() + 18; y += 1)
            lit |= near(s.img.at(x, y), rgb(255, 200, 120), 40);
    CHECK(lit);
    // A good trace has no message once its curves are made.
    fixture::TempPath good("segments.db");
    fixture::write_segments_trace(good.path);
    Shot g = shoot(good.path, "--view memory");
    REQUIRE(g.rc == 0);
    CHECK(g.layout["memory"]["message"] == "");
}

namespace {

// The centre of the box showing `id` in a track, and the track's middle height.
std::pair<double, double> box_of(const nlohmann::json& track, int64_t id) {
    for (const auto& b : track["boxes"])
        if (b[2].get<int64_t>() == id) return {(b[0].get<double>() + b[1].get<double>()) / 2, (track["y0"].get<double>() + track["y1"].get<double>()) / 2};
    FAIL("no box " << id << " in " << track["title"]);
    return {0, 0};
}

std::string field_of(const nlohmann::json& details, const std::string& key) {
    for (const auto& f : details["fields"])
        if (f[0] == key) return f[1].get<std::string>();
    FAIL("no field " << key);
    return "";
}

std::string click_at(std::pair<double, double> p) {
    return " --click " + std::to_string(static_cast<int>(p.first)) + "," + std::to_string(static_cast<int>(p.second));
}

}  // namespace

TEST_CASE("a click on a kernel selects it: outlined, its details pane with both clocks and what the run did") {
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    const std::string args = "--view timeline --run 1 --size 1400x800";
    Shot before = shoot(db.path, args);
    REQUIRE(before.rc == 0);
    auto at = box_of(track(before.layout["timeline"], "stream 7"), 2);   // beta, at [550, 750) us in run 1
    CHECK(before.layout["timeline"]["selected_kernel"] == 0);
    CHECK(before.layout["timeline"]["details"].is_null());

    Shot s = shoot(db.path, args + click_at(at));
    INFO(s.err);
    REQUIRE(s.rc == 0);
    const auto& tl = s.layout["timeline"];
    CHECK(tl["selected_kernel"] == 2);
    const auto& d = tl["details"];
    CHECK(d["title"] == fixture::kBeta);
    CHECK(field_of(d, "family") == "attention");
    CHECK(field_of(d, "recorded") == "start 500.000 us, end 700.000 us (200 us)");
    CHECK(field_of(d, "run #1 lru@1GiB") == "start 550.000 us (+50.0 us), end 750.000 us");
    CHECK(field_of(d, "stalled") == "50.0 us waiting for its operands");
    REQUIRE(d["rows"].size() == 2);
    CHECK(d["rows"][0][1] == "weights");
    CHECK(d["rows"][0][2] == "400.00 MiB");
    CHECK(d["rows"][0][3] == "param");
    CHECK(d["rows"][0][5] == "swapped out 40.0 us of 400.00 MiB, 110 us before; swapped in 50.0 us of 400.00 MiB, up to the start");
    CHECK(d["rows"][1][1] == "act_big");
    CHECK(d["rows"][1][4] == "write");
    // The pane sits under the plots, above the status bar, inside the window.
    CHECK(d["rect"]["y0"].get<double>() >= tl["plot"]["y1"].get<double>());
    CHECK(d["rect"]["y1"].get<double>() <= s.layout["status"]["y0"].get<double>());
    // The selected box is outlined in white, just outside its left edge.
    const auto& st7 = track(tl, "stream 7");
    auto box = box_of(st7, 2);
    double left = 0;
    for (const auto& b : st7["boxes"])
        if (b[2] == 2) left = b[0].get<double>();
    // (the line is antialiased over the pixel columns around the edge)
    auto outlined = [&](const Image& img) {
        bool white = false;
        for (double dx = -2; dx <= 1; ++dx) white |= near(img.at(left + dx, box.second), kSelected, 30);
        return white;
    };
    CHECK(outlined(s.img));
    CHECK(!outlined(before.img));
    CHECK(s.layout["status"]["text"] == "kernel #2 selected");
}

TEST_CASE("a click on a folded box zooms to it, a click on a band shows the allocation's details") {
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    Shot s = shoot(db.path, "--view timeline");
    REQUIRE(s.rc == 0);
    const auto& st8 = track(s.layout["timeline"], "stream 8");
    REQUIRE(st8["boxes"].size() == 1);
    CHECK(st8["boxes"][0][2] == -200);   // 200 kernels folded
    auto fold = std::pair<double, double>{(st8["boxes"][0][0].get<double>() + st8["boxes"][0][1].get<double>()) / 2,
                                          (st8["y0"].get<double>() + st8["y1"].get<double>()) / 2};
    Shot z = shoot(db.path, "--view timeline" + click_at(fold));
    REQUIRE(z.rc == 0);
    // The 200 kernels span [800, 899.6] us; the view pads by a twentieth.
    CHECK(z.layout["timeline"]["t0"].get<int64_t>() == Approx(800 * us - 4980).margin(2));
    CHECK(z.layout["timeline"]["t1"].get<int64_t>() == Approx(899.6 * us + 4980).margin(2));
    CHECK(track(z.layout["timeline"], "stream 8")["items"] == 200);

    // Memory view: "weights" is the bottom band at 500 us.
    Shot m = shoot(db.path, "--view memory --run 1");
    REQUIRE(m.rc == 0);
    const auto& b = m.layout["memory"]["bands"];
    double x = x_at(b, m.layout["memory"], 500 * us), y = b["y1"].get<double>() - 6;
    Shot c = shoot(db.path, "--view memory --run 1 --click " + std::to_string(static_cast<int>(x)) + "," + std::to_string(static_cast<int>(y)));
    REQUIRE(c.rc == 0);
    const auto& mem = c.layout["memory"];
    CHECK(mem["selected_allocation"] == 1);
    const auto& d = mem["details"];
    CHECK(d["title"] == "weights");
    CHECK(field_of(d, "allocation") == "#1, 400.00 MiB, param, GPU 0, stream 7");
    CHECK(field_of(d, "lifetime") == "allocated 0 ns, alive at the end of the trace (1.00 ms)");
    CHECK(field_of(d, "label (source frame)") == "weights");
    CHECK(field_of(d, "accesses") == "2: 2 reading, 0 writing");
    CHECK(field_of(d, "run #1 lru@1GiB") == "swap_out x1, swap_in x1; first at 400.000 us");
    REQUIRE(d["rows"].size() == 2);
    CHECK(d["rows"][1][1] == fixture::kBeta);
    CHECK(d["rows"][1][3] == "500.000 us");
    CHECK(d["rows"][1][4] == "550.000 us");
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
    for (const auto& t : go.layout["timeline"]["tracks"]) CHECK(t["y0"] == track(plain.layout["timeline"], t["title"])["y0"]);

    Shot st = shoot(db.path, "--view statistics --size 1400x500");
    REQUIRE(st.rc == 0);
    const auto& k = st.layout["statistics"]["kernels"];
    REQUIRE(k["column_widths"].size() == 5);
    double name_w = k["column_widths"][0], numbers = 0;
    for (size_t c = 1; c < 5; ++c) {
        CHECK(k["column_widths"][c].get<double>() < 160);   // as wide as their figures
        numbers += k["column_widths"][c].get<double>();
    }
    CHECK(name_w > 2.5 * numbers);
    // Every name ends inside the name column (none cut): beta's 70 characters included.
    bool beta = false;
    for (const auto& n : k["names"]) {
        CHECK(n["x1"].get<double>() < k["table_x0"].get<double>() + name_w + 30);
        beta |= n["name"] == fixture::kBeta;
    }
    CHECK(beta);
}

namespace {

// 68 more runs on the known trace (70 in all, as a sweep of the demo stores): five policies,
// three prefetchers, two links; kernels shifted by 10 us x (i % 7); the last one is slow (its
// kernels 5 ms later: it ends near 5.9 ms on a 1 ms trace).
void add_sweep_runs(const std::string& path) {
    using namespace mhc::trace;
    const char* policies[] = {"lru", "largest", "belady", "dtr", "cost_aware"};
    const char* prefetchers[] = {"none", "periodic", "lookahead:500"};
    std::vector<Run> runs;
    for (int i = 0; i < 68; ++i) {
        Run r;
        int64_t shift = i == 67 ? 5000 * us : 10 * us * (i % 7);
        std::string pol = policies[i % 5], pre = prefetchers[i % 3], link = i % 2 ? "pcie5" : "pcie4";
        r.name = pol + "+" + pre + "@" + std::to_string(50 + i % 4 * 10) + "%/" + link + "/caching";
        r.config = {{"eviction", pol}, {"prefetch", pre}, {"link", link}};
        r.metrics = {{"capacity_bytes", (900.0 + i) * MiB}, {"simulated_peak_bytes", (890.0 + i) * MiB},
                     {"peak_reduction", 0.3 + 0.001 * i}, {"throughput_loss", 0.01 * i},
                     {"simulated_makespan_ns", 1e6 + static_cast<double>(shift)}};
        for (int k = 1; k <= 202; ++k) {
            int64_t t = k == 1 ? 100 * us : k == 2 ? 500 * us : 800 * us + (k - 3) * 500;
            int64_t d = k == 1 || k == 2 ? 200 * us : 100;
            r.kernel_times.push_back({k, t + (k > 1 ? shift : 0), t + d + (k > 1 ? shift : 0)});
        }
        r.memory = {{0, 400 * MiB, 0}, {600 * us + shift, 500 * MiB, 0}};
        runs.push_back(std::move(r));
    }
    add_runs(path, runs);
}

}  // namespace

TEST_CASE("compare at scale: 70 runs in a table, timelines scroll, the axis reaches the slowest ticked run") {
    fixture::TempPath db("sweep.db");
    fixture::write_known_trace(db.path);
    add_sweep_runs(db.path);
    // Default: the first six ticked; none is the slow run (#70), so the axis ends near 1.06 ms.
    Shot s = shoot(db.path, "--view compare --size 1400x900");
    INFO(s.err);
    REQUIRE(s.rc == 0);
    const auto& cmp = s.layout["compare"];
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
                                                        "30.00 %", "0.00 %", "1.00 ms", "complete"}));
    // The picker takes a part of the window, the plots the rest; nothing runs off the window.
    double pick_h = picker["rect"]["y1"].get<double>() - picker["rect"]["y0"].get<double>();
    CHECK(pick_h < 0.35 * s.img.h);
    CHECK(cmp["curve"]["y0"].get<double>() > picker["rect"]["y1"].get<double>());
    CHECK(cmp["timelines"]["rect"]["y1"].get<double>() < s.layout["status"]["y0"].get<double>());
    CHECK(cmp["t1"].get<int64_t>() < 2000 * us);

    // Nine runs ticked, the slow one among them: the axis reaches its end; the list scrolls.
    std::string ticks;
    for (int id : {70, 1, 2, 3, 4, 5, 6, 7, 8}) ticks += " --run " + std::to_string(id);
    Shot n = shoot(db.path, "--view compare --size 1400x900" + ticks);
    REQUIRE(n.rc == 0);
    const auto& c9 = n.layout["compare"];
    REQUIRE(c9["runs"].size() == 9);
    int64_t slowest = 0;
    for (const auto& r : c9["runs"]) slowest = std::max(slowest, r["t_end"].get<int64_t>());
    CHECK(slowest > 5800 * us);
    CHECK(c9["t1"].get<int64_t>() >= slowest);
    const auto& tl = c9["timelines"];
    REQUIRE(tl["runs"].size() == 9);
    double visible_h = tl["rect"]["y1"].get<double>() - tl["rect"]["y0"].get<double>();
    CHECK(tl["content_height"].get<double>() > visible_h);   // more than fit: a scrolling list
    int visible = 0;
    for (const auto& r : tl["runs"]) visible += r["visible"].get<bool>();
    CHECK(visible >= 2);
    CHECK(visible < 9);
    // The slow run's curve (the ninth colour) runs on at 500 MiB to the right of the others' ends.
    const auto& c = c9["curve"];
    double y = c["y1"].get<double>() - 500.0 * MiB / c9["y_max"].get<double>() * (c["y1"].get<double>() - c["y0"].get<double>());
    bool found = false;
    for (double dy = -2; dy <= 2; ++dy) found |= near(n.img.at(x_at(c, c9, 5700 * us), y + dy), series_color(8), 6);
    CHECK(found);
}

TEST_CASE("memory bands people can read: long-lived state at the bottom, the rest summarised by bytes") {
    // A 512 MiB activation made first, the 1 GiB weights made after it (memory_viz's allocation
    // order would put them on top), one 512 MiB activation and 2000 activations of 1 MiB, too
    // thin to draw (half a pixel is ~5 MiB here), over [200, 800) us.
    using namespace mhc::trace;
    fixture::TempPath db("layers.db");
    {
        Writer w(db.path);
        w.set_meta("source", "viewer-test-bands");
        int64_t act = w.intern("act"), wt = w.intern("weights");
        w.add(Allocation{1, 0, 0, 512 * MiB, 0, 1000 * us, 7, Category::Activation, act});
        w.add(Allocation{2, 0, 0, 1024 * MiB, 100 * us, kNoTime, 7, Category::Param, wt});
        w.add(Allocation{3, 0, 0, 512 * MiB, 300 * us, 700 * us, 7, Category::Activation, act});
        for (int i = 0; i < 2000; ++i)
            w.add(Allocation{4 + i, 0, 0, MiB, 200 * us + i, 800 * us - i, 7, Category::Activation, act});
        w.finish();
    }
    Shot s = shoot(db.path, "--view memory --size 1400x700");
    INFO(s.err);
    REQUIRE(s.rc == 0);
    const auto& m = s.layout["memory"];
    const auto& b = m["bands"];
    double by = b["y1"].get<double>(), bh = by - b["y0"].get<double>(), bmax = m["band_y_max"];
    double x = x_at(b, m, 500 * us);
    auto at = [&](double mib) { return s.img.at(x, by - mib * MiB / bmax * bh); };
    // At 500 us, bottom up: weights [0, 1024), activation #1 [1024, 1536), #3 [1536, 2048), the
    // 2000 small ones drawn together, muted, [2048, 4048) MiB.
    CHECK(near(at(500), band_of(db.path, BandColoring::Category, 2)));
    CHECK(near(at(1300), band_of(db.path, BandColoring::Category, 1)));
    CHECK(near(at(1800), band_of(db.path, BandColoring::Category, 3)));
    BandKeys keys = band_keys(load_view_trace(db.path), BandColoring::Category);
    const auto activation = static_cast<uint8_t>(Category::Activation);
    CHECK(near(at(3000), summary_color(keys, activation)));
    CHECK(near(at(3900), summary_color(keys, activation)));
    CHECK(!near(at(4200), summary_color(keys, activation), 20));
    // The muted colour is its key's hue, not one slate for everything.
    CHECK(green(summary_color(keys, activation)) > red(summary_color(keys, activation)));
    // The legend says bytes at the peak: the muted bytes, then each category.
    std::vector<std::string> texts;   // the bands' legend: from its head on
    for (const auto& e : m["legend"])
        if (!texts.empty() || e["text"].get<std::string>().rfind("by category", 0) == 0) texts.push_back(e["text"]);
    REQUIRE(texts.size() == 4);
    CHECK(texts[0] == "by category, at the peak (3.95 GiB at 300 us):");
    CHECK(texts[1] == "muted: 2000 smaller allocations, 1.95 GiB");
    CHECK(texts[2] == "activation: 2.95 GiB");
    CHECK(texts[3] == "param: 1 GiB");
    CHECK(m["summarised"] == 2000);
}

TEST_CASE("memory bands of a real Kineto trace: size classes from its own sizes, told apart") {
    // ResNet-50 (tests/data/public): no categories, no labels; 6 MiB to 98 MiB activations. Fixed
    // classes put every drawn band in "16-128 MiB"; the trace's own fifths of bytes separate them.
    fixture::TempPath db("resnet.db");
    mhc::trace::import::Options opt;
    opt.warn = false;
    mhc::trace::import::import_file(std::string(MHC_PUBLIC_DATASETS) + "/kineto/tb-plugin-resnet50-worker0.1623143089861.pt.trace.json.gz",
                                    db.path, opt);
    Shot s = shoot(db.path, "--view memory --size 1400x700");
    INFO(s.err);
    REQUIRE(s.rc == 0);
    const auto& m = s.layout["memory"];
    CHECK(m["coloring"] == "size");
    ViewTrace t = load_view_trace(db.path);
    BandKeys keys = band_keys(t, BandColoring::SizeClass);
    REQUIRE(keys.count() == 5);
    // Every class holds bytes at the peak, and the legend says how many.
    int classes = 0;
    for (const auto& e : m["legend"]) {
        std::string text = e["text"];
        for (const std::string& n : keys.name)
            if (text.rfind(n + ": ", 0) == 0) ++classes;
    }
    CHECK(classes == 5);
    // Down the peak's column, the drawn bands take at least four classes' colours.
    const auto& b = m["bands"];
    double x = b["x0"].get<double>() + m["band_peak_col"].get<double>() + 0.5;
    std::set<int> seen;
    for (double y = b["y0"].get<double>() + 2; y < b["y1"].get<double>() - 1; y += 1)
        for (size_t k = 0; k < keys.count(); ++k) {
            uint32_t px = s.img.at(x, y), c = keys.color[k];
            double f = static_cast<double>(red(px) + green(px) + blue(px) + 1) / (red(c) + green(c) + blue(c) + 1);
            // The same hue, 0.86-1.14 as bright (each band's shade).
            if (f > 0.8 && f < 1.2 && std::abs(red(px) - red(c) * f) < 12 && std::abs(green(px) - green(c) * f) < 12 &&
                std::abs(blue(px) - blue(c) * f) < 12)
                seen.insert(static_cast<int>(k));
        }
    CHECK(seen.size() >= 4);
}

namespace {

// CPU time (user + system) of process `pid` so far, in seconds (/proc/PID/stat, fields 14-15).
double cpu_seconds(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));   // after "pid (comm) "
    std::string field;
    std::vector<std::string> f;
    while (rest >> field) f.push_back(field);
    REQUIRE(f.size() > 13);
    return static_cast<double>(std::stoll(f[11]) + std::stoll(f[12])) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

TEST_CASE("an idle window waits for events: it costs (almost) no CPU") {
    // The interactive viewer on the known trace, in this test's X server (xvfb-run): once loaded
    // and settled it must sleep in the event wait, not draw frames in a loop (a polling loop took
    // 73-98% of a core).
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        execl(MHC_VIEW_EXE, MHC_VIEW_EXE, db.path.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    usleep(2'500'000);   // start, load on the worker thread, settle
    int status = 0;
    REQUIRE(waitpid(pid, &status, WNOHANG) == 0);   // still running
    double before = cpu_seconds(pid);
    usleep(3'000'000);
    double used = cpu_seconds(pid) - before;
    kill(pid, SIGTERM);
    waitpid(pid, &status, 0);
    INFO("CPU seconds over 3 s idle: " << used);
    CHECK(used < 0.15);   // under 5% of one core
}

TEST_CASE(
    "a timeline-only trace (vLLM's decode graph on an MI300X): the strip is one line, the tracks keep the window") {
    // No allocations: the strip said so in a box of 60% of the window under two 64 px rows.
    fixture::TempPath db("vllm.db");
    mhc::trace::import::Options opt;
    opt.warn = false;
    mhc::trace::import::import_file(
        std::string(MHC_PUBLIC_DATASETS) + "/kineto/tracelens-mi300x-vllm-decode-full-graph.json.gz", db.path, opt);
    Shot shot = shoot(db.path, "--size 1400x700");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& tl = shot.layout["timeline"];
    REQUIRE(tl["memory_strip"]["empty"] == true);
    const auto& rect = tl["memory_strip"]["rect"];
    CHECK(rect["y1"].get<double>() - rect["y0"].get<double>() < 30);
    CHECK(track(tl, "GPU2 stream 0")["items"].get<int>() > 0);   // the device the kernels ran on, named
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
    mhc::trace::import::import_file(std::string(MHC_PUBLIC_DATASETS) + "/nsys/extrap-concurrent-16-streams.sqlite",
                                    db.path, opt);
    auto overlap = [](const nlohmann::json& upper, const nlohmann::json& lower) {
        return upper["y0"].get<double>() < lower["y1"].get<double>() && lower["y0"].get<double>() < upper["y1"].get<double>();
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
    mhc::trace::import::import_file(std::string(MHC_PUBLIC_DATASETS) + "/nsys/extrap-concurrent-16-streams.sqlite",
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

namespace {
std::string centre_of(const nlohmann::json& rect);   // below
}   // namespace

TEST_CASE("an import's warnings are said by the header, the strip's one line ends inside the view") {
    // nvFuser's 2025.1 Nsight export: no CUDA_GPU_MEMORY_USAGE_EVENTS (an import warning and
    // meta allocations' reason). Nothing in the window said so, and the strip's line "no
    // allocations in this trace: no memory curve" ran 6 px under the status bar, its descenders
    // cut ("no memoru curve").
    fixture::TempPath db("fuser-notes.db");
    mhc::trace::import::Options opt;
    opt.warn = false;
    mhc::trace::import::import_file(std::string(MHC_PUBLIC_DATASETS) + "/nsys/fuser-h200-nsys-2025.1.sqlite", db.path,
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

TEST_CASE("folded boxes say their count whole or not at all") {
    // Kineto's trace of CUDA graphs (HTA's trace-diff sample) at 1600 px: stream 7's folded
    // boxes read "47...", "32..." (4,744 and 327 kernels cut to fit), numbers the trace does not have.
    fixture::TempPath db("graphs-folded.db");
    mhc::trace::import::Options opt;
    opt.warn = false;
    mhc::trace::import::import_file(
        std::string(MHC_PUBLIC_DATASETS) + "/kineto/hta-trace-diff-cuda-graphs-rank-1.json.gz", db.path, opt);
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
    mhc::trace::import::import_file(std::string(MHC_PUBLIC_DATASETS) + "/kineto/hta-mtia-inference-rank-0.json.gz",
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

TEST_CASE("(?) shows the help on an order-only trace, the notes show every note on hover") {
    // FlexGen's out-of-memory snapshot: order only, so a yellow note followed (?) (now it titles the
    // axis). The help was the tooltip of the last item, that note: (?) showed nothing there.
    fixture::TempPath db("flexgen-help.db");
    mhc::trace::import::Options opt;
    opt.warn = false;
    mhc::trace::import::import_file(std::string(MHC_PUBLIC_DATASETS) + "/torch-snapshot/flexgen-oom-snapshot.pickle",
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
    // The notes line: each note whole in its tooltip.
    REQUIRE(first.layout.contains("notes"));
    Shot notes = shoot(db.path, "--size 1400x700 --hover " + centre(first.layout["notes"]["rect"]));
    REQUIRE(notes.rc == 0);
    CHECK(notes.layout["notes"]["tooltip"] == first.layout["notes"]["lines"]);
    CHECK(!notes.layout["toolbar"].contains("tooltip"));
}

namespace {

std::string import_public(const std::string& relative, const std::string& db) {
    mhc::trace::import::Options opt;
    opt.warn = false;
    mhc::trace::import::import_file(std::string(MHC_PUBLIC_DATASETS) + "/" + relative, db, opt);
    return db;
}

std::string centre_of(const nlohmann::json& rect) {
    return std::to_string(static_cast<int>((rect["x0"].get<double>() + rect["x1"].get<double>()) / 2)) + "," +
           std::to_string(static_cast<int>((rect["y0"].get<double>() + rect["y1"].get<double>()) / 2));
}

}  // namespace

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
    Shot go = shoot(db.path, "--size 1400x700 --step 0");
    REQUIRE(go.rc == 0);
    CHECK(go.layout["status"]["text"].get<std::string>().rfind("no steps in this trace", 0) == 0);
    // SGLang's decode capture starts at step 134: the field reads 134, on.
    fixture::TempPath sg("sglang-steps.db");
    import_public("kineto/tracelens-mi300x-sglang-decode-capture-bs32.json.gz", sg.path);
    Shot late = shoot(sg.path, "--size 1400x700");
    REQUIRE(late.rc == 0);
    CHECK(late.layout["toolbar"]["step"]["enabled"] == true);
    CHECK(late.layout["toolbar"]["step"]["first"] == 134);
    CHECK(late.layout["toolbar"]["step"]["value"] == 134);
}

TEST_CASE("fit y: a curve over a 141 GiB baseline fills the memory plot, its labels readable") {
    // SGLang's decode capture: 141.4 GiB held from before recording, moving by about 10 MB. From
    // 0 B the curve is a flat line at the top; fitted, its moves span most of the plot.
    fixture::TempPath db("sglang-fit.db");
    import_public("kineto/tracelens-mi300x-sglang-decode-capture-bs32.json.gz", db.path);
    constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
    Shot zero = shoot(db.path, "--view memory --size 1400x700");
    INFO(zero.err);
    REQUIRE(zero.rc == 0);
    CHECK(zero.layout["memory"]["y_min"] == 0.0);
    CHECK(zero.layout["memory"]["fit_y"] == false);
    CHECK(zero.layout["memory"]["axis_labels"][0]["text"] == "50 GiB");
    Shot fit = shoot(db.path, "--view memory --size 1400x700 --fit-y");
    REQUIRE(fit.rc == 0);
    const auto& mem = fit.layout["memory"];
    CHECK(mem["fit_y"] == true);
    CHECK(mem["y_min"].get<double>() > 141.3 * GiB);
    CHECK(mem["y_max"].get<double>() - mem["y_min"].get<double>() < 20e6);
    // The curve's labels: the lowest line whole, the others above it ("+2 MiB"); the bands' plot
    // below stays from 0 B ("50 GiB").
    std::vector<std::string> labels;
    const double curve_y1 = mem["curve"]["y1"];
    for (const auto& label : mem["axis_labels"])
        if (label["y1"].get<double>() <= curve_y1 + 8) labels.push_back(label["text"]);
    REQUIRE(labels.size() >= 3);
    CHECK(labels[0].rfind("141.", 0) == 0);
    CHECK(labels[0].find(" GiB") != std::string::npos);
    for (size_t i = 1; i < labels.size(); ++i) CHECK(labels[i] == "+" + std::to_string(2 * i) + " MiB");
    // Pixels: in the fitted plot the filled curve's top moves over more than half the height
    // (column by column: the topmost pixel in the curve's colour); from 0 B by under 3 px.
    auto top_spread = [](const Shot& shot) {
        const auto& plot = shot.layout["memory"]["curve"];
        double lowest = 0, highest = 1e9;
        for (double x = plot["x0"].get<double>() + 2; x < plot["x1"].get<double>() - 2; x += 3)
            for (double y = plot["y0"].get<double>() + 1; y < plot["y1"].get<double>(); ++y)
                if (near(shot.img.at(x, y), kCurve, 40)) {
                    lowest = std::max(lowest, y);
                    highest = std::min(highest, y);
                    break;
                }
        return (lowest - highest) / (plot["y1"].get<double>() - plot["y0"].get<double>());
    };
    CHECK(top_spread(fit) > 0.5);
    CHECK(top_spread(zero) < 0.05);
    // "fit y" in the toolbar's options does the same as --fit-y, and the timeline's strip follows it.
    const std::string options = " --click " + centre_of(zero.layout["toolbar"]["options"]);
    Shot menu = shoot(db.path, "--view memory --size 1400x700" + options);
    REQUIRE(menu.rc == 0);
    REQUIRE(menu.layout["toolbar"].contains("fit_y"));
    Shot clicked = shoot(
        db.path, "--view memory --size 1400x700" + options + " --click " + centre_of(menu.layout["toolbar"]["fit_y"]));
    REQUIRE(clicked.rc == 0);
    CHECK(clicked.layout["memory"]["fit_y"] == true);
    CHECK(clicked.layout["toolbar"]["options"]["fit_y"] == true);
    CHECK(clicked.layout["memory"]["y_min"] == mem["y_min"]);
    Shot strip = shoot(db.path, "--size 1400x700 --fit-y");
    REQUIRE(strip.rc == 0);
    CHECK(strip.layout["timeline"]["memory_strip"]["y_min"].get<double>() > 141.3 * GiB);
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
    Shot closed = shoot(db.path, "--size 1400x700 --click " + centre_of(notes["rect"]) + " --click " +
                                     centre_of(notes["rect"]));
    REQUIRE(closed.rc == 0);
    CHECK(!closed.layout["notes"].contains("window"));
}

TEST_CASE("the memory device picker: a trace with GPU 0 and the host shows either in the window") {
    // con_kernel: GPU 0 (the larger peak, shown first) and the host's pinned buffers.
    fixture::TempPath db("con-devices.db");
    import_public("nsys/con_kernel.sqlite", db.path);
    Shot first = shoot(db.path, "--size 1400x700");
    REQUIRE(first.rc == 0);
    const auto& device = first.layout["toolbar"]["device"];
    CHECK(device["current"] == 0);
    CHECK(device["text"].get<std::string>().rfind("GPU 0 (peak ", 0) == 0);
    Shot open = shoot(db.path, "--size 1400x700 --click " + centre_of(device));
    REQUIRE(open.rc == 0);
    const auto& entries = open.layout["toolbar"]["device"]["entries"];
    REQUIRE(entries.size() == 2);
    const nlohmann::json* host = nullptr;
    for (const auto& entry : entries)
        if (entry["device"] == -1) host = &entry;
    REQUIRE(host);
    Shot picked = shoot(db.path, "--size 1400x700 --click " + centre_of(device) + " --click " + centre_of(*host));
    INFO(picked.err);
    REQUIRE(picked.rc == 0);
    CHECK(picked.layout["toolbar"]["device"]["current"] == -1);
    CHECK(picked.layout["timeline"]["memory_strip"]["title"].get<std::string>().find("host") != std::string::npos);
    // The range is kept across the switch (the trace is read again for the host).
    Shot zoomed = shoot(db.path, "--size 1400x700 --range 20ms:120ms --click " + centre_of(device) + " --click " +
                                     centre_of(*host));
    REQUIRE(zoomed.rc == 0);
    CHECK(zoomed.layout["toolbar"]["device"]["current"] == -1);
    CHECK(zoomed.layout["timeline"]["t0"] == 20'000'000);
    CHECK(zoomed.layout["timeline"]["t1"] == 120'000'000);
    // As --device -1 draws it.
    Shot flag = shoot(db.path, "--size 1400x700 --device -1");
    REQUIRE(flag.rc == 0);
    CHECK(flag.layout["timeline"]["memory_strip"]["peak_bytes"] == picked.layout["timeline"]["memory_strip"]["peak_bytes"]);
    CHECK(flag.layout["timeline"]["memory_strip"]["title"] == picked.layout["timeline"]["memory_strip"]["title"]);
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

namespace {

// Every rectangle of the toolbar's layout lies on the run field's line and inside a window `width` wide.
void check_one_line(const nlohmann::json& tb, double width) {
    const double line_y0 = tb["run_combo"]["y0"], line_y1 = tb["run_combo"]["y1"];
    for (const auto& [name, rect] : tb.items()) {
        if (!rect.is_object() || !rect.contains("x0")) continue;
        INFO(name);
        CHECK(rect["y0"].get<double>() >= line_y0);
        CHECK(rect["y1"].get<double>() <= line_y1);
        CHECK(rect["x1"].get<double>() <= width - 8);
    }
}

}   // namespace

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

TEST_CASE("thin allocation bands keep their colours: no dark edge on a band a few pixels tall") {
    // HTA's V100 trace (df_index_resolver): between 4 and 5 GiB hundreds of 14-24 MiB activations
    // stack 1-3 px tall each. Each band had a dark line on its top edge, so that the stack read as
    // brown stripes, not as the legend's orange (and red, green) it holds. A band's own colour is its
    // key's, 0.86-1.14 as bright (band_color): no channel under 110 for these keys; the dark edge
    // (20, 20, 25 at 160/255 over it) is.
    fixture::TempPath db("df-index-bands.db");
    import_public("kineto/hta-df-index-resolver.json.gz", db.path);
    Shot shot = shoot(db.path, "--view memory --range 150ms:200ms --size 1400x900");
    REQUIRE(shot.rc == 0);
    const auto& mem = shot.layout["memory"];
    const double y0 = mem["bands"]["y0"], y1 = mem["bands"]["y1"], top = mem["band_y_max"];
    auto y_of = [&](double bytes) { return y1 - bytes / top * (y1 - y0); };
    const double gib = 1024.0 * 1024 * 1024;
    size_t dark = 0, all = 0;
    for (double y = y_of(4.9 * gib); y < y_of(4.1 * gib); y += 1)
        for (double x = mem["bands"]["x0"].get<double>() + 2; x < mem["bands"]["x1"].get<double>() - 2; x += 3) {
            const uint32_t px = shot.img.at(x, y);
            dark += std::max({red(px), green(px), blue(px)}) < 110;
            ++all;
        }
    INFO(dark << " dark of " << all);
    REQUIRE(all > 10000);
    CHECK(dark * 20 < all);   // under 5%
}

TEST_CASE("the peak's label never covers its dot") {
    // SGLang's decode capture peaks 8 px from the plot's right edge: the label was pushed back over
    // the dot ("pea" + dot + "k"). Whole traces and ranges that put the peak at either edge.
    fixture::TempPath db("sglang-peak.db");
    import_public("kineto/tracelens-mi300x-sglang-decode-capture-bs32.json.gz", db.path);
    for (const std::string args : {"", " --range 0:31500100", " --range 31499000:33000000", " --fit-y"}) {
        INFO(args);
        Shot shot = shoot(db.path, "--view memory --size 1400x560" + args);
        REQUIRE(shot.rc == 0);
        const auto& label = shot.layout["memory"]["peak_label"];
        REQUIRE(label.is_object());
        const double dot = label["dot_x"];
        CHECK((label["x1"].get<double>() <= dot - 4 || label["x0"].get<double>() >= dot + 4));
        CHECK(label["x0"].get<double>() >= shot.layout["memory"]["curve"]["x0"].get<double>());
        CHECK(label["x1"].get<double>() <= shot.layout["memory"]["curve"]["x1"].get<double>());
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
