// Memory view: the live-bytes curve (the selected run's device bytes, or the recorded live
// bytes) with the capacity line, the recorded reserved bytes (segments, when the trace has them:
// reserved vs allocated as memory_viz's segment view) with the caching model's reserved bytes for
// the same allocations, and memory_viz-style active-memory bands of the allocations.
#include <algorithm>

#include "mhc/common/units.hpp"
#include "mhc/viewer/axis.hpp"
#include "mhc/viewer/band_colors.hpp"
#include "mhc/viewer/colors.hpp"
#include "mhc/sim/allocator_compare.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/store.hpp"
#include "widgets.hpp"

namespace mhc::viewer {

namespace {

// The reserved-memory curves of a trace with a segments table (docs/trace-format.md), built once
// per opened trace from one read of its segments through the Reader:
// - recorded: the segments' bytes over time, all devices as the live curve;
// - model: the caching allocator model's reserved bytes for the same allocations (`mhc
//   allocator`'s replay: warm start from the recorded segments, the recorded settings;
//   docs/simulator.md "Comparing with a recording"), on the device with the largest recorded
//   reserved peak (it loads the trace's allocations; snapshot imports are small).
// Either is empty when it cannot be made; the view then shows what it showed before.
struct Reserved {
    Curve recorded, model;
    int32_t model_device = 0;
};
const Reserved& reserved_curves(const ViewTrace& tr) {
    static const trace::Reader* key = nullptr;
    static Reserved r;
    if (key == tr.reader.get()) return r;
    key = tr.reader.get();
    r = Reserved{};
    if (!tr.reader) return r;
    std::vector<trace::Segment> segs;
    try {
        tr.reader->for_each([&](const trace::Segment& s) { segs.push_back(s); });
    } catch (const std::exception&) {
        return r;
    }
    if (segs.empty()) return r;
    std::vector<int64_t> t_alloc, t_free, bytes;
    for (const auto& s : segs) {
        t_alloc.push_back(s.t_alloc);
        t_free.push_back(s.t_free);
        bytes.push_back(s.bytes);
    }
    r.recorded = Curve::from_intervals(t_alloc, t_free, bytes);
    try {
        const sim::AllocatorComparison c = sim::compare_allocator(trace::load_trace(tr.path), segs, -1, "");
        r.model.assign(c.sample_times, std::vector<double>(c.model_reserved.begin(), c.model_reserved.end()));
        r.model_device = c.device;
    } catch (const std::exception&) {
        r.model = Curve{};
    }
    return r;
}
constexpr ImU32 kReserved = IM_COL32(190, 120, 230, 255);
constexpr ImU32 kModelReserved = IM_COL32(240, 170, 60, 255);

// Bands drawn individually; the layout costs O(bands x width) per frame (about 3 ms at 1600 px).
constexpr size_t kMaxBands = 1024;

void band_tooltip(App& app, int64_t idx) {
    const AllocationTable& a = app.trace->allocations;
    auto i = static_cast<size_t>(idx);
    static int64_t cached_id = -1, cached_count = 0;
    if (cached_id != a.id[i]) { cached_id = a.id[i]; cached_count = access_count_of(*app.trace, a.id[i]); }
    ImGui::BeginTooltip();
    ImGui::Text("%s", app.trace->str(a.label[i]).empty() ? "(no label)" : app.trace->str(a.label[i]).c_str());
    ImGui::Text("allocation #%lld, %s, %s", static_cast<long long>(a.id[i]), format_bytes(a.bytes[i]).c_str(),
                std::string(trace::to_string(a.category[i])).c_str());
    std::string end = a.t_free[i] == trace::kNoTime ? std::string("end of trace") : format_time(a.t_free[i], 1);
    ImGui::Text("alive %s .. %s (%s)", format_time(a.t_alloc[i], 1).c_str(), end.c_str(),
                format_duration(a.end_or(i, app.trace->t_end) - a.t_alloc[i]).c_str());
    ImGui::Text("%lld accesses", static_cast<long long>(cached_count));
    ImGui::TextDisabled("click: highlight the kernels that touched it");
    ImGui::EndTooltip();
}

// Swatch + text entries left to right from `p`; each entry's rectangle goes to `out`.
float legend_row(ImDrawList* dl, ImVec2 p, float x_max, const std::vector<LegendEntry>& entries, nlohmann::json& out) {
    float x = p.x;
    for (const LegendEntry& e : entries) {
        float w = ImGui::CalcTextSize(e.text.c_str()).x + (e.color ? 16.f : 0.f);
        if (x + w > x_max) break;
        float tx = x;
        if (e.color) {
            dl->AddRectFilled({x, p.y + 3}, {x + 11, p.y + 14}, e.color);
            tx += 16;
        }
        dl->AddText({tx, p.y}, IM_COL32(200, 200, 205, 255), e.text.c_str());
        out.push_back({{"text", e.text}, {"color", e.color}, {"x0", x}, {"y0", p.y}, {"x1", x + w},
                       {"y1", p.y + ImGui::GetFontSize()}});
        x += w + 14;
    }
    return x;
}

}  // namespace

void draw_memory(App& app) {
    toolbar(app);
    // Colour of the bands: by category, or for imported traces (no categories) by the
    // allocation's source frame or size class; chosen for the trace unless the user picks.
    if (app.band_coloring_auto < 0) app.band_coloring_auto = static_cast<int>(choose_band_coloring(*app.trace));
    const auto auto_coloring = static_cast<BandColoring>(app.band_coloring_auto);
    const BandColoring coloring = app.band_coloring < 0 ? auto_coloring : static_cast<BandColoring>(app.band_coloring);
    same_line_if_fits(ImGui::CalcTextSize("band colour").x + 200, 24);
    ImGui::TextUnformatted("band colour");   // the label before its field, as in the toolbar
    ImGui::SameLine();
    ImGui::SetNextItemWidth(190);
    if (ImGui::BeginCombo("##band colour", coloring_name(coloring))) {
        for (BandColoring c : {BandColoring::Category, BandColoring::Label, BandColoring::SizeClass}) {
            std::string s = std::string(coloring_name(c)) + (c == auto_coloring ? " (this trace)" : "");
            if (ImGui::Selectable(s.c_str(), c == coloring)) app.band_coloring = static_cast<int>(c);
        }
        ImGui::EndCombo();
    }
    const ViewRun* run = app.selected_run();
    const bool run_curve = run && !run->memory.empty();
    const Curve& curve = run_curve ? run->memory : app.trace->live;

    ImVec2 avail = ImGui::GetContentRegionAvail();
    ImVec2 origin = ImGui::GetCursorScreenPos();
    float plot_x = origin.x + kLabelWidth, plot_w = std::max(avail.x - kLabelWidth - 10, 10.f);
    int W = static_cast<int>(plot_w);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    draw_time_axis(dl, {plot_x, origin.y}, plot_w, kAxisHeight, app.range, app.order_only());

    // Upper plot: the curve, under its legend row (legends sit over the plots, right of the
    // byte labels, never in the label column where the byte labels are).
    const float legend_h = 18.f;
    float top_h = std::max((avail.y - kAxisHeight) * 0.42f, 60.f);
    ImVec2 c0{plot_x, origin.y + kAxisHeight + 4 + legend_h}, c1{plot_x + plot_w, origin.y + kAxisHeight + top_h};
    dl->AddRectFilled(c0, c1, IM_COL32(36, 36, 42, 255));
    static CurveColumns cols, rec;
    prepare_curve(curve, app.range, W, cols);
    double y_max = std::max(cols.y_max, 1.0);
    if (run_curve) {
        prepare_curve(app.trace->live, app.range, W, rec);
        y_max = std::max(y_max, rec.y_max);
    }
    if (run && run->capacity > 0) y_max = std::max(y_max, static_cast<double>(run->capacity));
    const Reserved& curves = reserved_curves(*app.trace);
    const Curve& reserved = curves.recorded;
    static CurveColumns res;
    if (!reserved.empty()) {
        prepare_curve(reserved, app.range, W, res);
        y_max = std::max(y_max, res.y_max);
    }
    const Curve& model = curves.model;
    static CurveColumns mres;
    if (!model.empty()) {
        prepare_curve(model, app.range, W, mres);
        y_max = std::max(y_max, mres.y_max);
    }
    y_max *= 1.08;
    nlohmann::json axis_labels = nlohmann::json::array(), legend = nlohmann::json::array();
    draw_bytes_axis(dl, c0, c1, y_max, &axis_labels);
    size_t rec_end = columns_before(app.range, W, app.trace->t_end);
    if (!reserved.empty()) draw_curve(dl, res, c0, c1, y_max, kReserved, false, rec_end);
    if (!model.empty()) draw_curve(dl, mres, c0, c1, y_max, kModelReserved, false, rec_end);
    if (run_curve) draw_curve(dl, rec, c0, c1, y_max, IM_COL32(150, 150, 160, 255), false, rec_end);
    draw_curve(dl, cols, c0, c1, y_max, kCurve, true, columns_before(app.range, W, run_curve ? run->t_end : app.trace->t_end));
    if (run && run->capacity > 0) {
        std::string s = "capacity " + format_bytes(run->capacity);
        draw_hline(dl, c0, c1, static_cast<double>(run->capacity), y_max, kCapacity, s.c_str());
    }
    if (cols.peak_col >= 0) {
        float px = c0.x + static_cast<float>(cols.peak_col);
        float py = c1.y - static_cast<float>(cols.y_max / y_max) * (c1.y - c0.y);
        dl->AddCircleFilled({px, py}, 4, IM_COL32(255, 255, 255, 255));
        std::string s = "peak " + format_bytes(static_cast<int64_t>(cols.y_max));
        float tx = std::min(px + 6, c1.x - ImGui::CalcTextSize(s.c_str()).x);
        dl->AddText({tx, std::max(py - 16, c0.y + 2)}, IM_COL32(255, 255, 255, 255), s.c_str());
    }
    {
        std::vector<LegendEntry> e{{kCurve, run_curve ? run->label() + ": device bytes" : std::string("recorded live bytes")}};
        if (run_curve) e.push_back({IM_COL32(150, 150, 160, 255), "recorded live bytes"});
        if (!reserved.empty()) e.push_back({kReserved, "recorded reserved (segments)"});
        if (!model.empty())
            e.push_back({kModelReserved, "model reserved (caching allocator, device " + std::to_string(curves.model_device) + ")"});
        if (run && run->capacity > 0) e.push_back({kCapacity, "capacity"});
        legend_row(dl, {c0.x, c0.y - legend_h}, c1.x, e, legend);
    }

    // Lower plot: the bands.
    ImVec2 b0{plot_x, c1.y + 8 + legend_h}, b1{plot_x + plot_w, origin.y + avail.y - 4};
    dl->AddRectFilled(b0, b1, IM_COL32(36, 36, 42, 255));
    static BandLayout bands;
    int bh = static_cast<int>(b1.y - b0.y);
    layout_bands(app.trace->allocations, app.trace->live, app.range, W, bh, kMaxBands, bands);
    double by_max = bands.y_max * 1.05;
    auto y_of = [&](double v) { return b1.y - static_cast<float>(v / by_max) * (b1.y - b0.y); };
    draw_bytes_axis(dl, b0, b1, by_max, &axis_labels);
    for (const BandSegment& s : bands.segments) {
        uint32_t i = bands.bands[s.band];
        uint32_t c = band_color(*app.trace, i, coloring);
        if (app.trace->allocations.id[i] == app.highlight_alloc) c = kHighlight;
        dl->AddRectFilled({b0.x + s.x0, y_of(s.y1)}, {b0.x + s.x1, y_of(s.y0)}, c);
        // A darker line at the top edge separates neighbouring bands of one category.
        dl->AddLine({b0.x + s.x0, y_of(s.y1)}, {b0.x + s.x1, y_of(s.y1)}, IM_COL32(20, 20, 25, 160));
    }
    for (size_t x = 0; x < bands.total.size(); ++x)
        if (bands.total[x] > bands.drawn_top[x])
            dl->AddRectFilled({b0.x + x, y_of(bands.total[x])}, {b0.x + x + 1, y_of(bands.drawn_top[x])}, kSummary);
    // Legend: what the colours are, then the summary band.
    {
        std::vector<LegendEntry> e{{0, std::string("active memory by ") + coloring_name(coloring) + ":"}};
        for (LegendEntry& x : band_legend(*app.trace, bands, coloring)) e.push_back(std::move(x));
        e.push_back({kSummary, std::to_string(bands.summarised) + " summarised"});
        legend_row(dl, {b0.x, b0.y - legend_h}, b1.x, e, legend);
    }

    ImGui::Dummy(avail);
    bool hovered = navigate(app, {plot_x, c0.y}, {plot_x + plot_w, b1.y});
    draw_selection(app, dl, {plot_x, c0.y}, {plot_x + plot_w, b1.y});
    ImVec2 m = ImGui::GetIO().MousePos;
    if (hovered && m.y >= b0.y && m.y < b1.y) {
        int x = static_cast<int>(m.x - b0.x);
        double v = (b1.y - m.y) / (b1.y - b0.y) * by_max;
        int64_t hit = bands.hit(x, v);
        if (hit >= 0) {
            band_tooltip(app, hit);
            if (ImGui::IsMouseReleased(ImGuiMouseButton_Left) && ImGui::GetIO().MouseDragMaxDistanceSqr[0] < 9)
                app.select_allocation(app.trace->allocations.id[static_cast<size_t>(hit)]);
        } else if (hit == -1) {
            ImGui::SetTooltip("%zu smaller allocations, summarised\n%s live in all", bands.summarised,
                              format_bytes(static_cast<int64_t>(bands.total[static_cast<size_t>(x)])).c_str());
        }
    } else if (hovered && m.y >= c0.y && m.y < c1.y) {
        int64_t t = app.range.t_of(m.x - plot_x, plot_w);
        ImGui::SetTooltip("%s: %s", format_time(t, 1).c_str(), format_bytes(static_cast<int64_t>(curve.value_at(t))).c_str());
    }
    app.layout["memory"] = {{"curve", rect_json(c0, c1)}, {"bands", rect_json(b0, b1)},
                            {"t0", app.range.t0}, {"t1", app.range.t1}, {"y_max", y_max}, {"band_y_max", by_max},
                            {"peak_col", cols.peak_col}, {"peak_bytes", cols.y_max},
                            {"bands_drawn", bands.bands.size()}, {"segments", bands.segments.size()},
                            {"coloring", coloring_name(coloring)}, {"legend", legend}, {"axis_labels", axis_labels}};
}

}  // namespace mhc::viewer
