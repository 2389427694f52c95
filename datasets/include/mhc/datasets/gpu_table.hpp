#pragma once
// Every row of the toolkit's one GPU table, datasets/gpus.tsv (its columns and their sources are in
// the file, which is embedded when the build is configured), by the name that `mhc advise --gpu`
// and `mhc-torch capture --gpu` take. The generator's view of the same rows is GpuSpec (config.hpp).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mhc::datasets {

struct GpuRow {
    std::string name;           // column name: "h100-sxm"
    std::string device_name;    // "NVIDIA H100 80GB HBM3"
    int64_t memory_bytes = 0;   // device memory
    double ring_bus_bw = 0;     // bus bandwidth of a ring of this GPU within one node, bytes/s
    std::string ring_link;      // what that ring runs over: "NVLink 4", "PCIe 5"
};

// Throws std::logic_error naming the line and column where the table `tsv` is malformed: the
// embedded one is the repository's own, so that is a defect of the build, not bad input.
std::vector<GpuRow> read_gpu_rows(std::string_view tsv);
const std::vector<GpuRow>& gpu_rows();   // read_gpu_rows of the embedded table, once, in its order

}   // namespace mhc::datasets
