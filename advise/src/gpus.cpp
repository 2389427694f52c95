#include "mhc/advise/gpus.hpp"

#include <string>
#include <vector>

#include "mhc/common/error.hpp"
#include "mhc/common/refusal.hpp"
#include "mhc/datasets/gpu_table.hpp"

namespace mhc::advise {

namespace {
constexpr int64_t GiB = int64_t(1) << 30;

std::vector<GpuMemory> gpus_of_rows(const std::vector<datasets::GpuRow>& rows) {
    std::vector<GpuMemory> gpus;
    gpus.reserve(rows.size());
    for (const datasets::GpuRow& row : rows)
        gpus.push_back(GpuMemory{row.name, row.memory_bytes, GiB, row.ring_bus_bw, row.ring_link});
    return gpus;
}

const std::vector<GpuMemory>& gpus() {
    static const std::vector<GpuMemory> table = gpus_of_rows(datasets::gpu_rows());
    return table;
}
}  // namespace

std::vector<GpuMemory> gpus_of_table(std::string_view tsv) { return gpus_of_rows(datasets::read_gpu_rows(tsv)); }

std::string gpu_names() {
    std::string names;
    for (const GpuMemory& gpu : gpus()) names += (names.empty() ? "" : ", ") + gpu.name;
    return names;
}

const GpuMemory* find_gpu(const std::string& name) {
    for (const GpuMemory& gpu : gpus())
        if (name == gpu.name) return &gpu;
    return nullptr;
}

const GpuMemory& gpu_memory(const std::string& name) {
    if (const GpuMemory* gpu = find_gpu(name)) return *gpu;
    std::vector<std::string> names;
    for (const GpuMemory& gpu : gpus()) names.push_back(gpu.name);
    throw Error(refused_value("--gpu", name, "not a GPU mhc knows; use one of " + gpu_names() + did_you_mean(name, names)));
}

}  // namespace mhc::advise
