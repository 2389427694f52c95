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
                      "' --layout '" + json.path + "' --size 1400x700 " + args + " 2>'" + err.path + "'";
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

TEST_CASE("timeline screenshot: kernels where they belong, the dense stream folded") {
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    Shot s = shoot(db.path, "--view timeline");
    REQUIRE(s.rc == 0);
    CHECK(s.img.w == 1400);
    CHECK(distinct_colours(s.img) > 15);
    const auto& tl = s.layout["timeline"];
    const auto& st7 = track(tl, "stream 7");
    double y7 = (st7["y0"].get<double>() + st7["y1"].get<double>()) / 2 + 3;   // below the label text
    CHECK(near(s.img.at(x_at(tl["plot"], tl, 110 * us), y7), name_color("alpha")));
    CHECK(near(s.img.at(x_at(tl["plot"], tl, 690 * us), y7), name_color("beta")));
    uint32_t gap = s.img.at(x_at(tl["plot"], tl, 400 * us), y7);
    CHECK(!near(gap, name_color("alpha"), 20));
    CHECK(!near(gap, name_color("beta"), 20));
    // 200 kernels of 100 ns every 500 ns: one folded run at full zoom-out.
    const auto& st8 = track(tl, "stream 8");
    CHECK(st8["items"] == 1);
    double y8 = (st8["y0"].get<double>() + st8["y1"].get<double>()) / 2 + 5;
    CHECK(near(s.img.at(x_at(tl["plot"], tl, 805 * us), y8), kFolded));
    CHECK(!near(s.img.at(x_at(tl["plot"], tl, 700 * us), y8), kFolded, 20));

    // Zoomed in on them, every kernel is drawn alone.
    Shot z = shoot(db.path, "--view timeline --range 800us:900us");
    REQUIRE(z.rc == 0);
    CHECK(track(z.layout["timeline"], "stream 8")["items"] == 200);
}

TEST_CASE("timeline screenshot of a run: run kernel times and event tracks") {
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    Shot s = shoot(db.path, "--view timeline --run 1");
    REQUIRE(s.rc == 0);
    const auto& tl = s.layout["timeline"];
    const auto& st7 = track(tl, "stream 7");
    double y7 = (st7["y0"].get<double>() + st7["y1"].get<double>()) / 2 + 3;
    // Run 1 delays "beta" by 50 us: it starts at 550 us, not 500 us.
    CHECK(!near(s.img.at(x_at(tl["plot"], tl, 520 * us), y7), name_color("beta"), 20));
    CHECK(near(s.img.at(x_at(tl["plot"], tl, 560 * us), y7), name_color("beta")));
    const auto& stall = track(tl, "stall");
    double ys = (stall["y0"].get<double>() + stall["y1"].get<double>()) / 2 + 3;
    CHECK(near(s.img.at(x_at(tl["plot"], tl, 545 * us), ys), event_color(mhc::trace::EventKind::Stall)));
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
