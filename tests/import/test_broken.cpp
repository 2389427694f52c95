// Broken inputs, generated here: each is exit 2 with one line that names the file and what is
// wrong, and no output file (nor temporary) is left behind.
#include <sqlite3.h>

#include <catch2/catch.hpp>

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
        {"truncated.pickle", unhex("80049527000000000000007d94288c087365676d656e7473"), "truncated"},
        {"notes.txt", "hello, this is not a trace\n", "unknown format"},
        {"empty.json", "", "empty"},
        {"et-bad.json", "{\"schema\": \"1.0.1\", \"nodes\": [{\"name\": \"x\"}]}", "no numeric 'id'"},
        {"et-invalid.json", "{\"schema\": \"1.0.1\", \"nodes\": [", "invalid JSON"},
        // The first bytes of TraceLens's tests/rocprof/908_results.json.gz and of Chakra's
        // tests/data/json_trace.tar.gz jsonData/small_chakra.0.json: formats of other tools, said by name.
        {"rocprof.json", "{\"rocprofiler-sdk-tool\":[{\"metadata\":{\"node\":{\"id\":0}}}]}",
         "a rocprofiler-sdk JSON (rocprofv3 --output-format json), which mhc does not read"},
        {"chakra.json", "{\n  \"workload_graph\": [\n    {\n      \"Id\": 216,\n      \"NodeType\": 4}]}",
         "a Chakra workload-graph JSON (converted from a Chakra trace)"},
    };
    for (const auto& c : cases) {
        DYNAMIC_SECTION(c.name) {
            test::TempDir dir;
            std::string in = dir.file(c.name);
            test::write_file(in, c.bytes);
            expect_rejected(dir, in, c.expect);
        }
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
