// `mhc simulate` / `mhc sweep`: exit statuses, one-line errors, stored runs.
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <fstream>
#include <sys/wait.h>

#include "helpers.hpp"
#include "mhc/test/paths.hpp"
#include "mhc/trace/runs.hpp"

using namespace simtest;

namespace {
struct Out { int status; std::string err, out; };
Out run(const std::string& args) {
    std::string errf = temp_path("stderr.txt");
    std::string cmd = std::string(mhc::test::mhc_exe()) + " " + args + " 2>" + errf;
    Out o{};
    FILE* p = popen(cmd.c_str(), "r");
    std::array<char, 4096> buf{};
    while (size_t n = fread(buf.data(), 1, buf.size(), p)) o.out.append(buf.data(), n);
    int st = pclose(p);
    o.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    std::ifstream f(errf);
    std::getline(f, o.err, '\0');
    return o;
}
int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

std::string small_trace() {
    std::string path = temp_path("cli.db");
    write(path, {{MiB, 0, mhc::trace::kNoTime}, {MiB, 0, mhc::trace::kNoTime}, {MiB, 3 * ms, mhc::trace::kNoTime}},
          {{1 * ms, 2 * ms, {{0, 'w'}}}, {2 * ms, 3 * ms, {{1, 'w'}}}, {3 * ms, 4 * ms, {{2, 'w'}}},
           {4 * ms, 5 * ms, {{0, 'r'}}}, {5 * ms, 6 * ms, {{1, 'r'}}}});
    return path;
}
}  // namespace

TEST_CASE("mhc simulate prints metrics and stores the run", "[sim][cli]") {
    std::string t = small_trace();
    auto o = run("simulate " + t + " --capacity 70% --policy belady --link pcie4");
    INFO(o.err);
    CHECK(o.status == 0);
    CHECK(o.out.find("throughput loss") != std::string::npos);
    auto runs = mhc::trace::list_runs(t);
    REQUIRE(runs.size() == 1);
    auto r = mhc::trace::load_run(t, runs[0].id);
    CHECK(r.metrics.at("simulated_peak_bytes") <= 0.7 * 3 * MiB);
    CHECK(r.config.at("eviction") == "belady");
    auto j = run("simulate " + t + " --capacity 2MiB --json --no-store");
    CHECK(j.status == 0);
    CHECK(j.out.find("\"throughput_loss\"") != std::string::npos);
    CHECK(mhc::trace::list_runs(t).size() == 1);
}

TEST_CASE("mhc simulate --no-early records the ablation in the stored run", "[sim][cli][early]") {
    std::string t = small_trace();
    auto o = run("simulate " + t + " --capacity 70% --policy belady --prefetch lookahead:4 --no-early");
    INFO(o.err);
    REQUIRE(o.status == 0);
    CHECK(o.out.find("0 early evictions") != std::string::npos);
    auto runs = mhc::trace::list_runs(t);
    REQUIRE(runs.size() == 1);
    auto r = mhc::trace::load_run(t, runs[0].id);
    CHECK(r.config.at("early_swap_out") == "0");
    CHECK(r.metrics.at("early_evictions") == 0);
}

TEST_CASE("mhc simulate: an impossible capacity is an OOM with exit 3", "[sim][cli]") {
    std::string t = small_trace();
    auto o = run("simulate " + t + " --capacity 512KiB --no-store");
    CHECK(o.status == 3);
    // The OOM is the headline of the result, said once (not again on stderr).
    CHECK(o.out.find("OUT OF MEMORY  allocation 1") != std::string::npos);
    CHECK(o.err.find("out of memory") == std::string::npos);
    CHECK(o.out.find("(reduction ") == std::string::npos);   // no peak reduction figure
}

TEST_CASE("mhc simulate: bad configurations exit 2 with one line", "[sim][cli]") {
    std::string t = small_trace();
    for (std::string args : {"--capacity=-5GiB", "--policy fifo", "--prefetch sometimes", "--link pcie9",
                             "--allocator buddy", "--cpu-buffer-ratio=-1"}) {
        // Each refusal must be about `args`, not about a missing --capacity.
        std::string cap = args.find("--capacity") == std::string::npos ? " --capacity 50%" : "";
        auto o = run("simulate " + t + " " + args + cap + " --no-store");
        INFO(args << ": " << o.err);
        CHECK(o.status == 2);
        CHECK(lines(o.err) == 1);
        CHECK(o.err.find("--capacity is required") == std::string::npos);
    }
    std::string bad = temp_path("bad-link.json");
    { std::ofstream f(bad); f << R"({"name": "x", "h2d": {"bandwidth_Bps": "fast", "latency_s": 0}})"; }
    auto o = run("simulate " + t + " --capacity 50% --link " + bad + " --no-store");
    CHECK(o.status == 2);
    CHECK(lines(o.err) == 1);
    CHECK(o.err.find(bad) != std::string::npos);
    CHECK(o.err.find("h2d.bandwidth_Bps") != std::string::npos);
    auto m = run("simulate /nonexistent/trace.db --capacity 50%");
    CHECK(m.status == 2);
    CHECK(m.err == "mhc: /nonexistent/trace.db: no such file\n");
}

TEST_CASE("mhc sweep runs the grid, bisects and stores every run", "[sim][cli]") {
    std::string t = small_trace();
    auto o = run("sweep " + t + " --policies lru,belady --capacities 90%,70% --links pcie4,pcie5 --budget 50% --jobs 2");
    INFO(o.err);
    CHECK(o.status == 0);
    CHECK(o.out.find("smallest capacity") != std::string::npos);
    // 2 policies x 2 capacities x 2 links grid runs + 4 bisection answers
    CHECK(mhc::trace::list_runs(t).size() == 12);
    auto bad = run("sweep " + t + " --policies lru,fifo --no-store");
    CHECK(bad.status == 2);
    CHECK(lines(bad.err) == 1);
    auto neg = run("sweep " + t + " --capacities=90%,-1GiB --no-store");
    CHECK(neg.status == 2);
}
