#include "mhc/advise/gpus.hpp"

#include <string>
#include <vector>

#include "mhc/common/error.hpp"
#include "mhc/common/refusal.hpp"

namespace mhc::advise {

namespace {
constexpr int64_t GiB = int64_t(1) << 30;
// link_Bps, the bus bandwidth of a ring within one node (docs/advise.md, "communication time"):
// A100 SXM: NVLink 3, 600 GB/s per GPU both ways (A100 datasheet), which NCCL's own model caps at
// 235 GB/s of bus bandwidth on compute capability 8.0 (NVIDIA/nccl src/graph/tuning.cc);
// H100 SXM and H200: NVLink 4, 900 GB/s both ways (H100, H200 datasheets): 450 GB/s each way, an
// upper bound; H100 PCIe and L40S: a ring over PCIe 5 and PCIe 4, at the toolkit's measured host
// link figures (55 and 25 GB/s one way, docs/simulator.md link presets; the H100 PCIe's NVLink
// bridge joins pairs only).
const GpuMemory kGpus[] = {
    {"a100-40g", 40 * GiB, GiB, 235e9, "NVLink 3"}, {"a100-80g", 80 * GiB, GiB, 235e9, "NVLink 3"},
    {"h100-pcie", 80 * GiB, GiB, 55e9, "PCIe 5"},   {"h100-sxm", 80 * GiB, GiB, 450e9, "NVLink 4"},
    {"h200", 141000000000, GiB, 450e9, "NVLink 4"}, {"l40s", 48 * GiB, GiB, 25e9, "PCIe 4"},
};
}  // namespace

std::string gpu_names() {
    std::string names;
    for (const GpuMemory& gpu : kGpus) names += (names.empty() ? "" : ", ") + std::string(gpu.name);
    return names;
}

const GpuMemory* find_gpu(const std::string& name) {
    for (const GpuMemory& gpu : kGpus)
        if (name == gpu.name) return &gpu;
    return nullptr;
}

const GpuMemory& gpu_memory(const std::string& name) {
    for (const GpuMemory& gpu : kGpus)
        if (name == gpu.name) return gpu;
    std::vector<std::string> names;
    for (const GpuMemory& gpu : kGpus) names.emplace_back(gpu.name);
    throw Error(refused_value("--gpu", name, "not a GPU mhc knows; use one of " + gpu_names() + did_you_mean(name, names)));
}

}  // namespace mhc::advise
