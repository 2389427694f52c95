#pragma once
// GPUs by the names mhc-torch capture --gpu takes: the rows of the toolkit's one GPU table,
// datasets/gpus.tsv (their figures and sources are there).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mhc::advise {

struct GpuMemory {
    std::string name;
    int64_t bytes = 0;       // device memory (column memory_bytes)
    int64_t reserve = 0;     // left to the CUDA context, cuBLAS workspaces and kernel images, outside
                             // the caching allocator (an allowance, not a measurement: 1 GiB each)
    double link_Bps = 0;     // GPU-to-GPU bus bandwidth within a node for the collectives (comm.hpp;
                             // column ring_bus_bw)
    std::string link_name;   // column ring_link
};

// Throws mhc::Error (bad input) listing the names.
const GpuMemory& gpu_memory(const std::string& name);
const GpuMemory* find_gpu(const std::string& name);   // nullptr when unknown
std::string gpu_names();
// The GPUs of a table laid out as datasets/gpus.tsv, in its order (the three above read the one
// embedded in mhc); throws std::logic_error naming the line of a malformed row.
std::vector<GpuMemory> gpus_of_table(std::string_view tsv);

}  // namespace mhc::advise
