// Exports: Perfetto/Chrome JSON (plain and gzip, with a run) and CSV, read back independently.
#include <zlib.h>

#include <set>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "mhc/common/error.hpp"
#include "mhc/trace/export/export.hpp"
#include "mhc/trace/runs.hpp"
#include "util.hpp"

namespace ex = mhc::trace::exporter;
using nlohmann::json;

namespace {

std::string gunzip(const std::string& path) {
    gzFile f = gzopen(path.c_str(), "rb");
    REQUIRE(f);
    std::string out;
    char buf[65536];
    int n;
    while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    gzclose(f);
    return out;
}

std::string imported_nsys(const test::TempDir& dir) {
    std::string db = dir.file("nsys.db");
    mhc::trace::import::Options opt;
    opt.warn = false;
    mhc::trace::import::import_file(test::pub("nsys/con_kernel.sqlite"), db, opt);
    return db;
}

}  // namespace

TEST_CASE("perfetto export: kernels per stream, copies, memory counter", "[export]") {
    test::TempDir dir;
    std::string db = imported_nsys(dir);
    for (std::string name : {"out.json", "out.json.gz"}) {
        std::string out = dir.file(name);
        int64_t n = ex::export_perfetto(db, out);
        std::string text = name.ends_with(".gz") ? gunzip(out) : test::read_file(out);
        if (name.ends_with(".gz")) CHECK(test::read_file(out).substr(0, 2) == "\x1f\x8b");
        json j = json::parse(text);
        const auto& ev = j["traceEvents"];
        CHECK(static_cast<int64_t>(ev.size()) == n);
        int kernels = 0, copies = 0, threads = 0;
        int64_t max_live = 0;
        std::set<int64_t> kernel_tids;
        for (const auto& e : ev) {
            if (e["ph"] == "X" && e["cat"] == "kernel") { ++kernels; kernel_tids.insert(e["tid"].get<int64_t>()); }
            if (e["ph"] == "X" && e["cat"] == "copy") ++copies;
            if (e["ph"] == "M" && e["name"] == "thread_name") ++threads;
            if (e["ph"] == "C" && e["pid"] == 100) max_live = std::max(max_live, e["args"]["bytes"].get<int64_t>());
        }
        CHECK(kernels == 9);
        CHECK(copies == 12);
        CHECK(kernel_tids == std::set<int64_t>{14, 15, 16, 17, 18});   // streamId of the nsys kernels
        CHECK(threads >= 5);
        CHECK(max_live == 40160000);   // the device peak from expected_numbers.py
        CHECK(j["otherData"]["source"] == "nsight-systems-sqlite");
    }
}

TEST_CASE("perfetto export of a run: its events, kernel times and memory", "[export]") {
    test::TempDir dir;
    std::string db = imported_nsys(dir);
    mhc::trace::Run run;
    run.name = "test-run";
    run.events.push_back({mhc::trace::EventKind::SwapOut, 100, 900, 1, 0, 40000});
    run.events.push_back({mhc::trace::EventKind::Stall, 1000, 1500, 0, 2, 0});
    run.kernel_times.push_back({1, 5000, 6000});
    run.memory.push_back({0, 1234, 0});
    run.memory.push_back({900, 0, 40000});
    int64_t id = mhc::trace::add_run(db, run);
    std::string out = dir.file("run.json");
    ex::export_perfetto(db, out, ex::PerfettoOptions{id});
    json j = json::parse(test::read_file(out));
    int swap = 0, stall = 0, sim = 0, mem = 0;
    for (const auto& e : j["traceEvents"]) {
        if (e["ph"] == "X" && e["name"] == "swap_out") { ++swap; CHECK(e["dur"].get<double>() == Approx(0.8)); }
        if (e["ph"] == "X" && e["name"] == "stall") ++stall;
        if (e["ph"] == "X" && e["cat"] == "simulated") { ++sim; CHECK(e["ts"].get<double>() == Approx(5.0)); }
        if (e["ph"] == "C" && e["name"] == "simulated device bytes") ++mem;
    }
    CHECK(swap == 1);
    CHECK(stall == 1);
    CHECK(sim == 1);
    CHECK(mem == 2);
    // An unknown run: error, no output file.
    std::string bad = dir.file("bad.json");
    CHECK_THROWS_AS(ex::export_perfetto(db, bad, ex::PerfettoOptions{id + 7}), mhc::Error);
    CHECK_FALSE(std::filesystem::exists(bad));
    CHECK(test::run_mhc("export " + db + " --format perfetto --run " + std::to_string(id + 7) + " -o " + bad) == 2);
    CHECK_FALSE(std::filesystem::exists(bad));
}

TEST_CASE("csv export: quoted names, no temporaries left", "[export]") {
    test::TempDir dir;
    std::string db = imported_nsys(dir);
    std::string out = dir.file("csv");
    CHECK(test::run_mhc("export " + db + " --format csv -o " + out) == 0);
    std::string a = test::read_file(out + "/allocations.csv"), k = test::read_file(out + "/kernels.csv");
    CHECK(std::count(a.begin(), a.end(), '\n') == 1 + 10);
    CHECK(std::count(k.begin(), k.end(), '\n') == 1 + 9);
    CHECK(a.rfind("id,device,address,bytes,t_alloc_ns,t_free_ns", 0) == 0);
    // Kernel names with commas are quoted: "test0(double *, unsigned long long, ...)".
    CHECK(k.find("\"test0(double *, unsigned long long, unsigned long long)\"") != std::string::npos);
    CHECK(std::filesystem::directory_iterator(out) != std::filesystem::directory_iterator());
    for (auto& e : std::filesystem::directory_iterator(out)) CHECK(e.path().extension() == ".csv");   // no temporaries
}
