// The generator's GPUs come from the toolkit's one GPU table, datasets/gpus.tsv (mhc_torch reads
// the same file): checked here against the file itself, read line by line.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_table.hpp"
#include "mhc/datasets/config.hpp"
#include "mhc/test/paths.hpp"

using mhc::datasets::gpu_names;
using mhc::datasets::gpu_spec;
using mhc::datasets::GpuSpec;
using mhc::datasets::read_gpu_table;

namespace {
std::vector<std::string> tab_fields(const std::string& line) {
    std::vector<std::string> out;
    std::stringstream ss(line);
    for (std::string field; std::getline(ss, field, '\t');) out.push_back(field);
    return out;
}

// Each data row of the file, by the header's column names.
std::vector<std::map<std::string, std::string>> table_rows() {
    std::ifstream in(mhc::test::source_path("datasets/gpus.tsv"));
    REQUIRE(in);
    std::vector<std::string> header;
    std::vector<std::map<std::string, std::string>> rows;
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        const std::vector<std::string> fields = tab_fields(line);
        if (header.empty()) {
            header = fields;
            continue;
        }
        REQUIRE(fields.size() == header.size());
        std::map<std::string, std::string> row;
        for (size_t i = 0; i < fields.size(); ++i) row[header[i]] = fields[i];
        rows.push_back(row);
    }
    return rows;
}
}  // namespace

TEST_CASE("the generator's GPUs are the rows of datasets/gpus.tsv that have a generator name") {
    std::vector<std::string> names;
    for (const auto& row : table_rows()) {
        if (row.at("generate") == "-") continue;
        names.push_back(row.at("generate"));
        const GpuSpec gpu = gpu_spec(row.at("generate"));
        INFO(row.at("name"));
        CHECK(gpu.name == row.at("generate"));
        CHECK(gpu.device_name == row.at("device_name"));
        CHECK(gpu.memory_bytes == std::stoll(row.at("memory_bytes")));
        CHECK(gpu.matmul_flops == std::stod(row.at("bf16_flops")));
        CHECK(gpu.tf32_flops == std::stod(row.at("tf32_flops")));
        CHECK(gpu.fp32_flops == std::stod(row.at("fp32_flops")));
        CHECK(gpu.mem_bw == std::stod(row.at("hbm_bw")));
        CHECK(gpu.nvlink_bw == std::stod(row.at("nvlink_bw")));
        CHECK(gpu.net_bw == std::stod(row.at("net_bw")));
    }
    CHECK(names == std::vector<std::string>{"a100", "h100", "h200"});
    CHECK(gpu_names() == names);
    // The datasheets' figures (the file's sources): the H100 SXM's dense bf16 peak, the H200's memory.
    CHECK(gpu_spec("h100").matmul_flops == 989.4e12);
    CHECK(gpu_spec("h200").memory_bytes == 141000000000);
    CHECK(gpu_spec("a100").device_name == "NVIDIA A100-SXM4-80GB");
}

TEST_CASE("a malformed GPU table is refused with its line and column") {
    const std::string head = "# a comment\n\nname\tgenerate\tdevice_name\tmemory_bytes\tbf16_flops\ttf32_flops\t"
                             "fp32_flops\thbm_bw\tnvlink_bw\tnet_bw\n";
    const std::vector<GpuSpec> read = read_gpu_table(head + "x-1\tx\tX\t16\t2e3\t3\t4\t5.5\t6\t7\ny-1\t-\tY\t1\t2\t3\t4\t5\t6\t7\n");
    REQUIRE(read.size() == 1);   // the row without a generator name left out
    CHECK(read[0].name == "x");
    CHECK(read[0].memory_bytes == 16);
    CHECK(read[0].matmul_flops == 2000);
    CHECK(read[0].mem_bw == 5.5);
    CHECK_THROWS_WITH(read_gpu_table(head + "x-1\tx\tX\t16\t2\t3\t4\tfast\t6\t7\n"),
                      "datasets/gpus.tsv:4: column hbm_bw: 'fast' is no number");
    CHECK_THROWS_WITH(read_gpu_table(head + "x-1\tx\tX\t1.5\t2\t3\t4\t5\t6\t7\n"),
                      "datasets/gpus.tsv:4: column memory_bytes: '1.5' is no number");
    CHECK_THROWS_WITH(read_gpu_table(head + "x-1\tx\tX\t16\t2\n"), "datasets/gpus.tsv:4: 5 fields, the header has 10");
    CHECK_THROWS_AS(read_gpu_table("name\tgenerate\nx-1\tx\n"), std::logic_error);   // no device_name column
}
