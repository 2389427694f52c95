// The execution trace <-> Kineto join (trace/import/src/et_join.hpp) on real pairs and on small
// hand-written ones. tests/import/et_kineto_pairs.py recomputes the joined pairs' storages
// independently in Python.

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include "mhc/common/error.hpp"
#include "mhc/trace/check.hpp"
#include "util.hpp"

namespace imp = mhc::trace::import;
using mhc::trace::TraceData;

namespace {

struct Joined {
    TraceData trace;
    imp::Result result;
};

Joined import_pair(const test::TempDir& dir, const std::string& et, const std::string& kineto) {
    imp::Options opt;
    opt.warn = false;
    opt.kineto_path = kineto;
    const std::string out = dir.file("t.db");
    Joined imported;
    imported.result = imp::import_file(et, out, opt);
    imported.trace = mhc::trace::load_trace(out);
    REQUIRE(mhc::trace::check_trace(imported.trace).ok());
    return imported;
}

int64_t on_device(const TraceData& trace, int32_t device) {
    return std::count(trace.allocations.device.begin(), trace.allocations.device.end(), device);
}

std::string meta(const Joined& imported, const std::string& key) { return imported.trace.meta.at(key); }

// One training-loop op per Kineto iteration: `seqs` are the autograd sequence numbers of the
// iterations (-1: none written), `rf_ids` Kineto's Record function ids (-1: none written).
std::string kineto_iterations(const std::vector<int64_t>& seqs, const std::vector<int64_t>& rf_ids = {}) {
    std::string ev;
    for (size_t i = 0; i < seqs.size(); ++i) {
        const std::string ts = std::to_string(10 + 100 * i), corr = std::to_string(5 + i);
        std::string args = "\"External id\":" + std::to_string(i + 1) + ",\"Ev Idx\":" + std::to_string(i);
        if (seqs[i] >= 0) args += ",\"Sequence number\":" + std::to_string(seqs[i]);
        if (i < rf_ids.size() && rf_ids[i] >= 0) args += ",\"Record function id\":" + std::to_string(rf_ids[i]);
        ev += std::string(i ? "," : "") +
              "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::relu\",\"pid\":1,\"tid\":1,\"ts\":" + ts +
              ",\"dur\":5,\"args\":{" + args + "}}," +
              "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,\"ts\":" +
              std::to_string(11 + 100 * i) + ",\"dur\":1,\"args\":{\"correlation\":" + corr + "}}," +
              "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"relu_kernel\",\"pid\":0,\"tid\":7,\"ts\":" +
              std::to_string(20 + 100 * i) + ",\"dur\":2,\"args\":{\"correlation\":" + corr +
              ",\"device\":0,\"stream\":7}}";
    }
    return "{\"traceEvents\":[" + ev + "]}";
}

// An ET 1.0.1 of one relu (storage 7 on cuda:0) with autograd sequence number `seq`.
std::string et_one_relu(int64_t seq, int64_t rf_id = 1) {
    return "{\"schema\":\"1.0.1\",\"pid\":1,\"nodes\":[{\"id\":1,\"name\":\"aten::relu\",\"parent\":0,\"rf_id\":" +
           std::to_string(rf_id) + ",\"tid\":1,\"seq_id\":" + std::to_string(seq) +
           ",\"inputs\":[[7,7,0,1024,4,\"cuda:0\"]],\"input_types\":[\"Tensor(float)\"],\"outputs\":[],\"output_types\":[]}]}";
}

}   // namespace

TEST_CASE("ET + Kineto: param's ResNet pair (ET 1.0.1, no shared key) joins by op order, every storage placed",
          "[import][et][join]") {
    // The execution trace records one of the Kineto trace's 30 iterations. Kineto's External id
    // is the profiler's own counter (equal to rf_id only by chance): taken as the key it joined
    // 78 ops, all in other iterations (External ids up to 1310; the ET's iteration starts at
    // 13404), and left 306 of the 317 GPU storages out.
    test::TempDir dir;
    auto imported = import_pair(dir, test::pub("chakra/param-resnet-et-1.0.1.json.gz"),
                                test::pub("kineto/param-resnet-kineto.json.gz"));
    CHECK(meta(imported, "et.join_key") == "op order per thread (names and autograd sequence numbers)");
    CHECK(meta(imported, "et.kineto_ops_matched") == "1310");   // 704 forward/optimizer ops + 606 backward: all
    CHECK(meta(imported, "et.kineto_ops_matched_by_order") == "1310");
    CHECK(meta(imported, "et.threads_not_joined") == "0");
    CHECK(meta(imported, "et.join_parent_disagreements") == "0");   // the ET's parents enclose on Kineto's timeline
    CHECK(meta(imported, "et.storages_left_out") == "0");
    // The one warning: schema 1.0.1 writes no strides, and its aten::expand of the average pool's
    // gradient counts the [32, 2048, 7, 7] view's elements (test_et_strides.cpp).
    REQUIRE(imported.result.warnings.size() == 1);
    CHECK_THAT(imported.result.warnings[0], Catch::StartsWith("1 view larger than the tensor viewed") &&
                                                Catch::Contains("12550144 B more"));
    CHECK(on_device(imported.trace, 0) == 440);   // ids given again are allocations of their own (et_allocations in public_traces.py)
    CHECK(on_device(imported.trace, -1) == 21);
    CHECK(imported.trace.kernels.size() == 9628);
    CHECK(imported.trace.accesses.size() == 2038);
}

TEST_CASE("ET + Kineto: param's ResNet ET of 2024 with its Kineto trace of 2023 is refused (different processes)",
          "[import][et][join]") {
    // param's repository replaced resnet_et.json.gz and kept the Kineto trace: External id ==
    // rf_id then paired 581 ops of two unrelated runs by chance (819 of 871 storages left out).
    test::TempDir dir;
    CHECK_THROWS_WITH(import_pair(dir, test::pub("chakra/param-resnet-et-1.1.0-chakra.0.0.4.json.gz"),
                                  test::pub("kineto/param-resnet-kineto.json.gz")),
                      Catch::Contains("not the Kineto trace of") && Catch::Contains("process 23442") &&
                          Catch::Contains("process 1734239"));
    std::string err;
    CHECK(test::run_mhc("import " + test::pub("chakra/param-resnet-et-1.1.0-chakra.0.0.4.json.gz") + " --kineto " +
                            test::pub("kineto/param-resnet-kineto.json.gz") + " -o " + dir.file("cli.db"),
                        &err) == 2);
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
}

TEST_CASE("ET + Kineto: param's DLRM rank 0 records other iterations than its Kineto trace: nothing joined, said",
          "[import][et][join]") {
    // Same process, same op sequence, but every autograd sequence number 40 apart: another
    // iteration of the training loop. Pairing them would be a guess.
    test::TempDir dir;
    auto imported = import_pair(dir, test::pub("chakra/param-dlrm-rank0-et.json.gz"),
                                test::pub("kineto/param-dlrm-rank0-kineto.json.gz"));
    CHECK(meta(imported, "et.kineto_ops_matched") == "0");
    CHECK(meta(imported, "et.join_key") == "none");
    CHECK(meta(imported, "et.threads_not_joined") == "2");
    CHECK(meta(imported, "et.storages_left_out") == "214");   // allocations of 113 storage ids
    CHECK(meta(imported, "accesses") == "none");   // Kineto's 245 kernels, none with the ET's tensors
    CHECK(meta(imported, "timing") == "exact");
    CHECK_THAT(meta(imported, "et.join"), Catch::StartsWith("0 of 1672 ops joined (0 of 2 threads): execution-trace "
                                                            "thread 1 (988 ops): not joined"));
    CHECK(imported.trace.allocations.size() == 0);
    REQUIRE(imported.result.warnings.size() == 4);   // the first: an aten::expand's view, 60 B (no strides)
    CHECK_THAT(imported.result.warnings[0], Catch::StartsWith("1 view larger than the tensor viewed"));
    CHECK_THAT(imported.result.warnings[1], Catch::Contains("thread 1 (988 ops)") && Catch::Contains("differ by 40"));
    CHECK_THAT(imported.result.warnings[2], Catch::Contains("thread 2 (684 ops)") && Catch::Contains("differ by 40"));
    CHECK_THAT(imported.result.warnings[3], Catch::Contains("214 of the execution trace's 214 GPU storages"));
}

TEST_CASE("ET + Kineto: the order rule joins what the Record function id key joins", "[import][et][join]") {
    // Our CPU fixtures have the key: with Kineto's Record function ids renamed away, the order
    // rule must give the same trace, op for op. cpu_mlp: the execution trace covers all 3
    // profiled steps (357 ops). cpu_mlp_window: it covers the middle one of 3 whose ops repeat
    // by name; Kineto writes 0 for the other steps' ops and a nonzero id for its 118 (the ET's
    // 120 nodes less its 2 [pytorch|profiler] ranges).
    struct Case {
        const char* et;
        const char* kineto;
        const char* joined;
        size_t ids;
    };
    for (const Case& pair : {Case{"cpu_mlp_et.json.gz", "cpu_mlp_kineto.json.gz", "357", 357},
                             Case{"cpu_mlp_window_et.json.gz", "cpu_mlp_window_kineto.json.gz", "118", 357}}) {
        INFO(pair.et);
        test::TempDir dir;
        auto by_key = import_pair(dir, test::fixture(pair.et), test::fixture(pair.kineto));
        CHECK(meta(by_key, "et.kineto_ops_matched_by_key") == pair.joined);
        std::string text = test::gunzip(test::fixture(pair.kineto));
        size_t renamed = 0;
        for (size_t at = text.find("\"Record function id\""); at != std::string::npos;
             at = text.find("\"Record function id\"", at)) {
            text.replace(at, 20, "\"Record function ix\"");
            ++renamed;
        }
        REQUIRE(renamed == pair.ids);
        test::write_file(dir.file("kineto.json"), text);
        auto by_order = import_pair(dir, test::fixture(pair.et), dir.file("kineto.json"));
        CHECK(meta(by_order, "et.kineto_ops_matched_by_order") == pair.joined);
        CHECK(meta(by_order, "et.kineto_ops_matched_by_key") == "0");
        CHECK(by_order.trace.kernels.t_start == by_key.trace.kernels.t_start);
        CHECK(by_order.trace.kernels.t_end == by_key.trace.kernels.t_end);
        CHECK(by_order.trace.kernels.correlation == by_key.trace.kernels.correlation);
        CHECK(by_order.trace.accesses.allocation == by_key.trace.accesses.allocation);
        CHECK(by_order.trace.allocations.t_alloc == by_key.trace.allocations.t_alloc);
        CHECK(by_order.trace.allocations.t_free == by_key.trace.allocations.t_free);
    }
}

TEST_CASE("ET + Kineto: an execution trace of one profiled step lands in that step", "[import][et][join]") {
    // Kineto's ProfilerStep#1 range (a marker) must hold every op of the execution trace that
    // recorded that step only.
    test::TempDir dir;
    auto imported = import_pair(dir, test::fixture("cpu_mlp_window_et.json.gz"),
                                test::fixture("cpu_mlp_window_kineto.json.gz"));
    const auto& markers = imported.trace.markers;
    const auto step1 = std::find(markers.index.begin(), markers.index.end(), 1) - markers.index.begin();
    REQUIRE(static_cast<size_t>(step1) < markers.size());
    const auto& ops = imported.trace.kernels;
    REQUIRE(ops.size() == 50);   // its leaf ops with tensors (fixtures/expected_numbers.py)
    for (size_t op = 0; op < ops.size(); ++op) {
        CHECK(ops.t_start[op] >= markers.t_start[step1]);
        CHECK(ops.t_end[op] <= markers.t_end[step1]);
        CHECK(ops.step[op] == 1);   // the execution trace names no step: Kineto's range gives it
    }
}

TEST_CASE("ET + Kineto (CPU only): a thread the profiler did not record is said so, its storages counted as left out",
          "[import][et][join]") {
    // fixtures/cpu_threads_*: torch 2.15 on the CPU, a Python worker thread started in each step.
    // The execution trace records its ops (global callbacks), the profiler does not (its
    // callbacks are the thread's it was started on). By fixtures/expected_numbers.py: ET threads
    // 1 (492 ops, all 492 rf_ids in Kineto), 2 and 3 (24 ops each, none); 120 storages of leaf
    // ops with tensors, 112 of the joined ones, so 8 left out (the worker's 1 MiB matrices
    // among them). Before 2026-12-03: et.storages_left_out 0 (only GPU storages were counted) and
    // both threads said to be "other ops than the execution trace".
    test::TempDir dir;
    imp::Options opt;
    opt.warn = false;
    opt.kineto_path = test::fixture("cpu_threads_kineto.json.gz");
    const std::string out = dir.file("t.db");
    const auto result = imp::import_file(test::fixture("cpu_threads_et.json.gz"), out, opt);
    const TraceData trace = mhc::trace::load_trace(out);
    REQUIRE(mhc::trace::check_trace(trace).ok());
    CHECK(trace.meta.at("et.kineto_ops_matched") == "492");
    CHECK(trace.meta.at("et.threads_not_joined") == "2");
    CHECK(trace.meta.at("et.storages_left_out") == "8");
    CHECK(trace.meta.at("accesses") == "partial");
    CHECK(trace.allocations.size() == 119);   // ids given again are allocations of their own (et_allocations in public_traces.py)
    CHECK(on_device(trace, -1) == 119);
    const std::string& join = trace.meta.at("et.join");
    CHECK(join.find("execution-trace thread 2 (24 ops): not joined") != std::string::npos);
    CHECK(join.find("execution-trace thread 3 (24 ops): not joined") != std::string::npos);
    size_t said = 0;
    for (size_t at = join.find("the profiler did not record this thread"); at != std::string::npos;
         at = join.find("the profiler did not record this thread", at + 1))
        ++said;
    CHECK(said == 2);
    CHECK(join.find("other ops than the execution trace") == std::string::npos);
    CHECK(std::any_of(result.warnings.begin(), result.warnings.end(), [](const std::string& warning) {
        return warning.find("8 of the execution trace's 127 storages are used by no op joined to a Kineto op") !=
               std::string::npos;
    }));
}

TEST_CASE("ET + Kineto (CPU only): the profiler recording every thread, every thread joins by key",
          "[import][et][join]") {
    // fixtures/cpu_threads_all_*: the run above with profile_all_threads=True. By
    // fixtures/expected_numbers.py: threads 1 (492 ops), 2 and 3 (24 each), every rf_id in Kineto;
    // 128 storage ids of leaf ops with tensors (131 allocations: 3 ids given again), all of joined ops.
    test::TempDir dir;
    auto imported = import_pair(dir, test::fixture("cpu_threads_all_et.json.gz"),
                                test::fixture("cpu_threads_all_kineto.json.gz"));
    CHECK(meta(imported, "et.join") == "540 of 540 ops joined (3 of 3 threads) by Record function id == rf_id");
    CHECK(meta(imported, "et.storages_left_out") == "0");
    CHECK(meta(imported, "accesses") == "exact");
    CHECK(imported.trace.allocations.size() == 131);   // ids given again are allocations of their own (et_allocations in public_traces.py)
}

TEST_CASE("ET + Kineto: sequence numbers tell repeated iterations apart, without them the thread is not joined",
          "[import][et][join]") {
    test::TempDir dir;
    const std::string et = dir.file("et.json"), kineto = dir.file("kineto.json");
    test::write_file(et, et_one_relu(6));
    SECTION("the iteration whose sequence number agrees") {
        test::write_file(kineto, kineto_iterations({5, 6, 7}));
        auto imported = import_pair(dir, et, kineto);
        CHECK(meta(imported, "et.kineto_ops_matched_by_order") == "1");
        REQUIRE(imported.trace.allocations.size() == 1);
        CHECK(imported.trace.allocations.t_alloc[0] ==
              110000);   // the second iteration's kernel: 120 us, the trace starts at 10
    }
    SECTION("three iterations, none numbered: ambiguous") {
        test::write_file(kineto, kineto_iterations({-1, -1, -1}));
        auto imported = import_pair(dir, et, kineto);
        CHECK(meta(imported, "et.kineto_ops_matched") == "0");
        REQUIRE(imported.result.warnings.size() == 2);
        CHECK_THAT(imported.result.warnings[0], Catch::Contains("more than one place"));
    }
    SECTION("one iteration, numbered otherwise: another iteration") {
        test::write_file(kineto, kineto_iterations({9}));
        auto imported = import_pair(dir, et, kineto);
        CHECK(meta(imported, "et.kineto_ops_matched") == "0");
        REQUIRE(!imported.result.warnings.empty());
        CHECK_THAT(imported.result.warnings[0], Catch::Contains("differ by 3"));
    }
}

TEST_CASE("ET + Kineto: Record function id is a key only where it is nonzero and written once", "[import][et][join]") {
    test::TempDir dir;
    const std::string et = dir.file("et.json"), kineto = dir.file("kineto.json");
    SECTION("the id names the op among identical iterations") {
        test::write_file(et, et_one_relu(-1, 42));
        test::write_file(kineto, kineto_iterations({-1, -1, -1}, {41, 42, 43}));
        auto imported = import_pair(dir, et, kineto);
        CHECK(meta(imported, "et.join_key") == "Record function id == rf_id");
        REQUIRE(imported.trace.allocations.size() == 1);
        CHECK(imported.trace.allocations.t_alloc[0] == 110000);   // the second iteration's kernel
    }
    SECTION("0 is PyTorch's 'no handle': the op ran while no execution trace recorded, it is not this one") {
        // An inference step (no sequence numbers) profiled in another iteration than the one
        // the execution trace recorded: the names alone would pair them.
        test::write_file(et, et_one_relu(-1, 7));
        test::write_file(kineto, kineto_iterations({-1}, {0}));
        auto imported = import_pair(dir, et, kineto);
        CHECK(meta(imported, "et.kineto_ops_matched") == "0");
        REQUIRE(imported.result.warnings.size() == 2);
        CHECK_THAT(imported.result.warnings[0], Catch::Contains("no Kineto op carries one of its rf_ids"));
    }
    SECTION("an id written twice is nobody's") {
        test::write_file(et, et_one_relu(-1, 42));
        test::write_file(kineto, kineto_iterations({-1, -1}, {42, 42}));
        auto imported = import_pair(dir, et, kineto);
        CHECK(meta(imported, "et.kineto_ops_matched") == "0");
    }
}

TEST_CASE("ET + Kineto: another process's ops in a merged Kineto file are not the execution trace's",
          "[import][et][join]") {
    // Ranks merged into one Kineto file run the same code: process 2's relu has the same name,
    // thread id, sequence number and Record function id as process 1's. The execution trace is
    // process 1's ("pid": 1): before, both ops were candidates (two places by order; an id
    // written twice by key) and nothing was joined.
    test::TempDir dir;
    const std::string et = dir.file("et.json"), kineto = dir.file("kineto.json");
    const auto with_other_rank = [](std::string text, const std::string& args) {
        const std::string other =
            ",{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::relu\",\"pid\":2,\"tid\":1,"
            "\"ts\":12,\"dur\":5,\"args\":{" +
            args + "}}";
        text.insert(text.rfind("]}"), other);
        return text;
    };
    SECTION("by order") {
        test::write_file(et, et_one_relu(6));
        test::write_file(kineto, with_other_rank(kineto_iterations({6}), "\"Ev Idx\":0,\"Sequence number\":6"));
        auto imported = import_pair(dir, et, kineto);
        CHECK(meta(imported, "et.kineto_ops_matched_by_order") == "1");
        REQUIRE(imported.trace.allocations.size() == 1);
        CHECK(imported.trace.allocations.t_alloc[0] == 10000);   // process 1's kernel at 20 us
    }
    SECTION("by key") {
        test::write_file(et, et_one_relu(-1, 42));
        test::write_file(kineto, with_other_rank(kineto_iterations({-1}, {42}), "\"Record function id\":42"));
        auto imported = import_pair(dir, et, kineto);
        CHECK(meta(imported, "et.kineto_ops_matched_by_key") == "1");
        REQUIRE(imported.trace.allocations.size() == 1);
    }
}

TEST_CASE("ET + Kineto: endlessly repeated names are given up on within a bounded effort, said", "[import][et][join]") {
    // 20,000 ET ops and 40,000 Kineto ops of one name: 20,001 places fit the names, and each is
    // told apart only by the sequence number of its last op. Checking them all would compare
    // 4e8 numbers; the join stops at its budget and leaves the thread unjoined.
    test::TempDir dir;
    std::string nodes, events;
    for (int i = 1; i <= 20000; ++i)
        nodes +=
            std::string(i > 1 ? "," : "") + "{\"id\":" + std::to_string(i) +
            ",\"name\":\"aten::relu\",\"parent\":0,\"rf_id\":" + std::to_string(i) +
            ",\"tid\":1,\"seq_id\":" + (i == 20000 ? "5" : "-1") +
            ",\"inputs\":[[7,7,0,1,4,\"cpu\"]],\"input_types\":[\"Tensor(float)\"],\"outputs\":[],\"output_types\":[]}";
    for (int i = 0; i < 40000; ++i)
        events += std::string(i ? "," : "") +
                  "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::relu\",\"pid\":1,\"tid\":1,\"ts\":" +
                  std::to_string(10 + 2 * i) + ",\"dur\":1,\"args\":{\"Ev Idx\":" + std::to_string(i) +
                  ",\"Sequence number\":1}}";
    test::write_file(dir.file("et.json"), "{\"schema\":\"1.0.1\",\"pid\":1,\"nodes\":[" + nodes + "]}");
    test::write_file(dir.file("kineto.json"), "{\"traceEvents\":[" + events + "]}");
    auto imported = import_pair(dir, dir.file("et.json"), dir.file("kineto.json"));
    CHECK(meta(imported, "et.kineto_ops_matched") == "0");
    REQUIRE(!imported.result.warnings.empty());
    CHECK_THAT(imported.result.warnings[0], Catch::Contains("too many places"));
}

TEST_CASE("execution trace: tensors of any accelerator are device memory, meta tensors none (synthetic ET)",
          "[import][et]") {
    // A hand-written ET of the 1.1.1 schema (PyTorch writes c10::Device::str(): "xpu:1", "cpu",
    // "meta"). Storage 7 (xpu:1): 1024 floats, 4096 B; storage 8 (cpu): 16 B; storage 9 (meta)
    // has no memory. Before 2026-12-03 only "cuda" was a device: the 4096 B were the host's.
    test::TempDir dir;
    auto node = [](int id, const std::string& tensor) {
        const std::string shape = tensor.find(",4,4,") != std::string::npos ? "[4]" : "[1024]";   // numel 4 or 1024
        return "{\"id\":" + std::to_string(id) +
               ",\"name\":\"aten::relu\",\"ctrl_deps\":1,"
               "\"inputs\":{\"values\":[" +
               tensor + "],\"shapes\":[" + shape + "],\"types\":[\"Tensor(float)\"],\"strides\":[[1]]},"
               "\"outputs\":{\"values\":[],\"shapes\":[],\"types\":[],\"strides\":[]},"
               "\"attrs\":[{\"name\":\"rf_id\",\"type\":\"uint64\",\"value\":" +
               std::to_string(id) + "}]}";
    };
    auto et = [&](const std::string& second_device) {
        return "{\"schema\":\"1.1.1-chakra.0.0.4\",\"pid\":1,\"nodes\":[" + node(2, "[1,7,0,1024,4,\"xpu:1\"]") + "," +
               node(3, "[2,8,0,4,4,\"cpu\"]") + "," + node(4, "[3,9,0,1024,4,\"meta\"]") + "," +
               node(5, "[4,7,0,1024,4,\"" + second_device + "\"]") + "]}";
    };
    const std::string in = dir.file("xpu_et.json"), out = dir.file("trace.db");
    test::write_file(in, et("xpu:1"));
    imp::Options opt;
    opt.warn = false;
    const imp::Result result = imp::import_file(in, out, opt);
    const TraceData trace = mhc::trace::load_trace(out);
    REQUIRE(trace.allocations.size() == 2);
    for (size_t a = 0; a < trace.allocations.size(); ++a) {
        const bool xpu = trace.allocations.bytes[a] == 4096;
        CHECK(trace.allocations.device[a] == (xpu ? 1 : -1));
        if (!xpu) CHECK(trace.allocations.bytes[a] == 16);
    }
    CHECK(trace.meta.at("et.device_types") == "cpu 1, meta 1, xpu 2 tensors (xpu:N is device N)");
    REQUIRE(result.warnings.size() == 1);
    CHECK(result.warnings[0] == "1 tensors on the meta device (shapes without storage) hold no memory: not imported");
    // cuda:1 and xpu:1 would both be device 1: refused, naming both.
    test::write_file(in, et("cuda:1"));
    try {
        imp::import_file(in, out, opt);
        FAIL("an ET with cuda and xpu tensors was imported");
    } catch (const mhc::Error& e) {
        CHECK(std::string(e.what()).find("tensors on two kinds of accelerator (cuda and xpu)") != std::string::npos);
    }
    // A device type with a control byte is shown with '?': the error stays one line.
    test::write_file(in, et("bad\\ntype:1"));
    try {
        imp::import_file(in, out, opt);
        FAIL("an ET with two accelerator types was imported");
    } catch (const mhc::Error& e) {
        CHECK(std::string(e.what()).find("(bad?type and xpu)") != std::string::npos);
        CHECK(std::string(e.what()).find('\n') == std::string::npos);
    }
}

TEST_CASE("a Chakra protobuf execution trace (.et) is refused by name, one line, exit 2", "[import][et]") {
    // The first 96 bytes of mlcommons/chakra@21585d8f's tests/data/chakra.0.et (in
    // tests/data/feeder_tests_trace.tar.gz; Apache-2.0, tests/data/public/LICENSES/Apache-2.0-chakra.txt),
    // what chakra_converter writes from a PyTorch execution trace: a varint length (0x5e), then the
    // GlobalMetadata's attr "schema" = "1.0.1", "pid", "time" = "2023-12-14 11:55:01", ... The whole
    // file (2,978,371 bytes) was refused the same way. Before 2026-12-03: "unknown format: not a
    // pickle, JSON or SQLite file". Named .et, or not (the "schema" attribute first), it is said.
    const std::string head =
        "5e12100a06736368656d61ea0105312e302e3112090a0370696468a6ff06121c0a0474696d65ea0113323032332d31322d"
        "31342031313a35353a3031120f0a0873746172745f747368f1ad986712100a0966696e6973685f747368cd839a67bc";
    std::string bytes;
    for (size_t i = 0; i + 1 < head.size(); i += 2)
        bytes += static_cast<char>(std::stoi(head.substr(i, 2), nullptr, 16));
    test::TempDir dir;
    for (const char* name : {"chakra.0.et", "trace.bin"}) {
        test::write_file(dir.file(name), bytes);
        std::string err;
        CHECK(test::run_mhc("import " + dir.file(name) + " -o " + dir.file("t.db"), &err) == 2);
        CHECK(err.find("a Chakra protobuf execution trace (chakra_converter's .et), which mhc does not read") !=
              std::string::npos);
        CHECK(std::count(err.begin(), err.end(), '\n') == 1);
    }
    // Bytes of no known format and no .et name keep the general refusal.
    test::write_file(dir.file("x.bin"), std::string("\x01\x02\x03\x04\x05\x06\x07\x08"));
    std::string err;
    CHECK(test::run_mhc("import " + dir.file("x.bin") + " -o " + dir.file("t.db"), &err) == 2);
    CHECK(err.find("unknown format") != std::string::npos);
}

TEST_CASE("execution trace: tensors in lists of lists (a collective's outputs) are the op's", "[import][et]") {
    // Hand-written from mlcommons/chakra's 1.0.2 trace (tests/data/public/chakra/chakra-1.0.2-et.json.gz,
    // node 30): record_param_comms of an all_gather takes GenericList[Tensor(float)] in and writes
    // GenericList[GenericList[Tensor(float),Tensor(float)]]. Here it is a leaf, and its output
    // storages 20 (16 floats, 64 B) and 23 (8 floats, 32 B) are used by no other op. Before
    // 2026-12-03 only one level of lists was read: both were no allocation, and the op had one
    // access (its input, storage 15: 4 B) where it has three (read 15, write 20 and 23).
    test::TempDir dir;
    const std::string in = dir.file("allgather_et.json"), out = dir.file("trace.db");
    test::write_file(
        in, "{\"schema\":\"1.0.2-chakra.0.0.4\",\"pid\":1,\"nodes\":[{\"id\":30,\"name\":\"record_param_comms\","
            "\"ctrl_deps\":24,\"inputs\":{\"values\":[[[14,15,0,1,4,\"cuda:0\"]],12,\"all_gather\"],"
            "\"shapes\":[[[1]],[],[]],\"types\":[\"GenericList[Tensor(float)]\",\"Int\",\"String\"]},"
            "\"outputs\":{\"values\":[[[[19,20,0,16,4,\"cuda:0\"],[5,23,0,8,4,\"cuda:0\"]]]],\"shapes\":[[[[16],[8]]]],"
            "\"types\":[\"GenericList[GenericList[Tensor(float),Tensor(float)]]\"]},"
            "\"attrs\":[{\"name\":\"rf_id\",\"type\":\"uint64\",\"value\":7}]}]}");
    imp::Options opt;
    opt.warn = false;
    imp::import_file(in, out, opt);
    const TraceData trace = mhc::trace::load_trace(out);
    REQUIRE(trace.allocations.size() == 3);
    std::vector<int64_t> bytes(trace.allocations.bytes.begin(), trace.allocations.bytes.end());
    std::sort(bytes.begin(), bytes.end());
    CHECK(bytes == std::vector<int64_t>{4, 32, 64});
    CHECK(trace.kernels.size() == 1);
    CHECK(trace.accesses.size() == 3);
}

TEST_CASE("ET + Kineto: a join of nothing or of part says so in meta and in mhc info", "[import][et][join]") {
    // pytorch/pytorch#123640's kind of pair: the profiler recorded another iteration than the
    // execution trace, and Kineto's Record function id is 0 on every op. Before 2026-12-03 the
    // trace said accesses "exact" (of no access at all) and only the import's warning said why;
    // `mhc info` showed neither.
    test::TempDir dir;
    const std::string et = dir.file("et.json"), kineto = dir.file("kineto.json");
    SECTION("a GPU run, nothing joined: Kineto's kernels, timed, without accesses") {
        test::write_file(et, et_one_relu(-1, 7));
        test::write_file(kineto, kineto_iterations({-1}, {0}));
        auto imported = import_pair(dir, et, kineto);
        CHECK(imported.trace.kernels.size() == 1);
        CHECK(imported.trace.accesses.size() == 0);
        CHECK(meta(imported, "accesses") == "none");
        CHECK(meta(imported, "timing") == "exact");   // the kernel's time is Kineto's
        CHECK_THAT(meta(imported, "et.join"),
                   Catch::StartsWith("0 of 1 ops joined (0 of 1 threads): execution-trace thread 1 (1 ops): not "
                                     "joined, no Kineto op carries one of its rf_ids") &&
                       Catch::EndsWith("; the kernels have no accesses"));
        const std::string db = dir.file("cli.db");
        REQUIRE(test::run_mhc("import " + et + " --kineto " + kineto + " -o " + db) == 0);
        int rc = -1;
        const std::string info = test::mhc_stdout("info " + db, &rc);
        CHECK(rc == 0);
        CHECK_THAT(info, Catch::Contains("\naccesses    none\n"));
        CHECK_THAT(info, Catch::Contains("\njoin        0 of 1 ops joined (0 of 1 threads): execution-trace thread 1"));
    }
    SECTION("a CPU run, nothing joined: no op is in the trace, so nothing is timed") {
        test::write_file(et,
                         "{\"schema\":\"1.0.1\",\"pid\":1,\"nodes\":[{\"id\":1,\"name\":\"aten::relu\",\"parent\":0,"
                         "\"rf_id\":7,\"tid\":1,\"inputs\":[[7,7,0,1024,4,\"cpu\"]],\"input_types\":"
                         "[\"Tensor(float)\"],\"outputs\":[],\"output_types\":[]}]}");
        test::write_file(kineto,
                         "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::relu\",\"pid\":1,"
                         "\"tid\":1,\"ts\":10,\"dur\":5,\"args\":{\"Record function id\":0}}]}");
        auto imported = import_pair(dir, et, kineto);
        CHECK(imported.trace.kernels.size() == 0);
        CHECK(meta(imported, "accesses") == "none");
        CHECK(meta(imported, "timing") == "none");
        CHECK_THAT(meta(imported, "et.join"), Catch::StartsWith("0 of 1 ops joined (0 of 1 threads): ") &&
                                                  Catch::EndsWith("; no op is in the trace"));
    }
    SECTION("part joined: one thread by key, the other not") {
        // Thread 1's relu (rf_id 42) is Kineto's first op; thread 2's (rf_id 43) is nowhere.
        test::write_file(
            et,
            "{\"schema\":\"1.0.1\",\"pid\":1,\"nodes\":[{\"id\":1,\"name\":\"aten::relu\",\"parent\":0,\"rf_id\":42,"
            "\"tid\":1,\"inputs\":[[7,7,0,1024,4,\"cuda:0\"]],\"input_types\":[\"Tensor(float)\"],\"outputs\":[],"
            "\"output_types\":[]},{\"id\":2,\"name\":\"aten::relu\",\"parent\":0,\"rf_id\":43,\"tid\":2,\"inputs\":"
            "[[8,8,0,1024,4,\"cuda:0\"]],\"input_types\":[\"Tensor(float)\"],\"outputs\":[],\"output_types\":[]}]}");
        test::write_file(kineto, kineto_iterations({-1, -1}, {42, 0}));
        auto imported = import_pair(dir, et, kineto);
        CHECK(imported.trace.accesses.size() == 1);
        CHECK(meta(imported, "accesses") == "partial");
        CHECK(meta(imported, "timing") == "exact");
        CHECK(meta(imported, "et.join") ==
              "1 of 2 ops joined (1 of 2 threads) by Record function id == rf_id: execution-trace thread 2 (1 ops): "
              "not joined, no Kineto op carries one of its rf_ids as its Record function id (the profiler recorded "
              "other ops than the execution trace)");
    }
    SECTION("all joined: exact, and the line says by what") {
        test::write_file(et, et_one_relu(-1, 42));
        test::write_file(kineto, kineto_iterations({-1}, {42}));
        auto imported = import_pair(dir, et, kineto);
        CHECK(meta(imported, "accesses") == "exact");
        CHECK(meta(imported, "et.join") == "1 of 1 ops joined (1 of 1 threads) by Record function id == rf_id");
    }
}

TEST_CASE(
    "execution trace: a tensor of five fields (schema 1.0.0, no device), or not an array of numbers, is "
    "refused, naming node and field",
    "[import][et]") {
    // PyTorch's ExecutionGraphObserver of schema 1.0.0 (pytorch/pytorch@1f7ca033's
    // torch/csrc/profiler/execution_graph_observer.cpp) wrote [tensor_id, storage_id, offset, numel,
    // itemsize]; schema 1.0.1 added the device as a sixth field. Before 2026-12-03 a five-field
    // tensor was the host's, in silence: a GPU trace's memory was imported as host memory.
    test::TempDir dir;
    const auto et = [](const std::string& second_input) {
        return "{\"schema\":\"1.0.0\",\"pid\":1,\"nodes\":[{\"id\":1,\"name\":\"[pytorch|profiler|execution_graph|"
               "process]\",\"parent\":1},{\"id\":2,\"name\":\"aten::add\",\"parent\":1,\"tid\":1,\"inputs\":"
               "[[3,4,0,16,4,\"cuda:0\"]," +
               second_input +
               "],\"input_types\":[\"Tensor(float)\",\"Tensor(float)\"],\"outputs\":[],\"output_types\":[]}]}";
    };
    struct Case {
        const char* name;
        std::string tensor, expect;
    };
    const std::vector<Case> cases = {
        {"five", "[5,6,0,16,4]",
         "nodes[1]: tensor has 5 fields, no device (schema 1.0.0's [tensor_id, storage_id, offset, numel, itemsize]): "
         "its memory's device is unknown; recorded before schema 1.0.1 (inputs[1])"},
        {"seven", "[5,6,0,16,4,\"cuda:0\",1]",
         "nodes[1]: tensor has 7 fields, not 6 ([tensor_id, storage_id, offset, numel, itemsize, device]) (inputs[1])"},
        {"three", "[5,6,0]", "nodes[1]: tensor has 3 fields, not 6"},
        // Not an array, or a first field that is not a number: skipped in silence before 2026-12-03.
        {"object", "{\"id\":5}",
         "nodes[1]: tensor is not an array: {\"id\":5}, not [tensor_id, storage_id, offset, numel, itemsize, device] "
         "(inputs[1])"},
        {"number", "7", "nodes[1]: tensor is not an array: 7, not [tensor_id"},
        {"string-id", "[\"5\",6,0,16,4,\"cuda:0\"]",
         "nodes[1]: tensor has a first field (tensor_id) that is not a number: [\"5\",6,0,16,4,\"cuda:0\"], not "
         "[tensor_id, storage_id, offset, numel, itemsize, device] (inputs[1])"},
    };
    for (const auto& test_case : cases) {
        DYNAMIC_SECTION(test_case.name) {
            const std::string in = dir.file(std::string(test_case.name) + ".json");
            test::write_file(in, et(test_case.tensor));
            std::string err;
            CHECK(test::run_mhc("import " + in + " -o " + dir.file("t.db"), &err) == 2);
            CHECK_THAT(err, Catch::Contains(in + ": " + test_case.expect));
            CHECK(std::count(err.begin(), err.end(), '\n') == 1);
        }
    }
    SECTION("in a list, in the Chakra layout: the field names the list") {
        const std::string in = dir.file("chakra.json");
        test::write_file(in,
                         "{\"schema\":\"1.0.2-chakra.0.0.4\",\"pid\":1,\"nodes\":[{\"id\":2,\"name\":\"c10d::"
                         "allgather_\",\"ctrl_deps\":1,\"inputs\":{\"values\":[],\"types\":[]},\"outputs\":"
                         "{\"values\":[7,[[1,2,0,4,4,\"cuda:0\"],[3,4,0,4,4]]],\"types\":[\"Int\",\"GenericList"
                         "[Tensor(float),Tensor(float)]\"]}}]}");
        imp::Options opt;
        opt.warn = false;
        CHECK_THROWS_WITH(imp::import_file(in, dir.file("c.db"), opt),
                          Catch::Contains("nodes[0]: tensor has 5 fields") && Catch::EndsWith("(outputs.values[1])"));
    }
    SECTION("six fields are read as before") {
        const std::string in = dir.file("six.json");
        test::write_file(in, et("[5,6,0,16,4,\"cuda:0\"]"));
        CHECK(test::run_mhc("import " + in + " -o " + dir.file("six.db")) == 0);
    }
}

TEST_CASE("execution trace: a top-level pid that is not an integer is refused, one line", "[import][et]") {
    // PyTorch writes the recording process's id ("pid": 1734239). Before 2026-12-03 any other
    // value was read as "no process" (-1, a float truncated) in silence, and the --kineto join
    // then neither refused another run's Kineto trace nor kept to its process's ops.
    test::TempDir dir;
    const auto et = [](const std::string& pid) {
        return "{\"schema\":\"1.0.1\",\"pid\":" + pid +
               ",\"nodes\":[{\"id\":1,\"name\":\"aten::relu\",\"parent\":0,\"tid\":1,\"inputs\":"
               "[[7,7,0,1024,4,\"cuda:0\"]],\"input_types\":[\"Tensor(float)\"],\"outputs\":[],\"output_types\":[]}]}";
    };
    struct Case {
        const char* name;
        std::string pid, expect;
    };
    const std::vector<Case> cases = {
        {"string", "\"1734239\"", "'pid' \"1734239\" is not an integer (the recording process's id)"},
        {"float", "1734239.5", "'pid' 1734239.5 is not an integer"},
        {"null", "null", "'pid' null is not an integer"},
        {"boolean", "true", "'pid' true is not an integer"},
        {"array", "[1]", "'pid' an array is not an integer"},
        {"object", "{\"id\":1}", "'pid' an object is not an integer"},
        {"past-int64", "18446744073709551615", "'pid' 18446744073709551615 is not an integer"},
    };
    for (const auto& test_case : cases) {
        DYNAMIC_SECTION(test_case.name) {
            const std::string in = dir.file(std::string(test_case.name) + ".json");
            test::write_file(in, et(test_case.pid));
            std::string err;
            CHECK(test::run_mhc("import " + in + " -o " + dir.file("t.db"), &err) == 2);
            CHECK_THAT(err, Catch::Contains(in + ": " + test_case.expect));
            CHECK(std::count(err.begin(), err.end(), '\n') == 1);
        }
    }
    SECTION("an integer pid, and none, are read") {
        for (const std::string& pid : {std::string("1734239"), std::string("-1")}) {
            const std::string in = dir.file("ok.json");
            test::write_file(in, et(pid));
            CHECK(test::run_mhc("import " + in + " -o " + dir.file("ok" + pid + ".db")) == 0);
        }
        const std::string none = dir.file("none.json");
        std::string text = et("1");
        text.erase(text.find(",\"pid\":1"), 8);
        test::write_file(none, text);
        CHECK(test::run_mhc("import " + none + " -o " + dir.file("none.db")) == 0);
    }
}

TEST_CASE("et + kineto: the ops of a torch 2.5.1 pair take the mended ProfilerStep#N of their Kineto op",
          "[import][et][steps][writers]") {
    // tests/import/fixtures/writers: torch 2.5.1's execution trace of step 3 of 6 (106 leaf ops with
    // tensors, no ProfilerStep#N node: the observer started inside it), joined by rf_id to the Kineto
    // trace whose ProfilerStep#N ranges sit at the end of their steps (torch 2.5, with_stack=True).
    // The ops take step 3 from their Kineto ops once the ranges are mended before the join's units
    // are made (et_kineto_pairs.py reads the same). Before 2026-12-05 (later): all 106 in no step
    // (-1), while torch 2.9.1's pair put them in step 3.
    test::TempDir dir;
    const Joined imported = import_pair(dir, test::fixture("writers/torch-2.5.1-et.json.gz"),
                                        test::fixture("writers/torch-2.5.1-kineto.json.gz"));
    std::map<int32_t, int64_t> per_step;
    for (int32_t step : imported.trace.kernels.step) ++per_step[step];
    CHECK(per_step == std::map<int32_t, int64_t>{{3, 106}});
    CHECK(meta(imported, "kineto.profiler_steps_mended").rfind("4 ProfilerStep#N ranges", 0) == 0);
}

// chakra_trace_link's "ET+": the execution trace with a node added per Kineto kernel, copy or memset,
// each a copy of the op that ran it ("cat", "ts", "stream" of the Kineto event; ctrl_deps on the op),
// made from the public simple_add pair by tests/import/fixtures/make_et_plus.py as chakra's
// trace_linker.py writes it. Before 2026-12-06 the added nodes were read as ops: with --kineto the
// op order no longer matched the Kineto thread's (0 of 40 ops joined, 0 allocations, 0 accesses,
// two warnings), and alone each kernel was an op of its own with its op's tensors.
TEST_CASE("et: an execution trace linked by chakra_trace_link reads as the execution trace it linked",
          "[import][et][join]") {
    test::TempDir dir;
    const std::string plus = test::fixture("simple_add_et_plus.json.gz");
    const std::string kineto = test::pub("kineto/simple_add_trace.json.gz");
    test::TempDir other;
    Joined linked = import_pair(dir, plus, kineto);
    const TraceData& linked_trace = linked.trace;
    Joined original = import_pair(other, test::pub("chakra/simple_add_et.json.gz"), kineto);
    CHECK(meta(linked, "et.kineto_ops_matched") == "36");
    CHECK(meta(linked, "et.kineto_ops_matched") == meta(original, "et.kineto_ops_matched"));
    CHECK(meta(linked, "et.linked_kineto_nodes").rfind("4 nodes chakra_trace_link added", 0) == 0);
    REQUIRE(linked_trace.allocations.size() == 4);
    CHECK(linked_trace.allocations.bytes == original.trace.allocations.bytes);
    CHECK(linked_trace.allocations.t_alloc == original.trace.allocations.t_alloc);
    CHECK(linked_trace.allocations.t_free == original.trace.allocations.t_free);
    CHECK(linked_trace.kernels.t_start == original.trace.kernels.t_start);
    CHECK(linked_trace.accesses.size() == 8);
    CHECK(linked_trace.accesses.size() == original.trace.accesses.size());
    CHECK(linked.result.events == 42);
    // Alone: the 16 leaf ops with tensors of the execution trace, not the 4 added nodes in place of
    // the ops that ran them.
    imp::Options alone;
    alone.warn = false;
    imp::Result result = imp::import_file(plus, dir.file("alone.db"), alone);
    TraceData trace = mhc::trace::load_trace(dir.file("alone.db"));
    CHECK(trace.kernels.size() == 16);
    CHECK(trace.accesses.size() == 22);
    CHECK(trace.allocations.size() == 10);   // 9 storage ids, one given again
    for (size_t k = 0; k < trace.kernels.size(); ++k)
        CHECK(trace.str(trace.kernels.name[k]).rfind("void ", 0) != 0);   // no Kineto kernel name
    CHECK(std::any_of(result.warnings.begin(), result.warnings.end(), [](const std::string& warning) {
        return warning.find("an execution trace linked by chakra_trace_link (ET+)") != std::string::npos;
    }));
}

// PyTorch 1.13 writes whole microseconds and names the profiler's start order "Profiler Event
// Index" (2.0 on: "Ev Idx"). Two ops of one name beginning in one microsecond, the first 0 us long:
// ordered by duration (the longer first, as an enclosing op), the execution trace's first op took
// the second's Kineto interval and its tensors the other's lifetime, exit 0, no warning; a 0 us op
// followed by an op of another name in its microsecond (1.13.1's `aten::as_strided` then
// `aten::copy_`, 82 places in 4 steps of a recorded run) left the whole thread unjoined.
TEST_CASE("et + kineto: ops begun in one microsecond keep 1.13's Profiler Event Index order",
          "[import][et][join]") {
    auto op = [](const char* name, int64_t ts, int64_t dur, int64_t index) {
        return std::string("{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"") + name +
               "\",\"pid\":1,\"tid\":1,\"ts\":" + std::to_string(ts) + ",\"dur\":" + std::to_string(dur) +
               ",\"args\":{\"External id\":" + std::to_string(index + 1) +
               ",\"Profiler Event Index\":" + std::to_string(index) + "}}";
    };
    // Written in the profiler's order: add (storage 7) ends in the microsecond it began; the
    // second add (storage 8), begun in that microsecond, runs 3 us; then as_strided (0 us) and
    // mul (2 us), begun together.
    const std::string kineto = "{\"traceEvents\":[" + op("aten::add", 100, 0, 0) + "," + op("aten::add", 100, 3, 1) +
                               "," + op("aten::as_strided", 110, 0, 2) + "," + op("aten::mul", 110, 2, 3) + "]}";
    auto node = [](int id, const char* name, int storage) {
        return "{\"id\":" + std::to_string(id) + ",\"name\":\"" + name + "\",\"parent\":1,\"tid\":1,\"inputs\":[[" +
               std::to_string(storage) + "," + std::to_string(storage) +
               ",0,4,4,\"cpu\"]],\"input_types\":[\"Tensor(float)\"],\"outputs\":[],\"output_types\":[]}";
    };
    const std::string et = "{\"schema\":\"1.0.1\",\"pid\":1,\"nodes\":[{\"id\":1,\"name\":\"[pytorch|profiler|"
                           "execution_graph|thread]\",\"parent\":1,\"tid\":1,\"inputs\":[],\"input_types\":[],"
                           "\"outputs\":[],\"output_types\":[]}," +
                           node(2, "aten::add", 7) + "," + node(3, "aten::add", 8) + "," +
                           node(4, "aten::as_strided", 9) + "," + node(5, "aten::mul", 10) + "]}";
    test::TempDir dir;
    test::write_file(dir.file("k.json"), kineto);
    test::write_file(dir.file("et.json"), et);
    const Joined imported = import_pair(dir, dir.file("et.json"), dir.file("k.json"));
    CHECK(meta(imported, "et.kineto_ops_matched_by_order") == "4");
    const TraceData& trace = imported.trace;
    std::map<std::string, std::pair<int64_t, int64_t>> lives;
    for (size_t a = 0; a < trace.allocations.size(); ++a)
        lives[trace.str(trace.allocations.label[a])] = {trace.allocations.t_alloc[a], trace.allocations.t_free[a]};
    CHECK(lives["storage 7"] == std::pair<int64_t, int64_t>{0, 0});
    CHECK(lives["storage 8"] == std::pair<int64_t, int64_t>{0, 3000});
    CHECK(lives["storage 9"] == std::pair<int64_t, int64_t>{10000, 10000});
    CHECK(lives["storage 10"] == std::pair<int64_t, int64_t>{10000, 12000});
}

TEST_CASE("et + kineto: torch 1.13.1's execution trace of two steps joins around the profiler's step ranges",
          "[import][et][join][writers]") {
    // tests/import/fixtures/writers (make_writers.py --et-steps, torch 1.13.1 on the CPU): the
    // ExecutionGraphObserver records steps 2 and 3, and 1.13's observer records no ProfilerStep#N,
    // so the Kineto thread holds ProfilerStep#2 among the execution trace's ops. Before 2026-12-06
    // nothing joined (0 of 534 ops: "its ops do not occur in this order on any Kineto thread").
    test::TempDir dir;
    const Joined imported = import_pair(dir, test::fixture("writers/torch-1.13.1-et-steps-et.json.gz"),
                                        test::fixture("writers/torch-1.13.1-et-steps-kineto.json.gz"));
    CHECK(meta(imported, "et.kineto_ops_matched_by_order") == "534");
    CHECK(meta(imported, "et.threads_not_joined") == "0");
    CHECK(meta(imported, "et.join_parent_disagreements") == "0");
    std::map<int32_t, int64_t> per_step;
    for (int32_t step : imported.trace.kernels.step) ++per_step[step];
    // ProfilerStep#2 and #3 (steps 1 and 2); the 2 ops between them are the profiler's own, run by
    // step() before the next range begins (record_function's handle, torch.zeros in 1.13).
    CHECK(per_step == std::map<int32_t, int64_t>{{-1, 2}, {1, 120}, {2, 121}});
}

// The same ties on a GPU: two `aten::to` begun in one microsecond, the first a no-op (0 us, its
// tensor returned as it is), the second converting storage 8 into storage 9 with a kernel launched
// in the next microsecond. Ordered by duration, the execution trace's first `to` was joined to the
// 3 us op and the launch's innermost op was that one: the kernel read storage 7, and storages 8
// and 9 were left out as used by no kernel, exit 0 (the generic warning about storages left out).
TEST_CASE("et + kineto: a kernel launched by the second of two ops begun in one microsecond takes its tensors",
          "[import][et][join]") {
    const std::string kineto =
        "{\"traceEvents\":["
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::to\",\"pid\":1,\"tid\":1,\"ts\":100,\"dur\":0,"
        "\"args\":{\"External id\":1,\"Profiler Event Index\":0}},"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::to\",\"pid\":1,\"tid\":1,\"ts\":100,\"dur\":3,"
        "\"args\":{\"External id\":2,\"Profiler Event Index\":1}},"
        "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,\"ts\":101,"
        "\"dur\":1,\"args\":{\"correlation\":5}},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"copy_kernel\",\"pid\":0,\"tid\":7,\"ts\":110,\"dur\":2,"
        "\"args\":{\"correlation\":5,\"device\":0,\"stream\":7}}]}";
    auto tensor = [](int storage) {
        return "[" + std::to_string(storage) + "," + std::to_string(storage) + ",0,4,4,\"cuda:0\"]";
    };
    auto to = [&](int id, int in, int out) {
        return "{\"id\":" + std::to_string(id) + ",\"name\":\"aten::to\",\"parent\":1,\"tid\":1,\"inputs\":[" +
               tensor(in) + "],\"input_types\":[\"Tensor(float)\"],\"outputs\":[" + tensor(out) +
               "],\"output_types\":[\"Tensor(float)\"]}";
    };
    const std::string et = "{\"schema\":\"1.0.1\",\"pid\":1,\"nodes\":["
                           "{\"id\":1,\"name\":\"[pytorch|profiler|execution_graph|thread]\",\"parent\":1,"
                           "\"tid\":1,\"inputs\":[],\"input_types\":[],\"outputs\":[],\"output_types\":[]}," +
                           to(2, 7, 7) + "," + to(3, 8, 9) + "]}";
    test::TempDir dir;
    test::write_file(dir.file("k.json"), kineto);
    test::write_file(dir.file("et.json"), et);
    const Joined imported = import_pair(dir, dir.file("et.json"), dir.file("k.json"));
    CHECK(meta(imported, "et.kineto_ops_matched_by_order") == "2");
    const TraceData& trace = imported.trace;
    REQUIRE(trace.kernels.size() == 1);
    std::map<std::string, mhc::trace::AccessMode> accessed;
    for (size_t a = 0; a < trace.accesses.size(); ++a)
        accessed[trace.str(trace.allocations.label[static_cast<size_t>(trace.accesses.allocation[a])])] =
            trace.accesses.mode[a];
    CHECK(accessed == std::map<std::string, mhc::trace::AccessMode>{{"storage 8", mhc::trace::AccessMode::Read},
                                                                    {"storage 9", mhc::trace::AccessMode::Write}});
    CHECK(meta(imported, "et.storages_left_out").rfind('1', 0) == 0);   // storage 7: the no-op's, no kernel
}
