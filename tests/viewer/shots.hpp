#pragma once
// Screenshot tests: run `mhc-view --screenshot` on known and public traces (under xvfb-run, see
// CMakeLists) and check pixels where the known items must land. The viewer's --layout JSON
// gives the plot rectangles; the pixel colours are then checked independently. The helpers
// every test_shots_*.cpp file shares: taking a screenshot, reading its pixels and layout.
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

struct Image {
    int w = 0, h = 0;
    std::vector<unsigned char> px;
    uint32_t at(double x, double y) const {
        int xi = static_cast<int>(x), yi = static_cast<int>(y);
        REQUIRE(xi >= 0);
        REQUIRE(xi < w);
        REQUIRE(yi >= 0);
        REQUIRE(yi < h);
        const unsigned char* p = &px[(static_cast<size_t>(yi) * static_cast<size_t>(w) + static_cast<size_t>(xi)) * 4];
        return rgb(p[0], p[1], p[2]);
    }
};

inline bool near(uint32_t a, uint32_t b, int tol = 3) {
    return std::abs(red(a) - red(b)) <= tol && std::abs(green(a) - green(b)) <= tol &&
           std::abs(blue(a) - blue(b)) <= tol;
}

struct Shot {
    int rc = -1;
    std::string err;
    Image img;
    nlohmann::json layout;
};

inline Shot shoot(const std::string& trace, const std::string& args) {
    fixture::TempPath png("shot.png"), json("shot.json"), err("stderr.txt");
    std::string cmd = std::string("'") + MHC_VIEW_EXE + "' '" + trace + "' --screenshot '" + png.path + "' --layout '" +
                      json.path + "'" + (args.find("--size") == std::string::npos ? " --size 1400x700 " : " ") + args +
                      " 2>'" + err.path + "'";
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

inline double x_at(const nlohmann::json& rect, const nlohmann::json& view, int64_t t) {
    double x0 = rect["x0"], x1 = rect["x1"];
    double t0 = view["t0"].get<double>(), t1 = view["t1"].get<double>();
    return x0 + (static_cast<double>(t) - t0) / (t1 - t0) * (x1 - x0);
}

inline const nlohmann::json& track(const nlohmann::json& tl, const std::string& title) {
    for (const auto& t : tl["tracks"])
        if (t["title"] == title) return t;
    FAIL("no track " << title);
    static nlohmann::json none;
    return none;
}

inline size_t distinct_colours(const Image& img) {
    std::set<uint32_t> c;
    for (size_t i = 0; i + 3 < img.px.size(); i += 4 * 7) c.insert(rgb(img.px[i], img.px[i + 1], img.px[i + 2]));
    return c.size();
}

// The colour the memory view gives allocation `id`'s band under colouring `c` (computed by the
// core from the same trace, independently of the window).
inline uint32_t band_of(const std::string& db, BandColoring c, int64_t id) {
    ViewTrace t = load_view_trace(db);
    BandKeys keys = band_keys(t, c);
    int64_t i = t.allocations.index_of(id);
    REQUIRE(i >= 0);
    return band_color(keys, t.allocations, static_cast<size_t>(i));
}

// A point inside a track's boxes clear of their centred label text.
inline double row_y(const nlohmann::json& t) { return t["y1"].get<double>() - 4; }

// The centre of the box showing `id` in a track, and the track's middle height.
inline std::pair<double, double> box_of(const nlohmann::json& track, int64_t id) {
    for (const auto& b : track["boxes"])
        if (b[2].get<int64_t>() == id)
            return {(b[0].get<double>() + b[1].get<double>()) / 2,
                    (track["y0"].get<double>() + track["y1"].get<double>()) / 2};
    FAIL("no box " << id << " in " << track["title"]);
    return {0, 0};
}

inline std::string field_of(const nlohmann::json& details, const std::string& key) {
    for (const auto& f : details["fields"])
        if (f[0] == key) return f[1].get<std::string>();
    FAIL("no field " << key);
    return "";
}

inline std::string click_at(std::pair<double, double> p) {
    return " --click " + std::to_string(static_cast<int>(p.first)) + "," + std::to_string(static_cast<int>(p.second));
}

inline std::string import_public(const std::string& relative, const std::string& db) {
    mhc::trace::import::Options opt;
    opt.warn = false;
    mhc::trace::import::import_file(std::string(MHC_PUBLIC_DATASETS) + "/" + relative, db, opt);
    return db;
}

inline std::string centre_of(const nlohmann::json& rect) {
    return std::to_string(static_cast<int>((rect["x0"].get<double>() + rect["x1"].get<double>()) / 2)) + "," +
           std::to_string(static_cast<int>((rect["y0"].get<double>() + rect["y1"].get<double>()) / 2));
}

// Every rectangle of the toolbar's layout lies on the run field's line and inside a window `width` wide.
inline void check_one_line(const nlohmann::json& tb, double width) {
    const double line_y0 = tb["run_combo"]["y0"], line_y1 = tb["run_combo"]["y1"];
    for (const auto& [name, rect] : tb.items()) {
        if (!rect.is_object() || !rect.contains("x0")) continue;
        INFO(name);
        CHECK(rect["y0"].get<double>() >= line_y0);
        CHECK(rect["y1"].get<double>() <= line_y1);
        CHECK(rect["x1"].get<double>() <= width - 8);
    }
}
