// Screenshot tests: run `mhc-view --screenshot` on the known trace (under xvfb-run, see
// CMakeLists) and check pixels where the known items must land. The viewer's --layout JSON
// gives the plot rectangles; the pixel colours are then checked independently.
#include <catch2/catch.hpp>
#include <stb_image.h>   // implementation compiled into Debian's libstb
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <map>
#include <set>
#include <sstream>

#include "fixtures.hpp"
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
    // The strip ends near the window's bottom edge: no empty two thirds.
    const auto& strip = tl["memory_strip"];
    REQUIRE(strip.contains("rect"));
    CHECK(strip["rect"]["y1"].get<double>() > s.img.h - 20);
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
    CHECK(near(s.img.at(xb, by - 200.0 * MiB / bmax * bh), category_color(mhc::trace::Category::Param)));
    CHECK(near(s.img.at(xb, by - 900.0 * MiB / bmax * bh), category_color(mhc::trace::Category::Activation)));
    CHECK(near(s.img.at(x_at(b, m, 200 * us), by - 430.0 * MiB / bmax * bh), category_color(mhc::trace::Category::Workspace)));
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
    CHECK(near(a, name_color(fixture::kFrameA)));
    CHECK(near(bb, name_color(fixture::kFrameB)));
    CHECK(near(c, name_color(fixture::kFrameC)));
    CHECK(!near(a, bb, 20));
    for (uint32_t px : {a, bb, c}) {
        CHECK(!near(px, kSummary, 20));
        CHECK(!near(px, category_color(mhc::trace::Category::Other), 20));
    }
    // The legend names the frames, in their colours.
    std::set<std::string> texts;
    for (const auto& e : m["legend"]) texts.insert(e["text"].get<std::string>());
    CHECK(texts.count(fixture::kFrameA));
    CHECK(texts.count(fixture::kFrameB));
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
