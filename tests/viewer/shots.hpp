#pragma once
// Screenshot tests: run `mhc-view --screenshot` on known and public traces (under xvfb-run, see
// CMakeLists) and check pixels where the known items must land. The viewer's --layout JSON
// gives the plot rectangles; the pixel colours are then checked independently. The helpers
// every test_shots_*.cpp file shares: taking a screenshot, reading its pixels and layout.
#include <catch2/catch.hpp>
#include <stb/stb_image.h>   // implementation compiled into Debian's libstb
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
#include "mhc/test/paths.hpp"
#include "mhc/trace/import/import.hpp"
#include "mhc/viewer/band_colors.hpp"
#include "mhc/viewer/colors.hpp"

using mhc::viewer::BandColoring;
using mhc::viewer::BandKeys;
using mhc::viewer::ViewTrace;
using mhc::viewer::band_color;
using mhc::viewer::blue;
using mhc::viewer::green;
using mhc::viewer::red;
using mhc::viewer::rgb;
using mhc::viewer::load_view_trace;
inline constexpr int64_t MiB = fixture::MiB;   // (using-declarations read as unused in the header alone)
inline constexpr int64_t us = fixture::us;

struct Image {
    int w = 0, h = 0;
    std::vector<unsigned char> px;
    uint32_t at(double xpos, double ypos) const {
        int xi = static_cast<int>(xpos), yi = static_cast<int>(ypos);
        REQUIRE(xi >= 0);
        REQUIRE(xi < w);
        REQUIRE(yi >= 0);
        REQUIRE(yi < h);
        const unsigned char* pixel =
            &px[(static_cast<size_t>(yi) * static_cast<size_t>(w) + static_cast<size_t>(xi)) * 4];
        return rgb(pixel[0], pixel[1], pixel[2]);
    }
};

inline bool near(uint32_t one, uint32_t other, int tol = 3) {
    return std::abs(red(one) - red(other)) <= tol && std::abs(green(one) - green(other)) <= tol &&
           std::abs(blue(one) - blue(other)) <= tol;
}

struct Shot {
    int rc = -1;
    std::string err;
    Image img;
    nlohmann::json layout;
};

inline Shot shoot(const std::string& trace, const std::string& args) {
    fixture::TempPath png("shot.png"), json("shot.json"), err("stderr.txt");
    std::string cmd = std::string("'") + mhc::test::mhc_view_exe() + "' '" + trace + "' --screenshot '" + png.path + "' --layout '" +
                      json.path + "'" + (args.find("--size") == std::string::npos ? " --size 1400x700 " : " ") + args +
                      " 2>'" + err.path + "'";
    int st = std::system(cmd.c_str());
    Shot shot;
    shot.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    std::stringstream ss;
    ss << std::ifstream(err.path).rdbuf();
    shot.err = ss.str();
    if (shot.rc != 0) return shot;
    int channels = 0;
    unsigned char* data = stbi_load(png.path.c_str(), &shot.img.w, &shot.img.h, &channels, 4);
    REQUIRE(data);
    shot.img.px.assign(data, data + static_cast<size_t>(shot.img.w) * static_cast<size_t>(shot.img.h) * 4);
    stbi_image_free(data);
    shot.layout = nlohmann::json::parse(std::ifstream(json.path));
    return shot;
}

inline double x_at(const nlohmann::json& rect, const nlohmann::json& view, int64_t when) {
    double x0 = rect["x0"], x1 = rect["x1"];
    double t0 = view["t0"].get<double>(), t1 = view["t1"].get<double>();
    return x0 + (static_cast<double>(when) - t0) / (t1 - t0) * (x1 - x0);
}

// The memory view's curve area: the y of `bytes` on its axis (y_min..y_max bottom to top).
inline double y_at(const nlohmann::json& rect, const nlohmann::json& view, double bytes) {
    const double y0 = rect["y0"], y1 = rect["y1"];
    const double y_min = view["y_min"], y_max = view["y_max"];
    return y1 - (bytes - y_min) / (y_max - y_min) * (y1 - y0);
}

// Whether a line of `colour` passes within 2 px (vertically) of (when, bytes) in the memory view.
inline bool line_near(const Shot& shot, const nlohmann::json& view, int64_t when, double bytes, uint32_t colour) {
    const auto& rect = view["curve"];
    bool found = false;
    for (double dy = -2; dy <= 2; ++dy)
        found |= near(shot.img.at(x_at(rect, view, when), y_at(rect, view, bytes) + dy), colour, 12);
    return found;
}

inline const nlohmann::json& track(const nlohmann::json& tl, const std::string& title) {
    for (const auto& each : tl["tracks"])
        if (each["title"] == title) return each;
    FAIL("no track " << title);
    static nlohmann::json none;
    return none;
}

inline size_t distinct_colours(const Image& img) {
    std::set<uint32_t> colours;
    for (size_t i = 0; i + 3 < img.px.size(); i += 4 * 7) colours.insert(rgb(img.px[i], img.px[i + 1], img.px[i + 2]));
    return colours.size();
}

// The colour the memory view gives allocation `id`'s band under colouring `coloring` (computed by
// the core from the same trace, independently of the window).
inline uint32_t band_of(const std::string& db, BandColoring coloring, int64_t id) {
    ViewTrace view = load_view_trace(db);
    BandKeys keys = band_keys(view, coloring);
    int64_t index = view.allocations.index_of(id);
    REQUIRE(index >= 0);
    return band_color(keys, view.allocations, static_cast<size_t>(index));
}

// A point inside a track's boxes clear of their centred label text.
inline double row_y(const nlohmann::json& track) { return track["y1"].get<double>() - 4; }

// The centre of the box showing `id` in a track, and the track's middle height.
inline std::pair<double, double> box_of(const nlohmann::json& track, int64_t id) {
    for (const auto& box : track["boxes"])
        if (box[2].get<int64_t>() == id)
            return {(box[0].get<double>() + box[1].get<double>()) / 2,
                    (track["y0"].get<double>() + track["y1"].get<double>()) / 2};
    FAIL("no box " << id << " in " << track["title"]);
    return {0, 0};
}

inline std::string field_of(const nlohmann::json& details, const std::string& key) {
    for (const auto& field : details["fields"])
        if (field[0] == key) return field[1].get<std::string>();
    FAIL("no field " << key);
    return "";
}

inline std::string click_at(std::pair<double, double> point) {
    return " --click " + std::to_string(static_cast<int>(point.first)) + "," +
           std::to_string(static_cast<int>(point.second));
}

inline std::string import_public(const std::string& relative, const std::string& db) {
    mhc::trace::import::Options opt;
    opt.warn = false;
    mhc::trace::import::import_file(std::string(mhc::test::public_datasets()) + "/" + relative, db, opt);
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
