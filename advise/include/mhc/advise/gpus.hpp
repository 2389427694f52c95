#pragma once
// GPUs by the names mhc-torch capture --gpu takes (datasets/gpus.tsv holds their datasheet
// figures; a test checks that the memory sizes agree).
#include <cstdint>
#include <string>

namespace mhc::advise {

struct GpuMemory {
    const char* name;
    int64_t bytes;     // device memory
    int64_t reserve;   // left to the CUDA context, cuBLAS workspaces and kernel images, outside
                       // the caching allocator (an allowance, not a measurement)
    double link_Bps;   // GPU-to-GPU bus bandwidth within a node for the collectives (comm.hpp)
    const char* link_name;
};

// Throws mhc::Error (bad input) listing the names.
const GpuMemory& gpu_memory(const std::string& name);
const GpuMemory* find_gpu(const std::string& name);   // nullptr when unknown
std::string gpu_names();

}  // namespace mhc::advise
