// Broken inputs, generated here: each is exit 2 with one line that names the file and what is
// wrong, and no output file (nor temporary) is left behind.
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "mhc/common/error.hpp"
#include "util.hpp"

namespace imp = mhc::trace::import;

namespace {

std::string unhex(const std::string& h) {
    std::string out;
    for (size_t i = 0; i + 1 < h.size(); i += 2) out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
    return out;
}

struct Broken {
    std::string name;      // file name inside the temp dir
    std::string bytes;     // content ("" for files made otherwise)
    std::string expect;    // part of the message
};

void make_nsys_unknown(const std::string& path) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db,
                         "CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT);"
                         "CREATE TABLE EXPORT_META_DATA(name TEXT, value TEXT);"
                         "INSERT INTO EXPORT_META_DATA VALUES('EXPORT_SCHEMA_VERSION','99.0.0');"
                         "CREATE TABLE CUDA_KERNELS_V99(begin INTEGER, finish INTEGER);",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
}

// Checks both the library (mhc::Error text) and the CLI (exit 2, one stderr line).
void expect_rejected(const test::TempDir& dir, const std::string& in, const std::string& expect,
                     const std::string& extra_args = "") {
    std::string out = dir.file("out.db");
    size_t before = dir.entries();
    imp::Options opt;
    opt.warn = false;
    try {
        imp::import_file(in, out, opt);
        FAIL("accepted: " + in);
    } catch (const mhc::Error& e) {
        std::string m = e.what();
        INFO(m);
        CHECK(m.rfind(in, 0) == 0);   // names the file first
        CHECK(m.find(expect) != std::string::npos);
        CHECK(m.find('\n') == std::string::npos);
        CHECK(e.exit_code() == 2);
    }
    CHECK(dir.entries() == before);   // nothing left: no out.db, no temporaries
    std::string err;
    CHECK(test::run_mhc("import " + in + " -o " + out + " " + extra_args, &err) == 2);
    INFO(err);
    CHECK(err.find(in) != std::string::npos);
    CHECK(err.find(expect) != std::string::npos);
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
    CHECK(dir.entries() == before);
}

}  // namespace

TEST_CASE("broken inputs are refused cleanly", "[import][broken]") {
    std::string gz = test::read_file(test::pub("kineto/nccl_data.json.gz"));
    std::vector<Broken> cases = {
        {"truncated.json.gz", gz.substr(0, gz.size() / 2), "truncated"},
        {"invalid.json", "{\"traceEvents\": [ {\"ph\": \"X\", \"ts\": 1,, } ]}", "invalid JSON"},
        {"unterminated.json", "{\"traceEvents\": [ {\"ph\": \"X\"", "invalid JSON"},
        {"no-events.json", "{\"schemaVersion\": 1, \"traceEvents_\": []}", "traceEvents"},
        // pickle.dumps(collections.OrderedDict(a=1), protocol=2)
        {"global.pickle",
         unhex("800263636f6c6c656374696f6e730a4f726465726564446963740a71002952710158010000006171024b01732e"), "GLOBAL"},
        // pickle.dumps({'segments': [], 'device_traces': [[]]}, protocol=4)
        {"no-traces.pickle",
         unhex("80049527000000000000007d94288c087365676d656e7473945d948c0d6465766963655f747261636573945d945d9461752e"),
         "no trace events"},
        // pickle.dumps({'segments': []}, protocol=4)
        {"no-device-traces.pickle", unhex("80049511000000000000007d948c087365676d656e7473945d94732e"), "device_traces"},
        // pickle.dumps({'graag gedaan!': 'x', 'toeval': 1}, protocol=4): another program's pickle named
        // memory.pickle (peopleofdata/mygpt's, a chatbot's phrases); before 2026-12-06 "snapshot has no
        // 'device_traces': record it with torch.cuda.memory._record_memory_history() ...".
        {"memory.pickle",
         unhex("80049524000000000000007d94288c0d67726161672067656461616e21948c0178948c06746f6576616c944b01752e"),
         "not a PyTorch memory snapshot: a pickled dict without 'segments' or 'device_traces' (its keys: "
         "'graag gedaan!', 'toeval')"},
        {"truncated.pickle", unhex("80049527000000000000007d94288c087365676d656e7473"), "truncated"},
        {"notes.txt", "hello, this is not a trace\n", "unknown format"},
        {"empty.json", "", "empty"},
        {"et-bad.json", "{\"schema\": \"1.0.1\", \"nodes\": [{\"name\": \"x\"}]}", "no numeric 'id'"},
        {"et-invalid.json", "{\"schema\": \"1.0.1\", \"nodes\": [", "invalid JSON"},
        // The first bytes of TraceLens's tests/rocprof/908_results.json.gz and of Chakra's
        // tests/data/json_trace.tar.gz jsonData/small_chakra.0.json: formats of other tools, said by name.
        {"rocprof.json", "{\"rocprofiler-sdk-tool\":[{\"metadata\":{\"node\":{\"id\":0}}}]}",
         "a rocprofiler-sdk JSON (rocprofv3 --output-format json), which mhc does not read"},
        // py-spy record --format speedscope (bclarkson-code/flow_matching's profile.json): before
        // 2026-12-06 "not a known trace format".
        {"profile.json",
         "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"profiles\":[{\"type\":\"sampled\","
         "\"name\":\"Thread 24561\",\"unit\":\"seconds\",\"startValue\":0.0,\"endValue\":23.19,\"samples\":[[1]],"
         "\"weights\":[0.01]}],\"shared\":{\"frames\":[{\"name\":\"<module>\"}]}}",
         "a speedscope profile (py-spy record --format speedscope"},
        {"chakra.json", "{\n  \"workload_graph\": [\n    {\n      \"Id\": 216,\n      \"NodeType\": 4}]}",
         "a Chakra workload-graph JSON (converted from a Chakra trace)"},
        // TensorFlow's and JAX's profiler (XProf) write their trace viewer's JSON with traceEvents
        // too, as a TensorFlow 2.5 run's plugins/profile/*/HOST.trace.json.gz does (aoberai/chess-engine,
        // 2021): processes named /device:GPU:0 and /host:CPU, events without 'cat', metadata without
        // 'ts', a last empty event. Before 2026-12-04 imported as a Kineto trace of nothing, exit 0.
        {"host.trace.json",
         R"j({"displayTimeUnit":"ns","metadata":{"highres-ticks":true},"traceEvents":[)j"
         R"j({"ph":"M","pid":1,"name":"process_name","args":{"name":"/device:GPU:0"}},)j"
         R"j({"ph":"M","pid":1,"tid":13,"name":"thread_name","args":{"name":"Stream #13(Compute)"}},)j"
         R"j({"ph":"M","pid":501,"name":"process_name","args":{"name":"/host:CPU"}},)j"
         R"j({"ph":"X","pid":501,"tid":7,"ts":496135.561,"dur":9482.223,"name":"train_function"},)j"
         R"j({"ph":"X","pid":1,"tid":14,"ts":497270.374,"dur":31.584,"name":"MemcpyH2D","args":{"correlation_id":"1"}},)j"
         R"j({"ph":"X","pid":1,"tid":13,"ts":497300.1,"dur":12.5,"name":"volta_sgemm_64x64_nt"},{}]})j",
         "a TensorFlow or JAX profiler trace (XProf's trace viewer JSON: process '/device:GPU:0'), not a PyTorch "
         "profiler (Kineto) trace: none of its 3 events (3 (no category)) is of a kind Kineto (the PyTorch profiler's trace) writes"},
        // The autograd profiler's export_chrome_trace before Kineto (torch/autograd/profiler.py of
        // PyTorch 1.7; torch_npu's legacy profiler writes the same): an array of events without 'cat'.
        // Before 2026-12-04 imported as a Kineto trace of nothing, exit 0.
        {"legacy.json",
         R"j([{"name": "aten::mm", "ph": "X", "ts": 10.5, "dur": 3.2, "tid": 1, "pid": "CPU functions", "args": {}}, )j"
         R"j({"name": "aten::mm", "ph": "s", "ts": 10.5, "tid": 1, "pid": "CPU functions", "id": 0, "cat": "cpu_to_cuda", "args": {}}, )j"
         R"j({"name": "volta_sgemm", "ph": "f", "ts": 12, "tid": 0, "pid": "CUDA functions", "id": 0, "cat": "cpu_to_cuda", "args": {}}, )j"
         R"j({"name": "volta_sgemm", "ph": "X", "ts": 12, "dur": 4, "tid": 0, "pid": "CUDA functions", "args": {}}])j",
         "the autograd profiler's own Chrome trace (export_chrome_trace of PyTorch 1.7 or earlier, or of "
         "use_kineto=False: processes 'CPU functions' and 'CUDA functions'), not a Kineto trace: none of its 4 "
         "events (2 (no category), 2 cpu_to_cuda) is of a kind Kineto (the PyTorch profiler's trace) writes"},
        // The first bytes of an XProf XSpace protobuf (a JAX run's HOST.xplane.pb, AMD-AGI/TraceLens's
        // tests/traces/mi300/jax_conv_minimal_08/tw003.xplane.pb): before 2026-12-04 "unknown format".
        {"tw003.xplane.pb", unhex("0aa1f008120e2f686f73743a6d65746164617461"),
         "an XProf XSpace protobuf (HOST.xplane.pb of TensorFlow's, JAX's or PyTorch/XLA's profiler)"},
        // Containers and compressors other than gzip (before 2026-12-04 all "unknown format: not a ...
        // SQLite file", also for an SQLite export compressed with gzip).
        {"report.sqlite.gz", unhex("1f8b08000000000002030b0ef4c92c495548cb2fca4d2c513066a0050000b7a1578564000000"),
         "a gzip-compressed SQLite file: decompress it (gunzip)"},
        {"trace.json.bz2",
         unhex(
             "425a6839314159265359e754d7590000081f80100000100200000a2a011d0a2000314c00014d30034943d28d7341872066efc5dc91"
             "4e142439d535d640"),
         "compressed with bzip2, which mhc does not read"},
        {"trace.json.xz", unhex("fd377a585a000004e6d6b4460200210116000000"), "compressed with xz"},
        {"trace.json.zst", unhex("28b52ffd2400"), "compressed with zstd"},
        // The head of torch.save(torch.cuda.memory._snapshot(), "snap.pt") alone: a zip cut short, whose
        // entries cannot be listed (before 2026-12-08 refused as a torch.save archive, read since).
        {"snap.pt", std::string("PK\x03\x04\x00\x00\x08\x08", 8) + std::string(18, '\0') + "archive/data.pkl",
         "a zip archive that cannot be read ("},
        // XProf's memory profile, written beside the trace viewer's JSON (same TensorFlow 2.5 run):
        // before 2026-12-04 "not a known trace format".
        {"host.memory_profile.json",
         R"j({"memoryProfilePerAllocator":{"gpu_host_bfc":{"memoryProfileSnapshots":[{"timeOffsetPs":"683260242000",)j"
         R"j("aggregationStats":{"heapAllocatedBytes":"4352","peakBytesInUse":"4608"}}]}}})j",
         "a TensorFlow or JAX profiler memory profile (XProf's HOST.memory_profile.json), which mhc does not read"},
        // The head of `mhc export --format perfetto`'s output (mhc's own trace, for viewing): before
        // 2026-12-04 read as Kineto, its copies, markers and allocation counters left out with a warning.
        {"export.json",
         R"j({"displayTimeUnit":"ns","otherData":{"accesses":"none","format":"mhc-trace","import.format":"kineto"},)j"
         R"j("traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":100,"tid":7,"ts":1.0,"dur":2.0}]})j",
         "an mhc trace exported for viewing (mhc export --format perfetto), which mhc does not import"},
        // A Git LFS pointer committed in place of a trace (sidvijay10/ml_cloud_hw2's nsys_report.sqlite,
        // its three lines): before 2026-12-05 "unknown format: not a pickle ..., JSON ... or
        // SQLite (Nsight Systems) file", though the file names what it is.
        {"nsys_report.sqlite",
         "version https://git-lfs.github.com/spec/v1\n"
         "oid sha256:b87f94d83442f1366cd26b9aeb91843ab22d9edd7d553a2b465052d6ac077966\nsize 593444864\n",
         "a Git LFS pointer, not the trace: the file of 593444864 bytes is in the repository's LFS storage; fetch it "
         "(git lfs pull) and import that"},
        // NVIDIA's report files, which users hold beside (or instead of) an nsys SQLite export: the
        // first bytes of an nsys 2025.6.1 .nsys-rep (PPCU-ITK/parallel-prog-2026-lab-7-barlaya's
        // report2.nsys-rep), a .qdrep of January 2023 (BrentGG/hac_cuda_project's report1.qdrep) and
        // an Nsight Compute report (LakshyaSingh354/CudaCode's stage1/reps/vec_add.ncu-rep). Before
        // 2026-12-06 each was "unknown format: not a pickle ..., JSON ... or SQLite (Nsight Systems) file".
        {"report2.nsys-rep",
         unhex("4e56494449412054656772612050726f66696c6572205265706f7274203230323540364031403139302d323536313336"),
         "an Nsight Systems report (.nsys-rep or .qdrep, written by nsys 2025.6.1.190), which mhc does not read: "
         "export it with nsys export --type sqlite and import the .sqlite"},
        {"report1.qdrep",
         unhex("4e56494449412054656772612050726f66696c6572205265706f727420312e0a0b4c6f63616c2028434c4929120a0801"),
         "an Nsight Systems report (.nsys-rep or .qdrep), which mhc does not read: export it with nsys export"},
        {"vec_add.ncu-rep",
         unhex("4e565200020000000807d0000000080010001a8b0110a191f2c5061a82010a054c696e757812402336317e32322e3034"),
         "an Nsight Compute report (.ncu-rep: metrics per kernel, no timeline), which mhc does not read"},
        // nsys export --type json: one protobuf message a line, as the scripts that read such exports
        // take them apart (Type 48 a CUDA API call, 79 a GPU activity); before 2026-12-06 "JSON without
        // 'traceEvents' (Kineto) or 'nodes' (execution trace) in its first MiB: not a known trace format".
        {"report1.json",
         R"j({"Type":48,"TraceProcessEvent":{"startNs":"1","endNs":"9","eventClass":1,"correlationId":5,)j"
         R"j("globalTid":"72057844756653436","name":"889"}})j"
         "\n"
         R"j({"Type":79,"CudaEvent":{"startNs":"12","endNs":"30","correlationId":5,"deviceId":0}})j"
         "\n",
         "an Nsight Systems JSON export (nsys export --type json: one event per line), which mhc does not read"},
        {"strings.json", "{\"type\":\"String\",\"id\":\"3720\",\"value\":\"Profiling has started.\"}\n",
         "an Nsight Systems JSON export"},
        {"reordered.json", "{\"NvtxEvent\":{\"Timestamp\":\"5\",\"Text\":\"step\"},\"Type\":59}\n",
         "an Nsight Systems JSON export"},
        {"data.json", "{\"data\":[\"[Unknown]\",\"[Unknown kernel module]\",\"[Max depth]\"]}\n",
         "an Nsight Systems JSON export"},
        {"report1.h5", unhex("894844460d0a1a0a000000000008080004001000"),
         "an HDF5 file (such as nsys export --type hdf writes), which mhc does not read"},
        {"report1.arrow", std::string("ARROW1\0\0\xff\xff\xff\xff", 12), "an Apache Arrow file"},
        {"CUPTI_ACTIVITY_KIND_KERNEL.parquet", std::string("PAR1\x15\x04\x15", 7), "a Parquet file"},
        // torch_npu's profiler (Ascend NPU) writes trace_view.json: its framework events in Kineto's
        // shape (cat cpu_op, TraceEventManager.create_x_event), msprof's timeline beside them (the NPU's
        // tasks on process "Ascend Hardware", without 'cat'; older msprof writes 'ts' as a string).
        // Before 2026-12-06 the first imported as a Kineto trace of 0 kernels, exit 0, with one warning
        // ("1 events of categories mhc does not read were left out (1 (no category))"); the second was
        // refused as "traceEvents[3]: 'ts' is a string, not a number".
        {"trace_view.json",
         R"j([{"ph":"X","name":"aten::mm","pid":100,"tid":7,"ts":1010.0,"dur":50.0,"cat":"cpu_op","args":{}},)j"
         R"j({"ph":"M","name":"process_name","pid":100,"tid":0,"args":{"name":"Python"}},)j"
         R"j({"ph":"M","name":"process_name","pid":300,"tid":0,"args":{"name":"Ascend Hardware"}},)j"
         R"j({"ph":"X","name":"MatMulV2","pid":300,"tid":2,"ts":1060.0,"dur":200.0,"args":{"Task Type":"AI_CORE"}}])j",
         "an Ascend NPU profiler trace (trace_view.json of torch_npu's or MindSpore's profiler, msprof's timeline: "
         "process 'Ascend Hardware'), not a Kineto trace"},
        {"msprof_view.json",
         R"j([{"ph":"M","name":"process_name","pid":300,"tid":0,"args":{"name":"Ascend Hardware"}},)j"
         R"j({"ph":"X","name":"Slice1","pid":300,"tid":3,"ts":"1699529623106750","dur":100,"args":{"Task Type":"AI_CORE"}}])j",
         "an Ascend NPU profiler trace"},
        // A browser's or another tool's Chrome trace: events of its own categories, halves.
        {"browser.json",
         R"j({"traceEvents":[{"ph":"B","cat":"devtools.timeline","name":"RunTask","pid":1,"tid":2,"ts":10},)j"
         R"j({"ph":"X","cat":"v8","name":"V8.Execute","pid":1,"tid":2,"ts":11,"dur":3},)j"
         R"j({"ph":"E","cat":"devtools.timeline","name":"RunTask","pid":1,"tid":2,"ts":20}]})j",
         "a Chrome trace JSON that is not a PyTorch profiler (Kineto) trace: none of its 3 events "
         "(2 devtools.timeline, 1 v8) is of a kind Kineto (the PyTorch profiler's trace) writes"},
    };
    for (const auto& c : cases) {
        DYNAMIC_SECTION(c.name) {
            test::TempDir dir;
            std::string in = dir.file(c.name);
            test::write_file(in, c.bytes);
            expect_rejected(dir, in, c.expect);
        }
    }
    SECTION("another tool's Chrome trace given as the execution trace's Kineto trace") {
        test::TempDir dir;
        std::string et = dir.file("et.json"), kineto = dir.file("host.trace.json");
        test::write_file(et, "{\"schema\":\"1.0.1\",\"pid\":1,\"nodes\":[{\"id\":1,\"name\":\"aten::relu\",\"parent\":0,"
                             "\"rf_id\":1,\"inputs\":[[7,7,0,1024,4,\"cuda:0\"]],\"input_types\":[\"Tensor(float)\"],"
                             "\"outputs\":[],\"output_types\":[]}]}");
        test::write_file(kineto, R"j({"traceEvents":[{"ph":"M","pid":1,"name":"process_name","args":{"name":"/device:GPU:0"}},)j"
                                 R"j({"ph":"X","pid":1,"tid":13,"ts":5.5,"dur":1.5,"name":"relu_kernel"}]})j");
        imp::Options opt;
        opt.kineto_path = kineto;
        CHECK_THROWS_WITH(imp::import_file(et, dir.file("t.db"), opt),
                          Catch::StartsWith(kineto) && Catch::Contains("a TensorFlow or JAX profiler trace"));
        CHECK(dir.entries() == 2);
    }
    SECTION("an Nsight Systems report under --format nsys and as --kineto; a directory of its tables") {
        test::TempDir dir;
        std::string rep = dir.file("report1.nsys-rep");
        test::write_file(rep, "NVIDIA Tegra Profiler Report 1.\n\x0bLocal (CLI)");
        imp::Options opt;
        opt.format = imp::Format::Nsys;   // before: "cannot open as SQLite: file is not a database"
        CHECK_THROWS_WITH(imp::import_file(rep, dir.file("t.db"), opt),
                          Catch::StartsWith(rep) && Catch::Contains("an Nsight Systems report"));
        std::string et = dir.file("et.json");
        test::write_file(et, "{\"schema\":\"1.0.1\",\"pid\":1,\"nodes\":[]}");
        opt = {};
        opt.kineto_path = rep;
        CHECK_THROWS_WITH(imp::import_file(et, dir.file("t.db"), opt),
                          Catch::StartsWith(rep) && Catch::Contains("an Nsight Systems report"));
        CHECK(dir.entries() == 2);
        // nsys export --type parquetdir: a directory of TABLE.parquet files (before: "is a directory").
        std::string tables = dir.file("report1_pqtdir");
        std::filesystem::create_directory(tables);
        for (const char* name : {"StringIds.parquet", "CUPTI_ACTIVITY_KIND_KERNEL.parquet", "TARGET_INFO_GPU.parquet"})
            test::write_file(tables + "/" + name, "PAR1");
        expect_rejected(dir, tables, "is a directory of Nsight Systems tables (nsys export --type parquetdir or arrowdir)");
    }
    SECTION("a torch_npu profiler's directory") {
        // tensorboard_trace_handler of torch_npu: WORKER_TIME_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json
        // (before 2026-12-06: "is a directory, not a trace file").
        test::TempDir dir;
        const std::string run = dir.file("node1_12345_20261206072700123_ascend_pt");
        std::filesystem::create_directories(run + "/ASCEND_PROFILER_OUTPUT");
        test::write_file(run + "/ASCEND_PROFILER_OUTPUT/trace_view.json", "[]");
        expect_rejected(dir, run, "is a directory of torch_npu's profiler (Ascend NPU)");
        expect_rejected(dir, run + "/ASCEND_PROFILER_OUTPUT", "is a directory of torch_npu's profiler (Ascend NPU)");
    }
    SECTION("an Ascend NPU trace whose process names come after its first MiB") {
        // torch_npu appends the process names after its framework events: detection does not see
        // them in a long trace, the parse does.
        test::TempDir dir;
        std::string in = dir.file("trace_view.json");
        std::string events = "[";
        for (int i = 0; i < 20000; ++i)
            events += R"j({"ph":"X","name":"aten::add","pid":100,"tid":7,"ts":)j" + std::to_string(1000 + i) +
                      R"j(.0,"dur":0.5,"cat":"cpu_op","args":{"Sequence number":-1}},)j";
        REQUIRE(events.size() > (1u << 20));
        events += R"j({"ph":"M","name":"process_name","pid":300,"tid":0,"args":{"name":"Ascend Hardware"}},)j"
                  R"j({"ph":"X","name":"Add","pid":300,"tid":2,"ts":30000.0,"dur":2.0,"args":{"Task Type":"AI_VECTOR_CORE"}}])j";
        test::write_file(in, events);
        expect_rejected(dir, in, "an Ascend NPU profiler trace");
    }
    SECTION("nsys export of an unknown version, missing every table we read") {
        test::TempDir dir;
        std::string in = dir.file("unknown.sqlite");
        make_nsys_unknown(in);
        expect_rejected(dir, in, "none of the tables");
    }
    SECTION("an SQLite file that is not an nsys export") {
        test::TempDir dir;
        std::string in = dir.file("other.sqlite");
        sqlite3* db = nullptr;
        REQUIRE(sqlite3_open(in.c_str(), &db) == SQLITE_OK);
        sqlite3_exec(db, "CREATE TABLE t(x)", nullptr, nullptr, nullptr);
        sqlite3_close(db);
        expect_rejected(dir, in, "not an Nsight Systems export");
    }
    SECTION("a format forced on the wrong file") {
        test::TempDir dir;
        std::string in = dir.file("snap.pickle");
        test::write_file(in, test::read_file(test::pub("torch-snapshot/mosaic-synthetic.pickle")));
        std::string out = dir.file("out.db");
        imp::Options opt;
        opt.format = imp::Format::Kineto;
        CHECK_THROWS_WITH(imp::import_file(in, out, opt), Catch::StartsWith(in) && Catch::Contains("invalid JSON"));
        CHECK(dir.entries() == 1);
        CHECK(test::run_mhc("import " + in + " --format nsys -o " + out) == 2);
        CHECK(dir.entries() == 1);
    }
    SECTION("an existing output is left untouched by a failed import") {
        test::TempDir dir;
        std::string in = dir.file("bad.json");
        test::write_file(in, "{\"traceEvents\": [");
        std::string out = dir.file("out.db");
        test::write_file(out, "previous");
        CHECK(test::run_mhc("import " + in + " -o " + out) == 2);
        CHECK(test::read_file(out) == "previous");
    }
}

TEST_CASE("a Kineto trace cut short is said to end inside its JSON, a fault inside it is not", "[import][broken]") {
    // Kineto writes NAME.tmp and renames it once the trace is whole (pytorch/kineto efcc5103), so a
    // cut trace is a .tmp file left by a stopped process or a copy that did not finish. Before
    // 2026-12-07 the refusal gave only the parser's reason ("Missing a name for object member.").
    test::TempDir dir;
    const std::string text = test::gunzip(test::pub("kineto/nccl_data.json.gz"));
    const std::string cut = dir.file("cut.json"), cut_gz = dir.file("cut.json.gz"), inside = dir.file("inside.json");
    test::write_file(cut, text.substr(0, 500000));
    gzFile file = gzopen(cut_gz.c_str(), "wb");
    REQUIRE(file != nullptr);
    REQUIRE(gzwrite(file, text.data(), 300000) == 300000);
    gzclose(file);
    // The same bytes with a NUL where the cut was, and a syntax error inside the file: not cut.
    test::write_file(inside, text.substr(0, 499999) + std::string(1, '\0') + text.substr(500000));
    const std::string said = "The file ends there, inside the JSON: it is cut short";
    expect_rejected(dir, cut, "invalid JSON at byte 500000: Missing a name for object member. " + said);
    expect_rejected(dir, cut_gz, "invalid JSON at byte 300000: ");
    expect_rejected(dir, cut_gz, said);
    std::string err;
    CHECK(test::run_mhc("import " + inside + " -o " + dir.file("out.db"), &err) == 2);
    INFO(err);
    CHECK(err.find("invalid JSON at byte 499999") != std::string::npos);
    CHECK(err.find("cut short") == std::string::npos);
}
