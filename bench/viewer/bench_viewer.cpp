// bench_viewer [--kernels N] [--allocations M] [--trace PATH] [--width PX]
// bench_viewer --open TRACE [--width PX] [--run ID] [--find TEXT]
// Writes a synthetic trace with mhc::trace::Writer (kept at PATH between runs; rewritten when
// its size differs), or opens the given TRACE as it is (--open: a generated or imported trace,
// with accesses), through the viewer's loading path (load_view_trace), then times the
// accesses of an allocation as the memory view's tooltip and details ask for them (count, and the
// list, for the 1,000 allocations with the most accesses and 1,000 drawn at random), and the
// per-frame preparation of the timeline (folded lanes) and the memory view (curve columns
// from the pyramid + band layout) at several zoom levels (worst and median of 20 random ranges
// per zoom, process CPU time). With --run ID, the run is read as the viewer selects it
// (load_view_run) and the timeline has its kernel times and event tracks (swap-outs, swap-ins,
// stalls, prefetches, ...), the memory view its device-bytes curve over the recorded one. With
// --find TEXT, TEXT is typed into the timeline's find field a letter at a time, before (each letter
// searched at once: find_kernels, or refine_matches of the letter before, and match_marks over the
// list, as the field did until 2026-12-06) and now (FindState::update a slice a frame until done,
// each slice timed; FindState::marks at full zoom-out and at 1% of the trace). Prints figures; not a
// test.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "mhc/bench/args.hpp"
#include "mhc/trace/store.hpp"
#include "mhc/viewer/axis.hpp"
#include "mhc/viewer/band_colors.hpp"
#include "mhc/viewer/bands.hpp"
#include "mhc/viewer/data.hpp"
#include "mhc/viewer/find.hpp"
#include "mhc/viewer/stats.hpp"
#include "mhc/viewer/timeline.hpp"

using namespace mhc;
using namespace mhc::viewer;

namespace {

double cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}
// Resident memory of this process (VmRSS), MB.
double rss_mb() {
    std::ifstream in("/proc/self/status");
    std::string key;
    while (in >> key) {
        if (key == "VmRSS:") {
            double kb = 0;
            in >> kb;
            return kb / 1e3;
        }
        std::getline(in, key);
    }
    return 0;
}

double wall_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// What the synthetic trace's meta bench_size says: the sizes asked for and the generator's version
// (a trace of another version is written again).
std::string bench_size(int64_t kernels, int64_t allocations) {
    return std::to_string(kernels) + "/" + std::to_string(allocations) + "/v3";
}

// 8 compute streams of back-to-back kernels (0.5..40 us, 0..5 us gaps), 64 kernel names,
// a step marker every 20k kernels; allocations with log-uniform sizes (4 KiB..2 GiB) and
// lifetimes from 1 us to 1% of the trace per million allocations (about 2,000 live at a time).
void write_trace(const std::string& path, int64_t kernels, int64_t allocations) {
    std::mt19937_64 rng(42);
    trace::Writer w(path);
    w.set_meta("source", "bench_viewer");
    w.set_meta("bench_size", bench_size(kernels, allocations));
    std::vector<int64_t> names;
    for (int i = 0; i < 64; ++i) names.push_back(w.intern("kernel_" + std::to_string(i)));
    const int streams = 8;
    std::vector<int64_t> clock(streams, 0);
    trace::Kernel k;
    int64_t per_step = 20000, step_t0 = 0, t_max = 0;
    for (int64_t i = 0; i < kernels; ++i) {
        int s = static_cast<int>(i % streams);
        k.id = i + 1;
        k.stream = 7 + s;
        k.name = names[rng() % names.size()];
        k.t_start = clock[static_cast<size_t>(s)] + static_cast<int64_t>(rng() % 5000);
        k.t_end = k.t_start + 500 + static_cast<int64_t>(rng() % 40000);
        k.step = static_cast<int32_t>(i / per_step);
        clock[static_cast<size_t>(s)] = k.t_end;
        t_max = std::max(t_max, k.t_end);
        w.add(k);
        if ((i + 1) % per_step == 0) {
            w.add(trace::Marker{(i + 1) / per_step, w.intern("step"), step_t0, t_max, trace::MarkerKind::Step,
                                static_cast<int32_t>(i / per_step)});
            step_t0 = t_max;
        }
    }
    for (int64_t a = 0; a < allocations; ++a) {
        trace::Allocation al;
        al.id = a + 1;
        al.bytes = static_cast<int64_t>(std::exp(std::log(4096.0) + (std::log(2.0 * (1 << 30)) - std::log(4096.0)) *
                                                 std::pow(static_cast<double>(rng() % 1000000) / 1e6, 3.0)));
        al.t_alloc = static_cast<int64_t>(rng() % static_cast<uint64_t>(t_max));
        // About 2,000 allocations live at a time whatever their number, as in a training step:
        // lifetimes up to 1% of the trace for 1M allocations, shorter in proportion for more.
        double life = 0.01 * (1e6 / static_cast<double>(allocations)) * std::pow(static_cast<double>(rng() % 1000000) / 1e6, 4.0);
        al.t_free = std::min(t_max, al.t_alloc + 1000 + static_cast<int64_t>(life * static_cast<double>(t_max)));
        al.category = static_cast<trace::Category>(rng() % trace::kCategoryCount);
        al.label = names[rng() % names.size()];
        w.add(al);
    }
    w.finish();
}

// The accesses of an allocation as the memory view asks for them: the count (tooltip, on every
// new allocation under the pointer) and the list (details pane, highlights).
void hover_figures(const ViewTrace& view) {
    const AccessIndex* index = view.access_index.get();
    std::printf("accesses by allocation: %s", !index              ? "the file's index (queried per hover)"
                                              : index->from_cache ? "grouped at load, from the trace's cache"
                                                              : "grouped at load, from the rows");
    if (index) std::printf(", %.1f MB held", static_cast<double>(index->bytes()) / 1e6);
    std::printf(" (%lld accesses)\n", static_cast<long long>(view.access_count));
    if (view.allocations.size() == 0) return;
    std::vector<std::pair<int64_t, int64_t>> by_count;   // (count, id), the 1,000 largest
    by_count.reserve(view.allocations.size());
    std::vector<int64_t> drawn;
    drawn.reserve(1000);
    std::mt19937_64 rng(3);
    for (int i = 0; i < 1000; ++i) drawn.push_back(view.allocations.id[rng() % view.allocations.size()]);
    const double c0 = cpu_ms();
    for (int64_t id : view.allocations.id) {   // every allocation's count: a sweep of the pointer
        by_count.emplace_back(access_count_of(view, id), id);
        if (!index && by_count.size() == 2000) break;   // each a query of the file: a sample
    }
    const size_t counted = by_count.size();
    const double count_us = (cpu_ms() - c0) * 1e3 / static_cast<double>(counted);
    std::sort(by_count.rbegin(), by_count.rend());
    by_count.resize(std::min<size_t>(by_count.size(), 1000));
    auto lists = [&](const std::vector<int64_t>& ids, const char* what) {
        size_t hits = 0;
        double worst = 0, t0 = cpu_ms();
        for (int64_t id : ids) {
            const double c1 = cpu_ms();
            hits += accesses_of(view, id).size();
            worst = std::max(worst, cpu_ms() - c1);
        }
        std::printf("  list (accesses_of), %s: %.1f us each, worst %.2f ms, %.1f accesses each\n", what,
                    (cpu_ms() - t0) * 1e3 / static_cast<double>(ids.size()), worst,
                    static_cast<double>(hits) / static_cast<double>(ids.size()));
    };
    std::printf("  count (access_count_of): %.2f us each over %zu allocations%s\n", count_us, counted,
                index ? "" : " (the first ones: the most accessed below are among them)");
    std::vector<int64_t> most;
    most.reserve(by_count.size());
    for (const auto& [count, id] : by_count) most.push_back(id);
    lists(most, "the 1,000 most accessed");
    lists(drawn, "1,000 drawn at random");
}

// The find field as TEXT is typed, a letter at a time (see the top of the file): before (each letter
// searched at once: find_kernels for the first, refine_matches for the next, match_marks over the list)
// and now (FindState: a slice a frame until done, its marks by pixel column), in one run.
void find_figures(const ViewTrace& view, const ViewRun* run, const std::string& text, int width) {
    std::printf(
        "find: typing '%s', CPU ms per letter. before: the letter searched at once, marks at full zoom-out;\n"
        "  now: slices a letter (worst slice), total; marks at full zoom-out, at 1%%\n",
        text.c_str());
    std::printf("  %-14s %9s %10s %9s | %7s %9s %9s %10s %8s\n", "typed", "before", "matches", "marks", "slices",
                "worst", "total", "marks", "at 1%");
    FindState find;
    std::vector<KernelMatch> before;
    const TimeRange whole{view.t_begin, view.t_end};
    const int64_t span = std::max<int64_t>((view.t_end - view.t_begin) / 100, 1000);
    const TimeRange part{view.t_begin + (view.t_end - view.t_begin) / 2,
                         view.t_begin + (view.t_end - view.t_begin) / 2 + span};
    const size_t lanes = run && !run->kernel_lanes.empty() ? run->kernel_lanes.size() : view.kernel_lanes.size();
    double worst_frame = 0;
    for (size_t n = 1; n <= text.size(); ++n) {
        const std::string typed = text.substr(0, n);
        // Before: the whole list made at once (a refinement of the one before when the text grew).
        double start = cpu_ms();
        before = n > 1 && contains_ci(typed, text.substr(0, n - 1)) ? refine_matches(view, before, typed)
                                                                    : find_kernels(view, run, typed);
        const double at_once = cpu_ms() - start;
        start = cpu_ms();
        const auto old_marks = match_marks(before, lanes, whole, static_cast<float>(width), longest_match(before));
        const double marks_before = cpu_ms() - start;
        // Now: a slice a frame until done.
        const size_t slices = find.slices;
        double worst = 0, total = 0;
        do {
            start = cpu_ms();
            find.update(view, run, typed, 0);
            const double ms = cpu_ms() - start;
            worst = std::max(worst, ms);
            total += ms;
        } while (!find.done());
        start = cpu_ms();
        const auto marks = find.marks(whole, static_cast<float>(width));
        const double marks_now = cpu_ms() - start;
        start = cpu_ms();
        const auto marks_part = find.marks(part, static_cast<float>(width));
        const double marks_zoomed = cpu_ms() - start;
        worst_frame = std::max(worst_frame, worst + marks_now);
        size_t drawn = 0, marked = 0, old_drawn = 0;
        for (const auto& lane : marks) {
            drawn += lane.size();
            for (const MatchMark& mark : lane) marked += mark.count;
        }
        for (const auto& lane : old_marks) old_drawn += lane.size();
        if (find.count() != before.size() || drawn != old_drawn)
            std::printf("  MISMATCH: %zu matches against %zu, %zu marks against %zu\n", find.count(), before.size(),
                        drawn, old_drawn);
        std::printf("  %-14s %9.3f %10zu %9.3f | %7zu %9.3f %9.3f %10.3f %8.3f  (%zu marks of %zu matches)\n",
                    ("'" + typed + "'").c_str(), at_once, before.size(), marks_before, find.slices - slices, worst,
                    total, marks_now, marks_zoomed, drawn, marked);
    }
    std::printf(
        "  now: %zu whole searches, %zu refinements, %zu kernels or matches a slice; worst frame of find "
        "(slice + marks) %.2f ms\n",
        find.searches, find.refinements, find.slice, worst_frame);
}

// What the command line asks for.
struct BenchOptions {
    int64_t kernels = 10'000'000, allocations = 1'000'000;
    std::string path = (std::filesystem::temp_directory_path() / "mhc-bench-viewer.db").string();
    int width = 1600;
    bool open_as_is = false;
    int64_t run_id = 0;
    std::string find_text;
};

BenchOptions read_options(int argc, char** argv) {
    BenchOptions options;
    const bench::Args args(argc, argv,
                           "[--kernels N] [--allocations M] [--trace PATH | --open TRACE] [--width PX] [--run ID] "
                           "[--find TEXT]");
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& option = args.word(i);
        if (option == "--kernels") options.kernels = args.whole(args.value_after(i), "--kernels", 1, int64_t{1} << 40);
        else if (option == "--allocations")
            options.allocations = args.whole(args.value_after(i), "--allocations", 1, int64_t{1} << 40);
        else if (option == "--trace") options.path = args.value_after(i);
        else if (option == "--open") {
            options.path = args.value_after(i);
            options.open_as_is = true;
        } else if (option == "--run") options.run_id = args.whole(args.value_after(i), "--run", 1, int64_t{1} << 62);
        else if (option == "--find") options.find_text = args.value_after(i);
        else if (option == "--width")
            options.width = static_cast<int>(args.whole(args.value_after(i), "--width", 64, 16384));
        else args.refuse("unknown option '" + option + "'");
    }
    return options;
}

// The synthetic trace written again unless the one at the path has the size asked for (or
// --open names a trace to take as it is).
void prepare_trace_file(const BenchOptions& options) {
    const std::string& path = options.path;
    bool reuse = options.open_as_is;
    if (!reuse && std::filesystem::exists(path)) {
        try {
            reuse = trace::Reader(path).meta()["bench_size"] == bench_size(options.kernels, options.allocations);
        } catch (const std::exception&) {}
    }
    if (!reuse) {
        double t = wall_s();
        std::filesystem::remove(path);
        write_trace(path, options.kernels, options.allocations);
        std::printf("wrote %s (%lld kernels, %lld allocations) in %.1f s\n", path.c_str(),
                    static_cast<long long>(options.kernels), static_cast<long long>(options.allocations), wall_s() - t);
    }
    std::printf("trace file: %.0f MB\n", static_cast<double>(std::filesystem::file_size(path)) / 1e6);
}

// The trace through the viewer's loading path, timed, with the memory it takes.
ViewTrace open_view_trace(const std::string& path) {
    const double rss0 = rss_mb();
    const double w0 = wall_s(), c0 = cpu_ms();
    ViewTrace view = load_view_trace(path);
    const double open_wall = wall_s() - w0, open_cpu = (cpu_ms() - c0) / 1e3;
    std::printf(
        "open (load_view_trace): %.2f s wall, %.2f s CPU; %lld kernels in %zu lanes, %zu allocations, "
        "%zu curve samples\n",
        open_wall, open_cpu, static_cast<long long>(view.kernel_count), view.kernel_lanes.size(),
        view.allocations.size(), view.live.size());
    const double rss = rss_mb() - rss0;
    const auto events = static_cast<double>(view.kernel_count) + static_cast<double>(view.allocations.size());
    std::printf("resident after opening: %.0f MB more than before, %.0f bytes per event (kernel or allocation)\n", rss,
                rss * 1e6 / std::max(events, 1.0));
    return view;
}

// The run as the viewer selects it, timed.
ViewRun open_view_run(const ViewTrace& view, int64_t run_id) {
    const double w0 = wall_s(), c0 = cpu_ms();
    ViewRun run = load_view_run(view, run_id);
    size_t events = 0;
    for (const Lane& lane : run.event_lanes) events += lane.size();
    std::printf("run %lld (load_view_run): %.2f s wall, %.2f s CPU; %zu event tracks, %zu events, %zu memory samples\n",
                static_cast<long long>(run_id), wall_s() - w0, (cpu_ms() - c0) / 1e3, run.event_lanes.size(), events,
                run.memory.size());
    return run;
}

// The per-frame preparation of the timeline and the memory view over random ranges at several
// zoom levels: worst and median per span.
void frame_figures(const ViewTrace& view, const ViewRun* run, int width) {
    const BandKeys& keys = *view.keys;   // the memory view's colour keys, made at load
    std::vector<Track> tracks = timeline_tracks(view, run);
    std::vector<TrackFrame> frame;
    CurveColumns cols, run_cols;
    BandLayout bands;
    std::printf("%-14s %12s %12s %12s %12s %12s %10s\n", "span", "timeline ms", "(median)", "items", "memory ms",
                "(median)", "bands");
    const int reps = 20;
    double worst = 0;
    for (double frac : {1.0, 0.1, 0.01, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7}) {
        int64_t span = std::max<int64_t>(static_cast<int64_t>(static_cast<double>(view.t_end - view.t_begin) * frac),
                                         1000);
        std::vector<double> tl, mem;
        size_t max_items = 0, max_bands = 0;
        std::mt19937_64 rng(1);
        for (int r = 0; r < reps; ++r) {
            int64_t room = std::max<int64_t>(view.t_end - view.t_begin - span, 1);
            int64_t from = view.t_begin + static_cast<int64_t>(rng() % static_cast<uint64_t>(room));
            TimeRange range{from, from + span};
            double c = cpu_ms();
            prepare_timeline(tracks, range, static_cast<float>(width), frame);
            tl.push_back(cpu_ms() - c);
            max_items = std::max(max_items, draw_item_count(frame));
            c = cpu_ms();
            if (run) prepare_curve(run->memory, range, width, run_cols);   // the run's curve over the recorded one
            prepare_curve(view.live, range, width, cols, true);   // as the memory view: its curve, then the bands
            layout_bands(view.allocations, view.live, &keys, range, width, 300, 1024, bands, kBandsPerColumn, &cols);
            mem.push_back(cpu_ms() - c);
            max_bands = std::max(max_bands, bands.bands.size());
        }
        std::sort(tl.begin(), tl.end());
        std::sort(mem.begin(), mem.end());
        worst = std::max({worst, tl.back(), mem.back()});
        std::printf("%-14s %12.3f %12.3f %12zu %12.3f %12.3f %10zu\n", format_duration(span).c_str(), tl.back(),
                    tl[tl.size() / 2], max_items, mem.back(), mem[mem.size() / 2], max_bands);
    }
    std::printf(
        "(worst and median of %d random ranges per span, CPU time; width %d px, %zu tracks, bound on items %zu)\n",
        reps, width, tracks.size(), tracks.size() * static_cast<size_t>(width / kFoldPx + 2));
    std::printf("worst frame preparation: %.2f ms (the 60 fps budget is 16.7 ms)\n", worst);
}

int run_benchmark(int argc, char** argv) {
    const BenchOptions options = read_options(argc, argv);
    prepare_trace_file(options);
    const ViewTrace view = open_view_trace(options.path);
    hover_figures(view);
    ViewRun run;
    if (options.run_id) run = open_view_run(view, options.run_id);
    const ViewRun* selected = options.run_id ? &run : nullptr;
    if (!options.find_text.empty()) find_figures(view, selected, options.find_text, options.width);
    frame_figures(view, selected, options.width);
    return 0;
}

}   // namespace

int main(int argc, char** argv) {
    return bench::guarded("bench_viewer", [&] { return run_benchmark(argc, argv); });
}
