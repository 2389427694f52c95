// The writer matrix, round 3 (tests/import/fixtures/writers/README.md): what a user's profiler
// options and PyTorch's other memory exports write, recorded here (make_options.py), and the
// pages of torch.cuda._memory_viz, which embed a snapshot.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "mhc/trace/check.hpp"
#include "mhc/trace/import/import.hpp"
#include "public_variants.hpp"
#include "util.hpp"

namespace imp = mhc::trace::import;
using mhc::trace::TraceData;

TEST_CASE("snapshot: a torch.cuda._memory_viz page imports as the snapshot it embeds", "[import][snapshot][writers]") {
    // `python -m torch.cuda._memory_viz trace_plot cs336-silmont2000-memory.pickle -o X.html` (torch 2.15; 2.4.1
    // writes the same page): the snapshot's pickle, 1 to 3 NULs of padding, in base64. Before 2026-12-06 "unknown
    // format" (the page begins with <!DOCTYPE html>).
    test::TempDir dir;
    imp::Result from_pickle, from_gz, from_html;
    const TraceData pickle =
        test::import_public_path(dir, test::pub("torch-snapshot/cs336-silmont2000-memory.pickle"), from_pickle, "p.db");
    const std::string gz = test::fixture("writers/memory-viz-2.15.0-trace_plot-cs336-silmont2000.html.gz");
    const TraceData page_gz = test::import_public_path(dir, gz, from_gz, "gz.db");
    const std::string html = dir.file("trace_plot.html");   // as users have it: plain
    test::write_file(html, test::gunzip(gz));
    const TraceData page = test::import_public_path(dir, html, from_html, "html.db");
    for (const TraceData* from_page : {&page_gz, &page}) {
        CHECK(from_page->allocations.size() == pickle.allocations.size());
        CHECK(from_page->allocations.bytes == pickle.allocations.bytes);
        CHECK(from_page->allocations.requested_bytes == pickle.allocations.requested_bytes);
        CHECK(from_page->allocations.t_alloc == pickle.allocations.t_alloc);
        CHECK(from_page->allocations.t_free == pickle.allocations.t_free);
        CHECK(from_page->allocations.address == pickle.allocations.address);
        CHECK(from_page->segments.size() == pickle.segments.size());
        CHECK(from_page->markers.size() == pickle.markers.size());
        CHECK(from_page->meta.at("snapshot.file").find("torch.cuda._memory_viz") != std::string::npos);
        CHECK(from_page->meta.count("snapshot.page_without_freed_blocks") == 0);
    }
    CHECK(pickle.allocations.size() > 30);
    CHECK(from_html.format == imp::Format::Snapshot);
    CHECK(from_html.warnings == from_pickle.warnings);

    SECTION("a page whose base64 is damaged is refused naming the byte") {
        std::string text = test::gunzip(gz);
        const size_t at = text.find("\"base64\": \"") + 20;
        text[at] = '!';
        test::write_file(html, text);
        CHECK(test::import_error(dir, html) ==
              html + ": torch.cuda._memory_viz page: byte " + std::to_string(at) + " of its snapshot's base64 is not base64");
    }
}

TEST_CASE("snapshot: a _memory_viz page written with filter_freed is said to lack the freed blocks",
          "[import][snapshot][writers]") {
    // `python -m torch.cuda._memory_viz trace_plot --filter_freed cs336-silmont2000-memory.pickle` (torch 2.15):
    // filter_alloc_free_pairs drops every block allocated and freed in the trace, 78 of its 97 events, which the page
    // does not say. It imports as what it holds, 10 blocks alive at the end, peak 31,719,936 B where the snapshot
    // peaks at 3,249,144,832 B: before 2026-12-08 without a word.
    test::TempDir dir;
    imp::Result result;
    const std::string html = dir.file("filtered.html");
    const std::string gz = test::fixture("writers/memory-viz-2.15.0-trace_plot-filter_freed-cs336-silmont2000.html.gz");
    test::write_file(html, test::gunzip(gz));
    const TraceData page = test::import_public_path(dir, html, result, "f.db");
    CHECK(page.allocations.size() == 10);
    CHECK(mhc::trace::live_peak(page, 0).bytes == 31719936);
    CHECK_THAT(page.meta.at("snapshot.page_without_freed_blocks"),
               Catch::StartsWith("the page's trace frees none of the 10 blocks it allocates, as a page written by "
                                 "trace_plot with filter_freed=True holds it"));
    CHECK(test::warned(result, "import the snapshot pickle the page was made from"));
}

TEST_CASE("a torch.cuda._memory_viz.profile_plot page is refused by name: its snapshot is not the allocator's",
          "[import][snapshot][writers]") {
    // profile_plot(prof) of a CPU profile with profile_memory=True (make_profile_plot.py, torch 2.15): the page of
    // trace_plot with a snapshot made from the profiler's memory events. Before 2026-12-06 it imported as device 0
    // (the host's memory is its last device_traces entry), 315 allocations, a 132.91 MiB "segment" spanning the
    // blocks' addresses, with one warning about an unread event field 'category'.
    test::TempDir dir;
    const std::string gz = test::fixture("writers/memory-viz-2.15.0-profile_plot-cpu.html.gz");
    const std::string html = dir.file("profile_plot.html");
    test::write_file(html, test::gunzip(gz));
    for (const std::string& page : {gz, html}) {
        const std::string error = test::import_error(dir, page);
        CHECK_THAT(error, Catch::StartsWith(page + ": a snapshot made by torch.cuda._memory_viz.profile_plot from the "
                                                   "profiler's memory events"));
        CHECK_THAT(error, Catch::Contains("export_chrome_trace, with profile_memory=True"));
    }
}

TEST_CASE("a torch.cuda._memory_viz page of PyTorch 2.0 is refused by name: it holds the plot's data, no snapshot",
          "[import][snapshot][writers]") {
    // torch 2.0's trace_plot wrote _memory_over_time_template with the plot's data (its PlotWriter.to_html): its head
    // as that template begins, with a small plot. Before 2026-12-06: "an HTML page without a memory snapshot in it
    // (mhc reads the pages of torch.cuda._memory_viz trace_plot and segment_plot, which embed one)".
    test::TempDir dir;
    const std::string page = dir.file("trace_plot.html");
    test::write_file(page, "\n<!DOCTYPE html>\n<html>\n<head></head>\n<body>\n<script type=\"module\">\n"
                           "import * as d3 from \"https://cdn.jsdelivr.net/npm/d3@7.7.0/+esm\";\n\n"
                           "let alloc_data = {\"actions\": [0, 1, 0], \"elements\": [{\"size\": 512, \"info\": 1}, "
                           "{\"size\": 1024, \"info\": 1}], \"suffix_table\": [[0, null], [1, 0]], \"string_table\": "
                           "[\"512.0B allocation\", \"f (x.py:1)\"], \"initially_allocated\": []}\n");
    CHECK_THAT(test::import_error(dir, page),
               Catch::StartsWith(page + ": a torch.cuda._memory_viz page of PyTorch 2.0") &&
                   Catch::Contains("import the snapshot pickle it was plotted from"));
}

TEST_CASE("the profiler's memory timeline exports are refused by name, with what to import instead",
          "[import][writers]") {
    // prof.export_memory_timeline(path, "cpu") in the handler of make_options.py's `timeline` mode: .raw.json.gz
    // ([time_ns, action, bytes, category] rows) and .json.gz (the plot's times and bytes by category), torch 2.15
    // and 2.4.1; the .html is a PNG picture (its head as torch 2.4.1 wrote it with matplotlib). Before 2026-12-06
    // all three were "unknown format".
    test::TempDir dir;
    for (const char* raw : {"writers/torch-2.15.0-timeline.raw.json.gz", "writers/torch-2.4.1-timeline.raw.json.gz"}) {
        const std::string error = test::import_error(dir, test::fixture(raw));
        CHECK_THAT(error, Catch::StartsWith(test::fixture(raw) + ": the raw memory timeline of PyTorch's profiler"));
        CHECK_THAT(error, Catch::Contains("export_chrome_trace, with profile_memory=True"));
    }
    const std::string plot = test::fixture("writers/torch-2.15.0-timeline.json.gz");
    CHECK_THAT(test::import_error(dir, plot), Catch::StartsWith(plot + ": a JSON array of arrays, such as the memory "
                                                                       "timeline plot of PyTorch's profiler"));
    const std::string page = dir.file("torch-2.4.1-timeline.html");
    test::write_file(page, "<html>\n<head><meta charset=\"utf-8\" /><title>GPU Memory Timeline HTML</title></head>\n"
                           "<body>\n  <img src='data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAABkAAAAPACAYAAABthLXY'>\n"
                           "</body>\n</html>");
    CHECK(test::import_error(dir, page) ==
          page + ": the memory timeline plot of PyTorch's profiler (export_memory_timeline to .html): a PNG picture, "
                 "no data to import. Import the profiler's trace of the same run (export_chrome_trace, with "
                 "profile_memory=True)");
    test::write_file(page, "<!DOCTYPE html><html><body>a report</body></html>");
    CHECK_THAT(test::import_error(dir, page), Catch::Contains("an HTML page without a memory snapshot in it"));
}

TEST_CASE("a directory given to import is refused naming the profiler traces in it", "[import][writers]") {
    // tensorboard_trace_handler(dir) in two processes (make_options.py `workers`) writes one file per process and
    // cycle, HOST_PID.TIME_NS.pt.trace.json, into one directory, which users pass as it is. Before 2026-12-06:
    // "DIR: is a directory" at the command line, nothing of what to do.
    test::TempDir dir;
    const std::string logs = dir.file("log");
    std::filesystem::create_directory(logs);
    const std::string trace = test::gunzip(test::fixture("writers/torch-2.15.0-nomemory-kineto.json.gz"));
    test::write_file(logs + "/vm_13731.1796529757717149934.pt.trace.json", trace);
    test::write_file(logs + "/vm_13728.1796529755852827521.pt.trace.json", trace);
    const std::string said = logs +
                             ": is a directory of 2 PyTorch profiler traces (tensorboard_trace_handler writes one file "
                             "per process and profiling cycle: vm_13728.1796529755852827521.pt.trace.json, "
                             "vm_13731.1796529757717149934.pt.trace.json): import each file into a trace of its own; "
                             "the ranks of one job are then simulated together with mhc simulate --ranks";
    CHECK(test::import_error(dir, logs) == said);
    imp::Options kineto;   // --format skips detection: the same
    kineto.format = imp::Format::Kineto;
    CHECK_THROWS_WITH(imp::import_file(logs, dir.file("t.db"), kineto), said);
    const std::string empty = dir.file("empty");
    std::filesystem::create_directory(empty);
    CHECK(test::import_error(dir, empty) == empty + ": is a directory, not a trace file: import one file");
    std::string err;
    CHECK(test::run_mhc("import " + logs + " -o " + dir.file("cli.db"), &err) == 2);
    CHECK(err == "mhc: " + said + "\n");
    const std::string et = test::fixture("writers/torch-2.15.0-et.json.gz");   // the same as --kineto
    CHECK(test::run_mhc("import " + et + " --kineto " + logs + " -o " + dir.file("et.db"), &err) == 2);
    CHECK(err == "mhc: " + said + "\n");
}

TEST_CASE("kineto: the host's memory is said to leave out what was allocated before profiling and to keep what "
          "was freed unseen", "[import][kineto][writers]") {
    // PyTorch's CPU allocator updates Total Allocated only while the profiler records memory. make_options.py's
    // `timeline` recording: 0 B before its first event and a peak of 109,132 B, while the profiler's memory timeline
    // of the same cycle holds 134,864 B of parameters, AdamW state and inputs from before (peak 243,996 B). Its
    // `twice` recording, the loop profiled a second time in one process: the first run's model and AdamW state,
    // freed between the profiles, stay in the count: 124,624 B before the first event that no free shows live,
    // imported as one block alive throughout (host peak 316,844 B; the events' own 192,220 B). Before 2026-12-06
    // neither was said.
    test::TempDir dir;
    imp::Result first;
    const TraceData once =
        test::import_public_path(dir, test::fixture("writers/torch-2.15.0-timeline-kineto.json.gz"), first, "once.db");
    CHECK(once.meta.at("kineto.total_allocated.device-1").rfind("agrees at all", 0) == 0);
    REQUIRE(once.meta.count("kineto.host_memory_scope") == 1);
    CHECK_THAT(once.meta.at("kineto.host_memory_scope"),
               Catch::StartsWith("the CPU allocator's count, which PyTorch updates only while the profiler records "
                                 "memory: blocks allocated before profiling"));
    CHECK_THAT(once.meta.at("kineto.host_memory_scope"), !Catch::Contains("before the first host event"));
    CHECK_FALSE(test::warned(first, "host memory is"));   // nothing counted that may be freed: meta alone
    imp::Result second;
    const TraceData twice =
        test::import_public_path(dir, test::fixture("writers/torch-2.15.0-twice-kineto.json.gz"), second, "twice.db");
    CHECK_THAT(twice.meta.at("kineto.host_memory_scope"),
               Catch::EndsWith("; of its 124624 B before the first host event (Total Allocated), 124624 B no free of "
                               "the trace shows live: imported as one block alive throughout, which the host's peak "
                               "counts, though they may be blocks freed unseen"));
    CHECK(test::warned(second, "124624 B no free of the trace shows live"));
    // A GPU run's host events: said in meta; the GPU's count is its allocator's whole, so no warning.
    imp::Result gpu;
    const TraceData bert = test::import_public(dir, "kineto/tracelens-mi300x-bert-small-uncased.json.gz", gpu);
    CHECK(bert.meta.count("kineto.host_memory_scope") == 1);
    CHECK_FALSE(test::warned(gpu, "host memory is"));
    // No host event, nothing said.
    imp::Result none;
    const TraceData nccl = test::import_public(dir, "kineto/nccl_data.json.gz", none);
    CHECK(nccl.meta.count("kineto.host_memory_scope") == 0);
}
