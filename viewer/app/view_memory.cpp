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

void draw_memory(App& app) {
    if (!app.memory_ui) app.memory_ui = std::make_shared<MemoryUi>();
    MemoryUi& ui = *app.memory_ui;
    CurveColumns &cols = ui.cols, &rec = ui.rec, &res = ui.res, &mres = ui.mres, &pool = ui.pool;
    BandLayout& bands = ui.bands;
    // Colour of the bands: by category, or for imported traces (no categories) by the
    // allocation's source frame or size class; chosen for the trace unless the user picks (in the
    // toolbar's options).
    const BandColoring auto_coloring = app.trace->keys->coloring;   // chosen at load
    const BandColoring coloring = app.band_coloring < 0 ? auto_coloring : static_cast<BandColoring>(app.band_coloring);
    toolbar(app, [&](nlohmann::json& jt) {
        ImGui::Separator();
        ImGui::TextDisabled("band colour");
        nlohmann::json choices = nlohmann::json::array();
        for (BandColoring choice : {BandColoring::Category, BandColoring::Label, BandColoring::SizeClass}) {
            const std::string text = std::string(coloring_name(choice)) +
                                     (choice == auto_coloring ? " (this trace)" : "");
            if (ImGui::RadioButton(text.c_str(), choice == coloring)) app.band_coloring = static_cast<int>(choice);
            choices.push_back(rect_json(ImGui::GetItemRectMin(), ImGui::GetItemRectMax()));
            choices.back()["text"] = text;
        }
        jt["band_colour"] = choices;
    });
    const ViewRun* run = app.selected_run();
    // A run of another device than the one shown: the recording's memory, and a line saying why.
    const std::string device_note = run ? run_device_note(run->info, app.trace->memory_device) : std::string();
    if (!device_note.empty()) run = nullptr;
    const bool run_curve = run && !run->memory.empty();
    const Curve& curve = run_curve ? run->memory : app.trace->live;
    if (app.trace->allocations.size() == 0 && !run_curve) {   // nothing to plot: say why, not an axis of 0 B
        const std::string why = empty_table_text(*app.trace, StatsTable::Allocations, 0);
        ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
        ImGui::TextWrapped("%s", why.c_str());   // the importer's reason can be longer than the window
        ImGui::PopStyleColor();
        app.layout["memory"] = {{"empty", why}};
        return;
    }

    ImVec2 avail = ImGui::GetContentRegionAvail();
    // The selected allocation's details take the bottom of the view.
    const float details_h = app.highlight_alloc ? std::clamp(avail.y * 0.34f, 150.f, 320.f) : 0.f;
    avail.y -= details_h;
    ImVec2 origin = ImGui::GetCursorScreenPos();
    float plot_x = origin.x + kLabelWidth, plot_w = std::max(avail.x - kLabelWidth - 10, 10.f);
    int W = static_cast<int>(plot_w);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    time_axis(app, dl, {plot_x, origin.y}, plot_w, app.layout["axis"]);

    // Upper plot: the curve, under its legend row (legends sit over the plots, right of the
    // byte labels, never in the label column where the byte labels are).
    // The reserved curves come from a worker; until they arrive (or when they cannot be made)
    // the plot shows the rest, and a line over it says which.
    Job<ReservedCurves>& job = *app.reserved_curves();
    const ReservedCurves none;
    const ReservedCurves& curves = job.value() ? *job.value() : none;
    // The reserved bytes by pool on rows of their own (they do not fit on one beside the others).
    const bool by_pool = !curves.pool_reserved.empty();
    int pool_rows = 0;
    const std::vector<LegendEntry> pool_entries = by_pool ? pool_legend(curves, plot_w - 12, pool_rows)
                                                          : std::vector<LegendEntry>{};
    const float legend_h = 18.f, curve_legend_h = legend_h + static_cast<float>(pool_rows) * kLegendRow;
    float top_h = std::max((avail.y - kAxisHeight) * 0.42f, 60.f);
    ImVec2 c0{plot_x, origin.y + kAxisHeight + 4 + curve_legend_h}, c1{plot_x + plot_w, origin.y + kAxisHeight + top_h};
    dl->AddRectFilled(c0, c1, IM_COL32(36, 36, 42, 255));
    prepare_curve(curve, app.range, W, cols, !run_curve);   // the bands' column instants, when they share it
    const size_t rec_end = columns_before(app.range, W, app.trace->t_end);
    const size_t cols_end = columns_before(app.range, W, run_curve ? run->t_end : app.trace->t_end);
    std::vector<std::pair<const CurveColumns*, size_t>> drawn{{&cols, cols_end}};
    if (run_curve) {
        prepare_curve(app.trace->live, app.range, W, rec);
        drawn.emplace_back(&rec, rec_end);
    }
    std::string message = !job.error().empty() ? "reserved memory not shown: " + job.error()
                          : !job.value()       ? std::string("reading the segments and replaying the caching allocator model...")
                          : curves.model_error.empty() ? std::string() : "model reserved not shown: " + curves.model_error;
    // Segments that hold less than the allocations at their peak do not hold them: not drawn, said.
    const std::string mismatch = reserved_mismatch(curves.recorded, app.trace->live);
    if (!mismatch.empty()) message = message.empty() ? mismatch : message + "; " + mismatch;
    const Curve no_curve;
    const Curve& reserved = mismatch.empty() ? curves.recorded : no_curve;
    if (!reserved.empty()) {
        prepare_curve(reserved, app.range, W, res);
        drawn.emplace_back(&res, rec_end);
    }
    const Curve& model = curves.model;
    if (!model.empty()) {
        prepare_curve(model, app.range, W, mres);
        drawn.emplace_back(&mres, rec_end);
    }
    // What of the live bytes lies in private pools (a CUDA graph's, a torch.cuda.MemPool's): their
    // blocks never serve the default pool's requests, which a user reading the curve alone misses.
    if (!curves.pool_error.empty())
        message += (message.empty() ? "" : "; ") + std::string("private pools not shown: ") + curves.pool_error;
    if (!curves.pool_live.empty()) {
        prepare_curve(curves.pool_live, app.range, W, pool);
        drawn.emplace_back(&pool, rec_end);
    }
    // Reserved by pool (a private pool's blocks serve only its own requests: what each holds is
    // what a user sizes a CUDA graph's or a MemPool's memory by).
    ui.pool_reserved.resize(curves.pool_reserved.size());
    if (by_pool) {
        prepare_curve(curves.default_reserved, app.range, W, ui.default_pool);
        drawn.emplace_back(&ui.default_pool, rec_end);
        for (size_t k = 0; k < curves.pool_reserved.size(); ++k) {
            prepare_curve(curves.pool_reserved[k].reserved, app.range, W, ui.pool_reserved[k]);
            drawn.emplace_back(&ui.pool_reserved[k], rec_end);
        }
    }
    const ByteRange y_range = plot_range(app, drawn, run && run->capacity > 0 ? static_cast<double>(run->capacity) : 0, 0.08);
    nlohmann::json axis_labels = nlohmann::json::array(), legend = nlohmann::json::array();
    draw_bytes_axis(dl, c0, c1, y_range, &axis_labels);
    if (!reserved.empty()) draw_curve(dl, res, c0, c1, y_range, kReserved, false, rec_end);
    if (!model.empty()) draw_curve(dl, mres, c0, c1, y_range, kModelReserved, false, rec_end);
    if (run_curve) draw_curve(dl, rec, c0, c1, y_range, kRecorded, false, rec_end);
    // A run's curve from its first sample: before it the run stored none (it was moving what was
    // allocated before recording), and 0 B there read as an empty device.
    const size_t cols_first = run_curve ? columns_before_first_sample(curve, app.range, W) : 0;
    draw_curve(dl, cols, c0, c1, y_range, kCurve, true, cols_end, cols_first);
    nlohmann::json unknown;
    if (cols_first > 0) {
        const std::string when = run->times.at(curve.times().front(), 1000);
        const std::string text = "no device bytes stored before " + when;
        // The whole sentence, else shorter ones, where the gap is narrow (the whole in a tooltip).
        std::string shown;
        for (const std::string& each : {text, "none stored before " + when, std::string("not stored")})
            if (shown.empty() && ImGui::CalcTextSize(each.c_str()).x <= static_cast<float>(cols_first) - 8)
                shown = each;
        const ImVec2 at{c0.x + 4, c1.y - ImGui::GetFontSize() - 4};
        dl->AddText(at, IM_COL32(150, 150, 160, 255), shown.c_str());
        unknown = {{"columns", cols_first}, {"text", text}, {"shown", shown}};
        if (ImGui::IsMouseHoveringRect({c0.x, c0.y}, {c0.x + static_cast<float>(cols_first), c1.y}) &&
            ImGui::IsWindowHovered(ImGuiHoveredFlags_ChildWindows)) {
            ImGui::SetTooltip(
                "%s: the run's first sample of them is then, so the curve starts there\n(what the "
                "run did before it, its swaps and stalls, is in the timeline)",
                text.c_str());
            unknown["tooltip"] = true;
        }
    }
    // Over the live curve: a pool's allocations are most of it on CUDA-graph traces (slime's
    // Megatron snapshot: 31.98 of 33.75 GiB), where a line under it would be hidden.
    if (!curves.pool_live.empty()) draw_curve(dl, pool, c0, c1, y_range, kPoolLive, false, rec_end);
    if (by_pool) {
        draw_curve(dl, ui.default_pool, c0, c1, y_range, kDefaultPoolReserved, false, rec_end);
        for (size_t k = 0; k < ui.pool_reserved.size(); ++k)
            draw_curve(dl, ui.pool_reserved[k], c0, c1, y_range, kPoolReserved[std::min<size_t>(k, 4)], false, rec_end);
    }
    if (run && run->capacity > 0) {
        std::string s = "capacity " + format_bytes(run->capacity);
        draw_hline(dl, c0, c1, static_cast<double>(run->capacity), y_range, kCapacity, s.c_str());
    }
    nlohmann::json peak_label;
    if (cols.peak_col >= 0) {
        float px = c0.x + static_cast<float>(cols.peak_col);
        float py = c1.y - static_cast<float>(y_range.fraction(cols.y_max)) * (c1.y - c0.y);
        dl->AddCircleFilled({px, py}, 4, IM_COL32(255, 255, 255, 255));
        std::string s = "peak " + format_bytes(static_cast<int64_t>(cols.y_max));
        // Right of the dot, or left of it when it would leave the plot (it was pushed back over
        // the dot: SGLang's peak at the right edge read "pea●k").
        const float text_w = ImGui::CalcTextSize(s.c_str()).x;
        const float tx = px + 6 + text_w <= c1.x ? px + 6 : std::max(px - 6 - text_w, c0.x);
        const float ty = std::max(py - 16, c0.y + 2);
        dl->AddText({tx, ty}, IM_COL32(255, 255, 255, 255), s.c_str());
        peak_label = rect_json({tx, ty}, {tx + text_w, ty + ImGui::GetFontSize()});
        peak_label["dot_x"] = px;
    }
    {
        const std::string device = memory_device_text(*app.trace);
        const std::string recorded = "recorded live bytes" + (device.empty() ? "" : ", " + device);
        std::vector<LegendEntry> entries{{kCurve, run_curve ? run->label() + ": device bytes" : recorded}};
        if (run_curve) entries.push_back({kRecorded, recorded});
        if (!reserved.empty()) entries.push_back({kReserved, "recorded reserved (segments)"});
        if (!model.empty())
            entries.push_back({kModelReserved, "model reserved (caching allocator, device " +
                                                   std::to_string(curves.model_device) + ")"});
        if (!curves.pool_live.empty())
            entries.push_back({kPoolLive, "live in private pools (" + std::to_string(curves.pools) +
                                              (curves.pools == 1 ? " pool" : " pools") + ", peak " +
                                              format_bytes(static_cast<int64_t>(curves.pool_live.peak())) + ")"});
        if (run && run->capacity > 0) entries.push_back({kCapacity, "capacity"});
        if (!device_note.empty()) entries.emplace_back(0, device_note);
        legend_row(dl, {c0.x, c0.y - curve_legend_h}, c1.x, entries, legend, 1);
        // Reserved by pool on a row of its own, each pool named by what the snapshot says it is and
        // by what most of its bytes were allocated at (they read "pool 1", "pool 2").
        if (by_pool)
            legend_row(dl, {c0.x + 12, c0.y - curve_legend_h + kLegendRow}, c1.x, pool_entries, legend, pool_rows);
    }
    if (!message.empty()) message_line(dl, {c0.x + 6, c0.y + 4}, c1.x - 6, message);

    // Lower plot: the bands, coloured by key (computed when the colouring changes).
    // (the trace's own choice was made at load; another is computed when first picked)
    // (another colouring's keys come from a worker; the trace's own until they arrive)
    std::string keys_error, bands_message;
    const BandKeys* picked = app.band_keys_for(coloring, keys_error);
    const BandKeys& keys = picked ? *picked : *app.trace->keys;
    if (!keys_error.empty()) bands_message = "colouring by " + std::string(coloring_name(coloring)) + " failed: " + keys_error;
    else if (!picked) bands_message = "colouring by " + std::string(coloring_name(coloring)) + "...";
    const AllocationTable& allocs = app.trace->allocations;
    // (two legend rows: the keys' bytes may not fit on one)
    ImVec2 b0{plot_x, c1.y + 8 + legend_h + kLegendRow}, b1{plot_x + plot_w, origin.y + avail.y - 4};
    dl->AddRectFilled(b0, b1, IM_COL32(36, 36, 42, 255));
    int bh = static_cast<int>(b1.y - b0.y);
    layout_bands(allocs, app.trace->live, &keys, app.range, W, bh, kMaxBands, bands, kBandsPerColumn,
                 run_curve ? nullptr : &cols);   // the upper plot's columns, when it shows the same curve
    clip_bands(bands, rec_end);   // a run that ends later widens the range: nothing was recorded past its end
    double by_max = bands.y_max * 1.05;
    auto y_of = [&](double v) { return b1.y - static_cast<float>(v / by_max) * (b1.y - b0.y); };
    draw_bytes_axis(dl, b0, b1, ByteRange{0, by_max}, &axis_labels);   // bands stack from 0 B
    for (const SummarySegment& s : bands.summaries)
        dl->AddRectFilled({b0.x + s.x0, y_of(s.y1)}, {b0.x + s.x1, y_of(s.y0)}, summary_color(keys, s.key));
    for (const BandSegment& s : bands.segments) {
        uint32_t i = bands.bands[s.band];
        uint32_t c = allocs.id[i] == app.highlight_alloc ? kHighlight : band_color(keys, allocs, i);
        dl->AddRectFilled({b0.x + s.x0, y_of(s.y1)}, {b0.x + s.x1, y_of(s.y0)}, c);
        // A darker line at the top edge separates neighbouring bands of one key, on bands tall
        // enough to keep their colour under it: on bands of 1-3 px (hundreds of activations
        // stacked) the lines were most of the pixels and the stack read brown, not in its keys'
        // colours; there each band's own shade (band_color) tells them apart.
        if (y_of(s.y0) - y_of(s.y1) >= kBandEdgeMinPx)
            dl->AddLine({b0.x + s.x0, y_of(s.y1)}, {b0.x + s.x1, y_of(s.y1)}, IM_COL32(20, 20, 25, 160));
    }
    if (!bands_message.empty()) message_line(dl, {b0.x + 6, b0.y + 4}, b1.x - 6, bands_message);
    // The live bytes' maximum per column, where it rises above the stack (a spike inside a column).
    for (size_t x = 0; x < bands.total.size(); ++x)
        if (y_of(bands.stack_top[x]) - y_of(bands.total[x]) > 1)
            dl->AddRectFilled({b0.x + x, y_of(bands.total[x])}, {b0.x + x + 1, y_of(bands.total[x]) + 1}, kCurve);
    // Legend: each key's bytes at the range's peak, then what the muted bands hold.
    {
        double at_peak = 0;
        for (double v : bands.peak_key_bytes) at_peak += v;
        // With a run selected the curve above is the run's; the bands are still the recording's.
        std::string head = std::string(run_curve ? "recorded, by " : "by ") + coloring_name(coloring) +
                           ", at the peak (" + short_bytes(static_cast<int64_t>(at_peak)) + " at " +
                           app.times().at(bands.peak_time, std::max<int64_t>(app.range.span() / 1000, 1)) + "):";
        std::vector<LegendEntry> e{{0, head}};
        for (LegendEntry& x : band_legend(keys, bands)) e.push_back(std::move(x));
        legend_row(dl, {b0.x, b0.y - legend_h - kLegendRow}, b1.x, e, legend, 2);
    }

    ImGui::Dummy(avail);
    bool hovered = navigate(app, {plot_x, c0.y}, {plot_x + plot_w, b1.y});
    draw_selection(app, dl, {plot_x, c0.y}, {plot_x + plot_w, b1.y});
    ImVec2 m = ImGui::GetIO().MousePos;
    if (hovered && m.y >= b0.y && m.y < b1.y) {
        int x = static_cast<int>(m.x - b0.x);
        double v = (b1.y - m.y) / (b1.y - b0.y) * by_max;
        int64_t summary = -1;
        int64_t hit = bands.hit(x, v, &summary);
        if (hit >= 0) {
            band_tooltip(app, ui, hit);
            if (clicked()) app.select_allocation(app.trace->allocations.id[static_cast<size_t>(hit)]);
        } else if (hit == -1 && summary >= 0) {
            const SummarySegment& g = bands.summaries[static_cast<size_t>(summary)];
            ImGui::SetTooltip("%s in %s allocations too small to draw one by one%s\n%s live in all here",
                              format_bytes(static_cast<int64_t>(g.y1 - g.y0)).c_str(), keys.name[g.key].c_str(),
                              g.long_lived ? " (long-lived)" : "",
                              format_bytes(static_cast<int64_t>(bands.total[static_cast<size_t>(x)])).c_str());
        }
    } else if (hovered && m.y >= c0.y && m.y < c1.y) {
        int64_t t = app.range.t_of(m.x - plot_x, plot_w);
        ImGui::SetTooltip("%s: %s", app.times().at(t).c_str(),
                          format_bytes(static_cast<int64_t>(curve.value_at(t))).c_str());
    }
    nlohmann::json details;
    if (app.highlight_alloc && draw_details("allocation details", app.allocation_info, details_h - 4, details))
        app.select_allocation(0);
    if (details.contains("copied")) {
        app.status = "copied allocation #" + std::to_string(app.highlight_alloc) + "'s details to the clipboard";
        app.copied = details["copied"];
    }
    app.layout["memory"] = {{"before_first_sample", unknown},
                            {"details", details},
                            {"selected_allocation", app.highlight_alloc},
                            {"curve", rect_json(c0, c1)},
                            {"bands", rect_json(b0, b1)},
                            {"t0", app.range.t0},
                            {"t1", app.range.t1},
                            {"y_max", y_range.hi},
                            {"y_min", y_range.lo},
                            {"fit_y", app.fit_y},
                            {"band_y_max", by_max},
                            {"peak_col", cols.peak_col},
                            {"peak_bytes", cols.y_max},
                            {"peak_label", peak_label},
                            {"bands_drawn", bands.bands.size()},
                            {"segments", bands.segments.size()},
                            {"summaries", bands.summaries.size()},
                            {"summarised", bands.summarised},
                            {"band_peak_col", bands.peak_col},
                            {"coloring", coloring_name(keys.coloring)},
                            {"message", message},
                            {"bands_message", bands_message},
                            {"legend", legend},
                            {"axis_labels", axis_labels}};
}

}  // namespace mhc::viewer
