// Memory view: the live-bytes curve (the selected run's device bytes, or the recorded live
// bytes) with the capacity line, the recorded reserved bytes (segments, when the trace has them:
// reserved vs allocated as memory_viz's segment view) with the caching model's reserved bytes for
// the same allocations, and memory_viz-style active-memory bands of the allocations.
#include <algorithm>
#include <memory>

#include "mhc/common/units.hpp"
#include "mhc/viewer/axis.hpp"
#include "mhc/viewer/band_colors.hpp"
#include "mhc/viewer/colors.hpp"
#include "mhc/viewer/stats.hpp"
#include "mhc/trace/columns.hpp"
#include "widgets.hpp"

namespace mhc::viewer {

namespace {

constexpr ImU32 kReserved = IM_COL32(190, 120, 230, 255);
constexpr ImU32 kModelReserved = IM_COL32(240, 170, 60, 255);
constexpr ImU32 kPoolLive = IM_COL32(255, 105, 180, 255);   // live bytes in private pools
constexpr ImU32 kMessage = IM_COL32(255, 200, 120, 255);
// Reserved by pool, where the device has private pools: the default pool's, then each private
// pool's (ReservedCurves::kPoolLines and the rest summed).
constexpr ImU32 kDefaultPoolReserved = IM_COL32(100, 220, 120, 255);
constexpr ImU32 kPoolReserved[] = {IM_COL32(110, 225, 235, 255), IM_COL32(250, 225, 110, 255),
                                   IM_COL32(255, 150, 110, 255), IM_COL32(200, 200, 200, 255),
                                   IM_COL32(240, 240, 240, 255)};

// Bands drawn individually; the layout costs O(bands x width) per frame (about 3 ms at 1600 px).
constexpr size_t kMaxBands = 1024;
constexpr float kLegendRow = 17.f;
constexpr float kBandEdgeMinPx = 5.f;   // a band's dark top edge only from this height

}  // namespace

struct MemoryUi {
    CurveColumns cols, rec, res, mres, pool, default_pool;
    std::vector<CurveColumns> pool_reserved;   // one per ReservedCurves::pool_reserved entry
    BandLayout bands;
    int64_t tooltip_id = -1, tooltip_count = 0;   // access count of the hovered band, queried once
};

namespace {

void band_tooltip(App& app, MemoryUi& ui, int64_t idx) {
    const AllocationTable& a = app.trace->allocations;
    auto i = static_cast<size_t>(idx);
    if (ui.tooltip_id != a.id[i]) { ui.tooltip_id = a.id[i]; ui.tooltip_count = access_count_of(*app.trace, a.id[i]); }
    ImGui::BeginTooltip();
    ImGui::Text("%s", app.trace->str(a.label[i]).empty() ? "(no label)" : app.trace->str(a.label[i]).c_str());
    ImGui::Text("allocation #%lld, %s, %s", static_cast<long long>(a.id[i]), format_bytes(a.bytes[i]).c_str(),
                std::string(trace::to_string(a.category[i])).c_str());
    const TimeText times = app.times();
    std::string end = a.t_free[i] == trace::kNoTime ? std::string("end of trace") : times.at(a.t_free[i]);
    ImGui::Text("alive %s .. %s (%s)", times.at(a.t_alloc[i]).c_str(), end.c_str(),
                times.span(a.end_or(i, app.trace->t_end) - a.t_alloc[i]).c_str());
    ImGui::Text("%lld accesses", static_cast<long long>(ui.tooltip_count));
    ImGui::TextDisabled("click: its details, and the kernels that touched it highlighted on the timeline");
    ImGui::EndTooltip();
}

// Swatch + text entries left to right from `p`, on up to `rows` rows; each entry's rectangle
// goes to `out`. Entries that do not fit are left out.
void legend_row(ImDrawList* dl, ImVec2 p, float x_max, const std::vector<LegendEntry>& entries, nlohmann::json& out,
                int rows = 1) {
    float x = p.x, y = p.y;
    int row = 1;
    for (const LegendEntry& e : entries) {
        float w = ImGui::CalcTextSize(e.text.c_str()).x + (e.color ? 16.f : 0.f);
        if (x + w > x_max) {
            if (row == rows) break;
            ++row;
            x = p.x + 12;
            y += kLegendRow;
        }
        float tx = x;
        if (e.color) {
            dl->AddRectFilled({x, y + 3}, {x + 11, y + 14}, e.color);
            tx += 16;
        }
        dl->AddText({tx, y}, IM_COL32(200, 200, 205, 255), e.text.c_str());
        out.push_back({{"text", e.text}, {"color", e.color}, {"x0", x}, {"y0", y}, {"x1", x + w},
                       {"y1", y + ImGui::GetFontSize()}});
        if (!e.tip.empty() && ImGui::IsMouseHoveringRect({x, y}, {x + w, y + ImGui::GetFontSize()})) {
            ImGui::BeginTooltip();
            ImGui::PushTextWrapPos(ImGui::GetFontSize() * 40);
            ImGui::TextUnformatted(e.tip.c_str());
            ImGui::PopTextWrapPos();
            ImGui::EndTooltip();
            out.back()["tip"] = e.tip;
        }
        x += w + 14;
    }
}

// The legend of the reserved bytes by pool: each pool by its name and what most of its bytes were
// allocated at (the label's function, "MemPool (0, 2): _allocate_kv_cache (peak 20.30 GiB)"); where
// that does not fit in `width`, the smallest pools by their name alone first. The whole of it in the
// entry's tooltip. `rows`: 1, or 2 when even the names alone do not fit on one.
std::vector<LegendEntry> pool_legend(const ReservedCurves& curves, float width, int& rows) {
    auto peak = [](const Curve& curve) { return " (peak " + format_bytes(static_cast<int64_t>(curve.peak())) + ")"; };
    const auto& pools = curves.pool_reserved;
    std::vector<bool> with_holds(pools.size());
    for (size_t k = 0; k < pools.size(); ++k) with_holds[k] = !pools[k].holds.empty();
    auto entries_of = [&] {
        std::vector<LegendEntry> entries{
            {0, "reserved by pool:"},
            {kDefaultPoolReserved, curves.default_name + peak(curves.default_reserved), curves.default_detail}};
        for (size_t k = 0; k < pools.size(); ++k) {
            const std::string holds = pools[k].holds.substr(0,
                                                            pools[k].holds.find(" ("));   // the function, not its file
            entries.emplace_back(kPoolReserved[std::min<size_t>(k, 4)],
                                 pools[k].name + (with_holds[k] ? ": " + holds : "") + peak(pools[k].reserved),
                                 pools[k].detail);
        }
        return entries;
    };
    auto fits = [&](const std::vector<LegendEntry>& entries) {
        float total = 0;
        for (const LegendEntry& entry : entries)
            total += ImGui::CalcTextSize(entry.text.c_str()).x + (entry.color ? 16.f : 0.f) + 14;
        return total <= width;
    };
    std::vector<size_t> smallest_first(pools.size());
    for (size_t k = 0; k < pools.size(); ++k) smallest_first[k] = k;
    std::stable_sort(smallest_first.begin(), smallest_first.end(), [&](size_t one, size_t other) {
        return pools[one].reserved.peak() < pools[other].reserved.peak();
    });
    std::vector<LegendEntry> entries = entries_of();
    for (size_t pool : smallest_first) {
        if (fits(entries)) break;
        with_holds[pool] = false;
        entries = entries_of();
    }
    rows = fits(entries) ? 1 : 2;
    return entries;
}

// One line of text over a plot, on a dark backing so that it reads over the curves, cut at
// `x_max` (the full text is in the layout JSON).
void message_line(ImDrawList* dl, ImVec2 p, float x_max, const std::string& text) {
    ImVec2 size = ImGui::CalcTextSize(text.c_str());
    dl->AddRectFilled({p.x - 3, p.y - 1}, {std::min(p.x + size.x + 3, x_max), p.y + size.y + 1}, IM_COL32(20, 20, 24, 230));
    dl->PushClipRect({p.x - 3, p.y - 1}, {x_max, p.y + size.y + 1}, true);
    dl->AddText(p, kMessage, text.c_str());
    dl->PopClipRect();
}

}  // namespace

namespace {

// What one frame of the view shows and where, shared by its parts: chosen first (the run, the
// curve), placed (the two plots), then filled in as each part draws (for hovering and the layout).
struct MemoryFrame {
    const ViewRun* run = nullptr;   // the selected run; null with none, or one of another device
    std::string device_note;        // why a selected run's memory is not shown
    bool run_curve = false;         // the upper curve is the run's device bytes ...
    const Curve* curve = nullptr;   // ... else the recorded live bytes
    ImDrawList* dl = nullptr;
    ImVec2 avail;   // the view less the details pane
    float details_h = 0, plot_x = 0, plot_w = 0;
    int W = 0;                          // the plots' width in columns (pixels)
    ImVec2 c0, c1, b0, b1;              // the upper plot (curves) and the lower one (bands)
    size_t rec_end = 0, cols_end = 0;   // columns with a recording, with the curve
    bool reserved = false;              // the recorded reserved bytes are drawn
    ByteRange y_range;
    double by_max = 0;                // the bands' axis
    const BandKeys* keys = nullptr;   // the bands' colouring
    std::string message, bands_message;
    nlohmann::json axis_labels = nlohmann::json::array(), legend = nlohmann::json::array(), unknown, peak_label;
};

// Colour of the bands: by category, or for imported traces (no categories) by the allocation's
// source frame or size class; chosen for the trace unless the user picks (the toolbar's options).
void band_colour_options(App& app, BandColoring coloring, BandColoring auto_coloring) {
    toolbar(app, [&](nlohmann::json& jt) {
        ImGui::Separator();
        ImGui::TextDisabled("band colour");
        nlohmann::json choices = nlohmann::json::array();
        for (BandColoring choice : {BandColoring::Category, BandColoring::Label, BandColoring::SizeClass}) {
            const std::string text = std::string(coloring_name(choice)) +
                                     (choice == auto_coloring ? " (this trace)" : "");
            if (ImGui::RadioButton(text.c_str(), choice == coloring)) app.band_coloring = static_cast<int>(choice);
            std::string stop = std::string("band_colour_") + coloring_name(choice);
            std::replace(stop.begin(), stop.end(), ' ', '_');
            tab_stop(app, stop);
            choices.push_back(rect_json(ImGui::GetItemRectMin(), ImGui::GetItemRectMax()));
            choices.back()["text"] = text;
        }
        jt["band_colour"] = choices;
    });
}

// The run and curve shown: a run of another device than the one shown gives the recording's
// memory, and a line saying why.
MemoryFrame choose_curve(App& app) {
    MemoryFrame frame;
    frame.run = app.selected_run();
    frame.device_note = frame.run ? run_device_note(frame.run->info, app.trace->memory_device) : std::string();
    if (!frame.device_note.empty()) frame.run = nullptr;
    frame.run_curve = frame.run && !frame.run->memory.empty();
    frame.curve = frame.run_curve ? &frame.run->memory : &app.trace->live;
    return frame;
}

// Nothing to plot: why, not an axis of 0 B. True when said.
bool said_nothing_to_plot(App& app, const MemoryFrame& frame) {
    if (app.trace->allocations.size() != 0 || frame.run_curve) return false;
    const std::string why = empty_table_text(*app.trace, StatsTable::Allocations, 0);
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("%s", why.c_str());   // the importer's reason can be longer than the window
    ImGui::PopStyleColor();
    app.layout["memory"] = {{"empty", why}};
    return true;
}

// The curves of the upper plot in columns, the message over it (what is not shown, and why) and
// its y range. The reserved curves come from a worker; until they arrive (or when they cannot be
// made) the plot shows the rest, and the message says which.
void prepare_curves(App& app, MemoryUi& ui, const Job<ReservedCurves>& job, const ReservedCurves& curves,
                    MemoryFrame& frame) {
    prepare_curve(*frame.curve, app.range, frame.W, ui.cols,
                  !frame.run_curve);   // the bands' column instants, when they share it
    frame.rec_end = columns_before(app.range, frame.W, app.trace->t_end);
    frame.cols_end = columns_before(app.range, frame.W, frame.run_curve ? frame.run->t_end : app.trace->t_end);
    std::vector<std::pair<const CurveColumns*, size_t>> drawn{{&ui.cols, frame.cols_end}};
    auto add = [&](const Curve& curve, CurveColumns& cols) {
        prepare_curve(curve, app.range, frame.W, cols);
        drawn.emplace_back(&cols, frame.rec_end);
    };
    if (frame.run_curve) add(app.trace->live, ui.rec);
    frame.message = !job.error().empty() ? "reserved memory not shown: " + job.error()
                    : !job.value() ? std::string("reading the segments and replaying the caching allocator model...")
                    : curves.model_error.empty() ? std::string()
                                                 : "model reserved not shown: " + curves.model_error;
    // Segments that hold less than the allocations at their peak do not hold them: not drawn, said.
    const std::string mismatch = reserved_mismatch(curves.recorded, app.trace->live);
    if (!mismatch.empty()) frame.message = frame.message.empty() ? mismatch : frame.message + "; " + mismatch;
    frame.reserved = mismatch.empty() && !curves.recorded.empty();
    if (frame.reserved) add(curves.recorded, ui.res);
    if (!curves.model.empty()) add(curves.model, ui.mres);
    // What of the live bytes lies in private pools (a CUDA graph's, a torch.cuda.MemPool's): their
    // blocks never serve the default pool's requests, which a user reading the curve alone misses.
    if (!curves.pool_error.empty())
        frame.message += (frame.message.empty() ? "" : "; ") + std::string("private pools not shown: ") +
                         curves.pool_error;
    if (!curves.pool_live.empty()) add(curves.pool_live, ui.pool);
    // Reserved by pool (a private pool's blocks serve only its own requests: what each holds is
    // what a user sizes a CUDA graph's or a MemPool's memory by).
    ui.pool_reserved.resize(curves.pool_reserved.size());
    if (!curves.pool_reserved.empty()) {
        add(curves.default_reserved, ui.default_pool);
        for (size_t pool = 0; pool < curves.pool_reserved.size(); ++pool)
            add(curves.pool_reserved[pool].reserved, ui.pool_reserved[pool]);
    }
    frame.y_range = plot_range(
        app, drawn, frame.run && frame.run->capacity > 0 ? static_cast<double>(frame.run->capacity) : 0, 0.08);
}

// Before a run's first sample the run stored none (it was moving what was allocated before
// recording), and 0 B there read as an empty device: left undrawn, and said.
void say_unstored_start(const MemoryFrame& frame, size_t cols_first, nlohmann::json& unknown) {
    const std::string when = frame.run->times.at(frame.curve->times().front(), 1000);
    const std::string text = "no device bytes stored before " + when;
    // The whole sentence, else shorter ones, where the gap is narrow (the whole in a tooltip).
    std::string shown;
    for (const std::string& each : {text, "none stored before " + when, std::string("not stored")})
        if (shown.empty() && ImGui::CalcTextSize(each.c_str()).x <= static_cast<float>(cols_first) - 8) shown = each;
    const ImVec2 at{frame.c0.x + 4, frame.c1.y - ImGui::GetFontSize() - 4};
    frame.dl->AddText(at, IM_COL32(150, 150, 160, 255), shown.c_str());
    unknown = {{"columns", cols_first}, {"text", text}, {"shown", shown}};
    if (ImGui::IsMouseHoveringRect({frame.c0.x, frame.c0.y},
                                   {frame.c0.x + static_cast<float>(cols_first), frame.c1.y}) &&
        ImGui::IsWindowHovered(ImGuiHoveredFlags_ChildWindows)) {
        ImGui::SetTooltip(
            "%s: the run's first sample of them is then, so the curve starts there\n(what the "
            "run did before it, its swaps and stalls, is in the timeline)",
            text.c_str());
        unknown["tooltip"] = true;
    }
}

// The peak's dot and its bytes, right of the dot, or left of it when it would leave the plot (it
// was pushed back over the dot: SGLang's peak at the right edge read "pea●k").
nlohmann::json draw_peak_label(const MemoryFrame& frame, const CurveColumns& cols) {
    const float px = frame.c0.x + static_cast<float>(cols.peak_col);
    const float py = frame.c1.y - static_cast<float>(frame.y_range.fraction(cols.y_max)) * (frame.c1.y - frame.c0.y);
    frame.dl->AddCircleFilled({px, py}, 4, IM_COL32(255, 255, 255, 255));
    const std::string text = "peak " + format_bytes(static_cast<int64_t>(cols.y_max));
    const float text_w = ImGui::CalcTextSize(text.c_str()).x;
    const float tx = px + 6 + text_w <= frame.c1.x ? px + 6 : std::max(px - 6 - text_w, frame.c0.x);
    const float ty = std::max(py - 16, frame.c0.y + 2);
    frame.dl->AddText({tx, ty}, IM_COL32(255, 255, 255, 255), text.c_str());
    nlohmann::json label = rect_json({tx, ty}, {tx + text_w, ty + ImGui::GetFontSize()});
    label["dot_x"] = px;
    return label;
}

// The upper plot's axis and curves, back to front, then the capacity line and the peak.
void draw_curves(App& app, MemoryUi& ui, const ReservedCurves& curves, MemoryFrame& frame) {
    draw_bytes_axis(frame.dl, frame.c0, frame.c1, frame.y_range, &frame.axis_labels);
    auto line = [&](const CurveColumns& cols, uint32_t color) {
        draw_curve(frame.dl, cols, frame.c0, frame.c1, frame.y_range, color, false, frame.rec_end);
    };
    if (frame.reserved) line(ui.res, kReserved);
    if (!curves.model.empty()) line(ui.mres, kModelReserved);
    if (frame.run_curve) line(ui.rec, kRecorded);
    const size_t cols_first = frame.run_curve ? columns_before_first_sample(*frame.curve, app.range, frame.W) : 0;
    draw_curve(frame.dl, ui.cols, frame.c0, frame.c1, frame.y_range, kCurve, true, frame.cols_end, cols_first);
    if (cols_first > 0) say_unstored_start(frame, cols_first, frame.unknown);
    // Over the live curve: a pool's allocations are most of it on CUDA-graph traces (slime's
    // Megatron snapshot: 31.98 of 33.75 GiB), where a line under it would be hidden.
    if (!curves.pool_live.empty()) line(ui.pool, kPoolLive);
    if (!curves.pool_reserved.empty()) {
        line(ui.default_pool, kDefaultPoolReserved);
        for (size_t pool = 0; pool < ui.pool_reserved.size(); ++pool)
            line(ui.pool_reserved[pool], kPoolReserved[std::min<size_t>(pool, 4)]);
    }
    if (frame.run && frame.run->capacity > 0) {
        const std::string text = "capacity " + format_bytes(frame.run->capacity);
        draw_hline(frame.dl, frame.c0, frame.c1, static_cast<double>(frame.run->capacity), frame.y_range, kCapacity,
                   text.c_str());
    }
    if (ui.cols.peak_col >= 0) frame.peak_label = draw_peak_label(frame, ui.cols);
}

// The upper plot's legend over it (right of the byte labels, never in their column), then the
// reserved bytes by pool on rows of their own, each pool named by what the snapshot says it is
// and by what most of its bytes were allocated at (they read "pool 1", "pool 2").
void curve_legend(App& app, const ReservedCurves& curves, const std::vector<LegendEntry>& pool_entries, int pool_rows,
                  float curve_legend_h, MemoryFrame& frame) {
    const std::string device = memory_device_text(*app.trace);
    const std::string recorded = "recorded live bytes" + (device.empty() ? "" : ", " + device);
    std::vector<LegendEntry> entries{{kCurve, frame.run_curve ? frame.run->label() + ": device bytes" : recorded}};
    if (frame.run_curve) entries.emplace_back(kRecorded, recorded);
    if (frame.reserved) entries.emplace_back(kReserved, "recorded reserved (segments)");
    if (!curves.model.empty())
        entries.emplace_back(kModelReserved,
                             "model reserved (caching allocator, device " + std::to_string(curves.model_device) + ")");
    if (!curves.pool_live.empty())
        entries.emplace_back(kPoolLive, "live in private pools (" + std::to_string(curves.pools) +
                                            (curves.pools == 1 ? " pool" : " pools") + ", peak " +
                                            format_bytes(static_cast<int64_t>(curves.pool_live.peak())) + ")");
    if (frame.run && frame.run->capacity > 0) entries.emplace_back(kCapacity, "capacity");
    if (!frame.device_note.empty()) entries.emplace_back(0, frame.device_note);
    legend_row(frame.dl, {frame.c0.x, frame.c0.y - curve_legend_h}, frame.c1.x, entries, frame.legend, 1);
    if (!pool_entries.empty())
        legend_row(frame.dl, {frame.c0.x + 12, frame.c0.y - curve_legend_h + kLegendRow}, frame.c1.x, pool_entries,
                   frame.legend, pool_rows);
}

// The lower plot: the allocations' bands stacked from 0 B, coloured by key (another colouring's
// keys come from a worker; the trace's own, chosen at load, until they arrive), the live bytes'
// spikes above the stack, and the legend: each key's bytes at the range's peak.
void draw_bands(App& app, MemoryUi& ui, BandColoring coloring, float legend_h, MemoryFrame& frame) {
    std::string keys_error;
    const BandKeys* picked = app.band_keys_for(coloring, keys_error);
    frame.keys = picked ? picked : app.trace->keys.get();
    const BandKeys& keys = *frame.keys;
    if (!keys_error.empty())
        frame.bands_message = "colouring by " + std::string(coloring_name(coloring)) + " failed: " + keys_error;
    else if (!picked) frame.bands_message = "colouring by " + std::string(coloring_name(coloring)) + "...";
    const AllocationTable& allocs = app.trace->allocations;
    BandLayout& bands = ui.bands;
    frame.dl->AddRectFilled(frame.b0, frame.b1, IM_COL32(36, 36, 42, 255));
    layout_bands(allocs, app.trace->live, &keys, app.range, frame.W, static_cast<int>(frame.b1.y - frame.b0.y),
                 kMaxBands, bands, kBandsPerColumn,
                 frame.run_curve ? nullptr : &ui.cols);   // the upper plot's columns, when it shows the same curve
    clip_bands(bands, frame.rec_end);   // a run that ends later widens the range: nothing was recorded past its end
    frame.by_max = bands.y_max * 1.05;
    const ImVec2 b0 = frame.b0, b1 = frame.b1;
    const double by_max = frame.by_max;
    auto y_of = [&](double v) { return b1.y - static_cast<float>(v / by_max) * (b1.y - b0.y); };
    draw_bytes_axis(frame.dl, b0, b1, ByteRange{0, by_max}, &frame.axis_labels);
    for (const SummarySegment& run : bands.summaries)
        frame.dl->AddRectFilled({b0.x + run.x0, y_of(run.y1)}, {b0.x + run.x1, y_of(run.y0)},
                                summary_color(keys, run.key));
    for (const BandSegment& seg : bands.segments) {
        const uint32_t row = bands.bands[seg.band];
        const uint32_t color = allocs.id[row] == app.highlight_alloc ? kHighlight : band_color(keys, allocs, row);
        frame.dl->AddRectFilled({b0.x + seg.x0, y_of(seg.y1)}, {b0.x + seg.x1, y_of(seg.y0)}, color);
        // A darker line at the top edge separates neighbouring bands of one key, on bands tall
        // enough to keep their colour under it: on bands of 1-3 px (hundreds of activations
        // stacked) the lines were most of the pixels and the stack read brown, not in its keys'
        // colours; there each band's own shade (band_color) tells them apart.
        if (y_of(seg.y0) - y_of(seg.y1) >= kBandEdgeMinPx)
            frame.dl->AddLine({b0.x + seg.x0, y_of(seg.y1)}, {b0.x + seg.x1, y_of(seg.y1)}, IM_COL32(20, 20, 25, 160));
    }
    if (!frame.bands_message.empty()) message_line(frame.dl, {b0.x + 6, b0.y + 4}, b1.x - 6, frame.bands_message);
    // The live bytes' maximum per column, where it rises above the stack (a spike inside a column).
    for (size_t col = 0; col < bands.total.size(); ++col)
        if (y_of(bands.stack_top[col]) - y_of(bands.total[col]) > 1)
            frame.dl->AddRectFilled({b0.x + col, y_of(bands.total[col])}, {b0.x + col + 1, y_of(bands.total[col]) + 1},
                                    kCurve);
    double at_peak = 0;
    for (double bytes : bands.peak_key_bytes) at_peak += bytes;
    // With a run selected the curve above is the run's; the bands are still the recording's.
    const std::string head = std::string(frame.run_curve ? "recorded, by " : "by ") + coloring_name(coloring) +
                             ", at the peak (" + short_bytes(static_cast<int64_t>(at_peak)) + " at " +
                             app.times().at(bands.peak_time, std::max<int64_t>(app.range.span() / 1000, 1)) + "):";
    std::vector<LegendEntry> entries{{0, head}};
    for (LegendEntry& entry : band_legend(keys, bands)) entries.push_back(std::move(entry));
    legend_row(frame.dl, {b0.x, b0.y - legend_h - kLegendRow}, b1.x, entries, frame.legend, 2);
}

// Navigation and selection over both plots; a band's tooltip (a click selects its allocation), a
// summarised run's, or the curve's bytes at the pointer.
void memory_pointer(App& app, MemoryUi& ui, const MemoryFrame& frame) {
    bool hovered = navigate(app, {frame.plot_x, frame.c0.y}, {frame.plot_x + frame.plot_w, frame.b1.y});
    draw_selection(app, frame.dl, {frame.plot_x, frame.c0.y}, {frame.plot_x + frame.plot_w, frame.b1.y});
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    if (hovered && mouse.y >= frame.b0.y && mouse.y < frame.b1.y) {
        const int col = static_cast<int>(mouse.x - frame.b0.x);
        const double bytes = (frame.b1.y - mouse.y) / (frame.b1.y - frame.b0.y) * frame.by_max;
        int64_t summary = -1;
        const int64_t hit = ui.bands.hit(col, bytes, &summary);
        if (hit >= 0) {
            band_tooltip(app, ui, hit);
            if (clicked()) app.select_allocation(app.trace->allocations.id[static_cast<size_t>(hit)]);
        } else if (hit == -1 && summary >= 0) {
            const SummarySegment& group = ui.bands.summaries[static_cast<size_t>(summary)];
            ImGui::SetTooltip("%s in %s allocations too small to draw one by one%s\n%s live in all here",
                              format_bytes(static_cast<int64_t>(group.y1 - group.y0)).c_str(),
                              frame.keys->name[group.key].c_str(), group.long_lived ? " (long-lived)" : "",
                              format_bytes(static_cast<int64_t>(ui.bands.total[static_cast<size_t>(col)])).c_str());
        }
    } else if (hovered && mouse.y >= frame.c0.y && mouse.y < frame.c1.y) {
        const int64_t when = app.range.t_of(mouse.x - frame.plot_x, frame.plot_w);
        ImGui::SetTooltip("%s: %s", app.times().at(when).c_str(),
                          format_bytes(static_cast<int64_t>(frame.curve->value_at(when))).c_str());
    }
}

// What the frame drew, for tests and tools (mhc-view --layout).
void memory_layout(App& app, const MemoryUi& ui, const MemoryFrame& frame, nlohmann::json details) {
    const BandLayout& bands = ui.bands;
    app.layout["memory"] = {{"before_first_sample", frame.unknown},
                            {"details", std::move(details)},
                            {"selected_allocation", app.highlight_alloc},
                            {"curve", rect_json(frame.c0, frame.c1)},
                            {"bands", rect_json(frame.b0, frame.b1)},
                            {"t0", app.range.t0},
                            {"t1", app.range.t1},
                            {"y_max", frame.y_range.hi},
                            {"y_min", frame.y_range.lo},
                            {"fit_y", app.fit_y},
                            {"band_y_max", frame.by_max},
                            {"peak_col", ui.cols.peak_col},
                            {"peak_bytes", ui.cols.y_max},
                            {"peak_label", frame.peak_label},
                            {"bands_drawn", bands.bands.size()},
                            {"segments", bands.segments.size()},
                            {"summaries", bands.summaries.size()},
                            {"summarised", bands.summarised},
                            {"band_peak_col", bands.peak_col},
                            {"coloring", coloring_name(frame.keys->coloring)},
                            {"message", frame.message},
                            {"bands_message", frame.bands_message},
                            {"legend", frame.legend},
                            {"axis_labels", frame.axis_labels}};
}

}   // namespace

// The view, top to bottom: the curves under their legend, the bands under theirs, the selected
// allocation's details; then what the pointer is over.
void draw_memory(App& app) {
    if (!app.memory_ui) app.memory_ui = std::make_shared<MemoryUi>();
    MemoryUi& ui = *app.memory_ui;
    const BandColoring auto_coloring = app.trace->keys->coloring;   // chosen at load
    const BandColoring coloring = app.band_coloring < 0 ? auto_coloring : static_cast<BandColoring>(app.band_coloring);
    band_colour_options(app, coloring, auto_coloring);
    MemoryFrame frame = choose_curve(app);
    if (said_nothing_to_plot(app, frame)) return;

    frame.avail = ImGui::GetContentRegionAvail();
    // The selected allocation's details take the bottom of the view.
    frame.details_h = app.highlight_alloc ? std::clamp(frame.avail.y * 0.34f, 150.f, 320.f) : 0.f;
    frame.avail.y -= frame.details_h;
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    frame.plot_x = origin.x + kLabelWidth;
    frame.plot_w = std::max(frame.avail.x - kLabelWidth - 10, 10.f);
    frame.W = static_cast<int>(frame.plot_w);
    frame.dl = ImGui::GetWindowDrawList();
    time_axis(app, frame.dl, {frame.plot_x, origin.y}, frame.plot_w, app.layout["axis"]);

    // Upper plot: the curves, under their legend row and the reserved bytes by pool on rows of
    // their own (they do not fit on one beside the others).
    Job<ReservedCurves>& job = *app.reserved_curves();
    const ReservedCurves none;
    const ReservedCurves& curves = job.value() ? *job.value() : none;
    int pool_rows = 0;
    const std::vector<LegendEntry> pool_entries = !curves.pool_reserved.empty()
                                                      ? pool_legend(curves, frame.plot_w - 12, pool_rows)
                                                      : std::vector<LegendEntry>{};
    const float legend_h = 18.f, curve_legend_h = legend_h + static_cast<float>(pool_rows) * kLegendRow;
    const float top_h = std::max((frame.avail.y - kAxisHeight) * 0.42f, 60.f);
    frame.c0 = {frame.plot_x, origin.y + kAxisHeight + 4 + curve_legend_h};
    frame.c1 = {frame.plot_x + frame.plot_w, origin.y + kAxisHeight + top_h};
    frame.dl->AddRectFilled(frame.c0, frame.c1, IM_COL32(36, 36, 42, 255));
    prepare_curves(app, ui, job, curves, frame);
    draw_curves(app, ui, curves, frame);
    curve_legend(app, curves, pool_entries, pool_rows, curve_legend_h, frame);
    if (!frame.message.empty()) message_line(frame.dl, {frame.c0.x + 6, frame.c0.y + 4}, frame.c1.x - 6, frame.message);

    // Lower plot: the bands, under two legend rows (the keys' bytes may not fit on one).
    frame.b0 = {frame.plot_x, frame.c1.y + 8 + legend_h + kLegendRow};
    frame.b1 = {frame.plot_x + frame.plot_w, origin.y + frame.avail.y - 4};
    draw_bands(app, ui, coloring, legend_h, frame);

    ImGui::Dummy(frame.avail);
    memory_pointer(app, ui, frame);
    nlohmann::json details;
    if (app.highlight_alloc && draw_details(app, "allocation details", app.allocation_info, frame.details_h - 4, details))
        app.select_allocation(0);
    if (details.contains("copied")) {
        app.status = "copied allocation #" + std::to_string(app.highlight_alloc) + "'s details to the clipboard";
        app.copied = details["copied"];
    }
    memory_layout(app, ui, frame, details);
}

}  // namespace mhc::viewer
