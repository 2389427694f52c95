// Settings as JSON: what mhc advise prints is what it reads back; mistakes name the field.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "mhc/advise/gpus.hpp"
#include "mhc/advise/setting.hpp"
#include "mhc/common/error.hpp"
#include "mhc/test/paths.hpp"
#include "mhc/test/temp.hpp"

using namespace mhc::advise;

TEST_CASE("a setting's JSON reads back the same", "[advise][setting]") {
    const char* texts[] = {
        "{}",
        R"({"checkpoint":{"modules":["M.blocks.0"],"policy":"full"}})",
        R"({"checkpoint":[{"modules":["a"],"policy":"full"},{"modules":["b"],"policy":"save_matmuls"}]})",
        R"({"offload":{"max_fwd_stash":3,"min_bytes":4096,"mode":"streamed","modules":null,"prefetch":1}})",
        R"({"offload":{"min_bytes":1024,"mode":"sync","modules":["x"]}})",
        R"({"allocator":"expandable_segments:True","optimizer":{"impl":"fused","state":"host"}})",
    };
    for (const char* t : texts) {
        Setting s = parse_setting(t);
        CHECK(to_json(s) == t);
        CHECK(to_json(parse_setting(to_json(s))) == to_json(s));
    }
    CHECK(parse_setting("{}").empty());
    CHECK(parse_setting(R"({"offload": {"mode": "sync"}})").offload->prefetch_or_default() == 0);
    CHECK(parse_setting(R"({"offload": {}})").offload->prefetch_or_default() == 2);
}

TEST_CASE("a setting can come from a file", "[advise][setting]") {
    mhc::test::TempPath p{"setting.json"};
    std::ofstream(p.path) << R"({"optimizer": {"impl": "fused"}})";
    CHECK(parse_setting(p.path).optimizer_impl == OptimizerImpl::Fused);
}

TEST_CASE("a bad setting names its field", "[advise][setting]") {
    auto bad = [](const std::string& text, const std::string& says) {
        INFO(text);
        CHECK_THROWS_WITH(parse_setting(text), Catch::Contains(says));
    };
    bad("[1]", "must be a JSON object");
    bad("{", "not JSON");
    bad(R"({"checkpointing": {}})", "field 'checkpointing': unknown key");
    bad(R"({"checkpoint": {"modules": "x"}})", "field 'checkpoint.modules': must be a list");
    bad(R"({"checkpoint": {"policy": "full"}})", "field 'checkpoint.modules': missing");
    bad(R"({"checkpoint": {"modules": [], "policy": "half"}})", "field 'checkpoint.policy'");
    bad(R"({"checkpoint": [{"modules": ["a"]}, 3]})", "field 'checkpoint[1]'");
    bad(R"({"offload": {"mode": "async"}})", "field 'offload.mode'");
    bad(R"({"offload": {"max_fwd_stash": 0}})", "field 'offload.max_fwd_stash': 0 is outside");
    bad(R"({"offload": {"min_bytes": 1.5}})", "field 'offload.min_bytes': must be an integer");
    bad(R"({"offload": {"mode": "sync", "prefetch": 2}})", "field 'offload.prefetch'");
    bad(R"({"optimizer": {"state": "cpu"}})", "field 'optimizer.state'");
    bad(R"({"optimizer": {"impl": "sgd"}})", "field 'optimizer.impl'");
    bad(R"({"weights": "fp8"})", "field 'weights'");
    bad(R"({"allocator": 3})", "field 'allocator': must be a string");
}

TEST_CASE("the GPU sizes of mhc advise --gpu are mhc-torch's", "[advise][setting]") {
    // datasets/gpus.tsv, the GPU table mhc-torch capture reads, holds each GPU's figures; --gpu must
    // agree: its column `name` is a --gpu name, `memory_bytes` its memory.
    std::ifstream in(std::string(mhc::test::source_dir()) + "/datasets/gpus.tsv");
    REQUIRE(in);
    std::vector<std::string> header;
    int seen = 0;
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        std::vector<std::string> fields;
        std::stringstream ss(line);
        for (std::string field; std::getline(ss, field, '\t');) fields.push_back(field);
        if (header.empty()) {
            header = fields;
            continue;
        }
        auto at = [&](const std::string& column) {
            return fields.at(static_cast<size_t>(std::find(header.begin(), header.end(), column) - header.begin()));
        };
        INFO(at("name"));
        CHECK(gpu_memory(at("name")).bytes == std::stoll(at("memory_bytes")));
        ++seen;
    }
    CHECK(seen >= 6);
    CHECK_THROWS_WITH(gpu_memory("v100"), Catch::Contains("--gpu: 'v100': not a GPU mhc knows"));
}
