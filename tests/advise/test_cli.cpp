// `mhc advise`: the answer with its code, --json, and bad input in one line with exit 2.
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "mhc/test/paths.hpp"
#include "mhc/test/temp.hpp"
#include "tiny.hpp"

namespace {

struct Out {
    int status;
    std::string out, err;
};

Out run(const std::string& args, const std::string& env = "") {
    mhc::test::TempPath err{"stderr.txt"};
    std::string cmd = env + " " + std::string(mhc::test::mhc_exe()) + " " + args + " 2>" + err.path;
    Out o{};
    FILE* p = popen(cmd.c_str(), "r");
    std::array<char, 4096> buf{};
    while (size_t n = fread(buf.data(), 1, buf.size(), p)) o.out.append(buf.data(), n);
    int st = pclose(p);
    o.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    std::ifstream f(err.path);
    std::getline(f, o.err, '\0');
    return o;
}

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

// The notes under advise's table wrap within 100 columns, a continued line indented by one space:
// the text as one line, to find a sentence wherever it was cut.
std::string unwrapped(std::string text) {
    for (size_t at = text.find("\n "); at != std::string::npos; at = text.find("\n ", at)) text.replace(at, 2, " ");
    return text;
}

}  // namespace

TEST_CASE("mhc advise ranks settings that fit and prints their code", "[advise][cli]") {
    mhc::test::TempPath t{"chain.db"};
    advisetest::chain({64, 96, 32}, true).write(t.path);
    Out o = run("advise " + t.path + " --capacity 400MiB");
    INFO(o.err);
    REQUIRE(o.status == 0);
    CHECK(o.out.find("rank") != std::string::npos);
    CHECK(o.out.find("estimates") != std::string::npos);   // times are said to be estimates
    // The chain holds 2 steps: a time is theirs together, not a step's (it was printed as "step").
    CHECK(o.out.find(", 2 steps ") != std::string::npos);
    CHECK(o.out.find("time (est.)") != std::string::npos);
    CHECK(o.out.find("(time: the 2 steps of the capture together; ") != std::string::npos);
    CHECK(o.out.find("mhc_torch.apply(model, optimizer, {") != std::string::npos);
    Out j = run("advise " + t.path + " --capacity 400MiB --json --top 2");
    REQUIRE(j.status == 0);
    auto doc = nlohmann::json::parse(j.out);
    REQUIRE(doc["rows"].size() >= 1);
    CHECK(doc["rows"].size() <= 2);
    for (auto& r : doc["rows"]) {
        CHECK(r["reserved_at_capacity_bytes"].get<int64_t>() <= (int64_t(400) << 20));
        CHECK(r["fits"].get<bool>());
        CHECK(r["code"].get<std::string>().find("mhc_torch.apply") != std::string::npos);
    }
    // the setting a row prints predicts the same figures when given back
    std::string setting = doc["rows"][0]["setting"].dump();
    Out one = run("advise " + t.path + " --json --setting '" + setting + "'");
    REQUIRE(one.status == 0);
    CHECK(nlohmann::json::parse(one.out)["rows"][0]["reserved_bytes"] == doc["rows"][0]["reserved_bytes"]);
}

TEST_CASE("mhc advise: the reserved peak at the capacity beside the one without a limit", "[advise][cli][allocator]") {
    // tests/data/advise/speech_gru.db at 5.8 GiB (tests/advise/test_search.cpp works out why): the first
    // answer, the fused AdamW with the last conv block checkpointed and max_split_size_mb:2048,
    // reserves 5.85 GiB without a limit, more than the capacity, and runs there: a failed cudaMalloc
    // in each step gives 4 cached segments back (517,969 ns in the capture; 657,031 ns a steady step).
    const std::string gru = std::string(mhc::test::source_dir()) + "/tests/data/advise/speech_gru.db";
    const int64_t capacity = 6227702579;   // 5.8 GiB, rounded down
    Out json = run("advise " + gru + " --capacity " + std::to_string(capacity) + "B --json");
    INFO(json.err);
    REQUIRE(json.status == 0);
    auto doc = nlohmann::json::parse(json.out);
    CHECK_FALSE(doc["baseline"]["fits"].get<bool>());
    const auto& first = doc["rows"][0];
    CHECK(first["setting"].dump() ==
          R"({"allocator":"max_split_size_mb:2048","checkpoint":{"modules":["SpeechGru.conv.3"],"policy":"full"},"optimizer":{"impl":"fused"}})");
    CHECK(first["retry_cost_ns"].get<int64_t>() == 517969);
    CHECK(first["alloc_releases"].get<int64_t>() == 1);
    CHECK(first["steady_retry_cost_ns"].get<int64_t>() == 1314062);
    CHECK(first["steady"]["alloc_releases"].get<int64_t>() == 1);
    CHECK(first["loss"].get<double>() < -0.04);
    CHECK(first["fits"].get<bool>());
    CHECK(first["reserved_bytes"].get<int64_t>() > capacity);
    CHECK(first["reserved_at_capacity_bytes"].get<int64_t>() <= capacity);
    CHECK(first["alloc_retries"].get<int64_t>() > 0);
    Out text = run("advise " + gru + " --capacity " + std::to_string(capacity) + "B");
    REQUIRE(text.status == 0);
    text.out = unwrapped(text.out);
    CHECK(text.out.find("reserved   no limit") != std::string::npos);
    CHECK(text.out.find("as the GPU's limit, where a failed cudaMalloc gives cached memory back and retries") !=
          std::string::npos);
    CHECK(text.out.find("1. runs only by giving cached memory back: 1 cudaMalloc retry, 1 full release") !=
          std::string::npos);
    CHECK(text.out.find("517.97 us in the capture; a steady step: 1 full release, 4 given back (212.00 MiB) and 4 "
                        "made again (212.00 MiB), 657.03 us a step, 1.31 ms in its time") != std::string::npos);
}

TEST_CASE("mhc advise: bad input is one line and exit 2", "[advise][cli]") {
    mhc::test::TempPath t{"chain.db"};
    advisetest::chain({64, 96, 32}, true).write(t.path);
    auto one_line = [](const Out& o, const std::string& says) {
        INFO(o.err);
        CHECK(o.status == 2);
        CHECK(lines(o.err) == 1);
        CHECK(o.err.find(says) != std::string::npos);
    };
    one_line(run("advise " + t.path + " --capacity 1MiB"), "nothing fits 1.00 MiB: the closest is");
    one_line(run("advise " + t.path + " --capacity 400MiB --budget 0%"), "within the loss budget of 0%: the closest is");
    one_line(run("advise " + t.path + " --setting '{\"checkpoint\": {\"modules\": [\"M.blocks.9\"]}}'"),
             "the model has no module 'M.blocks.9'");
    one_line(run("advise " + t.path), "give the GPU as --capacity SIZE or --gpu NAME");
    one_line(run("advise " + t.path + " --gpu h100-sxm --capacity 1GiB"), "one of them");
    one_line(run("advise " + t.path + " --gpu v100"), "--gpu: 'v100': not a GPU mhc knows; use one of");
    one_line(run("advise " + t.path + " --capacity 50%"), "--capacity: '50%': give the GPU's memory as a size (80GiB) or --gpu NAME");
    one_line(run("advise " + t.path + " --capacity 1GiB --budget lots"), "--budget: 'lots': not a share");
    one_line(run("advise " + t.path + " --capacity 1GiB --verify"), "no capture.recipe");
    one_line(run("advise " + t.path + " --setting '{\"offload\": 1}'"), "field 'offload'");
    // Options with nothing to do beside the others given: refused before any work, naming them
    // (the search's options with one setting; --force without the file it would replace).
    one_line(run("advise " + t.path + " --capacity 1GiB --setting '{}'"),
             "--capacity and --setting: --capacity is for the search");
    one_line(run("advise " + t.path + " --setting '{}' --gpu h100-sxm"), "--gpu and --setting");
    one_line(run("advise " + t.path + " --setting '{}' --budget 3%"), "--budget and --setting");
    one_line(run("advise " + t.path + " --setting '{}' --top 3"), "--top and --setting");
    one_line(run("advise " + t.path + " --capacity 1GiB --force"), "--force: replaces an existing --trace-out file");
    one_line(run("advise " + t.path + " --capacity 1GiB --step-time 0s"), "--step-time: '0s': not a step time");
    one_line(run("advise " + t.path + " --capacity 1GiB --step-time 7200s"), "--step-time: '7200s': not a step time");
    one_line(run("advise " + t.path + " --capacity 1GiB --step-time 60"), "--step-time: '60': a duration needs a unit");
    one_line(run("advise " + t.path + " --capacity 1GiB --step-time fast"), "--step-time");
    one_line(run("advise " + t.path + " --capacity 1GiB --step-time 1s"), "no scaling of the kernels' times gives that step");
    mhc::test::TempPath plain{"plain.db"};
    advisetest::TinyTrace p = advisetest::chain({8}, false);
    p.modules.clear();
    p.write(plain.path);
    one_line(run("advise " + plain.path + " --capacity 1GiB"), "not a model capture");
}

TEST_CASE("mhc advise --step-time scales the baseline to the measured step and says so", "[advise][cli]") {
    mhc::test::TempPath chain{"chain.db"};
    advisetest::chain({64, 96, 32}, true).write(chain.path);
    // The last step runs 13 kernels of 10 ns: 130 ns; measured 260 ns, twice.
    const Out out = run("advise " + chain.path + " --capacity 400MiB --json --step-time 260ns");
    INFO(out.err);
    REQUIRE(out.status == 0);
    const auto doc = nlohmann::json::parse(out.out);
    CHECK(doc["calibration"]["factor"].get<double>() == Approx(2.0));
    CHECK(doc["calibration"]["estimated_step_ns"] == 130);
    CHECK(doc["calibration"]["calibrated_step_ns"] == 260);
    CHECK(doc["baseline"]["step_time_ns"] == 2 * (15 + 13) * 10);
    CHECK(doc["times"].get<std::string>().find("measured --step-time") != std::string::npos);
    CHECK(nlohmann::json::parse(run("advise " + chain.path + " --capacity 400MiB --json").out)["calibration"].is_null());
    const Out text = run("advise " + chain.path + " --capacity 400MiB --step-time 260ns");
    CHECK(text.out.find("last step 260 ns, as --step-time 260 ns; kernel times x2.00 the capture's roofline, whose step was 130 ns") !=
          std::string::npos);
}

TEST_CASE("mhc advise --comm-link on a step without collectives says it has no effect", "[advise][cli]") {
    mhc::test::TempPath chain{"chain.db"};
    advisetest::chain({64, 96, 32}, true).write(chain.path);
    // One GPU, no DDP or FSDP2: the answer is the same with or without the option, and one line says so.
    const Out with = run("advise " + chain.path + " --capacity 400MiB --json --comm-link nvlink");
    const Out without = run("advise " + chain.path + " --capacity 400MiB --json");
    INFO(with.err);
    REQUIRE(with.status == 0);
    CHECK(with.err == "mhc: warning: --comm-link nvlink has no effect: " + chain.path +
                          " has no DDP or FSDP2 collectives (a step on one GPU)\n");
    CHECK(nlohmann::json::parse(with.out)["rows"] == nlohmann::json::parse(without.out)["rows"]);
    CHECK(without.err.empty());
}

TEST_CASE("mhc advise --verify runs the capture command and compares", "[advise][cli]") {
    // A stand-in for mhc-torch that writes the baseline itself back (as a capture with an
    // empty setting would): the errors must be 0.
    mhc::test::TempDir dir;
    advisetest::TinyTrace t = advisetest::chain({64, 96, 32}, true);
    t.meta = {{"capture.recipe", R"({"model": "tiny"})"}};
    const std::string trace = dir.file("t.db");
    t.write(trace);
    const std::string fake = dir.file("fake-mhc-torch");
    std::ofstream(fake) << "#!/bin/sh\n# capture --recipe R --setting S -o OUT\ncp " << trace << " \"$7\"\n";
    std::string chmod = "chmod +x " + fake;
    REQUIRE(std::system(chmod.c_str()) == 0);
    Out o = run("advise " + trace + " --setting '{}' --verify --json", "MHC_TORCH=" + fake);
    INFO(o.err);
    REQUIRE(o.status == 0);
    auto doc = nlohmann::json::parse(o.out);
    CHECK(doc["rows"][0]["verify"]["peak_error"].get<double>() == 0.0);
    CHECK(doc["rows"][0]["verify"]["reserved_error"].get<double>() == 0.0);
    // a failing capture is one line naming what it said
    std::ofstream(fake) << "#!/bin/sh\necho 'mhc-torch: tiny: setting: offload: bad' >&2\nexit 2\n";
    Out f = run("advise " + trace + " --setting '{}' --verify", "MHC_TORCH=" + fake);
    CHECK(f.status == 2);
    CHECK(f.err.find("mhc-torch: tiny: setting: offload: bad") != std::string::npos);
}
