#include "mhc/advise/gpus.hpp"

#include "mhc/common/error.hpp"

namespace mhc::advise {

namespace {
constexpr int64_t GiB = int64_t(1) << 30;
const GpuMemory kGpus[] = {
    {"a100-40g", 40 * GiB, GiB}, {"a100-80g", 80 * GiB, GiB}, {"h100-pcie", 80 * GiB, GiB},
    {"h100-sxm", 80 * GiB, GiB}, {"h200", 141000000000, GiB}, {"l40s", 48 * GiB, GiB},
};
}  // namespace

std::string gpu_names() {
    std::string s;
    for (const GpuMemory& g : kGpus) s += (s.empty() ? "" : ", ") + std::string(g.name);
    return s;
}

const GpuMemory& gpu_memory(const std::string& name) {
    for (const GpuMemory& g : kGpus)
        if (name == g.name) return g;
    throw Error("--gpu: unknown GPU '" + name + "'; valid: " + gpu_names());
}

}  // namespace mhc::advise
