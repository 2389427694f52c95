// Real public Kineto traces of shapes the other importer tests do not cover: other back-ends and
// profiler modes (MTIA, the CUPTI range profiler, XPU-style sycl queues, a CPU-only gloo rank,
// PyTorch 1.x category names and 1.8's JSON array document, computeProperties of early 2021), a
// rank pair of one job and ranks merged into one file, ROCm ranks whose kernels carry the
// runtime's agent number, memory-profiling flags and launches without their kernels. The figures
// were read from the files with Python's json/gzip (tests/data/public/SOURCES.md);
// tests/import/public_traces.py checks the same files against their own accounting.
#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "mhc/common/error.hpp"
#include "mhc/trace/check.hpp"
#include "public_variants.hpp"
#include "util.hpp"

namespace imp = mhc::trace::import;
using mhc::trace::TraceData;

namespace {

// The public Kineto trace `name` with `change` made to its traceEvents, written to `path`.
void kineto_variant(const std::string& name, const std::string& path,
                    const std::function<void(nlohmann::json& events)>& change) {
    auto doc = nlohmann::json::parse(test::gunzip(test::pub(name)));
    change(doc["traceEvents"]);
    test::write_file(path, doc.dump());
}

// The events without the profiler's ProfilerStep#N ranges.
void drop_profiler_steps(nlohmann::json& events) {
    events.erase(std::remove_if(events.begin(), events.end(),
                                [](const nlohmann::json& event) {
                                    return event.value("name", "").rfind("ProfilerStep#", 0) == 0;
                                }),
                 events.end());
}

// Kernels per step of param's ResNet trace (30 optimizer steps): `after` launched after the last
// (step -1), `first` in step 0 and `each` in steps 1 to 29.
test::Steps resnet_steps(int64_t after, int64_t first, int64_t each) {
    test::Steps steps{{-1, after}, {0, first}};
    for (int32_t step = 1; step < 30; ++step) steps[step] = each;
    return steps;
}

}   // namespace

TEST_CASE("kineto: an MTIA trace's device events are said to be left out, not dropped in silence",
          "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result result;
    TraceData trace = test::import_public(dir, "kineto/hta-mtia-inference-rank-0.json.gz", result);
    // 16,158 events: 1,313 mtia_ccp_events on the MTIA device's lane (pid 17), 823 mtia_runtime
    // calls, 1,696 user annotations; no kernel, memcpy or memset event.
    CHECK(result.events == 16158);
    CHECK(trace.kernels.size() == 0);
    CHECK(trace.markers.size() == 1696);
    CHECK(trace.meta.at("kineto.unread_events") == "1313 mtia_ccp_events, 823 mtia_runtime");
    CHECK(test::warned(result, "2136 events of categories mhc does not read were left out (1313 mtia_ccp_events, 823 mtia_runtime)"));
}

TEST_CASE("kineto: CUPTI range-profiler kernels are said to be left out", "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result result;
    TraceData trace = test::import_public(dir, "kineto/hta-cupti-profiler-range.json.gz", result);
    // 77 kernels measured by the range profiler (cuda_profiler_range on GPU 0's lane), no
    // activity-trace kernel: their times are the profiler's replays, not the run's.
    CHECK(trace.kernels.size() == 0);
    CHECK(trace.meta.at("kineto.unread_events") == "77 cuda_profiler_range");
    CHECK(test::warned(result, "77 events of categories mhc does not read"));
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
        TraceData trace = test::import_public(dir, name, result);
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
    TraceData cpu = test::import_public(dir, "kineto/hta-cpu-only-gloo-rank-34.pt.trace.json.gz", result);
    CHECK(cpu.kernels.size() == 0);
    CHECK(cpu.meta.at("rank") == "34");
    CHECK(cpu.meta.at("world_size") == "300");
    CHECK(cpu.markers.size() == 11);   // 10 gloo:all_reduce annotations and ProfilerStep#551
    CHECK(std::count(cpu.markers.kind.begin(), cpu.markers.kind.end(), mhc::trace::MarkerKind::Step) == 1);
    // Ranks 0 and 1 of a 128-rank job, two steps each (551 and 552), kernels split evenly.
    for (const auto& [name, rank, kernels] : {std::tuple{"kineto/hta-sampled-rank-0.json.gz", "0", 1154},
                                               std::tuple{"kineto/hta-sampled-rank-1.json.gz", "1", 1104}}) {
        INFO(name);
        TraceData trace = test::import_public(dir, name, result);
        CHECK(trace.meta.at("rank") == rank);
        CHECK(trace.meta.at("world_size") == "128");
        CHECK(static_cast<int>(trace.kernels.size()) == kernels);
        CHECK(std::count(trace.kernels.step.begin(), trace.kernels.step.end(), 551) == kernels / 2);
        CHECK(std::count(trace.kernels.step.begin(), trace.kernels.step.end(), 552) == kernels / 2);
    }
}


TEST_CASE("kineto: a large job's trace whose header passes the first MiB is read, not refused as an unknown format",
          "[import][kineto][public]") {
    // Kineto writes distributedInfo before traceEvents, with every process group's ranks: HTA's
    // gloo rank 34 lists 11 groups of all 300 ranks (16,604 bytes). The same file as rank 34 of a
    // 16,384-rank job holds 1,140,783 bytes before traceEvents as PyTorch writes it (json.dumps);
    // before 2026-12-06 detection read the first MiB only and refused it ("not a known trace
    // format"), where --format kineto read it whole.
    test::TempDir dir;
    auto doc = nlohmann::ordered_json::parse(test::gunzip(test::pub("kineto/hta-cpu-only-gloo-rank-34.pt.trace.json.gz")));
    constexpr int kRanks = 16384;
    auto& info = doc["distributedInfo"];
    info["world_size"] = kRanks;
    std::vector<int> ranks(kRanks);
    std::iota(ranks.begin(), ranks.end(), 0);
    for (auto& group : info["pg_config"]) {
        group["pg_size"] = kRanks;
        group["ranks"] = ranks;
    }
    const std::string text = doc.dump(1);   // a rank a line: past the first MiB as json.dumps's ", " is
    REQUIRE(text.find("\"traceEvents\"") > (size_t{1} << 20));
    const std::string path = dir.file("rank34-of-16384.json");
    test::write_file(path, text);
    CHECK(imp::detect_format(path) == imp::Format::Kineto);
    imp::Result result;
    TraceData trace = test::import_public_path(dir, path, result, "rank34.db");
    CHECK(trace.meta.at("rank") == "34");
    CHECK(trace.meta.at("world_size") == "16384");
    CHECK(trace.markers.size() == 11);   // as the original: 10 gloo:all_reduce annotations and ProfilerStep#551
    // A JSON object without those keys at its top level stays refused, also past the first MiB and
    // where a nested object holds one.
    doc.erase("traceEvents");
    doc["distributedInfo"]["traceEvents"] = nlohmann::ordered_json::array();
    test::write_file(path, doc.dump(1));
    std::string err;
    CHECK(test::run_mhc("import " + path + " -o " + dir.file("none.db"), &err) == 2);
    CHECK(err.find("without a top-level 'traceEvents' (Kineto) or 'nodes'") != std::string::npos);
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
    TraceData trace = test::import_public_path(dir, dir.file("merged.json"), result);
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
    CHECK(test::warned(result, "2 ProfilerStep#N ranges of the same N joined, one step marker each"));
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
    CHECK(!test::warned(result, "may be another process's"));
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
    TraceData nodes = test::import_public_path(dir, dir.file("nodes.json"), result);
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
    TraceData alone = test::import_public(dir, "kineto/hta-sampled-rank-0.json.gz", result);
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
    TraceData trace = test::import_public_path(dir, dir.file("two.json"), result);   // mhc check: ok
    // FalconsAI's events come first in time: its allocator keeps the addresses, BERT's are the
    // later process's (.pid19392).
    CHECK(trace.meta.at("kineto.total_allocated.device0") == "agrees at all 572 events");
    CHECK(trace.meta.at("kineto.total_allocated.device0.pid19392") == "agrees at all 218 events");
    CHECK(trace.meta.at("kineto.baseline.device0").rfind("214877184 ", 0) == 0);
    CHECK(trace.meta.at("kineto.baseline.device0.pid19392").rfind("91360768 ", 0) == 0);
    CHECK(trace.meta.at("kineto.total_allocated.device-1") == "agrees at all 48 events");
    CHECK(trace.meta.at("kineto.total_allocated.device-1.pid19392") == "agrees at all 18 events");
    CHECK(trace.meta.at("kineto.memory_processes").find("pid 19392 on device 0") != std::string::npos);
    CHECK(!test::warned(result, "differ from Total Allocated"));
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
    TraceData trace = test::import_public(dir, "kineto/tb-plugin-gpu-metrics-input.json.gz", result);
    CHECK(result.events == 340);
    CHECK(trace.kernels.size() == 30);
    CHECK(test::all_are(trace.kernels.stream, 7));
    CHECK(test::all_are(trace.kernels.device, 0));
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
    TraceData plain = test::import_public(dir, "kineto/tracelens-h100-bert-small-uncased.json.gz", plain_result);
    std::string text = test::gunzip(test::pub("kineto/tracelens-h100-bert-small-uncased.json.gz"));
    const std::string key = "{\"traceEvents\": [";
    REQUIRE(text.rfind(key, 0) == 0);
    text.insert(key.size(), R"j({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[OutOfMemory]", )j"
                            R"j("pid": 19392, "tid": 19392, "ts": 1419247336000.5, "args": {"Total Reserved": )j"
                            R"j(121634816, "Total Allocated": 101305344, "Bytes": 85899345920, "Device Id": 0, )j"
                            R"j("Device Type": 1, "Ev Idx": 5000}}, )j");
    test::write_file(dir.file("oom.json"), text);
    TraceData trace = test::import_public_path(dir, dir.file("oom.json"), result);
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
    TraceData cuda = test::import_public(dir, "kineto/hta-alexnet-param-bench.json.gz", result);
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
    TraceData xpu = test::import_public_path(dir, dir.file("xpu.json"), result);
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
    CHECK(test::kernel_time(xpu) == test::kernel_time(cuda));
    CHECK(xpu.meta.at("kineto.kernels_linked_to_launch") == cuda.meta.at("kineto.kernels_linked_to_launch"));
    CHECK(xpu.meta.at("kineto.kernels_linked_to_launch") == "79");
    CHECK(xpu.meta.count("kineto.unread_events") == 0);
    CHECK(xpu.meta.at("kineto.sycl_queues").rfind("98 kernels and copies on the stream of their args.sycl queue", 0) ==
          0);
    CHECK(cuda.meta.count("kineto.sycl_queues") == 0);
    // A queue id past int64 (an invalid id written unsigned) places nothing and refuses nothing.
    CHECK(replace_all("\"sycl queue\": 7,", "\"sycl queue\": 18446744073709551615,") == 123);
    test::write_file(dir.file("xpu-invalid-queue.json"), text);
    TraceData invalid = test::import_public_path(dir, dir.file("xpu-invalid-queue.json"), result);
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
    TraceData peer = test::import_public_path(dir, dir.file("peer.json"), result);
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
    TraceData nowhere = test::import_public_path(dir, dir.file("nowhere.json"), result);
    CHECK(nowhere.meta.at("kineto.without_device") ==
          "16 kernels, memcpys or memsets without args.device (the first: 'Memcpy PtoP (Device -> Device)') were "
          "placed on device 0");
    CHECK(test::warned(result, "16 kernels, memcpys or memsets without args.device"));
}

TEST_CASE("kineto: a PyTorch 1.8-era trace written as one JSON array is read, not refused", "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result result;
    TraceData trace = test::import_public(dir, "kineto/tb-plugin-resnet50-2020-12-array.pt.trace.json.gz", result);
    // 82,276 events in a top-level array (no traceEvents object): 9,538 Kernel, 12 Memcpy, 377
    // Memset, ProfilerStep#5..#10; 'tid' written as strings on most events.
    CHECK(result.format == imp::Format::Kineto);
    CHECK(result.events == 82276);
    CHECK(trace.kernels.size() == 9538);
    CHECK(trace.copies.size() == 389);
    // 736 kernels carry a correlation id no CPU event of the file has (launched before the
    // profiler's window opened): the other 8,802, one per cudaLaunchKernel, are linked.
    CHECK(trace.meta.at("kineto.kernels_linked_to_launch") == "8802");
    // Kernels per step as tests/import/public_traces.py finds them from each launch's time; the 736
    // launched before recording in none (before 2026-12-07: 81 in none, 2,122 in step 5).
    CHECK(std::count(trace.kernels.step.begin(), trace.kernels.step.end(), -1) == 736);
    CHECK(std::count(trace.kernels.step.begin(), trace.kernels.step.end(), 5) == 1467);
    for (int step = 6; step <= 10; ++step) CHECK(std::count(trace.kernels.step.begin(), trace.kernels.step.end(), step) == 1467);
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
    TraceData graphs = test::import_public(dir, "kineto/hta-trace-diff-cuda-graphs-rank-1.json.gz", result);
    CHECK(graphs.kernels.size() == 9876);
    CHECK(test::all_are(graphs.kernels.device, 1));
    CHECK(graphs.meta.at("kineto.kernel_starts_clamped") == "31");
    CHECK(test::kernel_time(graphs) == 801858000 - 115000);
    const std::string said =
        "31 kernels started before the previous kernel on their stream ended (by up to 13000 ns; "
        "115000 ns of kernel time in all; 31 of them launched with other kernels under one "
        "correlation id, a CUDA graph's)";
    CHECK(graphs.meta.at("kineto.kernel_clamp") == said);
    CHECK(test::warned(result, said + ": their starts were moved"));
    // A B200 (CUDA 12.9 runtime, driver 13.0, NCCL 2.27.5, rank 0 of 8): 74 MoE kernels launched
    // with cuLaunchKernelEx/cudaLaunchKernelExC start up to 3.7 us before the previous one ends
    // (programmatic dependent launch): none of them shares a correlation id.
    TraceData pdl = test::import_public(dir, "kineto/tracelens-b200-eager.json.gz", result);
    CHECK(pdl.kernels.size() == 768);
    CHECK(pdl.copies.size() == 161);
    CHECK(pdl.meta.at("kineto.kernels_linked_to_launch") == "768");
    CHECK(pdl.meta.at("world_size") == "8");
    CHECK(test::kernel_time(pdl) == 10862916 - 69278);
    CHECK(pdl.meta.at("kineto.kernel_clamp") ==
          "74 kernels started before the previous kernel on their stream ended (by up to 3744 ns; 69278 ns of kernel "
          "time in all; 0 of them launched with other kernels under one correlation id, a CUDA graph's)");
    // A trace with no such overlap says nothing.
    TraceData plain = test::import_public(dir, "kineto/hta-sampled-rank-0.json.gz", result);
    CHECK(plain.meta.at("kineto.kernel_starts_clamped") == "0");
    CHECK(plain.meta.count("kineto.kernel_clamp") == 0);
    CHECK(!test::warned(result, "started before the previous kernel"));
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
        TraceData trace = test::import_public(dir, name, result);
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
    TraceData one = test::import_public(dir, "kineto/tracelens-mi300x-sglang-qwen3-decode-graph.json.gz", result);
    CHECK(test::all_are(one.kernels.device, 0));
    CHECK(test::all_are(one.copies.device, 0));
    CHECK(one.meta.at("kineto.kernel_device").rfind("9 -> 0 (one GPU in deviceProperties", 0) == 0);
    // vLLM's trace lists eight GPUs: agent 2 may be GPU 0 or GPU 2, so its number is kept, and
    // said (before 2026-12-02 it was kept in silence).
    TraceData eight = test::import_public(dir, "kineto/tracelens-mi300x-vllm-decode-full-graph.json.gz", result);
    CHECK(test::all_are(eight.kernels.device, 2));
    CHECK(eight.meta.at("kineto.kernel_device") ==
          "2 kept: ROCm numbers kernels by the runtime's agent (CPU agents first), not by the process's device "
          "index, which the file does not tell (8 GPUs in deviceProperties)");
    CHECK(test::warned(result, "kernels and copies on device 2 kept: ROCm numbers kernels by the runtime's agent"));
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
    TraceData ddp = test::import_public(dir, "kineto/tracelens-mi300x-resnet-act-checkpoint-ddp.json.gz", result);
    CHECK(ddp.kernels.size() == 2995);
    CHECK(std::count(ddp.kernels.stream.begin(), ddp.kernels.stream.end(), 4) == 17);
    CHECK(test::all_are(ddp.kernels.device, 2));
    CHECK(ddp.copies.size() == 658);
    // 746 kernels a step; 757 launched before recording in none (before 2026-12-07: 1,383 in step 15).
    for (int step = 15; step <= 17; ++step)
        CHECK(std::count(ddp.kernels.step.begin(), ddp.kernels.step.end(), step) == 746);
    CHECK(std::count(ddp.kernels.step.begin(), ddp.kernels.step.end(), -1) == 757);
    CHECK(ddp.meta.at("rank") == "0");
    CHECK(ddp.meta.at("world_size") == "8");
    CHECK(ddp.meta.at("kineto.kernel_device").rfind("2 kept: ROCm numbers kernels by the runtime's agent", 0) == 0);
    CHECK(test::warned(result, "kernels and copies on device 2 kept"));
    // A ROCm 6.2 trace that writes no version key (its runtime calls are hipLaunchKernel, ...), four
    // MI250 dies listed, kernels on agent 2; and a GPU-only MI210 trace (no CPU op), four listed,
    // kernels on agent 1.
    TraceData mi250 = test::import_public(dir, "kineto/hta-mi250-rocm6.2-minitoy-train.json.gz", result);
    CHECK(mi250.meta.at("kineto.kernel_device").rfind("2 kept", 0) == 0);
    TraceData mi210 = test::import_public(dir, "kineto/tracelens-mi210-gpu-only.json.gz", result);
    CHECK(mi210.kernels.size() == 562);
    CHECK(mi210.meta.at("kineto.kernel_device").rfind("1 kept", 0) == 0);
    CHECK(test::warned(result, "which the file does not tell (4 GPUs in deviceProperties)"));
    // CUDA numbers kernels by the process's device: a TorchRec rank with eight A100s listed and
    // kernels on five streams of device 0 (NCCL all_to_all among them) says nothing.
    TraceData cuda = test::import_public(dir, "kineto/hta-torchrec-rank0-five-streams.json.gz", result);
    CHECK(cuda.kernels.size() == 6080);
    CHECK(test::all_are(cuda.kernels.device, 0));
    for (const auto& [stream, count] : {std::pair{7, 5705}, {27, 295}, {84, 36}, {285, 22}, {363, 22}})
        CHECK(std::count(cuda.kernels.stream.begin(), cuda.kernels.stream.end(), stream) == count);
    CHECK(cuda.meta.count("kineto.kernel_device") == 0);
    CHECK(result.warnings.empty());
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
    TraceData trace = test::import_public(dir, "kineto/tracelens-mi300x-vllm-decode-graph-capture.json.gz", result);
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

TEST_CASE("kineto: a trace with no [memory] event says whether memory profiling was on, from its own flag",
          "[import][kineto][public]") {
    test::TempDir dir;
    imp::Result result;
    // vLLM's piecewise-graph replay: top-level "profile_memory": 1 before traceEvents, no [memory]
    // event (json, SOURCES.md). Nothing was allocated while it recorded: memory profiling was on.
    TraceData vllm = test::import_public(dir, "kineto/tracelens-mi300x-vllm-prefilldecode-piecewise.json.gz", result);
    CHECK(vllm.allocations.size() == 0);
    CHECK(vllm.meta.at("kineto.profile_memory") == "on");
    CHECK(vllm.meta.at("allocations").rfind("none: memory profiling was on (the trace's profile_memory: 1)", 0) == 0);
    // The flag after traceEvents (the Falconsai trace as written back) is read too.
    TraceData falcon = test::import_public(dir, "kineto/tracelens-h100-falconsai-nsfw-image-detection.json.gz", result);
    CHECK(falcon.meta.at("kineto.profile_memory") == "on");
    CHECK(falcon.meta.count("allocations") == 0);
    // No flag (B200 eager trace, PyTorch writes it only when on): either reason is said.
    TraceData b200 = test::import_public(dir, "kineto/tracelens-b200-eager.json.gz", result);
    CHECK(b200.meta.count("kineto.profile_memory") == 0);
    const std::string no_memory = "recorded without profile_memory=True, or by PyTorch 1.8, whose profiler wrote none";
    CHECK(b200.meta.at("allocations").find(no_memory) != std::string::npos);
    // torch 1.8.1 recorded with profile_memory=True (writers/make_writers.py) wrote no [memory]
    // event and no flag; before 2026-12-06 mhc asked whether it had been recorded without it.
    TraceData t181 = test::import_public_path(dir, test::fixture("writers/torch-1.8.1-kineto.json.gz"), result, "t181.db");
    CHECK(t181.allocations.size() == 0);
    CHECK(t181.meta.at("allocations").find(no_memory) != std::string::npos);
}

TEST_CASE("kineto: Total Reserved at the first memory event and at its peak", "[import][kineto][public]") {
    // What the allocator held when the profiler began (docs/import.md, eleventh audit), read from
    // the files with Python: HTA's trace reserves 12,782,141,440 B at its first [memory] event of
    // GPU 1 and never changes (Total Allocated peaks at 6,629,508,096 B: the rest was reserved before
    // profiling); TraceLens's MI300X normalization test starts at 2,097,152 B and grows to 8,388,608 B.
    test::TempDir dir;
    imp::Result result;
    TraceData hta = test::import_public(dir, "kineto/hta-df-index-resolver.json.gz", result);
    CHECK(hta.meta.at("kineto.reserved_first.device1") == "12782141440");
    CHECK(hta.meta.at("kineto.reserved_peak.device1") == "12782141440");
    CHECK(hta.meta.at("kineto.reserved_first.device-1") == "0");   // the host's events record 0
    TraceData norm = test::import_public(dir, "kineto/tracelens-mi300x-normalization-layer-test.json.gz", result);
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
    TraceData ddp = test::import_public(dir, "kineto/tracelens-mi300x-ddp-resnet18-no-pool-pid1.json.gz", result);
    CHECK(ddp.kernels.size() == 2360);
    CHECK(test::all_are(ddp.kernels.device, 2));
    // No ProfilerStep#N: its 5 Optimizer.step#SGD.step ranges make 5 steps of 472 kernels each
    // (public_traces.py's cpu_steps counts the same; before 2026-12-05 every kernel was in none).
    for (int32_t step = 0; step < 5; ++step)
        CHECK(std::count(ddp.kernels.step.begin(), ddp.kernels.step.end(), step) == 472);
    int64_t kernel_ns = 0;
    for (size_t i = 0; i < ddp.kernels.size(); ++i) kernel_ns += ddp.kernels.t_end[i] - ddp.kernels.t_start[i];
    CHECK(kernel_ns == 358908852);   // the sum of the kernels' dur, none clamped
    CHECK(ddp.copies.size() == 15);
    CHECK(ddp.markers.size() == 20);   // the 15 annotations and the 5 steps
    CHECK(ddp.allocations.size() == 105);
    CHECK(test::all_are(ddp.allocations.device, -1));
    CHECK(mhc::trace::live_peak(ddp, -1).bytes == 8);
    CHECK(ddp.meta.at("kineto.kernels_linked_to_launch") == "2360");
    CHECK(ddp.meta.at("kineto.total_allocated.device-1") == "agrees at all 210 events");
    CHECK(ddp.meta.at("kineto.profile_memory") == "on");
    CHECK(ddp.meta.at("kineto.gpu_memory")
              .rfind("not recorded: the trace's 210 [memory] events are all the host's, "
                     "while device 2 (2360 kernels, 15 copies and memsets) ran GPU work",
                     0) == 0);
    CHECK(test::warned(result, "GPU memory not recorded"));
    // A trace with a GPU's [memory] events says nothing of it: the H100 BERT-small trace (218 GPU
    // events beside 18 host ones); nor does one with none at all (the B200 eager trace).
    TraceData bert = test::import_public(dir, "kineto/tracelens-h100-bert-small-uncased.json.gz", result);
    CHECK(bert.meta.count("kineto.gpu_memory") == 0);
    TraceData b200 = test::import_public(dir, "kineto/tracelens-b200-eager.json.gz", result);
    CHECK(b200.meta.count("kineto.gpu_memory") == 0);
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
    TraceData whole = test::import_public(dir, "kineto/simple_add_trace.json.gz", result);
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
    TraceData lost = test::import_public_path(dir, dir.file("lost.json"), result);
    CHECK(lost.kernels.size() == 0);
    const std::string first_text = "(the first: traceEvents[" + std::to_string(first) + "] 'cudaLaunchKernel')";
    CHECK(lost.meta.at(key) ==
          "4 of 4 kernel launches (runtime and driver calls that launch kernels or CUDA graphs) have no kernel, memcpy "
          "or memset event of their correlation id: 4 not recorded " +
              first_text);
    CHECK(test::warned(
        result, "4 of the Kineto trace's 4 kernel launches have no kernel, memcpy or memset event in the trace"));
    // The execution trace of the same run given that Kineto trace: said the same way.
    imp::Options with_kineto;
    with_kineto.warn = false;
    with_kineto.kineto_path = dir.file("lost.json");
    result = imp::import_file(test::pub("chakra/simple_add_et.json.gz"), dir.file("et.db"), with_kineto);
    CHECK(result.meta.at(key) == lost.meta.at(key));
    CHECK(test::warned(result, "4 of the Kineto trace's 4 kernel launches have no kernel"));
    // SGLang capturing its decode graph on an MI300X: 546 launches (Python's json: 399
    // hipLaunchKernel, 145 hipExtModuleLaunchKernel, 2 more) of which 544 fall between the one
    // hipStreamBeginCapture and hipStreamEndCapture and have no kernel; the 2 kernels ran.
    TraceData capture = test::import_public(dir, "kineto/tracelens-mi300x-sglang-decode-capture-bs32.json.gz", result);
    CHECK(capture.kernels.size() == 2);
    CHECK(capture.meta.at(key) ==
          "544 of 546 kernel launches (runtime and driver calls that launch kernels or CUDA graphs) have no kernel, "
          "memcpy or memset event of their correlation id: 544 made while a stream capture was open (captured into a "
          "CUDA graph, not run)");
    CHECK_FALSE(test::warned(result, "kernel launches have no kernel"));
    // Without its capture's begin the same launches are not recorded ones.
    std::string text = test::gunzip(test::pub("kineto/tracelens-mi300x-sglang-decode-capture-bs32.json.gz"));
    const size_t at = text.find("\"hipStreamBeginCapture\"");
    REQUIRE(at != std::string::npos);
    text.replace(at, 23, "\"hipStreamBeginCapturX\"");
    test::write_file(dir.file("uncaptured.json"), text);
    TraceData uncaptured = test::import_public_path(dir, dir.file("uncaptured.json"), result);
    CHECK(uncaptured.meta.at(key).find("have no kernel, memcpy or memset event of their correlation id: 544 not "
                                       "recorded (the first: traceEvents[") != std::string::npos);
    CHECK(test::warned(result, "544 of the Kineto trace's 546 kernel launches have no kernel"));
}

// Correlation ids are per process: in a file of several processes' traces a launch whose kernel the
// profiler lost was taken as run where another process's kernel had its id, and the loss went unsaid.
TEST_CASE("kineto: merged ranks' launches are matched to their kernels within their process",
          "[import][kineto][public]") {
    test::TempDir dir;
    // HTA's sampled ranks 0 (pid 4037) and 1 (pid 4045) merged into one file, as in the merge test
    // above, without the 4 kernels of rank 1 whose correlation ids rank 0's kernels also carry
    // (Python's json: 1,154 and 1,104 launches, 1,154 and 1,104 kernels; 4 ids in both ranks'
    // kernels, the first 6,945,023).
    auto rank0 = nlohmann::json::parse(test::gunzip(test::pub("kineto/hta-sampled-rank-0.json.gz")));
    const auto rank1 = nlohmann::json::parse(test::gunzip(test::pub("kineto/hta-sampled-rank-1.json.gz")));
    std::set<int64_t> ids0;
    for (const auto& event : rank0["traceEvents"])
        if (event.value("cat", "") == "kernel") ids0.insert(event["args"]["correlation"].get<int64_t>());
    int64_t dropped = 0;
    for (const auto& event : rank1["traceEvents"]) {
        if (event.value("cat", "") == "kernel" && ids0.count(event["args"]["correlation"].get<int64_t>())) {
            ++dropped;
            continue;
        }
        rank0["traceEvents"].push_back(event);
    }
    REQUIRE(dropped == 4);
    test::write_file(dir.file("merged.json"), rank0.dump());
    imp::Result result;
    TraceData trace = test::import_public_path(dir, dir.file("merged.json"), result);
    CHECK(std::count(trace.kernels.device.begin(), trace.kernels.device.end(), 1) == 1104 - 4);
    CHECK(trace.meta.at("kineto.launches_without_kernel").rfind(
              "4 of 2258 kernel launches (runtime and driver calls that launch kernels or CUDA graphs) have no "
              "kernel, memcpy or memset event of their correlation id: 4 not recorded (the first: traceEvents[",
              0) == 0);
    CHECK(test::warned(result, "4 of the Kineto trace's 2258 kernel launches have no kernel"));
}

TEST_CASE("kineto: a trace without ProfilerStep#N takes its steps from the optimizer's step ranges",
          "[import][kineto][public][steps]") {
    test::TempDir dir;
    imp::Result result;
    // param's ResNet trace (recorded without a profiler schedule) has no ProfilerStep#N and 30
    // Optimizer.step#SGD.step user_annotation ranges. Step k ends where the k-th ends; a kernel is
    // in the step its launch fell in. Counted from the JSON by public_traces.py (cpu_steps): step 0
    // 318 kernels, steps 1-29 321 each, 1 launched after the last optimizer step. Before
    // 2026-12-05 every kernel was in no step and `mhc info` said "steps none marked".
    TraceData trace = test::import_public(dir, "kineto/param-resnet-kineto.json.gz", result);
    CHECK(test::kernels_per_step(trace) == resnet_steps(1, 318, 321));
    CHECK(mhc::trace::summarize(trace).steps == 30);
    const std::string loader = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__";
    CHECK(trace.meta.at("steps_from") ==
          "Optimizer.step#SGD.step ranges (no ProfilerStep#N in the trace); step 0 from the last " + loader +
              " before the first");
    // `mhc info` says where they came from. The loop fetches its batch first: each later step's
    // first DataLoader range begins 124 us (the median) after the step before ended, so step 0
    // begins 124 us before the first one (which begins 314,136,000 ns in): at 314,012,000 ns
    // (public_traces.py's cpu_steps: 314,252 us after the file's earliest ts, which is 240 us
    // before this trace's time 0), not at the
    // trace's start: the 314 ms before it (moving the model to the GPU) are setup. The steps run
    // from 314,012,000 ns to the end of the 30th optimizer step, 14,415,075,000 ns in: a mean of
    // 470,035,433 ns (480,502,500 from time 0 before 2026-12-05).
    CHECK(trace.markers.t_start[std::distance(
              trace.markers.kind.begin(),
              std::find(trace.markers.kind.begin(), trace.markers.kind.end(), mhc::trace::MarkerKind::Step))] ==
          314012000);
    CHECK_THAT(mhc::trace::to_text(mhc::trace::summarize(trace)),
               Catch::Contains("steps       30 (mean 470.04 ms)\n            from Optimizer.step#SGD.step ranges (no "
                               "ProfilerStep#N in the trace); step 0 from the") &&
                   Catch::Contains(loader + " before the first\n"));
    // A trace with ProfilerStep#N keeps them (HTA's sampled rank: Shampoo and EMA optimizers too).
    TraceData sampled = test::import_public(dir, "kineto/hta-sampled-rank-0.json.gz", result);
    CHECK(sampled.meta.at("steps_from") == "ProfilerStep#N ranges (the profiler's step markers)");
    CHECK(mhc::trace::summarize(sampled).steps == 2);
    // The same rank with its ProfilerStep#N taken out: each step runs Optimizer.step#Shampoo.step
    // then Optimizer.step#EMAOptimizer.step, twice. One step per Shampoo range with EMA's after it:
    // 2 steps of 526 and 578 kernels, 50 after (public_traces.py's check_kernel_steps on the same
    // file: equal; ProfilerStep#551 and #552 hold 577 each). Before this rule: 4 steps (518, 8,
    // 570, 8), one per optimizer range.
    const std::string stripped = dir.file("sampled-no-profiler-steps.json");
    kineto_variant("kineto/hta-sampled-rank-0.json.gz", stripped, drop_profiler_steps);
    TraceData two = test::import_public_path(dir, stripped, result);
    CHECK(test::kernels_per_step(two) == test::Steps{{-1, 50}, {0, 526}, {1, 578}});
    CHECK(test::warned(
        result, "one step per Optimizer.step#Shampoo.step range (the most frequent; the first seen among equals)"));
    // PyTorch 1.8's traces name the range's category Operator: read the same way (they have
    // ProfilerStep#N, so a copy without them is made here). 6 steps: ProfilerStep#5-#10.
    const std::string in = dir.file("no-profiler-steps.json");
    kineto_variant("kineto/tb-plugin-resnet50-worker0.1623143089861.pt.trace.json.gz", in, drop_profiler_steps);
    TraceData old = test::import_public_path(dir, in, result);
    CHECK(mhc::trace::summarize(old).steps == 6);
    // Its loop's DataLoader ranges (Operator too) lead every step, so step 0 begins where they put
    // it, not at the trace's start (since 2026-12-05).
    CHECK(old.meta.at("steps_from") ==
          "Optimizer.step#SGD.step ranges (no ProfilerStep#N in the trace); step 0 from the last "
          "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__ before the first");
}

TEST_CASE("kineto: two optimizers of one class stepping back to back make one step, not two",
          "[import][kineto][public][steps]") {
    // param's ResNet trace with each of its 30 Optimizer.step#SGD.step ranges cut in two halves
    // back to back (param groups split over two SGD optimizers): 60 ranges of one name. The gaps
    // between them take turns (0 within an iteration, over 100 ms between), so a step is two of
    // them: the same 30 steps and kernels per step as the file as recorded (318, then 321 each, 1
    // after the last). Before 2026-12-05: 60 steps, each optimizer half a step.
    test::TempDir dir;
    const std::string in = dir.file("split-sgd.json");
    kineto_variant("kineto/param-resnet-kineto.json.gz", in, [](nlohmann::json& events) {
        const size_t count = events.size();
        for (size_t i = 0; i < count; ++i) {
            auto& event = events[i];
            if (event.value("name", "") != "Optimizer.step#SGD.step" || event.value("cat", "") == "gpu_user_annotation")
                continue;
            const int64_t half = event["dur"].get<int64_t>() / 2;
            nlohmann::json second = event;
            second["ts"] = event["ts"].get<int64_t>() + half;
            second["dur"] = event["dur"].get<int64_t>() - half;
            event["dur"] = half;
            events.push_back(second);
        }
    });
    imp::Result result;
    TraceData trace = test::import_public_path(dir, in, result);
    CHECK(test::kernels_per_step(trace) == resnet_steps(1, 318, 321));
    CHECK(mhc::trace::summarize(trace).steps == 30);
    CHECK_THAT(trace.meta.at("steps_from"),
               Catch::StartsWith("Optimizer.step#SGD.step ranges (no ProfilerStep#N in the trace): a step per 2 "
                                 "Optimizer.step#SGD.step ranges (their gaps take turns)"));
    CHECK(test::warned(result, "Optimizer.step#SGD.step's take turns with a period of 2 (their gaps"));
}

TEST_CASE("kineto: ranks merged into one file without ProfilerStep#N join their k-th optimizer steps",
          "[import][kineto][public][steps]") {
    // param's ResNet trace twice in one file, the second copy's pids (CPU and GPU lanes) moved by
    // 1,000,000 as a merging tool makes ranks distinct: two processes, 30 optimizer steps each, the
    // k-th of both joined into step k (the same times): 30 steps, each with twice one copy's
    // kernels (636, then 642; 2 after the last step).
    test::TempDir dir;
    const std::string in = dir.file("two-ranks.json");
    kineto_variant("kineto/param-resnet-kineto.json.gz", in, [](nlohmann::json& events) {
        const size_t count = events.size();
        for (size_t i = 0; i < count; ++i) {
            nlohmann::json copy = events[i];
            if (copy.contains("pid") && copy["pid"].is_number_integer())
                copy["pid"] = copy["pid"].get<int64_t>() + 1000000;
            events.push_back(copy);
        }
    });
    imp::Result result;
    TraceData trace = test::import_public_path(dir, in, result);
    CHECK(test::kernels_per_step(trace) == resnet_steps(2, 636, 642));
    CHECK(mhc::trace::summarize(trace).steps == 30);
    CHECK(test::warned(result, "30 optimizer steps of the same number joined, one step marker each"));
}

// Ranks run out of step by some time. Each joined step spans the ranks' ranges of its number, from
// the first start to the last end; a kernel's step was looked up in those joined spans, so the
// launches at the end of a lagging rank's step (its optimizer's update, after the first rank had
// begun the next step) were counted in the next step, and the first rank's launch after its last
// step in the lagging rank's last one.
namespace {

// param's ResNet trace twice in one file, the second copy as rank 1 on GPU 1 (its GPU events' pid
// and args.device 0 -> 1, its CPU pid + 1,000,000), every ts `later_us` later, and, where
// `own_ids`, its correlation, External id and flow ids + 10,000,000 (else the same ids as rank 0's,
// as ranks running one program number their calls).
void two_ranks(const std::string& path, int64_t later_us, bool own_ids) {
    kineto_variant("kineto/param-resnet-kineto.json.gz", path, [&](nlohmann::json& events) {
        const size_t count = events.size();
        for (size_t i = 0; i < count; ++i) {
            nlohmann::json copy = events[i];
            if (copy.contains("pid") && copy["pid"] == 0) {
                copy["pid"] = 1;
                if (copy.contains("args") && copy["args"].contains("device")) copy["args"]["device"] = 1;
            } else if (copy.contains("pid") && copy["pid"].is_number_integer()) {
                copy["pid"] = copy["pid"].get<int64_t>() + 1000000;
            }
            if (copy.contains("ts") && copy["ts"].is_number_integer())
                copy["ts"] = copy["ts"].get<int64_t>() + later_us;
            for (const char* key : {"correlation", "External id"})
                if (own_ids && copy.contains("args") && copy["args"].contains(key) &&
                    copy["args"][key].is_number_integer())
                    copy["args"][key] = copy["args"][key].get<int64_t>() + 10000000;
            if (own_ids && (copy.value("ph", "") == "s" || copy.value("ph", "") == "f") && copy["id"].is_number_integer())
                copy["id"] = copy["id"].get<int64_t>() + 10000000;
            events.push_back(copy);
        }
    });
}

std::map<int32_t, test::Steps> kernels_per_device_step(const TraceData& trace) {
    std::map<int32_t, test::Steps> out;
    for (size_t i = 0; i < trace.kernels.size(); ++i) ++out[trace.kernels.device[i]][trace.kernels.step[i]];
    return out;
}

}   // namespace

TEST_CASE("kineto: merged ranks running out of step keep each kernel in its own process's step",
          "[import][kineto][public][steps]") {
    // param's ResNet trace as two ranks (two_ranks), with ids of their own (distinct from rank 0's, as
    // HTA's sampled ranks' are), the second 2 ms later. Each rank's own optimizer ranges give each
    // GPU param's 318, then 321 kernels a step, 1 after the last (the same rule on rank 0's file alone).
    test::TempDir dir;
    const std::string in = dir.file("skewed.json");
    two_ranks(in, 2000, true);
    imp::Result result;
    TraceData trace = test::import_public_path(dir, in, result);
    std::map<int32_t, test::Steps> per_device = kernels_per_device_step(trace);
    // Before 2026-12-06 (twenty-fifth audit): GPU 1 {0: 317, 1: 317, 2: 316, 3: 321, 4: 304, ...},
    // GPU 0 322 kernels in step 29 and none after it.
    CHECK(per_device[0] == resnet_steps(1, 318, 321));
    CHECK(per_device[1] == resnet_steps(1, 318, 321));
    CHECK(mhc::trace::summarize(trace).steps == 30);
    CHECK_THAT(trace.meta.at("kineto.processes"),
               Catch::EndsWith("30 optimizer steps of the same number joined, one step marker each; the ranges of one "
                               "step begin up to 2000000 ns apart across processes: each marker spans them all (the "
                               "first start to the last end), and a kernel is in the step its launch fell in among "
                               "its own process's ranges"));
}

// Ranks running one program number their runtime calls alike: in a file of them merged every
// correlation id repeats, and the GPU lanes' processes were learnt from ids one process used alone.
// None was learnt, each kernel took the latest call of its id before it, and the calls left over
// were said to have lost their kernels.
TEST_CASE("kineto: merged ranks sharing every correlation id join each kernel to its own rank's launch",
          "[import][kineto][public]") {
    // param's ResNet trace as two ranks with the same ids (two_ranks), the second 2 ms later:
    // every one of the 19,256 launches has its kernel. Before 2026-12-06 (twenty-fifth audit):
    // "9530 of 19256 kernel launches ... have no kernel" (warned), 0 kernels joined by their lane's
    // process. Now rank 0's lane is learnt from the kernels that began before rank 1's call of
    // their id (a launch precedes its kernel); rank 1's kernels take the latest call before them,
    // their own.
    test::TempDir dir;
    const std::string in = dir.file("same-ids.json");
    two_ranks(in, 2000, false);
    imp::Result result;
    TraceData trace = test::import_public_path(dir, in, result);
    CHECK(trace.meta.count("kineto.launches_without_kernel") == 0);
    CHECK_FALSE(test::warned(result, "kernel launches have no kernel"));
    CHECK_THAT(trace.meta.at("kineto.shared_correlations"),
               Catch::Contains("9628 kernels of such ids joined to the launch of the process that launched the other "
                               "kernels of their GPU, 9628 to the latest launch before them"));
    std::map<int32_t, test::Steps> per_device = kernels_per_device_step(trace);
    CHECK(per_device[0] == resnet_steps(1, 318, 321));
    CHECK(per_device[1] == resnet_steps(1, 318, 321));
}
