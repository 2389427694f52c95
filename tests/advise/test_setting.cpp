// Settings as JSON: what mhc advise prints is what it reads back; mistakes name the field.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
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

TEST_CASE("the GPUs of mhc advise --gpu are the rows of datasets/gpus.tsv", "[advise][setting]") {
    // datasets/gpus.tsv, the GPU table mhc-torch capture reads, holds each GPU's figures; --gpu must
    // agree: its column `name` is a --gpu name, `memory_bytes` its memory, `ring_bus_bw` and
    // `ring_link` the NVLink or PCIe ring its collectives run over. Read here line by line.
    std::ifstream in(std::string(mhc::test::source_dir()) + "/datasets/gpus.tsv");
    REQUIRE(in);
    std::vector<std::string> header;
    std::string names;
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
        const GpuMemory& gpu = gpu_memory(at("name"));
        CHECK(gpu.bytes == std::stoll(at("memory_bytes")));
        CHECK(gpu.reserve == int64_t(1) << 30);
        CHECK(gpu.link_Bps == std::stod(at("ring_bus_bw")));
        CHECK(gpu.link_name == at("ring_link"));
        names += (names.empty() ? "" : ", ") + at("name");
    }
    CHECK(gpu_names() == names);   // every row, none besides, in the file's order
    CHECK(names == "a100-40g, a100-80g, h100-pcie, h100-sxm, h200, l40s");
    CHECK_THROWS_WITH(gpu_memory("v100"), Catch::Contains("--gpu: 'v100': not a GPU mhc knows"));
    // The datasheet and NCCL figures the file cites: the A100's ring capped at 235 GB/s, the L40S's 48 GiB.
    CHECK(gpu_memory("a100-80g").link_Bps == 235e9);
    CHECK(gpu_memory("l40s").bytes == int64_t(48) << 30);
}

TEST_CASE("mhc advise's GPUs are whatever the GPU table's rows say", "[advise][setting]") {
    // A table of two made-up GPUs, laid out as datasets/gpus.tsv (columns in another order, and
    // columns advise does not read): advise takes each row's name, memory and ring, nothing of its own.
    const std::vector<GpuMemory> gpus = gpus_of_table(
        "# a comment\n\nring_link\tname\tdevice_name\tmemory_bytes\tring_bus_bw\tsm_count\n"
        "NVLink 9\tx-1\tX One\t17179869184\t7e11\t1\nPCIe 9\ty-2\tY Two\t1000\t2.5e9\t-\n");
    REQUIRE(gpus.size() == 2);
    CHECK(gpus[0].name == "x-1");
    CHECK(gpus[0].bytes == 17179869184);
    CHECK(gpus[0].reserve == int64_t(1) << 30);
    CHECK(gpus[0].link_Bps == 7e11);
    CHECK(gpus[0].link_name == "NVLink 9");
    CHECK(gpus[1].name == "y-2");
    CHECK(gpus[1].bytes == 1000);
    CHECK(gpus[1].link_Bps == 2.5e9);
    CHECK(gpus[1].link_name == "PCIe 9");
    CHECK_THROWS_WITH(
        gpus_of_table("name\tdevice_name\tmemory_bytes\tring_bus_bw\tring_link\nx-1\tX\t16\tfast\tPCIe 9\n"),
        "datasets/gpus.tsv:2: column ring_bus_bw: 'fast' is no number");
}
