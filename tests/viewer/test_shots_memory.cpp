// Screenshots of the memory view: the peak, allocation bands and their colours, reserved bytes
// from segments, fit y, the device picker.
// (shots.hpp: how a screenshot is taken and read.)
#include "shots.hpp"
#include "mhc/test/paths.hpp"
#include <tuple>

using mhc::viewer::category_color;
using mhc::viewer::kCurve;
using mhc::viewer::kSummary;

TEST_CASE("memory screenshot: the peak's column, its height, and the bands") {
    fixture::TempPath db("known.db");
    fixture::write_known_trace(db.path);
    Shot shot = shoot(db.path, "--view memory");
    REQUIRE(shot.rc == 0);
    const auto& mem = shot.layout["memory"];
    const auto& curve_rect = mem["curve"];
    CHECK(mem["peak_bytes"] == Approx(1424.0 * MiB));
    // The peak starts at 450 us: its column is where 450 us falls.
    double width = curve_rect["x1"].get<double>() - curve_rect["x0"].get<double>();
    int expect_col = static_cast<int>(std::floor(450.0 / 1000.0 * static_cast<int>(width)));
    CHECK(std::abs(mem["peak_col"].get<int>() - expect_col) <= 1);
    // Top of the filled curve (its opaque edge) in a column, searched from the top down.
    auto top = [&](int64_t when) {
        double xpos = x_at(curve_rect, mem, when);
        for (double y = curve_rect["y0"].get<double>() + 1; y < curve_rect["y1"].get<double>(); ++y)
            if (near(shot.img.at(xpos, y), kCurve, 6)) return y;
        return curve_rect["y1"].get<double>();
    };
    double tall = curve_rect["y1"].get<double>() - curve_rect["y0"].get<double>();
    double y_max = mem["y_max"];
    CHECK(top(500 * us) == Approx(curve_rect["y1"].get<double>() - 1424.0 * MiB / y_max * tall).margin(2.5));
    CHECK(top(200 * us) == Approx(curve_rect["y1"].get<double>() - 464.0 * MiB / y_max * tall).margin(2.5));
    // Bands: weights (param) at the bottom, act_big (activation) above it at 500 us.
    const auto& band_rect = mem["bands"];
    double by = band_rect["y1"].get<double>(), bh = by - band_rect["y0"].get<double>(), bmax = mem["band_y_max"];
    double xb = x_at(band_rect, mem, 500 * us);
    CHECK(
        near(shot.img.at(xb, by - 200.0 * MiB / bmax * bh), band_of(db.path, BandColoring::Category, 1)));   // weights
    CHECK(
        near(shot.img.at(xb, by - 900.0 * MiB / bmax * bh), band_of(db.path, BandColoring::Category, 2)));   // act_big
    CHECK(near(shot.img.at(x_at(band_rect, mem, 200 * us), by - 430.0 * MiB / bmax * bh),
               band_of(db.path, BandColoring::Category, 3)));
    // Bands keep their category's hue, a little lighter or darker each.
    CHECK(std::abs(blue(band_of(db.path, BandColoring::Category, 1)) -
                   blue(category_color(mhc::trace::Category::Param))) < 40);
    CHECK(mem["coloring"] == "category");
    // No legend entry overlaps a byte label of either axis.
    auto overlap = [](const nlohmann::json& point, const nlohmann::json& other) {
        return point["x0"].get<double>() < other["x1"].get<double>() &&
               other["x0"].get<double>() < point["x1"].get<double>() &&
               point["y0"].get<double>() < other["y1"].get<double>() &&
               other["y0"].get<double>() < point["y1"].get<double>();
    };
    REQUIRE(mem["legend"].size() >= 4);
    REQUIRE(mem["axis_labels"].size() >= 4);
    for (const auto& legend_entry : mem["legend"])
        for (const auto& label : mem["axis_labels"]) CHECK(!overlap(legend_entry, label));
    // Legends sit over the plots, right of the byte labels' column; also in a short window,
    // where a list down the label column would run into the labels.
    for (const auto& legend_entry : mem["legend"])
        CHECK(legend_entry["x0"].get<double>() >= curve_rect["x0"].get<double>() - 1);
    Shot small = shoot(db.path, "--view memory --size 1400x380");
    INFO(small.err);
    REQUIRE(small.rc == 0);
    const auto& sm = small.layout["memory"];
    for (const auto& item : sm["legend"])
        for (const auto& lane : sm["axis_labels"]) CHECK(!overlap(item, lane));
}

TEST_CASE("memory screenshot of an imported trace: bands by source frame, not one grey") {
    fixture::TempPath db("imported.db");
    fixture::write_imported_trace(db.path);
    Shot shot = shoot(db.path, "--view memory");
    REQUIRE(shot.rc == 0);
    const auto& mem = shot.layout["memory"];
    CHECK(mem["coloring"] == "source frame");
    // Stacked in id order: A [0, 256), A [256, 512), B [512, 1024), C [1024, 1088) MiB.
    const auto& band_rect = mem["bands"];
    double by = band_rect["y1"].get<double>(), bh = by - band_rect["y0"].get<double>(), bmax = mem["band_y_max"];
    double xpos = x_at(band_rect, mem, 500 * us);
    uint32_t first = shot.img.at(xpos, by - 128.0 * MiB / bmax * bh),
             bb = shot.img.at(xpos, by - 768.0 * MiB / bmax * bh),
             curve_rect = shot.img.at(xpos, by - 1056.0 * MiB / bmax * bh);
    CHECK(near(first, band_of(db.path, BandColoring::Label, 1)));
    CHECK(near(bb, band_of(db.path, BandColoring::Label, 3)));
    CHECK(near(curve_rect, band_of(db.path, BandColoring::Label, 4)));
    CHECK(!near(first, bb, 20));
    for (uint32_t px : {first, bb, curve_rect}) {
        CHECK(!near(px, kSummary, 20));
        CHECK(!near(px, category_color(mhc::trace::Category::Other), 20));
    }
    // The legend names the frames with their bytes at the peak, in their colours.
    std::set<std::string> texts;
    for (const auto& entry : mem["legend"]) texts.insert(entry["text"].get<std::string>());
    CHECK(texts.count(std::string(fixture::kFrameA) + ": 512 MiB"));
    CHECK(texts.count(std::string(fixture::kFrameB) + ": 512 MiB"));
    CHECK(texts.count(std::string(fixture::kFrameC) + ": 64 MiB"));
}

TEST_CASE("memory screenshot of a trace with segments: recorded reserved over allocated") {
    // Segments (docs/viewer.md): 2 GiB of segments from 0 to the end over the imported fixture's 1088 MiB of
    // allocations; the upper plot scales to the reserved bytes and names the curve.
    fixture::TempPath db("segments.db");
    {
        using mhc::trace::Allocation;
        using mhc::trace::Category;
        using mhc::trace::Segment;
        using mhc::trace::Writer;
        Writer writer(db.path);
        writer.set_meta("source", "viewer-test-segments");
        int64_t first = writer.intern(fixture::kFrameA);
        writer.add(Allocation{1, 0, 0x1000, 1088 * MiB, 0, 1000 * us, 1, Category::Other, first});
        Segment seg;
        seg.id = 1;
        seg.address = 0x1000;
        seg.bytes = 2048 * MiB;
        seg.t_alloc = 0;
        seg.reconstructed = true;
        writer.add(seg);
        writer.finish();
    }
    Shot shot = shoot(db.path, "--view memory");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& mem = shot.layout["memory"];
    CHECK(mem["y_max"].get<double>() == Approx(2048.0 * MiB * 1.08));
    bool named = false, model = false;
    for (const auto& entry : mem["legend"]) {
        named |= entry["text"] == "recorded reserved (segments)";
        model |= entry["text"] == "model reserved (caching allocator, device 0)";
    }
    CHECK(named);
    // The model, warm-started from the recorded 2 GiB segment, places the allocation in it:
    // its reserved curve is drawn (named) and reaches the same 2 GiB, not above.
    CHECK(model);
    CHECK(mem["y_max"].get<double>() == Approx(2048.0 * MiB * 1.08));
}

TEST_CASE("memory screenshot: segments that cannot be read are said in the window, the rest drawn") {
    fixture::TempPath db("broken-segments.db");
    fixture::write_segments_trace(db.path);
    sqlite3* height = nullptr;
    REQUIRE(sqlite3_open(db.path.c_str(), &height) == SQLITE_OK);
    REQUIRE(sqlite3_exec(height, "UPDATE segments SET bytes = 'lots' WHERE id = 2", nullptr, nullptr, nullptr) ==
            SQLITE_OK);
    sqlite3_close(height);
    Shot shot = shoot(db.path, "--view memory");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& mem = shot.layout["memory"];
    const std::string message = mem["message"];
    CHECK_THAT(message, Catch::StartsWith("reserved memory not shown: ") && Catch::Contains(db.path) &&
                            Catch::Contains("segments"));
    for (const auto& entry : mem["legend"]) CHECK(entry["text"] != "recorded reserved (segments)");
    // The live bytes are drawn as without segments: 1088 MiB, the plot scaled to them.
    CHECK(mem["peak_bytes"].get<double>() == 1088.0 * MiB);
    // The line is drawn over the plot: its warm text colour at the plot's top left.
    const auto& curve_rect = mem["curve"];
    bool lit = false;
    for (double xpos = curve_rect["x0"].get<double>() + 6; xpos < curve_rect["x0"].get<double>() + 200; xpos += 1)
        for (double y = curve_rect["y0"].get<double>() + 4; y < curve_rect["y0"].get<double>() + 18; y += 1)
            lit |= near(shot.img.at(xpos, y), rgb(255, 200, 120), 40);
    CHECK(lit);
    // A good trace has no message once its curves are made.
    fixture::TempPath good("segments.db");
    fixture::write_segments_trace(good.path);
    Shot grey = shoot(good.path, "--view memory");
    REQUIRE(grey.rc == 0);
    CHECK(grey.layout["memory"]["message"].get<std::string>().empty());
}

TEST_CASE("memory bands people can read: long-lived state at the bottom, the rest summarised by bytes") {
    // A 512 MiB activation made first, the 1 GiB weights made after it (memory_viz's allocation
    // order would put them on top), one 512 MiB activation and 2000 activations of 1 MiB, too
    // thin to draw (half a pixel is ~5 MiB here), over [200, 800) us.
    using mhc::trace::Allocation;
    using mhc::trace::Category;
    using mhc::trace::kNoTime;
    using mhc::trace::Writer;
    fixture::TempPath db("layers.db");
    {
        Writer writer(db.path);
        writer.set_meta("source", "viewer-test-bands");
        int64_t act = writer.intern("act"), wt = writer.intern("weights");
        writer.add(Allocation{1, 0, 0, 512 * MiB, 0, 1000 * us, 7, Category::Activation, act});
        writer.add(Allocation{2, 0, 0, 1024 * MiB, 100 * us, kNoTime, 7, Category::Param, wt});
        writer.add(Allocation{3, 0, 0, 512 * MiB, 300 * us, 700 * us, 7, Category::Activation, act});
        for (int i = 0; i < 2000; ++i)
            writer.add(Allocation{4 + i, 0, 0, MiB, 200 * us + i, 800 * us - i, 7, Category::Activation, act});
        writer.finish();
    }
    Shot shot = shoot(db.path, "--view memory --size 1400x700");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& mem = shot.layout["memory"];
    const auto& band_rect = mem["bands"];
    double by = band_rect["y1"].get<double>(), bh = by - band_rect["y0"].get<double>(), bmax = mem["band_y_max"];
    double xpos = x_at(band_rect, mem, 500 * us);
    auto at = [&](double mib) { return shot.img.at(xpos, by - mib * MiB / bmax * bh); };
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
    for (const auto& entry : mem["legend"])
        if (!texts.empty() || entry["text"].get<std::string>().rfind("by category", 0) == 0)
            texts.push_back(entry["text"]);
    REQUIRE(texts.size() == 4);
    CHECK(texts[0] == "by category, at the peak (3.95 GiB at 300 us):");
    CHECK(texts[1] == "muted: 2000 smaller allocations, 1.95 GiB");
    CHECK(texts[2] == "activation: 2.95 GiB");
    CHECK(texts[3] == "param: 1 GiB");
    CHECK(mem["summarised"] == 2000);
}

TEST_CASE("memory bands of a real Kineto trace: size classes from its own sizes, told apart") {
    // ResNet-50 (tests/data/public): no categories, no labels; 6 MiB to 98 MiB activations. Fixed
    // classes put every drawn band in "16-128 MiB"; the trace's own fifths of bytes separate them.
    fixture::TempPath db("resnet.db");
    mhc::trace::import::Options opt;
    opt.warn = false;
    mhc::trace::import::import_file(
        std::string(mhc::test::public_datasets()) + "/kineto/tb-plugin-resnet50-worker0.1623143089861.pt.trace.json.gz", db.path,
        opt);
    Shot shot = shoot(db.path, "--view memory --size 1400x700");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& mem = shot.layout["memory"];
    CHECK(mem["coloring"] == "size");
    ViewTrace loaded = load_view_trace(db.path);
    BandKeys keys = band_keys(loaded, BandColoring::SizeClass);
    REQUIRE(keys.count() == 5);
    // Every class holds bytes at the peak, and the legend says how many.
    int classes = 0;
    for (const auto& entry : mem["legend"]) {
        std::string text = entry["text"];
        for (const std::string& number : keys.name)
            if (text.rfind(number + ": ", 0) == 0) ++classes;
    }
    CHECK(classes == 5);
    // Down the peak's column, the drawn bands take at least four classes' colours.
    const auto& band_rect = mem["bands"];
    double xpos = band_rect["x0"].get<double>() + mem["band_peak_col"].get<double>() + 0.5;
    std::set<int> seen;
    for (double y = band_rect["y0"].get<double>() + 2; y < band_rect["y1"].get<double>() - 1; y += 1)
        for (size_t k = 0; k < keys.count(); ++k) {
            uint32_t px = shot.img.at(xpos, y), curve_rect = keys.color[k];
            double frac = static_cast<double>(red(px) + green(px) + blue(px) + 1) /
                          (red(curve_rect) + green(curve_rect) + blue(curve_rect) + 1);
            // The same hue, 0.86-1.14 as bright (each band's shade).
            if (frac > 0.8 && frac < 1.2 && std::abs(red(px) - red(curve_rect) * frac) < 12 &&
                std::abs(green(px) - green(curve_rect) * frac) < 12 &&
                std::abs(blue(px) - blue(curve_rect) * frac) < 12)
                seen.insert(static_cast<int>(k));
        }
    CHECK(seen.size() >= 4);
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
        for (double xpos = plot["x0"].get<double>() + 2; xpos < plot["x1"].get<double>() - 2; xpos += 3)
            for (double y = plot["y0"].get<double>() + 1; y < plot["y1"].get<double>(); ++y)
                if (near(shot.img.at(xpos, y), kCurve, 40)) {
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
    Shot zoomed = shoot(
        db.path, "--size 1400x700 --range 20ms:120ms --click " + centre_of(device) + " --click " + centre_of(*host));
    REQUIRE(zoomed.rc == 0);
    CHECK(zoomed.layout["toolbar"]["device"]["current"] == -1);
    CHECK(zoomed.layout["timeline"]["t0"] == 20'000'000);
    CHECK(zoomed.layout["timeline"]["t1"] == 120'000'000);
    // As --device -1 draws it.
    Shot flag = shoot(db.path, "--size 1400x700 --device -1");
    REQUIRE(flag.rc == 0);
    CHECK(flag.layout["timeline"]["memory_strip"]["peak_bytes"] ==
          picked.layout["timeline"]["memory_strip"]["peak_bytes"]);
    CHECK(flag.layout["timeline"]["memory_strip"]["title"] == picked.layout["timeline"]["memory_strip"]["title"]);
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
        for (double xpos = mem["bands"]["x0"].get<double>() + 2; xpos < mem["bands"]["x1"].get<double>() - 2;
             xpos += 3) {
            const uint32_t px = shot.img.at(xpos, y);
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

TEST_CASE("memory view with a run that ends after the recording: no bands past the recording's end") {
    // The known trace (0..1 ms; "weights" 400 MiB never freed) and a run whose kernels after the
    // first are 1 ms later, so that it ends near 1.9 ms and the view spans it. The bands are the
    // recording's: "weights" ran on at the bottom of the plot to the run's end, where nothing was
    // recorded (a generated GPT-2's optimizer state drew 2 GiB out to 830 ms of a 128 ms trace).
    fixture::TempPath db("late-run.db");
    fixture::write_known_trace(db.path, false);
    mhc::trace::Run run;
    run.name = "lru@1GiB";
    run.config = {{"policy", "lru"}, {"capacity_bytes", std::to_string(1024 * MiB)}};
    run.kernel_times.push_back({1, 100 * us, 300 * us});
    run.kernel_times.push_back({2, 1500 * us, 1700 * us});
    for (int i = 0; i < 200; ++i) run.kernel_times.push_back({3 + i, 1800 * us + i * 500, 1800 * us + i * 500 + 100});
    run.memory = {{0, 400 * MiB, 0}, {1500 * us, 1000 * MiB, 0}, {1700 * us, 400 * MiB, 0}};
    mhc::trace::add_run(db.path, run);
    Shot shot = shoot(db.path, "--view memory --run 1 --size 1400x800");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& mem = shot.layout["memory"];
    REQUIRE(mem["t1"].get<double>() > 1800 * us);   // the view reaches the run's end
    const auto& bands = mem["bands"];
    const double bottom = bands["y1"].get<double>() - 3;   // inside the bottom band ("weights")
    const uint32_t background = shot.img.at(bands["x1"].get<double>() - 2, bands["y0"].get<double>() + 2);
    CHECK(!near(shot.img.at(x_at(bands, mem, 200 * us), bottom), background, 6));   // recorded: weights drawn
    CHECK(near(shot.img.at(x_at(bands, mem, 1200 * us), bottom), background, 6));   // past the recording: empty
    CHECK(near(shot.img.at(x_at(bands, mem, 1800 * us), bottom), background, 6));
    // The legend says the bands are the recording's, not the run'shot.
    std::string head;
    for (const auto& entry : mem["legend"])
        if (entry["text"].get<std::string>().find(", at the peak (") != std::string::npos) head = entry["text"];
    CHECK(head.rfind("recorded, by ", 0) == 0);
}

TEST_CASE("memory screenshot: the live bytes in private pools drawn over the live curve, and named") {
    // fixtures.hpp's pools trace: 384 MiB of its allocations lie in private pool (0, 1) at 350 us,
    // 1472 MiB live in all then. Nothing in the window said which memory a CUDA graph's or a
    // MemPool's pool held (slime's Megatron snapshot: 31.98 of its 33.75 GiB).
    fixture::TempPath db("pools.db");
    fixture::write_pools_trace(db.path);
    Shot shot = shoot(db.path, "--view memory --size 1400x800");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& mem = shot.layout["memory"];
    bool named = false;
    for (const auto& entry : mem["legend"]) named |= entry["text"] == "live in private pools (1 pool, peak 384.00 MiB)";
    CHECK(named);
    auto pink_near = [&](int64_t when, double bytes) { return line_near(shot, mem, when, bytes, rgb(255, 105, 180)); };
    CHECK(pink_near(350 * us, 384.0 * MiB));
    CHECK(pink_near(500 * us, 256.0 * MiB));
    CHECK(!pink_near(500 * us, 384.0 * MiB));
}

TEST_CASE("memory screenshot: the reserved bytes by pool, where the trace has private pools") {
    // fixtures.hpp's pools trace: the default pool reserves 2 GiB throughout, private pool 1 512 MiB
    // from 100 us (its one segment). At 700 us the pool's line runs at 512 MiB (over the 1088 MiB of
    // live bytes' fill) and the default pool's at 2 GiB; both are named with their peaks. Before,
    // the reserved bytes of all pools were one violet line (2.5 GiB) and no line said what the
    // private pool held.
    fixture::TempPath db("pools.db");
    fixture::write_pools_trace(db.path);
    Shot shot = shoot(db.path, "--view memory --size 1400x800");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& mem = shot.layout["memory"];
    std::set<std::string> names;
    for (const auto& entry : mem["legend"]) names.insert(entry["text"].get<std::string>());
    INFO(mem["legend"].dump());
    CHECK(names.count("reserved by pool:") == 1);
    // Each pool named by what the snapshot says it is and what its allocations were made at (they read
    // "default", "pool 1").
    CHECK(names.count("default pool (peak 2.00 GiB)") == 1);
    CHECK(names.count("MemPool (0, 1): model.py:41 forward (peak 512.00 MiB)") == 1);
    // The legend's rows end above the plot; its entries lie inside the window.
    const auto& rect = mem["curve"];
    for (const auto& entry : mem["legend"]) {
        if (entry["y1"].get<double>() > rect["y1"].get<double>()) continue;   // the bands' legend
        CHECK(entry["y1"].get<double>() <= rect["y0"].get<double>() + 1);
        CHECK(entry["x1"].get<double>() <= shot.img.w);
    }
    CHECK(line_near(shot, mem, 700 * us, 512.0 * MiB, rgb(110, 225, 235)));
    CHECK(line_near(shot, mem, 700 * us, 2048.0 * MiB, rgb(100, 220, 120)));
    CHECK(!line_near(shot, mem, 50 * us, 512.0 * MiB, rgb(110, 225, 235)));   // the pool's segment came at 100 us
}

TEST_CASE("memory screenshot: a CUDA graph's pool and a MemPool named, their legend entries say what they are") {
    // fixtures.hpp's pools trace with a second private pool, a CUDA graph's (1, 0) holding 256 MiB from
    // 150 us for allocation 4 (optim.py:88 step). Its legend entry names it and hovering it says what
    // such a pool is, as PyTorch's MempoolId_t says (a graph's (n, 0), a MemPool's (0, n)). Before,
    // the entries read "pool 1", "pool 2" with nothing on hover.
    fixture::TempPath db("two_pools.db");
    fixture::write_pools_trace(db.path, true);
    Shot shot = shoot(db.path, "--view memory --size 1600x800");
    INFO(shot.err);
    REQUIRE(shot.rc == 0);
    const auto& mem = shot.layout["memory"];
    INFO(mem["legend"].dump());
    const nlohmann::json* graph = nullptr;
    for (const auto& entry : mem["legend"])
        if (entry["text"] == "CUDA graph pool (1, 0): optim.py:88 step (peak 256.00 MiB)") graph = &entry;
    REQUIRE(graph);
    // Its line: 256 MiB from 150 us, yellow (the second pool's colour).
    CHECK(line_near(shot, mem, 700 * us, 256.0 * MiB, rgb(250, 225, 110)));
    CHECK(!line_near(shot, mem, 100 * us, 256.0 * MiB, rgb(250, 225, 110)));
    // Hovering the entry gives its tooltip.
    const int hx = static_cast<int>(((*graph)["x0"].get<double>() + (*graph)["x1"].get<double>()) / 2);
    const int hy = static_cast<int>(((*graph)["y0"].get<double>() + (*graph)["y1"].get<double>()) / 2);
    Shot hovered = shoot(db.path,
                         "--view memory --size 1600x800 --hover " + std::to_string(hx) + "," + std::to_string(hy));
    REQUIRE(hovered.rc == 0);
    std::string tip;
    for (const auto& entry : hovered.layout["memory"]["legend"])
        if (entry.contains("tip")) tip = entry["tip"].get<std::string>();
    INFO(tip);
    CHECK(tip.rfind("CUDA graph pool (1, 0): a CUDA graph's private pool", 0) == 0);
    CHECK(tip.find("100% of its allocated bytes were allocated at optim.py:88 step") != std::string::npos);
    // Narrower, the smaller pool (the graph's, 256 MiB) gives up what it holds first, then the MemPool
    // (512 MiB), then the entries take two rows; every entry is drawn, inside the window, above the plot.
    for (const auto& [width, graph_text, mempool_text] : std::vector<std::tuple<int, std::string, std::string>>{
             {1300, "CUDA graph pool (1, 0) (peak 256.00 MiB)",
              "MemPool (0, 1): model.py:41 forward (peak 512.00 MiB)"},
             {900, "CUDA graph pool (1, 0) (peak 256.00 MiB)", "MemPool (0, 1) (peak 512.00 MiB)"}}) {
        Shot narrow = shoot(db.path, "--view memory --size " + std::to_string(width) + "x700");
        REQUIRE(narrow.rc == 0);
        std::set<std::string> texts;
        for (const auto& entry : narrow.layout["memory"]["legend"]) {
            texts.insert(entry["text"].get<std::string>());
            CHECK(entry["x1"].get<double>() <= width);
            if (entry["y1"].get<double>() < narrow.layout["memory"]["curve"]["y1"].get<double>())
                CHECK(entry["y1"].get<double>() <= narrow.layout["memory"]["curve"]["y0"].get<double>() + 1);
        }
        std::string all;
        for (const auto& text : texts) all += text + " | ";
        INFO(width << ": " << all);
        CHECK(texts.count(graph_text) == 1);
        CHECK(texts.count(mempool_text) == 1);
    }
}

TEST_CASE("a run's device bytes are drawn from its first sample: no 0 B curve before it") {
    // The known trace (0..1 ms) and a run that stored its first sample at 500 us (as a snapshot's run
    // at 30% does after moving what was allocated before recording, 50.6 ms in): before it the run's
    // device bytes are not known. They were drawn as 0 B, a line along the plot's floor that read as
    // an empty device while the run held 2 GiB and more.
    fixture::TempPath db("late-sample.db");
    fixture::write_known_trace(db.path, false);
    mhc::trace::Run run;
    run.name = "lru@1GiB";
    run.config = {{"policy", "lru"}, {"capacity_bytes", std::to_string(1024 * MiB)}};
    run.memory = {{500 * us, 600 * MiB, 0}, {800 * us, 300 * MiB, 0}};
    mhc::trace::add_run(db.path, run);
    for (const char* view : {"timeline", "memory"}) {
        INFO(view);
        Shot shot = shoot(db.path, std::string("--view ") + view + " --run 1 --size 1400x800");
        INFO(shot.err);
        REQUIRE(shot.rc == 0);
        const bool memory = std::string(view) == "memory";
        const auto& where = memory ? shot.layout["memory"] : shot.layout["timeline"]["memory_strip"];
        const auto& rect = memory ? where["curve"] : where["rect"];
        const auto& range = memory ? shot.layout["memory"] : shot.layout["timeline"];
        const double floor_y = rect["y1"].get<double>() - 1;
        // The fill's line at the floor (0 B, drawn 1.5 px from the plot's bottom edge down) before
        // 500 us is gone; after it the run's fill is drawn.
        for (double dy : {0.0, 1.0})
            CHECK(!near(shot.img.at(x_at(rect, range, 250 * us), rect["y1"].get<double>() + dy), mhc::viewer::kCurve,
                        30));
        CHECK(near(shot.img.at(x_at(rect, range, 600 * us), floor_y - 3),
                   shot.img.at(x_at(rect, range, 650 * us), floor_y - 3)));
        if (memory) {
            REQUIRE(where["before_first_sample"].is_object());
            CHECK(where["before_first_sample"]["text"] == "no device bytes stored before 500 us");
        }
    }
}
