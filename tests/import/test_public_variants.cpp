// Real public traces of shapes the other importer tests do not cover: Kineto traces of other
// back-ends and profiler modes (MTIA, the CUPTI range profiler, a CPU-only gloo rank, PyTorch
// 1.x category names, PyTorch 1.8's JSON array document, a rank pair of one job, ROCm ranks whose
// kernels carry the runtime's agent number), Nsight Systems 2024.5 and 2025.1 exports (and variants
// without GPU tables), execution traces of several schemas and a snapshot's end state alone. The
// figures were read from the files with Python's json/gzip/sqlite3 (tests/data/public/SOURCES.md);
// tests/import/public_traces.py checks the same files against their own accounting.
#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "mhc/common/error.hpp"
#include "mhc/trace/check.hpp"
#include "util.hpp"

namespace imp = mhc::trace::import;
using mhc::trace::TraceData;

namespace {

TraceData import_public(const test::TempDir& dir, const std::string& name, imp::Result& result) {
    imp::Options opt;
    opt.warn = false;
    const std::string out = dir.file("t.db");
    result = imp::import_file(test::pub(name), out, opt);
    TraceData trace = mhc::trace::load_trace(out);
    REQUIRE(mhc::trace::check_trace(trace).ok());
    return trace;
}

TraceData import_public_path(const test::TempDir& dir, const std::string& path, imp::Result& result) {
    imp::Options opt;
    opt.warn = false;
    const std::string out = dir.file("p.db");
    result = imp::import_file(path, out, opt);
    TraceData trace = mhc::trace::load_trace(out);
    REQUIRE(mhc::trace::check_trace(trace).ok());
    return trace;
}

bool warned(const imp::Result& result, const std::string& text) {
    return std::any_of(result.warnings.begin(), result.warnings.end(),
                       [&](const std::string& warning) { return warning.find(text) != std::string::npos; });
}

// A copy of a public file at `path` changed by the SQL `change` (a variant a test needs).
void public_variant(const std::string& name, const std::string& path, const std::string& change) {
    test::write_file(path, test::read_file(test::pub(name)));
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    char* msg = nullptr;
    const int rc = sqlite3_exec(db, change.c_str(), nullptr, nullptr, &msg);
    INFO((msg ? msg : ""));
    sqlite3_free(msg);
    sqlite3_close(db);
    REQUIRE(rc == SQLITE_OK);
}

std::string import_error(const test::TempDir& dir, const std::string& in) {
    imp::Options opt;
    opt.warn = false;
    try {
        imp::import_file(in, dir.file("refused.db"), opt);
    } catch (const mhc::Error& e) { return e.what(); }
    return "";
}

int64_t kernel_time(const TraceData& trace) {
    int64_t ns = 0;
    for (size_t i = 0; i < trace.kernels.size(); ++i) ns += trace.kernels.t_end[i] - trace.kernels.t_start[i];
    return ns;
}

}  // namespace

TEST_CASE("kineto: an MTIA trace's device events are said to be left out, not dropped in silence",
          "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result result;
    TraceData trace = import_public(dir, "kineto/hta-mtia-inference-rank-0.json.gz", result);
    // 16,158 events: 1,313 mtia_ccp_events on the MTIA device's lane (pid 17), 823 mtia_runtime
    // calls, 1,696 user annotations; no kernel, memcpy or memset event.
    CHECK(result.events == 16158);
    CHECK(trace.kernels.size() == 0);
    CHECK(trace.markers.size() == 1696);
    CHECK(trace.meta.at("kineto.unread_events") == "1313 mtia_ccp_events, 823 mtia_runtime");
    CHECK(warned(result, "2136 events of categories mhc does not read were left out (1313 mtia_ccp_events, 823 mtia_runtime)"));
}

TEST_CASE("kineto: CUPTI range-profiler kernels are said to be left out", "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result result;
    TraceData trace = import_public(dir, "kineto/hta-cupti-profiler-range.json.gz", result);
    // 77 kernels measured by the range profiler (cuda_profiler_range on GPU 0's lane), no
    // activity-trace kernel: their times are the profiler's replays, not the run's.
    CHECK(trace.kernels.size() == 0);
    CHECK(trace.meta.at("kineto.unread_events") == "77 cuda_profiler_range");
    CHECK(warned(result, "77 events of categories mhc does not read"));
    // Kept with the trace as said, one per line, for `mhc info` to say again later.
    std::string kept;
    for (const auto& warning : result.warnings) kept += (kept.empty() ? "" : "\n") + warning;
    CHECK(trace.meta.at("import.warnings") == kept);
}

TEST_CASE("kineto: traces whose every event is read carry no unread-events line", "[import][kineto][public]") {
    test::TempDir dir;
    for (const char* name : {"kineto/hta-cuda-event-sync.json.gz", "kineto/hta-triton-example.json.gz",
                             "kineto/hta-inference-rank-1-old-categories.json.gz"}) {
        INFO(name);
        imp::Result result;
        TraceData trace = import_public(dir, name, result);
        CHECK(trace.meta.count("kineto.unread_events") == 0);
        CHECK(result.warnings.empty());
        CHECK(trace.meta.count("import.warnings") == 0);
        // Every kernel linked to its launch: by correlation with a cuda_runtime call, a
        // cuda_driver cuLaunchKernel (Triton), or a PyTorch 1.x 'Runtime' call.
        CHECK(trace.meta.at("kineto.kernels_linked_to_launch") == std::to_string(trace.kernels.size()));
    }
}

TEST_CASE("kineto: a CPU-only gloo rank and a rank pair of one job keep their job identity",
          "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result result;
    TraceData cpu = import_public(dir, "kineto/hta-cpu-only-gloo-rank-34.pt.trace.json.gz", result);
    CHECK(cpu.kernels.size() == 0);
    CHECK(cpu.meta.at("rank") == "34");
    CHECK(cpu.meta.at("world_size") == "300");
    CHECK(cpu.markers.size() == 11);   // 10 gloo:all_reduce annotations and ProfilerStep#551
    CHECK(std::count(cpu.markers.kind.begin(), cpu.markers.kind.end(), mhc::trace::MarkerKind::Step) == 1);
    // Ranks 0 and 1 of a 128-rank job, two steps each (551 and 552), kernels split evenly.
    for (const auto& [name, rank, kernels] : {std::tuple{"kineto/hta-sampled-rank-0.json.gz", "0", 1154},
                                               std::tuple{"kineto/hta-sampled-rank-1.json.gz", "1", 1104}}) {
        INFO(name);
        TraceData trace = import_public(dir, name, result);
        CHECK(trace.meta.at("rank") == rank);
        CHECK(trace.meta.at("world_size") == "128");
        CHECK(static_cast<int>(trace.kernels.size()) == kernels);
        CHECK(std::count(trace.kernels.step.begin(), trace.kernels.step.end(), 551) == kernels / 2);
        CHECK(std::count(trace.kernels.step.begin(), trace.kernels.step.end(), 552) == kernels / 2);
    }
}

// Tools merge the traces of several ranks into one file (concatenating traceEvents; some also
// prefix each pid with the rank). Each rank has its own ProfilerStep#N and its own correlation
// ids: such a file was read as one process, with every step counted once per rank.
TEST_CASE("kineto: two ranks' traces merged into one file have one step marker per step, and say so",
          "[import][kineto][public]") {
    test::TempDir dir;
    // HTA's sampled ranks 0 (pid 4037, 1,154 kernels on device 0) and 1 (pid 4045, 1,104 on
    // device 1), both ProfilerStep#551 and #552, traceEvents the last key of each: rank 1's events
    // appended to rank 0's array.
    std::string rank0 = test::gunzip(test::pub("kineto/hta-sampled-rank-0.json.gz"));
    const std::string rank1 = test::gunzip(test::pub("kineto/hta-sampled-rank-1.json.gz"));
    const std::string key = "\"traceEvents\": [";
    REQUIRE(rank0.substr(rank0.size() - 2) == "]}");
    REQUIRE(rank1.find(key) != std::string::npos);
    rank0.resize(rank0.size() - 2);
    const std::string merged = rank0 + ", " + rank1.substr(rank1.find(key) + key.size());
    test::write_file(dir.file("merged.json"), merged);
    imp::Result result;
    TraceData trace = import_public_path(dir, dir.file("merged.json"), result);
    CHECK(result.events == 4855 + 4720);
    CHECK(std::count(trace.kernels.device.begin(), trace.kernels.device.end(), 0) == 1154);
    CHECK(std::count(trace.kernels.device.begin(), trace.kernels.device.end(), 1) == 1104);
    // One marker per step, over both ranks' ranges: #551 from rank 0's start (ts
    // 1682725898079292 us) to rank 1's end (1682725898079484 + 607904 us): 608,096,000 ns; #552
    // from rank 0's start (1682725898686653) to rank 1's end (1682725898687438 + 630639): 631,424,000 ns.
    std::vector<std::pair<int32_t, int64_t>> steps;
    for (size_t i = 0; i < trace.markers.size(); ++i)
        if (trace.markers.kind[i] == mhc::trace::MarkerKind::Step)
            steps.emplace_back(trace.markers.index[i], trace.markers.t_end[i] - trace.markers.t_start[i]);
    std::sort(steps.begin(), steps.end());
    CHECK(steps == std::vector<std::pair<int32_t, int64_t>>{{551, 608096000}, {552, 631424000}});
    CHECK(trace.meta.at("kineto.processes").rfind("2 processes' traces in one file", 0) == 0);
    CHECK(warned(result, "2 ProfilerStep#N ranges of the same N joined, one step marker each"));
    // Correlation ids are per process: each kernel takes the launch of its own rank's process
    // (device 0's kernels were launched by pid 4037, device 1's by 4045). Worked out with Python's
    // json from the two files (each kernel's step by its own process's call of its correlation
    // id, in the joined step ranges): 577 and 577 kernels in steps 551 and 552 on device 0, 552
    // and 552 on device 1. Joined by the last launch of the id read, one kernel of device 0 took
    // rank 1's step 552 (576 and 578).
    std::map<std::pair<int32_t, int32_t>, int64_t> per_step;
    for (size_t i = 0; i < trace.kernels.size(); ++i) ++per_step[{trace.kernels.device[i], trace.kernels.step[i]}];
    CHECK(per_step == std::map<std::pair<int32_t, int32_t>, int64_t>{
                          {{0, 551}, 577}, {{0, 552}, 577}, {{1, 551}, 552}, {{1, 552}, 552}});
    CHECK(trace.meta.at("kineto.shared_correlations").find("kernels of such ids joined to the launch of the process") !=
          std::string::npos);
    CHECK(trace.meta.at("kineto.shared_correlations").find(", 0 to the latest launch before them") !=
          std::string::npos);
    CHECK(!warned(result, "may be another process's"));
    CHECK(trace.meta.count("kineto.device_processes") == 0);   // one pid per device

    // The same two ranks as two nodes' GPU 0 each, merged by a tool that makes pids distinct (as
    // SGLang's trace merger prefixes them with the rank): rank 1's GPU events carry device 0 and
    // pid "node1 0". Each process keeps its own lanes: no kernel is cut short, the kernel time is
    // the files' 606,519,000 + 651,026,000 ns (Python's json: each rank's sum of dur; neither rank
    // alone has an overlap on a stream). On shared lanes 687 kernels were clamped and 328,507,000
    // ns of kernel time lost (929,038,000 ns kept).
    std::string rank1_node1 = rank1.substr(rank1.find(key) + key.size());
    for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
             {"\"pid\": 1, ", "\"pid\": \"node1 0\", "}, {"\"device\": 1, ", "\"device\": 0, "}})
        for (size_t at = rank1_node1.find(from); at != std::string::npos; at = rank1_node1.find(from, at + to.size()))
            rank1_node1.replace(at, from.size(), to);
    test::write_file(dir.file("nodes.json"), rank0 + ", " + rank1_node1);
    TraceData nodes = import_public_path(dir, dir.file("nodes.json"), result);
    REQUIRE(nodes.kernels.size() == 2258);
    CHECK(std::count(nodes.kernels.device.begin(), nodes.kernels.device.end(), 0) == 2258);
    int64_t kernel_ns = 0;
    for (size_t i = 0; i < nodes.kernels.size(); ++i) kernel_ns += nodes.kernels.t_end[i] - nodes.kernels.t_start[i];
    CHECK(kernel_ns == 606519000 + 651026000);
    CHECK(nodes.meta.at("kineto.kernel_starts_clamped") == "0");
    CHECK(std::count(nodes.kernels.stream.begin(), nodes.kernels.stream.end(), (int64_t{1} << 40) + 7) == 986);
    CHECK(nodes.meta.at("kineto.device_processes")
              .rfind("kernels, copies and memsets of several pids on device 0 (2 pids)", 0) == 0);
    // The launches are still joined per process: lane (pid "node1 0", device 0) is rank 1's.
    std::map<int32_t, int64_t> node_steps;
    for (int32_t step : nodes.kernels.step) ++node_steps[step];
    CHECK(node_steps == std::map<int32_t, int64_t>{{551, 577 + 552}, {552, 577 + 552}});

    // Each rank alone is one process: nothing joined, nothing said.
    TraceData alone = import_public(dir, "kineto/hta-sampled-rank-0.json.gz", result);
    CHECK(alone.meta.count("kineto.processes") == 0);
}

// Two processes' profile_memory traces merged into one file, both on CUDA device 0 and the host:
// each allocator has its own addresses, baseline and Total Allocated. TraceLens's H100 BERT-small
// (pid 19392: 218 [memory] events on GPU 0, baseline 91,360,768 B) and FalconsAI (pid 5617: 572,
// baseline 214,877,184 B, recorded earlier), the second's events put first in the first's
// traceEvents. Worked out
// with Python's json (each process's level is its latest Total Allocated, its baseline before
// its first event; the sum after every event in ts order): device 0 peaks at 322,693,632 B, the
// FalconsAI peak (231,332,864) over BERT's baseline, alive from the start. Read as one allocator,
// the pairing crossed processes and every check of Total Allocated failed.
TEST_CASE("kineto: two processes' [memory] events on one device are each paired and checked on their own",
          "[import][kineto][public]") {
    test::TempDir dir;
    std::string bert = test::gunzip(test::pub("kineto/tracelens-h100-bert-small-uncased.json.gz"));
    const std::string falcon = test::gunzip(test::pub("kineto/tracelens-h100-falconsai-nsfw-image-detection.json.gz"));
    const std::string key = "\"traceEvents\": [", end = "}], \"schemaVersion\"";
    const size_t from = falcon.find(key) + key.size(), to = falcon.find(end) + 1;
    REQUIRE((bert.find(key) != std::string::npos && falcon.find(end) != std::string::npos));
    bert.insert(bert.find(key) + key.size(), falcon.substr(from, to - from) + ", ");
    test::write_file(dir.file("two.json"), bert);
    imp::Result result;
    TraceData trace = import_public_path(dir, dir.file("two.json"), result);   // mhc check: ok
    // FalconsAI's events come first in time: its allocator keeps the addresses, BERT's are the
    // later process's (.pid19392).
    CHECK(trace.meta.at("kineto.total_allocated.device0") == "agrees at all 572 events");
    CHECK(trace.meta.at("kineto.total_allocated.device0.pid19392") == "agrees at all 218 events");
    CHECK(trace.meta.at("kineto.baseline.device0").rfind("214877184 ", 0) == 0);
    CHECK(trace.meta.at("kineto.baseline.device0.pid19392").rfind("91360768 ", 0) == 0);
    CHECK(trace.meta.at("kineto.total_allocated.device-1") == "agrees at all 48 events");
    CHECK(trace.meta.at("kineto.total_allocated.device-1.pid19392") == "agrees at all 18 events");
    CHECK(trace.meta.at("kineto.memory_processes").find("pid 19392 on device 0") != std::string::npos);
    CHECK(!warned(result, "differ from Total Allocated"));
    // Device 0's live bytes over time, from the rows.
    std::vector<std::pair<int64_t, int64_t>> deltas;
    for (size_t i = 0; i < trace.allocations.size(); ++i) {
        if (trace.allocations.device[i] != 0) continue;
        deltas.emplace_back(trace.allocations.t_alloc[i], trace.allocations.bytes[i]);
        if (trace.allocations.t_free[i] != mhc::trace::kNoTime)
            deltas.emplace_back(trace.allocations.t_free[i], -trace.allocations.bytes[i]);
    }
    std::sort(deltas.begin(), deltas.end());
    int64_t live = 0, peak = 0;
    for (const auto& [time, bytes] : deltas) peak = std::max(peak, live += bytes);
    CHECK(peak == 322693632);
}

// Kineto's traces of early 2021 (PyTorch 1.9 pre-releases) list the GPUs as computeProperties,
// with the entries deviceProperties has now: tb_plugin's GPU-metrics test input (May 2021, four
// V100s listed, 30 kernels on stream 7 of GPU 0, two HtoD copies of 640 and 128 B,
// ProfilerStep#2; Python's json). Before 2026-12-03 the list was skipped: no device name or memory.
TEST_CASE("kineto: a 2021 trace's computeProperties name its GPU", "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result result;
    TraceData trace = import_public(dir, "kineto/tb-plugin-gpu-metrics-input.json.gz", result);
    CHECK(result.events == 340);
    CHECK(trace.kernels.size() == 30);
    CHECK(std::all_of(trace.kernels.stream.begin(), trace.kernels.stream.end(),
                      [](int64_t stream) { return stream == 7; }));
    CHECK(std::all_of(trace.kernels.device.begin(), trace.kernels.device.end(),
                      [](int32_t device) { return device == 0; }));
    REQUIRE(trace.copies.size() == 2);
    CHECK(trace.copies.bytes[0] + trace.copies.bytes[1] == 768);
    CHECK((trace.copies.kind[0] == mhc::trace::CopyKind::H2D && trace.copies.kind[1] == mhc::trace::CopyKind::H2D));
    CHECK(trace.meta.at("kineto.step_markers") == "1");
    CHECK(trace.meta.at("device_name") == "Tesla V100-DGXS-32GB");
    CHECK(trace.meta.at("device_memory") == "34084028416");   // GPU 0's (GPUs 1-3: 34,087,305,216 B)
}

// An out-of-memory as PyTorch's profiler writes it (profiler_kineto.cpp: a cpu_instant_event
// named [OutOfMemory] with the Device Type, Device Id and Bytes of the request that failed, and
// the allocator's totals then) put first into the H100 BERT-small trace: the rows are the
// original's (it allocates nothing), and the import says that an allocation failed, where
// before 2026-12-03 the event was dropped without a word and the trace looked like a run that fit.
TEST_CASE("kineto: an [OutOfMemory] event is said, not dropped", "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result plain_result, result;
    TraceData plain = import_public(dir, "kineto/tracelens-h100-bert-small-uncased.json.gz", plain_result);
    std::string text = test::gunzip(test::pub("kineto/tracelens-h100-bert-small-uncased.json.gz"));
    const std::string key = "{\"traceEvents\": [";
    REQUIRE(text.rfind(key, 0) == 0);
    text.insert(key.size(), R"j({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[OutOfMemory]", )j"
                            R"j("pid": 19392, "tid": 19392, "ts": 1419247336000.5, "args": {"Total Reserved": )j"
                            R"j(121634816, "Total Allocated": 101305344, "Bytes": 85899345920, "Device Id": 0, )j"
                            R"j("Device Type": 1, "Ev Idx": 5000}}, )j");
    test::write_file(dir.file("oom.json"), text);
    TraceData trace = import_public_path(dir, dir.file("oom.json"), result);
    CHECK(trace.allocations.size() == plain.allocations.size());
    CHECK(trace.kernels.size() == plain.kernels.size());
    CHECK(mhc::trace::live_peak(trace, 0).bytes == 101305344);   // the file's largest Total Allocated
    CHECK(trace.meta.at("kineto.total_allocated.device0") == plain.meta.at("kineto.total_allocated.device0"));
    const std::string said =
        "1 allocation failed while the profiler recorded ([OutOfMemory] events; the first: traceEvents[0], device 0, "
        "85899345920 bytes asked for, Total Allocated 101305344, Total Reserved 121634816)";
    CHECK(trace.meta.at("kineto.out_of_memory") == said);
    CHECK(plain.meta.count("kineto.out_of_memory") == 0);
    CHECK(std::any_of(result.warnings.begin(), result.warnings.end(),
                      [&](const std::string& warning) { return warning.rfind(said, 0) == 0; }));
}

// Kineto's XPU plugin (Intel GPUs) places kernels and copies by args.sycl queue, with no
// args.stream, and writes its runtime calls as xpu_runtime (synchronisation as xpu_sync). Such a
// trace had every kernel of a device on stream 0 (the overlapping ones of two queues cut short)
// and its launches said to be unread events. The XPU-style copy of a real CUDA trace (param's
// AlexNet on an A100: 79 kernels and 19 copies on streams 7 and 20, two of them overlapping a
// kernel of the other stream) must import as the original does.
TEST_CASE("kineto: an XPU-style trace (sycl queue, xpu_runtime) keeps its lanes and launches",
          "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result result;
    TraceData cuda = import_public(dir, "kineto/hta-alexnet-param-bench.json.gz", result);
    std::string text = test::gunzip(test::pub("kineto/hta-alexnet-param-bench.json.gz"));
    auto replace_all = [&](const std::string& from, const std::string& to) {
        size_t count = 0;
        for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()), ++count)
            text.replace(at, from.size(), to);
        return count;
    };
    CHECK(replace_all("\"stream\": ", "\"sycl queue\": ") == 139);   // 98 kernels and copies, 41 cuda_sync
    CHECK(replace_all("\"cat\": \"cuda_runtime\"", "\"cat\": \"xpu_runtime\"") == 361);
    CHECK(replace_all("\"cat\": \"cuda_sync\"", "\"cat\": \"xpu_sync\"") == 41);
    // Its memcpys named as the XPU plugin names them (Intel PTI's memcpy type, "M2D": system
    // memory to device); they were device to device before 2026-12-03.
    CHECK(replace_all("Memcpy HtoD (Pageable -> Device)", "Memcpy M2D (MEMORY(Unknown) -> DEVICE)") == 16);
    test::write_file(dir.file("xpu.json"), text);
    TraceData xpu = import_public_path(dir, dir.file("xpu.json"), result);
    auto lanes = [](const TraceData& trace) {
        std::map<std::pair<int32_t, int64_t>, int64_t> out;
        for (size_t i = 0; i < trace.kernels.size(); ++i) ++out[{trace.kernels.device[i], trace.kernels.stream[i]}];
        for (size_t i = 0; i < trace.copies.size(); ++i) ++out[{trace.copies.device[i], trace.copies.stream[i]}];
        return out;
    };
    CHECK(lanes(xpu) == lanes(cuda));
    CHECK(lanes(xpu).size() == 2);
    auto copy_kinds = [](const TraceData& trace) {   // kind -> [count, bytes]
        std::map<int, std::pair<int64_t, int64_t>> out;
        for (size_t i = 0; i < trace.copies.size(); ++i) {
            auto& [count, bytes] = out[static_cast<int>(trace.copies.kind[i])];
            ++count;
            bytes += trace.copies.bytes[i];
        }
        return out;
    };
    CHECK(copy_kinds(xpu) == copy_kinds(cuda));
    // 16 HtoD of 244,403,360 B in all and 3 memsets of 21,760 B (Python's json, 2026-12-03).
    CHECK(copy_kinds(cuda).at(static_cast<int>(mhc::trace::CopyKind::H2D)) ==
          std::pair<int64_t, int64_t>{16, 244403360});
    CHECK(xpu.meta.count("kineto.copies_without_direction") == 0);
    CHECK(kernel_time(xpu) == kernel_time(cuda));
    CHECK(xpu.meta.at("kineto.kernels_linked_to_launch") == cuda.meta.at("kineto.kernels_linked_to_launch"));
    CHECK(xpu.meta.at("kineto.kernels_linked_to_launch") == "79");
    CHECK(xpu.meta.count("kineto.unread_events") == 0);
    CHECK(xpu.meta.at("kineto.sycl_queues").rfind("98 kernels and copies on the stream of their args.sycl queue", 0) ==
          0);
    CHECK(cuda.meta.count("kineto.sycl_queues") == 0);
    // A queue id past int64 (an invalid id written unsigned) places nothing and refuses nothing.
    CHECK(replace_all("\"sycl queue\": 7,", "\"sycl queue\": 18446744073709551615,") == 123);
    test::write_file(dir.file("xpu-invalid-queue.json"), text);
    TraceData invalid = import_public_path(dir, dir.file("xpu-invalid-queue.json"), result);
    CHECK(invalid.kernels.size() == 79);
    CHECK(invalid.meta.at("kineto.sycl_queues").rfind("7 kernels and copies", 0) ==
          0);   // stream 20: 6 kernels, 1 memset
}

// A process driving several GPUs copies between them peer to peer (cudaMemcpyPeer, NVLink):
// CUPTI reports such a copy as a memcpy2 record, which Kineto writes with args fromDevice,
// inDevice and toDevice and no args.device, under the pid of the device that ran it (libkineto
// CuptiActivity.h, GpuActivity<CUpti_ActivityMemcpyPtoPType>). No such trace was found public;
// AlexNet's 16 HtoD memcpys on GPU 0 written as that writer writes peer copies from GPU 0 run by
// GPU 1 were imported on device 0 (every peer copy of such a trace on the first GPU).
TEST_CASE("kineto: peer copies (no args.device) are on the GPU that ran them, their args.inDevice",
          "[import][kineto][public]") {
    test::TempDir dir;
    std::string text = test::gunzip(test::pub("kineto/hta-alexnet-param-bench.json.gz"));
    int copies = 0;
    const std::string htod = "\"Memcpy HtoD (Pageable -> Device)\", \"pid\": 0,";
    for (size_t at = text.find(htod); at != std::string::npos; at = text.find(htod, at + 1), ++copies) {
        text.replace(at, htod.size(), "\"Memcpy PtoP (Device -> Device)\", \"pid\": 1,");
        const std::string device = "\"device\": 0, \"context\": 1,";
        const size_t args = text.find(device, at);
        REQUIRE(args != std::string::npos);
        text.replace(args, device.size(),
                     "\"fromDevice\": 0, \"inDevice\": 1, \"toDevice\": 1, \"fromContext\": 1, \"inContext\": 2, "
                     "\"toContext\": 2,");
    }
    CHECK(copies == 16);
    test::write_file(dir.file("peer.json"), text);
    imp::Result result;
    TraceData peer = import_public_path(dir, dir.file("peer.json"), result);
    std::map<std::tuple<int32_t, int, int64_t>, std::pair<int64_t, int64_t>> by_lane;   // (device, kind, stream)
    for (size_t i = 0; i < peer.copies.size(); ++i) {
        auto& [count,
               bytes] = by_lane[{peer.copies.device[i], static_cast<int>(peer.copies.kind[i]), peer.copies.stream[i]}];
        ++count;
        bytes += peer.copies.bytes[i];
    }
    // The 16 copies' 244,403,360 B (Python's json, 2026-12-03) on GPU 1, stream 7; the 3 memsets
    // (21,760 B) stay on GPU 0.
    const int p2p = static_cast<int>(mhc::trace::CopyKind::P2P),
              memset = static_cast<int>(mhc::trace::CopyKind::Memset);
    CHECK(by_lane.at({1, p2p, 7}) == std::pair<int64_t, int64_t>{16, 244403360});
    CHECK(by_lane.count({0, p2p, 7}) == 0);
    std::map<int32_t, std::pair<int64_t, int64_t>> memsets;   // device -> count, bytes
    for (const auto& [lane, count_bytes] : by_lane) {
        if (std::get<1>(lane) != memset) continue;
        memsets[std::get<0>(lane)].first += count_bytes.first;
        memsets[std::get<0>(lane)].second += count_bytes.second;
    }
    CHECK(memsets == std::map<int32_t, std::pair<int64_t, int64_t>>{{0, {3, 21760}}});
    CHECK(peer.meta.at("kineto.copies_on_in_device").rfind("16 memcpys without args.device", 0) == 0);
    CHECK(peer.meta.count("kineto.without_device") == 0);
    // Placed on device 0, the copies (pid 1) made GPU 0 look like two processes' (pid 0's kernels).
    CHECK(peer.meta.count("kineto.device_processes") == 0);
    CHECK(peer.kernels.size() == 79);
    // With the inDevice removed too, the copies have no device at all: on device 0, and said.
    const std::string in_device = "\"inDevice\": 1, ";
    for (size_t at = text.find(in_device); at != std::string::npos; at = text.find(in_device, at))
        text.erase(at, in_device.size());
    test::write_file(dir.file("nowhere.json"), text);
    TraceData nowhere = import_public_path(dir, dir.file("nowhere.json"), result);
    CHECK(nowhere.meta.at("kineto.without_device") ==
          "16 kernels, memcpys or memsets without args.device (the first: 'Memcpy PtoP (Device -> Device)') were "
          "placed on device 0");
    CHECK(warned(result, "16 kernels, memcpys or memsets without args.device"));
}

TEST_CASE("kineto: a PyTorch 1.8-era trace written as one JSON array is read, not refused", "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result result;
    TraceData trace = import_public(dir, "kineto/tb-plugin-resnet50-2020-12-array.pt.trace.json.gz", result);
    // 82,276 events in a top-level array (no traceEvents object): 9,538 Kernel, 12 Memcpy, 377
    // Memset, ProfilerStep#5..#10; 'tid' written as strings on most events.
    CHECK(result.format == imp::Format::Kineto);
    CHECK(result.events == 82276);
    CHECK(trace.kernels.size() == 9538);
    CHECK(trace.copies.size() == 389);
    // 736 kernels carry a correlation id no CPU event of the file has (launched before the
    // profiler's window opened): the other 8,802, one per cudaLaunchKernel, are linked.
    CHECK(trace.meta.at("kineto.kernels_linked_to_launch") == "8802");
    // Kernels per step as tests/import/public_traces.py finds them from each launch's time.
    CHECK(std::count(trace.kernels.step.begin(), trace.kernels.step.end(), -1) == 81);
    CHECK(std::count(trace.kernels.step.begin(), trace.kernels.step.end(), 5) == 2122);
    for (int step = 6; step <= 10; ++step) CHECK(std::count(trace.kernels.step.begin(), trace.kernels.step.end(), step) == 1467);
}

TEST_CASE("nsys: a 2024.5 export (META_DATA_EXPORT, four A100s, one MPI rank's kernels)", "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    TraceData trace = import_public(dir, "nsys/pipit-perlmutter-cloverleaf-cuda.sqlite", result);
    CHECK(trace.kernels.size() == 1312);
    REQUIRE(trace.copies.size() == 279);
    CHECK(std::count(trace.copies.kind.begin(), trace.copies.kind.end(), mhc::trace::CopyKind::H2D) == 254);
    CHECK(std::count(trace.copies.kind.begin(), trace.copies.kind.end(), mhc::trace::CopyKind::D2H) == 25);
    CHECK(trace.meta.at("device_name") == "NVIDIA A100-SXM4-80GB");
    CHECK(trace.meta.at("device_memory") == "84990623744");
    // The version table was renamed META_DATA_EXPORT; it was read as "unknown" before.
    CHECK(trace.meta.at("nsys.version") == "2024.5.1.113");
    CHECK(trace.meta.at("nsys.schema_version") == "3.13.2");
    int64_t kernel_ns = 0;
    for (size_t i = 0; i < trace.kernels.size(); ++i) kernel_ns += trace.kernels.t_end[i] - trace.kernels.t_start[i];
    CHECK(kernel_ns == 294404540);
}

TEST_CASE("nsys: NVTX rows that are no range or mark (a domain's creation, thread names) are not markers",
          "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    // extra-p's export: 76 push/pop ranges (eventType 59) and the creation of the domain
    // de.tu-darmstadt.parallel.extra_prof (75), which was a zero-length range at t = 0.
    TraceData trace = import_public(dir, "nsys/extrap-concurrent-16-streams.sqlite", result);
    CHECK(trace.markers.size() == 76);
    for (size_t i = 0; i < trace.markers.size(); ++i)
        CHECK(trace.str(trace.markers.name[i]) != "de.tu-darmstadt.parallel.extra_prof");
    CHECK(trace.meta.at("nsys.nvtx_rows_not_ranges") == "1 (domain, category and thread names: not markers)");
    // Time 0 is the earliest range ('main'), no longer the domain's creation 8,209 ns before it.
    auto first = std::min_element(trace.markers.t_start.begin(), trace.markers.t_start.end());
    CHECK(*first == 0);
    CHECK(trace.str(trace.markers.name[static_cast<size_t>(first - trace.markers.t_start.begin())]) == "main");
}

TEST_CASE(
    "kineto: kernels that ran at once on one stream (CUDA graph branches, programmatic dependent launch) are "
    "moved and said, not silently shortened",
    "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result result;
    // Rank 1 of 2 on a V100 (GPU 1), 12 cudaGraphLaunch calls whose kernels (up to 429 each) share
    // the launch's correlation id and are all written on stream 7: 31 of them start up to 13 us
    // before the previous kernel on that stream ends (the graph's parallel branches). The file's
    // kernel time is 801,858,000 ns; moving those starts to the previous end takes 115,000 ns off
    // (tests/import/public_traces.py replays the same rule on the JSON).
    TraceData graphs = import_public(dir, "kineto/hta-trace-diff-cuda-graphs-rank-1.json.gz", result);
    CHECK(graphs.kernels.size() == 9876);
    CHECK(std::all_of(graphs.kernels.device.begin(), graphs.kernels.device.end(),
                      [](int32_t device) { return device == 1; }));
    CHECK(graphs.meta.at("kineto.kernel_starts_clamped") == "31");
    CHECK(kernel_time(graphs) == 801858000 - 115000);
    const std::string said =
        "31 kernels started before the previous kernel on their stream ended (by up to 13000 ns; "
        "115000 ns of kernel time in all; 31 of them launched with other kernels under one "
        "correlation id, a CUDA graph's)";
    CHECK(graphs.meta.at("kineto.kernel_clamp") == said);
    CHECK(warned(result, said + ": their starts were moved"));
    // A B200 (CUDA 12.9 runtime, driver 13.0, NCCL 2.27.5, rank 0 of 8): 74 MoE kernels launched
    // with cuLaunchKernelEx/cudaLaunchKernelExC start up to 3.7 us before the previous one ends
    // (programmatic dependent launch): none of them shares a correlation id.
    TraceData pdl = import_public(dir, "kineto/tracelens-b200-eager.json.gz", result);
    CHECK(pdl.kernels.size() == 768);
    CHECK(pdl.copies.size() == 161);
    CHECK(pdl.meta.at("kineto.kernels_linked_to_launch") == "768");
    CHECK(pdl.meta.at("world_size") == "8");
    CHECK(kernel_time(pdl) == 10862916 - 69278);
    CHECK(pdl.meta.at("kineto.kernel_clamp") ==
          "74 kernels started before the previous kernel on their stream ended (by up to 3744 ns; 69278 ns of kernel "
          "time in all; 0 of them launched with other kernels under one correlation id, a CUDA graph's)");
    // A trace with no such overlap says nothing.
    TraceData plain = import_public(dir, "kineto/hta-sampled-rank-0.json.gz", result);
    CHECK(plain.meta.at("kineto.kernel_starts_clamped") == "0");
    CHECK(plain.meta.count("kineto.kernel_clamp") == 0);
    CHECK(!warned(result, "started before the previous kernel"));
}

TEST_CASE("kineto: hipGraphLaunch kernels sharing one correlation id are each linked to the launch",
          "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result result;
    // vLLM's full decode graph replayed on an MI300X: 421 of the 425 kernels carry the correlation
    // id of the one hipGraphLaunch; sglang's Qwen3-8B decode: 544 of 555.
    for (const auto& [name, kernels] : {std::tuple{"kineto/tracelens-mi300x-vllm-decode-full-graph.json.gz", 425},
                                        std::tuple{"kineto/tracelens-mi300x-sglang-qwen3-decode-graph.json.gz", 555}}) {
        INFO(name);
        TraceData trace = import_public(dir, name, result);
        CHECK(static_cast<int>(trace.kernels.size()) == kernels);
        CHECK(trace.meta.at("kineto.kernels_linked_to_launch") == std::to_string(kernels));
        CHECK(trace.meta.at("kineto.kernel_starts_clamped") == "0");
    }
}

TEST_CASE("kineto: a ROCm trace without [memory] events numbers its one GPU as deviceProperties does",
          "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result result;
    // SGLang on one MI300X: deviceProperties lists device 0 alone, the kernels and copies carry the
    // HIP agent number 9 (two CPU agents, then eight GPUs: the process ran on the node's eighth).
    // They were imported on device 9 of a one-GPU trace; there is no [memory] event to go by.
    TraceData one = import_public(dir, "kineto/tracelens-mi300x-sglang-qwen3-decode-graph.json.gz", result);
    CHECK(
        std::all_of(one.kernels.device.begin(), one.kernels.device.end(), [](int32_t device) { return device == 0; }));
    CHECK(std::all_of(one.copies.device.begin(), one.copies.device.end(), [](int32_t device) { return device == 0; }));
    CHECK(one.meta.at("kineto.kernel_device").rfind("9 -> 0 (one GPU in deviceProperties", 0) == 0);
    // vLLM's trace lists eight GPUs: agent 2 may be GPU 0 or GPU 2, so its number is kept, and
    // said (before 2026-12-02 it was kept in silence).
    TraceData eight = import_public(dir, "kineto/tracelens-mi300x-vllm-decode-full-graph.json.gz", result);
    CHECK(std::all_of(eight.kernels.device.begin(), eight.kernels.device.end(),
                      [](int32_t device) { return device == 2; }));
    CHECK(eight.meta.at("kineto.kernel_device") ==
          "2 kept: ROCm numbers kernels by the runtime's agent (CPU agents first), not by the process's device "
          "index, which the file does not tell (8 GPUs in deviceProperties)");
    CHECK(warned(result, "kernels and copies on device 2 kept: ROCm numbers kernels by the runtime's agent"));
}

TEST_CASE("kineto: a ROCm rank of an 8-GPU DDP job keeps its kernels' agent number and says so",
          "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result result;
    // TraceLens's MI300X ResNet run with activation checkpointing, DDP rank 0 of 8 (NCCL 2.22.3):
    // 2,995 kernels on agent 2 (2,978 on stream 0, 17 NCCL kernels on stream 4), 550 DtoD copies
    // and 108 memsets, ProfilerStep#15-#17. Eight GPUs in deviceProperties and no [memory] event:
    // rank 0 most likely ran on GPU 0, but nothing in the file says which GPU agent 2 is. It was
    // imported on device 2 without a word.
    TraceData ddp = import_public(dir, "kineto/tracelens-mi300x-resnet-act-checkpoint-ddp.json.gz", result);
    CHECK(ddp.kernels.size() == 2995);
    CHECK(std::count(ddp.kernels.stream.begin(), ddp.kernels.stream.end(), 4) == 17);
    CHECK(
        std::all_of(ddp.kernels.device.begin(), ddp.kernels.device.end(), [](int32_t device) { return device == 2; }));
    CHECK(ddp.copies.size() == 658);
    CHECK(std::count(ddp.kernels.step.begin(), ddp.kernels.step.end(), 15) == 1383);
    CHECK(ddp.meta.at("rank") == "0");
    CHECK(ddp.meta.at("world_size") == "8");
    CHECK(ddp.meta.at("kineto.kernel_device").rfind("2 kept: ROCm numbers kernels by the runtime's agent", 0) == 0);
    CHECK(warned(result, "kernels and copies on device 2 kept"));
    // A ROCm 6.2 trace that writes no version key (its runtime calls are hipLaunchKernel, ...), four
    // MI250 dies listed, kernels on agent 2; and a GPU-only MI210 trace (no CPU op), four listed,
    // kernels on agent 1.
    TraceData mi250 = import_public(dir, "kineto/hta-mi250-rocm6.2-minitoy-train.json.gz", result);
    CHECK(mi250.meta.at("kineto.kernel_device").rfind("2 kept", 0) == 0);
    TraceData mi210 = import_public(dir, "kineto/tracelens-mi210-gpu-only.json.gz", result);
    CHECK(mi210.kernels.size() == 562);
    CHECK(mi210.meta.at("kineto.kernel_device").rfind("1 kept", 0) == 0);
    CHECK(warned(result, "which the file does not tell (4 GPUs in deviceProperties)"));
    // CUDA numbers kernels by the process's device: a TorchRec rank with eight A100s listed and
    // kernels on five streams of device 0 (NCCL all_to_all among them) says nothing.
    TraceData cuda = import_public(dir, "kineto/hta-torchrec-rank0-five-streams.json.gz", result);
    CHECK(cuda.kernels.size() == 6080);
    CHECK(std::all_of(cuda.kernels.device.begin(), cuda.kernels.device.end(),
                      [](int32_t device) { return device == 0; }));
    for (const auto& [stream, count] : {std::pair{7, 5705}, {27, 295}, {84, 36}, {285, 22}, {363, 22}})
        CHECK(std::count(cuda.kernels.stream.begin(), cuda.kernels.stream.end(), stream) == count);
    CHECK(cuda.meta.count("kineto.kernel_device") == 0);
    CHECK(result.warnings.empty());
}

TEST_CASE("nsys: a 2024.6 export of an H200 run with NVTX ranges", "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    // nvFuser's report1.sqlite: schema 3.16.1, 19 kernels (393,539 ns), one DtoH memcpy of 1 B and
    // one memset of 4 B, 652 NVTX push/pop ranges (eventType 59), no CUDA_GPU_MEMORY_USAGE_EVENTS.
    TraceData trace = import_public(dir, "nsys/fuser-h200-nsys-2024.6.sqlite", result);
    CHECK(trace.kernels.size() == 19);
    CHECK(kernel_time(trace) == 393539);
    REQUIRE(trace.copies.size() == 2);
    CHECK(std::count(trace.copies.kind.begin(), trace.copies.kind.end(), mhc::trace::CopyKind::D2H) == 1);
    CHECK(std::count(trace.copies.kind.begin(), trace.copies.kind.end(), mhc::trace::CopyKind::Memset) == 1);
    CHECK(trace.markers.size() == 652);
    CHECK(trace.meta.at("nsys.version") == "2024.6.2.25");
    CHECK(trace.meta.at("nsys.schema_version") == "3.16.1");
    CHECK(trace.meta.at("device_name") == "NVIDIA H200");
    CHECK(trace.meta.at("device_memory") == "150137864192");
    CHECK(trace.meta.at("nsys.missing_tables") == "CUDA_GPU_MEMORY_USAGE_EVENTS");
}

TEST_CASE("nsys: a 2025.1 export (schema 3.17.1) of an H200 run with 13,513 NVTX ranges", "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    // nvFuser's report1.sqlite of March 2025: 18 kernels on stream 7 (10,167,602 ns), memcpys of
    // 394,002,432 B and 2 B HtoD (copyKind 1) and 62,914,560 B DtoD (copyKind 8), three 4 B memsets.
    TraceData trace = import_public(dir, "nsys/fuser-h200-nsys-2025.1.sqlite", result);
    CHECK(trace.kernels.size() == 18);
    CHECK(kernel_time(trace) == 10167602);
    REQUIRE(trace.copies.size() == 6);
    CHECK(std::count(trace.copies.kind.begin(), trace.copies.kind.end(), mhc::trace::CopyKind::H2D) == 2);
    CHECK(std::count(trace.copies.kind.begin(), trace.copies.kind.end(), mhc::trace::CopyKind::D2D) == 1);
    CHECK(std::count(trace.copies.kind.begin(), trace.copies.kind.end(), mhc::trace::CopyKind::Memset) == 3);
    CHECK(std::accumulate(trace.copies.bytes.begin(), trace.copies.bytes.end(), int64_t{0}) ==
          394002432 + 2 + 62914560 + 3 * 4);
    CHECK(trace.markers.size() == 13513);
    CHECK(trace.meta.at("nsys.version") == "2025.1.1.110");
    CHECK(trace.meta.at("nsys.schema_version") == "3.17.1");
    CHECK(trace.meta.at("device_memory") == "150121545728");
    // Its META_DATA_CAPTURE row PROCESS_0:CUDA_GRAPH_TRACE_OPTIONS:MODE is Graph: a graph launch
    // would be one CUPTI_ACTIVITY_KIND_GRAPH_TRACE row (it has none).
    CHECK(trace.meta.at("nsys.cuda_graph_trace").rfind("Graph (META_DATA_CAPTURE", 0) == 0);
    CHECK(trace.meta.count("nsys.graph_launches") == 0);
}

// A memory event's memKind is host memory (0 pageable, 1 pinned) or the GPU's (2-7: device,
// array, managed, static, unknown; ENUM_CUDA_MEM_KIND of nsys 2022 to 2026). A kind a later nsys
// adds is read as the GPU's, as before, but said: extra-p's con_kernel export (no enum table: the
// eight kinds) with its first device allocation and its free (rowids 2 and 11, 40,000 B at
// 47,315,943,424) of kind 9.
TEST_CASE("nsys: a memory event of a memKind the export does not list is said", "[import][nsys][public]") {
    test::TempDir dir;
    const std::string in = dir.file("kind.sqlite");
    public_variant("nsys/con_kernel.sqlite", in,
                   "UPDATE CUDA_GPU_MEMORY_USAGE_EVENTS SET memKind = 9 WHERE address = 47315943424;");
    imp::Result result;
    TraceData trace = import_public_path(dir, in, result);
    CHECK(mhc::trace::live_peak(trace, 0).bytes == 40160000);   // as the original: the GPU's
    CHECK(trace.meta.at("nsys.unknown_memory_kinds") ==
          "2 memory events of a memKind the export's ENUM_CUDA_MEM_KIND does not list (the first: 9) were read as "
          "the GPU's memory");
    CHECK(warned(result, "does not list"));
    TraceData plain = import_public(dir, "nsys/con_kernel.sqlite", result);
    CHECK(plain.meta.count("nsys.unknown_memory_kinds") == 0);
}

// NVTX_EVENTS.end may be NULL (the schema allows it): a mark has none, and a range that was
// pushed or started and never ended while nsys recorded has none either. Such a range is a
// marker of no length at its start, as before, but no longer in silence. The 2024.6 export's
// first push/pop range (rowid 1, 'Fusion::resetTvUses', 4,130 ns) without its end, and a mark.
// Tables of GPU memory and GPU samples the trace has no rows for are named with their row
// counts: extra-p's 2022.1 exports hold Windows' per-process video memory usage and budget
// (219 and 130 rows in con_kernel, sqlite3 2026-12-03), left out in silence before; a CUDA memory
// pool's reservations (cudaMallocAsync: CUDA_GPU_MEMORY_POOL_EVENTS, added to a copy) likewise.
TEST_CASE("nsys: rows of GPU memory tables mhc does not read are named and counted", "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    TraceData plain = import_public(dir, "nsys/con_kernel.sqlite", result);
    CHECK(plain.meta.at("nsys.unread_tables") == "GPU_MEMORY_USAGE_EVENTS 219, GPU_MEMORY_BUDGET_EVENTS 130");
    CHECK(warned(result, "rows of tables mhc does not read were left out (GPU_MEMORY_USAGE_EVENTS 219"));
    const std::string in = dir.file("pool.sqlite");
    public_variant("nsys/con_kernel.sqlite", in,
                   "CREATE TABLE CUDA_GPU_MEMORY_POOL_EVENTS (start INTEGER NOT NULL, globalPid INTEGER, deviceId "
                   "INTEGER, address INTEGER, operationType INTEGER, poolType INTEGER, size INTEGER); INSERT INTO "
                   "CUDA_GPU_MEMORY_POOL_EVENTS VALUES (1, 1, 0, 4096, 0, 0, 33554432), (2, 1, 0, 4096, 1, 0, 0);");
    TraceData pool = import_public_path(dir, in, result);
    CHECK(pool.meta.at("nsys.unread_tables") ==
          "CUDA_GPU_MEMORY_POOL_EVENTS 2, GPU_MEMORY_USAGE_EVENTS 219, GPU_MEMORY_BUDGET_EVENTS 130");
    CHECK(pool.allocations.size() == plain.allocations.size());
    // A 2025.1 export holds none of them: no line.
    import_public(dir, "nsys/fuser-h200-nsys-2025.1.sqlite", result);
    CHECK(!warned(result, "tables mhc does not read"));
}

TEST_CASE("nsys: an NVTX range without an end is said", "[import][nsys][public]") {
    test::TempDir dir;
    const std::string in = dir.file("open.sqlite");
    public_variant("nsys/fuser-h200-nsys-2024.6.sqlite", in,
                   "UPDATE NVTX_EVENTS SET end = NULL WHERE rowid = 1;"
                   "UPDATE NVTX_EVENTS SET end = NULL, eventType = 34 WHERE rowid = 2;");
    imp::Result result;
    TraceData trace = import_public_path(dir, in, result);
    CHECK(trace.markers.size() == 652);
    CHECK(trace.meta.at("nsys.nvtx_unended_ranges") ==
          "1 NVTX ranges have no end (pushed or started and never ended while nsys recorded; the first: "
          "'Fusion::resetTvUses'): each is a marker of no length at its start");
    CHECK(warned(result, "NVTX ranges have no end"));
    TraceData plain = import_public(dir, "nsys/fuser-h200-nsys-2024.6.sqlite", result);
    CHECK(plain.meta.count("nsys.nvtx_unended_ranges") == 0);
}

// nsys --cuda-graph-trace=graph writes each CUDA graph launch as one row of
// CUPTI_ACTIVITY_KIND_GRAPH_TRACE and none of the graph's kernels in CUPTI_ACTIVITY_KIND_KERNEL:
// read alone, such an export lost every graph's GPU time without a word.
TEST_CASE("nsys: CUDA graph launches traced whole are kernel rows, said, not dropped", "[import][nsys][public]") {
    test::TempDir dir;
    // The 2025.1 export (18 kernels on device 0, stream 7, the last ending at 9,034,955,316 ns,
    // correlation ids 167 to 2200) with the table and columns CUPTI_ActivityGraphTrace2 gives it:
    // graph 4 twice (10,000 and 20,000 ns), graph 6 once (15,000 ns, starting 5,000 ns before
    // graph 4's second launch ends: clamped to 10,000 ns), one launch of correlation 2200, whose
    // kernel the kernel table holds (node-level tracing: not added again), and one launch that
    // CUPTI could not time (start = end = 0: left out).
    const std::string table =
        "CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER "
        "NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
        "graphId INTEGER NOT NULL);"
        "INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE VALUES (9034956316, 9034966316, 0, 1, 7, 3001, 1, 4),"
        "(9034970000, 9034990000, 0, 1, 7, 3002, 1, 4), (9034985000, 9035000000, 0, 1, 7, 3004, 1, 6),"
        "(9032815243, 9034955316, 0, 1, 7, 2200, 1, 5), (0, 0, 0, 1, 7, 3003, 1, 4);";
    const std::string in = dir.file("graphs.sqlite");
    public_variant("nsys/fuser-h200-nsys-2025.1.sqlite", in, table);
    imp::Options opt;
    opt.warn = false;
    imp::Result result = imp::import_file(in, dir.file("graphs.db"), opt);
    TraceData trace = mhc::trace::load_trace(dir.file("graphs.db"));
    REQUIRE(mhc::trace::check_trace(trace).ok());
    REQUIRE(trace.kernels.size() == 18 + 3);
    CHECK(kernel_time(trace) == 10167602 + 10000 + 20000 + 10000);
    int graph4 = 0, graph6 = 0;
    for (size_t i = 0; i < trace.kernels.size(); ++i) {
        graph4 += trace.str(trace.kernels.name[i]) == "CUDA graph 4";
        graph6 += trace.str(trace.kernels.name[i]) == "CUDA graph 6";
    }
    CHECK(graph4 == 2);
    CHECK(graph6 == 1);
    CHECK(trace.meta.at("nsys.kernel_starts_clamped") == "1");
    CHECK(trace.meta.at("nsys.graph_launches") ==
          "3 CUDA graph launches of 2 graphs traced whole (CUPTI_ACTIVITY_KIND_GRAPH_TRACE, nsys "
          "--cuda-graph-trace=graph; 45000 ns on the GPU): each is one kernel row named 'CUDA graph G'; 1 more whose "
          "kernels the kernel table holds were not added; 1 without timestamps (start and end 0) left out");
    CHECK(warned(result, "the graphs' own kernels are not in the file"));

    // An export whose only GPU table is the graph trace is read, not refused for having none.
    const std::string alone = dir.file("graphs-alone.sqlite");
    public_variant("nsys/fuser-h200-nsys-2025.1.sqlite", alone,
                   "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL; DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY; "
                   "DROP TABLE CUPTI_ACTIVITY_KIND_MEMSET;" +
                       table);
    TraceData only = import_public_path(dir, alone, result);
    CHECK(only.kernels.size() == 4);   // with the launch of correlation 2200: no kernel holds it now
    CHECK(only.meta.at("nsys.missing_tables").find("CUPTI_ACTIVITY_KIND_KERNEL") != std::string::npos);
}

// nsys profile over a launcher records several processes in one export (globalPid): each numbers
// its streams and holds its address space on its own. Two processes on one GPU both had stream 7
// (one lane: the second's kernels clamped behind the first's) and the same addresses (one
// process's allocation freed the other's block).
TEST_CASE("nsys: two processes on one GPU keep their own lanes and their own allocations", "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    // The 2025.1 export's 18 kernels (device 0, stream 7, 10,167,602 ns, none clamped) again as a
    // second process's, 1,000 ns later: they overlap the first process's on the same stream number.
    const std::string kernels = dir.file("two-processes.sqlite");
    public_variant(
        "nsys/fuser-h200-nsys-2025.1.sqlite", kernels,
        "CREATE TEMP TABLE second AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL; UPDATE second SET globalPid = "
        "globalPid + 1, start = start + 1000, end = end + 1000, correlationId = correlationId + 100000; "
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM second;");
    TraceData two = import_public_path(dir, kernels, result);
    REQUIRE(two.kernels.size() == 36);
    CHECK(kernel_time(two) == 2 * 10167602);
    CHECK(two.meta.at("nsys.kernel_starts_clamped") == "0");
    CHECK(std::count(two.kernels.stream.begin(), two.kernels.stream.end(), 7) == 18);
    CHECK(std::count(two.kernels.stream.begin(), two.kernels.stream.end(), (int64_t{1} << 40) + 7) == 18);
    CHECK(two.meta.at("nsys.processes").rfind("2 processes (globalPid) in the export; 2 on device 0: ", 0) == 0);
    CHECK(warned(result, "streams are per process"));

    // extra-p's con_kernel export: 20 memory events of one process (device 0 and pinned host
    // memory, each peaking at 40,160,000 B) again as a second process's, 1 ns later, at the same
    // addresses. The file's own signed sum (frees first at one start) peaks at 80,320,000 B on
    // each and ends at 0.
    const std::string memory = dir.file("two-processes-memory.sqlite");
    public_variant(
        "nsys/con_kernel.sqlite", memory,
        "CREATE TEMP TABLE second AS SELECT * FROM CUDA_GPU_MEMORY_USAGE_EVENTS; UPDATE second SET globalPid = "
        "globalPid + 1, start = start + 1; INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS SELECT * FROM second;");
    TraceData mem = import_public_path(dir, memory, result);
    for (int32_t device : {-1, 0}) {
        std::vector<std::pair<int64_t, int64_t>> changes;   // frees before allocations at one instant
        for (size_t i = 0; i < mem.allocations.size(); ++i) {
            if (mem.allocations.device[i] != device) continue;
            changes.emplace_back(mem.allocations.t_alloc[i], mem.allocations.bytes[i]);
            if (mem.allocations.t_free[i] != mhc::trace::kNoTime)
                changes.emplace_back(mem.allocations.t_free[i], -mem.allocations.bytes[i]);
        }
        std::sort(changes.begin(), changes.end());
        int64_t live = 0, peak = 0;
        for (const auto& change : changes) peak = std::max(peak, live += change.second);
        INFO("device " << device);
        CHECK(peak == 80320000);
        CHECK(live == 0);
    }
    CHECK(mem.meta.at("nsys.memory_processes").rfind("20 memory events of processes after the first", 0) == 0);
}

TEST_CASE("nsys: a 2021 export without a version table, with memcpys, memsets and synchronisation rows",
          "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    // Mordred's report1.sqlite (July 2021, a Quadro RTX 6000): no EXPORT_META_DATA, 12 kernels on
    // one stream (8,544,420 ns), 48 memcpys (45 HtoD of 126,162 B, 3 DtoH of 504,000 B), 12 memsets
    // (21,651,120 B), CUPTI_ACTIVITY_KIND_SYNCHRONIZATION rows (not device work), no NVTX or memory table.
    TraceData trace = import_public(dir, "nsys/mordred-quadro-rtx6000-nsys-2021.sqlite", result);
    CHECK(trace.kernels.size() == 12);
    CHECK(kernel_time(trace) == 8544420);
    REQUIRE(trace.copies.size() == 60);
    int64_t h2d = 0, d2h = 0, memset = 0;
    for (size_t i = 0; i < trace.copies.size(); ++i) {
        const auto kind = trace.copies.kind[i];
        (kind == mhc::trace::CopyKind::H2D ? h2d : kind == mhc::trace::CopyKind::D2H ? d2h : memset) += trace.copies.bytes[i];
    }
    CHECK(h2d == 126162);
    CHECK(d2h == 504000);
    CHECK(memset == 21651120);
    CHECK(std::count(trace.copies.kind.begin(), trace.copies.kind.end(), mhc::trace::CopyKind::Memset) == 12);
    CHECK(trace.meta.at("nsys.schema_version") == "unknown");
    CHECK(trace.meta.at("device_name") == "Quadro RTX 6000");
    CHECK(trace.meta.at("device_memory") == "25396838400");
    CHECK(trace.meta.at("nsys.missing_tables") == "CUDA_GPU_MEMORY_USAGE_EVENTS,NVTX_EVENTS");
}

TEST_CASE("nsys: a 2025.5 export (schema 3.23.3) whose run made one memset and no kernel", "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    // WeatherBench2's report1.sqlite (November 2025, a GeForce RTX 4060): 23 CUDA API calls, one
    // cudaMemsetAsync (4,608 B, 1,472 ns on the GPU), no kernel, memcpy, memory or NVTX table;
    // recorded with CUDA_GRAPH_TRACE_OPTIONS:MODE Graph and COLLECT_GPU_MEMORY_USAGE false.
    TraceData trace = import_public(dir, "nsys/weatherbench2-rtx4060-nsys-2025.5.sqlite", result);
    CHECK(trace.kernels.size() == 0);
    REQUIRE(trace.copies.size() == 1);
    CHECK(trace.copies.kind[0] == mhc::trace::CopyKind::Memset);
    CHECK(trace.copies.bytes[0] == 4608);
    CHECK(trace.copies.t_end[0] - trace.copies.t_start[0] == 1472);
    CHECK(trace.meta.at("nsys.version") == "2025.5.1.121");
    CHECK(trace.meta.at("nsys.schema_version") == "3.23.3");
    CHECK(trace.meta.at("device_name") == "NVIDIA GeForce RTX 4060");
    CHECK(trace.meta.at("nsys.cuda_graph_trace").rfind("Graph", 0) == 0);
    CHECK(trace.meta.at("allocations").find("COLLECT_GPU_MEMORY_USAGE=false") != std::string::npos);
}

TEST_CASE("kineto: vLLM capturing its decode CUDA graph with profile_memory (MI300X)", "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result result;
    // TraceLens's vLLM graph-capture trace (ROCm, HIP runtime 70051831) without its 119,876
    // python_function events (SOURCES.md): 11,367 events, 7 kernels on HIP agent 2 (one GPU with
    // [memory] events: device 0), 3 memcpys, 1,184 [memory] events on HIP device 0 (category
    // cpu_instant_event) pairing 592 allocations with 592 frees; 191,610,969,088 B allocated before
    // the first (Total Allocated - Bytes), Total Allocated peaking at 191,628,704,768 B and back to
    // the baseline at the end, Total Reserved peaking at 193,621,655,552 B.
    TraceData trace = import_public(dir, "kineto/tracelens-mi300x-vllm-decode-graph-capture.json.gz", result);
    CHECK(result.events == 11367);
    CHECK(trace.kernels.size() == 7);
    CHECK(std::count(trace.kernels.device.begin(), trace.kernels.device.end(), 0) == 7);
    CHECK(trace.copies.size() == 3);
    CHECK(trace.allocations.size() == 592 + 1);
    CHECK(trace.meta.at("kineto.baseline.device0").rfind("191610969088 ", 0) == 0);
    CHECK(trace.meta.at("kineto.total_allocated.device0") == "agrees at all 1184 events");
    CHECK(trace.meta.at("kineto.reserved_peak.device0") == "193621655552");
    CHECK(trace.meta.at("kineto.profile_memory") == "on");
    int64_t live = 0, peak = 0;   // frees before allocations at one instant (docs/trace-format.md)
    std::vector<std::pair<int64_t, int64_t>> changes;
    for (size_t i = 0; i < trace.allocations.size(); ++i) {
        changes.emplace_back(trace.allocations.t_alloc[i], trace.allocations.bytes[i]);
        if (trace.allocations.t_free[i] != mhc::trace::kNoTime)
            changes.emplace_back(trace.allocations.t_free[i], -trace.allocations.bytes[i]);
    }
    std::sort(changes.begin(), changes.end());
    for (const auto& change : changes) peak = std::max(peak, live += change.second);
    CHECK(peak == 191628704768);
    CHECK(live == 191610969088);
}

TEST_CASE("et: an execution trace alone marks its ProfilerStep#N steps, as info counts them", "[import][et][public]") {
    test::TempDir dir;
    imp::Result result;
    // ResNet (schema 1.0.3): ProfilerStep#4-#6 with 2,584 ops each. `mhc info` said "steps none
    // marked": the import wrote the ops' steps but no step marker.
    TraceData resnet = import_public(dir, "chakra/param-resnet-1gpu-et-1.0.3.json.gz", result);
    REQUIRE(std::count(resnet.markers.kind.begin(), resnet.markers.kind.end(), mhc::trace::MarkerKind::Step) == 3);
    for (size_t m = 0; m < resnet.markers.size(); ++m) {
        CHECK(resnet.markers.index[m] == static_cast<int32_t>(m) + 4);
        CHECK(resnet.str(resnet.markers.name[m]) == "ProfilerStep#" + std::to_string(m + 4));
        for (size_t k = 0; k < resnet.kernels.size(); ++k)
            if (resnet.kernels.step[k] == resnet.markers.index[m]) {
                CHECK(resnet.kernels.t_start[k] >= resnet.markers.t_start[m]);
                CHECK(resnet.kernels.t_end[k] <= resnet.markers.t_end[m]);
            }
    }
    CHECK(mhc::trace::summarize(resnet).steps == 3);
    // HF GPT-2 (schema 1.1.0-chakra.0.0.4): ProfilerStep#0 holds 16,064 nodes of thread 1 and the
    // autograd thread's 11,091 fall within its ids; ProfilerStep#1 (id 38,919, the last) has
    // nothing under it: recording stopped as it began. One step, all 14,254 leaf ops in it.
    TraceData gpt2 = import_public(dir, "chakra/param-hf-gpt2-et-1.1.0.json.gz", result);
    CHECK(gpt2.kernels.size() == 14254);
    CHECK(std::all_of(gpt2.kernels.step.begin(), gpt2.kernels.step.end(), [](int32_t step) { return step == 0; }));
    REQUIRE(gpt2.markers.size() == 1);
    CHECK(gpt2.str(gpt2.markers.name[0]) == "ProfilerStep#0");
    CHECK(gpt2.meta.at("et.step_markers") == "1");
    // No ProfilerStep#N node: no marker.
    TraceData plain = import_public(dir, "chakra/param-resnet-et-1.0.1.json.gz", result);
    CHECK(plain.markers.size() == 0);
}

TEST_CASE("et: newer execution-trace schemas (1.0.3, a torch.compile trace in 1.1.1) written in finish order",
          "[import][et][public]") {
    test::TempDir dir;
    imp::Result result;
    // The compiled trace: per step (ProfilerStep#5, #6) an aten::mm and a Triton kernel node are
    // the leaf ops with tensors; its nodes come in the order ops finish (13, 16, 9, 6, 4, 3, ...).
    TraceData pt2 = import_public(dir, "chakra/param-pt2-et-1.1.1.json.gz", result);
    REQUIRE(pt2.kernels.size() == 4);
    CHECK(std::count(pt2.kernels.step.begin(), pt2.kernels.step.end(), 5) == 2);
    CHECK(std::count(pt2.kernels.step.begin(), pt2.kernels.step.end(), 6) == 2);
    CHECK(pt2.str(pt2.kernels.name[1]) == "triton_poi_fused_add_cos_neg_sin_0");
    CHECK(pt2.allocations.size() == 9);
    // ResNet, schema 1.0.3: three steps of leaf ops, 872 GPU storages and 350 host ones
    // (tests/import/public_traces.py recomputes their peaks from the nodes).
    TraceData resnet = import_public(dir, "chakra/param-resnet-1gpu-et-1.0.3.json.gz", result);
    CHECK(resnet.kernels.size() == 7752);
    CHECK(resnet.allocations.size() == 1222);
    CHECK(std::count(resnet.allocations.device.begin(), resnet.allocations.device.end(), 0) == 872);
}

TEST_CASE("et: the autograd thread's ops take the step whose ids they fall within, not none", "[import][et][public]") {
    test::TempDir dir;
    imp::Result result;
    // Both ResNet traces: three ProfilerStep#N nodes on thread 1 (1,519 leaf ops with tensors under
    // each), and 3,195 leaf ops on the autograd thread 2, whose root is the profiler's thread node:
    // 1,065 backward ops per step, all with ids between the step node's and the last id under it.
    // They were imported in no step (-1): 3,195 of 7,752 ops, the whole backward.
    for (const auto& [name, first] : {std::tuple{"chakra/param-resnet-1gpu-et-1.0.3.json.gz", 4},
                                      std::tuple{"chakra/param-resnet-et-1.1.0-chakra.0.0.4.json.gz", 6}}) {
        INFO(name);
        TraceData trace = import_public(dir, name, result);
        CHECK(trace.kernels.size() == 7752);
        for (int step = first; step < first + 3; ++step)
            CHECK(std::count(trace.kernels.step.begin(), trace.kernels.step.end(), step) == 2584);
        CHECK(trace.meta.at("et.steps_by_id").rfind("3195 ops under no ProfilerStep#N", 0) == 0);
    }
    // Traces without ProfilerStep#N nodes keep every op in no step and say nothing.
    TraceData plain = import_public(dir, "chakra/param-resnet-et-1.0.1.json.gz", result);
    CHECK(std::all_of(plain.kernels.step.begin(), plain.kernels.step.end(), [](int32_t step) { return step == -1; }));
    CHECK(plain.meta.count("et.steps_by_id") == 0);
}

TEST_CASE("snapshot: an end state's blocks pending free are kept alive and said to be above memory_allocated",
          "[import][snapshot][public]") {
    test::TempDir dir;
    imp::Result result;
    // verl's mem.pickle (a _dump_snapshot() of a Megatron + vLLM worker's GPU, no trace events): 127 segments
    // (26,189,234,176 B; pools (0,0), (0,1), (0,2)), 638 blocks: 534 active_allocated (24,916,034,560 B: the segments'
    // allocated_size, what memory_allocated() said), 9 active_pending_free (597,377,024 B), 95 inactive (Python's
    // pickle, SOURCES.md).
    TraceData trace = import_public(dir, "torch-snapshot/verl-megatron-vllm-end-state.pickle.gz", result);
    REQUIRE(trace.allocations.size() == 543);
    const int64_t live = std::accumulate(trace.allocations.bytes.begin(), trace.allocations.bytes.end(), int64_t{0});
    CHECK(live == 24916034560 + 597377024);   // the segments' active_size: all alive from t = 0
    CHECK(trace.meta.at("snapshot.end_state_only") == "127 segments, 638 blocks (no trace events)");
    CHECK(trace.meta.at("snapshot.end_state_pending_free").rfind("9 blocks, 597377024 B (", 0) == 0);
    CHECK(warned(result, "9 blocks, 597377024 B freed but still pending"));
    CHECK(warned(result, "imported the end state only"));
    // A snapshot whose end state holds no pending block says nothing of it.
    imp::Result other;
    TraceData plain = import_public(dir, "torch-snapshot/cs336-bcrafton-benchmark.pickle.gz", other);
    CHECK(plain.meta.count("snapshot.end_state_pending_free") == 0);
    CHECK_FALSE(warned(other, "pending"));
}

TEST_CASE("snapshot: a real snapshot's user-annotated region is a range marker", "[import][snapshot][public]") {
    test::TempDir dir;
    imp::Result result;
    // bcrafton's snapshot (PyTorch of 2026): external_annotations holds Optimizer.step's
    // record_function range, START at time_us 1773270053883781 and END at 1773270053896695; its
    // earliest event is at 1773270053858957 (Python's pickle): 24,824 us and 37,738 us in, so the
    // marker runs from 24,824,000 ns to the end of the END's microsecond, 37,739,000 ns. Before
    // 2026-12-03 the region was dropped in silence (no marker).
    TraceData trace = import_public(dir, "torch-snapshot/cs336-bcrafton-benchmark.pickle.gz", result);
    REQUIRE(trace.markers.size() == 1);
    CHECK(trace.str(trace.markers.name[0]) == "Optimizer.step#AdamW.step");
    CHECK(trace.markers.t_start[0] == 24824000);
    CHECK(trace.markers.t_end[0] == 37739000);
    CHECK(trace.markers.kind[0] == mhc::trace::MarkerKind::Range);
    CHECK(trace.meta.at("snapshot.annotations") ==
          "1 range markers from 2 START/END entries (record_function ranges of user scope)");
}

TEST_CASE("nsys: an export without GPU tables says whether CUDA was traced, from its capture options",
          "[import][nsys][public]") {
    test::TempDir dir;
    // nsys 2025.1's META_DATA_CAPTURE has PROCESS_0:COLLECT_CUDA_TRACE=true and
    // PROCESS_0:COLLECT_GPU_MEMORY_USAGE=false (sqlite3, SOURCES.md): no memory table, and why.
    imp::Result result;
    TraceData trace = import_public(dir, "nsys/fuser-h200-nsys-2025.1.sqlite", result);
    CHECK(trace.meta.at("allocations").find("COLLECT_GPU_MEMORY_USAGE=false") != std::string::npos);
    const std::string no_gpu_tables =
        "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL; DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY;"
        "DROP TABLE CUPTI_ACTIVITY_KIND_MEMSET;";
    SECTION("memory usage recorded, nothing allocated: the advice to record it is not given") {
        const std::string in = dir.file("memory-on.sqlite");
        public_variant("nsys/fuser-h200-nsys-2025.1.sqlite", in,
                       "UPDATE META_DATA_CAPTURE SET value = 'true' WHERE name LIKE '%COLLECT_GPU_MEMORY_USAGE';");
        imp::Options opt;
        opt.warn = false;
        imp::import_file(in, dir.file("memory-on.db"), opt);
        const TraceData on = mhc::trace::load_trace(dir.file("memory-on.db"));
        CHECK(on.meta.at("allocations").rfind("none (GPU memory usage was recorded", 0) == 0);
        CHECK(on.meta.at("allocations").find("--cuda-memory-usage") == std::string::npos);
    }
    SECTION("CUDA traced, no GPU work recorded (as an RTX 5060 Ti run of nsys 2025.1 whose kernels never ran)") {
        const std::string in = dir.file("runtime-only.sqlite");
        public_variant("nsys/fuser-h200-nsys-2025.1.sqlite", in, no_gpu_tables);
        const std::string error = import_error(dir, in);
        CHECK(error.find("none of the tables mhc reads") != std::string::npos);
        CHECK(error.find("CUDA was traced (CUPTI_ACTIVITY_KIND_RUNTIME holds its API calls)") != std::string::npos);
    }
    SECTION("CUDA tracing on, nothing recorded (as a 2023.3 export of an OpenMP offload run)") {
        const std::string in = dir.file("nothing.sqlite");
        public_variant("nsys/fuser-h200-nsys-2025.1.sqlite", in,
                       no_gpu_tables + "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME;");
        const std::string error = import_error(dir, in);
        CHECK(error.find(
                  "CUDA tracing was on (META_DATA_CAPTURE COLLECT_CUDA_TRACE=true) but nsys recorded no CUDA call") !=
              std::string::npos);
    }
    SECTION("CUDA not traced (as nsys 2026.1 and 2026.2 exports of NVTX only)") {
        const std::string in = dir.file("no-cuda.sqlite");
        public_variant("nsys/fuser-h200-nsys-2025.1.sqlite", in,
                       no_gpu_tables +
                           "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME;"
                           "UPDATE META_DATA_CAPTURE SET value = 'false' WHERE name LIKE '%COLLECT_CUDA_TRACE';");
        const std::string error = import_error(dir, in);
        CHECK(error.find("CUDA was not traced (META_DATA_CAPTURE COLLECT_CUDA_TRACE=false") != std::string::npos);
    }
    // nsys 2023.1 (schema 3.1.2) writes its version and no capture options: three such exports
    // of a Python process whose CUDA calls were not traced (nikitinvv/recon-stream, not kept: no
    // licence) were refused as "unknown version or nothing was traced", their version in the file.
    SECTION("a known version without capture options, nothing traced (as three nsys 2023.1 exports)") {
        const std::string in = dir.file("known-version.sqlite");
        public_variant("nsys/fuser-h200-nsys-2025.1.sqlite", in,
                       no_gpu_tables + "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME; DROP TABLE META_DATA_CAPTURE;");
        const std::string error = import_error(dir, in);
        CHECK(error.find("(schema 3.17.1) has none of the tables mhc reads") != std::string::npos);
        CHECK(error.find("no CUDA call and no GPU activity was traced (no CUPTI_ACTIVITY_KIND_RUNTIME: record with "
                         "nsys profile --trace=cuda)") != std::string::npos);
        CHECK(error.find("unknown version") == std::string::npos);
        // Without its version table too, the version is unknown, and the refusal says so.
        const std::string unknown = dir.file("unknown-version.sqlite");
        public_variant("nsys/fuser-h200-nsys-2025.1.sqlite", unknown,
                       no_gpu_tables +
                           "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME; DROP TABLE META_DATA_CAPTURE; DROP TABLE "
                           "META_DATA_EXPORT;");
        CHECK(import_error(dir, unknown).find("unknown version or nothing was traced") != std::string::npos);
    }
}

TEST_CASE("kineto: a trace with no [memory] event says whether memory profiling was on, from its own flag",
          "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result result;
    // vLLM's piecewise-graph replay: top-level "profile_memory": 1 before traceEvents, no [memory]
    // event (json, SOURCES.md). Nothing was allocated while it recorded: memory profiling was on.
    TraceData vllm = import_public(dir, "kineto/tracelens-mi300x-vllm-prefilldecode-piecewise.json.gz", result);
    CHECK(vllm.allocations.size() == 0);
    CHECK(vllm.meta.at("kineto.profile_memory") == "on");
    CHECK(vllm.meta.at("allocations").rfind("none: memory profiling was on (the trace's profile_memory: 1)", 0) == 0);
    // The flag after traceEvents (the Falconsai trace as written back) is read too.
    TraceData falcon = import_public(dir, "kineto/tracelens-h100-falconsai-nsfw-image-detection.json.gz", result);
    CHECK(falcon.meta.at("kineto.profile_memory") == "on");
    CHECK(falcon.meta.count("allocations") == 0);
    // No flag (B200 eager trace, PyTorch writes it only when on): the hint stays a question.
    TraceData b200 = import_public(dir, "kineto/tracelens-b200-eager.json.gz", result);
    CHECK(b200.meta.count("kineto.profile_memory") == 0);
    CHECK(b200.meta.at("allocations").find("profile_memory=True?") != std::string::npos);
}

TEST_CASE("kineto: Total Reserved at the first memory event and at its peak", "[import][kineto][public]") {
    // What the allocator held when the profiler began (docs/import.md, eleventh audit), read from
    // the files with Python: HTA's trace reserves 12,782,141,440 B at its first [memory] event of
    // GPU 1 and never changes (Total Allocated peaks at 6,629,508,096 B: the rest was reserved before
    // profiling); TraceLens's MI300X normalization test starts at 2,097,152 B and grows to 8,388,608 B.
    test::TempDir dir;
    imp::Result result;
    TraceData hta = import_public(dir, "kineto/hta-df-index-resolver.json.gz", result);
    CHECK(hta.meta.at("kineto.reserved_first.device1") == "12782141440");
    CHECK(hta.meta.at("kineto.reserved_peak.device1") == "12782141440");
    CHECK(hta.meta.at("kineto.reserved_first.device-1") == "0");   // the host's events record 0
    TraceData norm = import_public(dir, "kineto/tracelens-mi300x-normalization-layer-test.json.gz", result);
    CHECK(norm.meta.at("kineto.reserved_first.device0") == "2097152");
    CHECK(norm.meta.at("kineto.reserved_peak.device0") == "8388608");
}

TEST_CASE("kineto: GPU work beside [memory] events that are all the host's says the GPU memory was not recorded",
          "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result result;
    // TraceLens's MI300X DDP ResNet-18 rank "no_pool" (ROCm, HIP runtime 70253211, April 2026; Python's
    // json): profile_memory 1, 2,360 kernels on agent 2 stream 0, 5 DtoD memcpys and 10 memsets, 15
    // annotations (10 on the CPU, 5 on the GPU), no ProfilerStep#N, and 210 [memory] events, all the
    // host's (Device Type 0, 105 blocks of 8 B, Total Allocated at most 8 B): the GPU's allocations
    // were never reported to the profiler. Its process ran as PID 1 (a container): pid 1 is labelled
    // 'CPU' and 'GPU 1'. Before 2026-12-05 the import said nothing, and mhc info's peak was the host's
    // 8 B as if it were the trace's.
    TraceData ddp = import_public(dir, "kineto/tracelens-mi300x-ddp-resnet18-no-pool-pid1.json.gz", result);
    CHECK(ddp.kernels.size() == 2360);
    CHECK(std::all_of(ddp.kernels.device.begin(), ddp.kernels.device.end(), [](int32_t dev) { return dev == 2; }));
    CHECK(std::all_of(ddp.kernels.step.begin(), ddp.kernels.step.end(), [](int64_t step) { return step == -1; }));
    int64_t kernel_ns = 0;
    for (size_t i = 0; i < ddp.kernels.size(); ++i) kernel_ns += ddp.kernels.t_end[i] - ddp.kernels.t_start[i];
    CHECK(kernel_ns == 358908852);   // the sum of the kernels' dur, none clamped
    CHECK(ddp.copies.size() == 15);
    CHECK(ddp.markers.size() == 15);
    CHECK(ddp.allocations.size() == 105);
    CHECK(std::all_of(ddp.allocations.device.begin(), ddp.allocations.device.end(),
                      [](int32_t dev) { return dev == -1; }));
    CHECK(mhc::trace::live_peak(ddp, -1).bytes == 8);
    CHECK(ddp.meta.at("kineto.kernels_linked_to_launch") == "2360");
    CHECK(ddp.meta.at("kineto.total_allocated.device-1") == "agrees at all 210 events");
    CHECK(ddp.meta.at("kineto.profile_memory") == "on");
    CHECK(ddp.meta.at("kineto.gpu_memory")
              .rfind("not recorded: the trace's 210 [memory] events are all the host's, "
                     "while device 2 (2360 kernels, 15 copies and memsets) ran GPU work",
                     0) == 0);
    CHECK(warned(result, "GPU memory not recorded"));
    // A trace with a GPU's [memory] events says nothing of it: the H100 BERT-small trace (218 GPU
    // events beside 18 host ones); nor does one with none at all (the B200 eager trace).
    TraceData bert = import_public(dir, "kineto/tracelens-h100-bert-small-uncased.json.gz", result);
    CHECK(bert.meta.count("kineto.gpu_memory") == 0);
    TraceData b200 = import_public(dir, "kineto/tracelens-b200-eager.json.gz", result);
    CHECK(b200.meta.count("kineto.gpu_memory") == 0);
}

TEST_CASE("nsys: unified-memory page migrations (memcpy copyKind 11-13) are copies on stream 0, said",
          "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    // cestwc/balinski-and-gomory-cuda's Nsight Systems 2025.5.1 export (schema 3.23.3) of a
    // cudaMallocManaged solver on one of two RTX 3090s (Python's sqlite3): 86 kernels on stream 7
    // of device 0 (4,566,039 ns), 56 memcpy rows and 2 memsets; 49 of the memcpys are unified
    // memory's migrations (copyKind 11 UVM HtoD: 25 rows, 274,432 B; 12 UVM DtoH: 24, 212,992 B;
    // migrationCause 2 "Page fault" 44, 3 "Speculative prefecth" 5, as the export's
    // ENUM_CUDA_UNIF_MEM_MIGRATION spells it), all with streamId 0; the other 7 are cudaMemcpy
    // calls on stream 7 (4 HtoD, 160 B; 3 DtoH, 72 B). Before 2026-12-05 the migrations were read
    // as the program's copies without a word.
    TraceData uvm = import_public(dir, "nsys/cestwc-rtx3090-uvm-nsys-2025.5.sqlite", result);
    CHECK(uvm.kernels.size() == 86);
    int64_t kernel_ns = 0;
    for (size_t i = 0; i < uvm.kernels.size(); ++i) kernel_ns += uvm.kernels.t_end[i] - uvm.kernels.t_start[i];
    CHECK(kernel_ns == 4566039);
    CHECK(uvm.copies.size() == 58);
    std::map<std::tuple<int, int64_t>, std::pair<int64_t, int64_t>> lanes;   // (kind, stream) -> rows, bytes
    for (size_t i = 0; i < uvm.copies.size(); ++i) {
        auto& lane = lanes[{static_cast<int>(uvm.copies.kind[i]), uvm.copies.stream[i]}];
        ++lane.first;
        lane.second += uvm.copies.bytes[i];
    }
    const int h2d = static_cast<int>(mhc::trace::CopyKind::H2D), d2h = static_cast<int>(mhc::trace::CopyKind::D2H);
    CHECK(lanes.at({h2d, 0}) == std::pair<int64_t, int64_t>{25, 274432});
    CHECK(lanes.at({d2h, 0}) == std::pair<int64_t, int64_t>{24, 212992});
    CHECK(lanes.at({h2d, 7}) == std::pair<int64_t, int64_t>{4, 160});
    CHECK(lanes.at({d2h, 7}) == std::pair<int64_t, int64_t>{3, 72});
    CHECK(uvm.meta.at("nsys.version") == "2025.5.1.121");
    CHECK(uvm.meta.at("nsys.uvm_migrations") ==
          "49 memcpy rows are unified-memory page migrations (25 UVM HtoD (274432 B), 24 UVM DtoH (212992 B); "
          "migration cause: 44 Page fault, 5 Speculative prefecth): the driver moving managed memory, not "
          "cudaMemcpy calls; imported as copies on stream 0 (CUPTI gives them no stream)");
    CHECK(warned(result, "49 memcpy rows are unified-memory page migrations"));
    // An export without such rows says nothing of them (the 2024.6 H200 export: a DtoH memcpy).
    TraceData h200 = import_public(dir, "nsys/fuser-h200-nsys-2024.6.sqlite", result);
    CHECK(h200.meta.count("nsys.uvm_migrations") == 0);
}

TEST_CASE("snapshot: segments of private memory pools (a MemPool's, a CUDA graph's) are said",
          "[import][snapshot][public]") {
    test::TempDir dir;
    imp::Result result;
    // slime's Megatron RL snapshot (THUDM/slime, August 2025; Python's pickle): device_traces for
    // eight devices, events on device 3 alone (2,515: 1,065 alloc, 462 free_requested, 462
    // free_completed, 412 segment_alloc, 114 segment_free), 298 end-state segments, 297 of them
    // (34,709,962,752 B) in pool (0, 1), the torch.cuda.MemPool its offloaded weights live in, one
    // small segment (2,097,152 B) in the default pool (0, 0); 24 external_annotations. Its blocks peak
    // at 36,235,336,192 B and its reserved bytes at 38,780,534,784 B (snapshot_accounting.py). Before
    // 2026-12-05 the pools went unsaid, and mhc allocator's model (one pool per stream) reserved 5.05%
    // less with no reason given.
    TraceData slime = import_public(dir, "torch-snapshot/slime-megatron-mempool-device3.pickle.gz", result);
    CHECK(slime.allocations.size() == 1065);
    CHECK(std::all_of(slime.allocations.device.begin(), slime.allocations.device.end(),
                      [](int32_t dev) { return dev == 3; }));
    CHECK(mhc::trace::live_peak(slime, 3).bytes == 36235336192);
    CHECK(slime.segments.size() == 412);
    CHECK(slime.markers.size() == 12);
    CHECK(slime.meta.at("snapshot.reserved_peak_from_segment_events") == "38780534784");
    CHECK(slime.meta.at("snapshot.private_pools") == "device 3 pool (0, 1): 297 segments, 34709962752 B");
    CHECK(warned(result, "the end state holds 297 segments (34709962752 B) of private memory pools"));
    // Each private-pool segment of the end state by device, pool and address (meta
    // snapshot.segment_pools), which mhc allocator's model gives its allocations' pool from.
    const std::string& sp = slime.meta.at("snapshot.segment_pools");
    CHECK(std::count(sp.begin(), sp.end(), ' ') == 296);
    CHECK(sp.find("3:0,1:46808432640") != std::string::npos);
    CHECK(sp.find("3:0,0:") == std::string::npos);
    // verl's end state: a CUDA graph's pool and vLLM's KV cache pool beside the default one.
    TraceData verl = import_public(dir, "torch-snapshot/verl-megatron-vllm-end-state.pickle.gz", result);
    CHECK(verl.meta.at("snapshot.private_pools") ==
          "device 0 pool (0, 1): 44 segments, 585105408 B, device 0 pool (0, 2): 24 segments, 21793603584 B");
    // Snapshots of the default pool alone say nothing (Stanford's training step).
    TraceData stanford = import_public(dir, "torch-snapshot/stanford-cs336-training-step.pickle", result);
    CHECK(stanford.meta.count("snapshot.private_pools") == 0);
}

// A kernel launch (cudaLaunchKernel, cuLaunchKernel, hipLaunchKernel, cudaGraphLaunch, ...) whose
// correlation id no kernel, memcpy or memset event carries: in a trace the profiler wrote whole
// there is none (every Kineto trace kept here, Python's json). HazyResearch/zoology's A100 trace
// (October 2023, not kept: committed without a licence) holds 236 cudaLaunchKernel and 24
// cuLaunchKernel calls and no GPU event at all: the profiler lost them, and mhc imported a run of no
// kernel without a word. A launch made while its process's stream capture was open
// (hipStreamBeginCapture ... hipStreamEndCapture) was captured into a graph and did not run.
TEST_CASE("kineto: kernel launches whose kernels are not in the trace are said (captured ones apart)",
          "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result result;
    const std::string key = "kineto.launches_without_kernel";
    TraceData whole = import_public(dir, "kineto/simple_add_trace.json.gz", result);
    CHECK(whole.kernels.size() == 4);
    CHECK(whole.meta.count(key) == 0);
    // The same trace as the profiler writes it when it loses the GPU's activity: its 4 kernels
    // dropped, the 4 cudaLaunchKernel calls kept. The first launch's index counted here.
    auto trace = nlohmann::json::parse(test::gunzip(test::pub("kineto/simple_add_trace.json.gz")));
    auto& events = trace["traceEvents"];
    for (auto it = events.begin(); it != events.end();)
        it = it->value("cat", "") == "kernel" ? events.erase(it) : it + 1;
    size_t first = 0;
    while (events[first].value("name", "") != "cudaLaunchKernel") ++first;
    test::write_file(dir.file("lost.json"), trace.dump());
    TraceData lost = import_public_path(dir, dir.file("lost.json"), result);
    CHECK(lost.kernels.size() == 0);
    const std::string first_text = "(the first: traceEvents[" + std::to_string(first) + "] 'cudaLaunchKernel')";
    CHECK(lost.meta.at(key) ==
          "4 of 4 kernel launches (runtime and driver calls that launch kernels or CUDA graphs) have no kernel, memcpy "
          "or memset event of their correlation id: 4 not recorded " +
              first_text);
    CHECK(warned(result,
                 "4 of the Kineto trace's 4 kernel launches have no kernel, memcpy or memset event in the trace"));
    // The execution trace of the same run given that Kineto trace: said the same way.
    imp::Options with_kineto;
    with_kineto.warn = false;
    with_kineto.kineto_path = dir.file("lost.json");
    result = imp::import_file(test::pub("chakra/simple_add_et.json.gz"), dir.file("et.db"), with_kineto);
    CHECK(result.meta.at(key) == lost.meta.at(key));
    CHECK(warned(result, "4 of the Kineto trace's 4 kernel launches have no kernel"));
    // SGLang capturing its decode graph on an MI300X: 546 launches (Python's json: 399
    // hipLaunchKernel, 145 hipExtModuleLaunchKernel, 2 more) of which 544 fall between the one
    // hipStreamBeginCapture and hipStreamEndCapture and have no kernel; the 2 kernels ran.
    TraceData capture = import_public(dir, "kineto/tracelens-mi300x-sglang-decode-capture-bs32.json.gz", result);
    CHECK(capture.kernels.size() == 2);
    CHECK(capture.meta.at(key) ==
          "544 of 546 kernel launches (runtime and driver calls that launch kernels or CUDA graphs) have no kernel, "
          "memcpy or memset event of their correlation id: 544 made while a stream capture was open (captured into a "
          "CUDA graph, not run)");
    CHECK_FALSE(warned(result, "kernel launches have no kernel"));
    // Without its capture's begin the same launches are not recorded ones.
    std::string text = test::gunzip(test::pub("kineto/tracelens-mi300x-sglang-decode-capture-bs32.json.gz"));
    const size_t at = text.find("\"hipStreamBeginCapture\"");
    REQUIRE(at != std::string::npos);
    text.replace(at, 23, "\"hipStreamBeginCapturX\"");
    test::write_file(dir.file("uncaptured.json"), text);
    TraceData uncaptured = import_public_path(dir, dir.file("uncaptured.json"), result);
    CHECK(uncaptured.meta.at(key).find("have no kernel, memcpy or memset event of their correlation id: 544 not "
                                       "recorded (the first: traceEvents[") != std::string::npos);
    CHECK(warned(result, "544 of the Kineto trace's 546 kernel launches have no kernel"));
}

// The same for an Nsight Systems export: a CUPTI_ACTIVITY_KIND_RUNTIME launch that returned success
// and whose correlationId no kernel, memcpy, memset or graph row carries. None in any export read
// here; con_kernel (extra-p, nsys 2022.1: 7 cudaLaunchKernel_v7000 calls, correlation ids 122, 124,
// 129, 133, 135, 138, 141, Python's sqlite3) with the kernels of 124 and 133 deleted, as a recording
// that lost them; then with a stream capture begun before the first launch (captured, not run).
TEST_CASE("nsys: kernel launches without their kernel rows are said (captured ones apart)", "[import][nsys][public]") {
    test::TempDir dir;
    imp::Result result;
    const std::string key = "nsys.launches_without_kernel";
    TraceData whole = import_public(dir, "nsys/con_kernel.sqlite", result);
    CHECK(whole.meta.count(key) == 0);
    const std::string lost = dir.file("lost.sqlite");
    public_variant("nsys/con_kernel.sqlite", lost,
                   "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId IN (124, 133);");
    TraceData missing = import_public_path(dir, lost, result);
    CHECK(missing.kernels.size() == whole.kernels.size() - 2);
    CHECK(missing.meta.at(key) ==
          "2 of 7 kernel launches (CUPTI_ACTIVITY_KIND_RUNTIME calls that launch kernels or CUDA graphs, returning "
          "success) have no kernel, memcpy, memset or graph row of their correlationId: 2 not recorded (the first: "
          "CUPTI_ACTIVITY_KIND_RUNTIME row 25 'cudaLaunchKernel_v7000')");
    CHECK(warned(result, "2 of the export's 7 kernel launches have no kernel, memcpy, memset or graph row"));
    const std::string captured = dir.file("captured.sqlite");
    public_variant("nsys/con_kernel.sqlite", captured,
                   "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId IN (124, 133);"
                   "INSERT INTO StringIds (id, value) VALUES (99999, 'cudaStreamBeginCapture_v10000');"
                   "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId, "
                   "returnValue) SELECT MIN(start) - 1, MIN(start) - 1, 0, 72058132318159760, 0, 99999, 0 "
                   "FROM CUPTI_ACTIVITY_KIND_RUNTIME;");
    TraceData in_capture = import_public_path(dir, captured, result);
    CHECK(in_capture.meta.at(key) ==
          "2 of 7 kernel launches (CUPTI_ACTIVITY_KIND_RUNTIME calls that launch kernels or CUDA graphs, returning "
          "success) have no kernel, memcpy, memset or graph row of their correlationId: 2 made while a stream capture "
          "was open (captured into a CUDA graph, not run)");
    CHECK_FALSE(warned(result, "kernel launches have no kernel"));
}
