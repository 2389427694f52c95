#pragma once
// The GPUs of the toolkit's one GPU table, datasets/gpus.tsv (embedded at build time), that
// `mhc generate` offers: the rows with a name in its column `generate`, by that name, in the
// table's order.
#include <string_view>
#include <vector>

#include "mhc/datasets/config.hpp"

namespace mhc::datasets {

// Throws std::logic_error naming the line where the table `tsv` is malformed: the embedded one is
// the repository's own, so that is a defect of the build, not bad input.
std::vector<GpuSpec> read_gpu_table(std::string_view tsv);
const std::vector<GpuSpec>& generator_gpus();   // read_gpu_table of the embedded table, once

}  // namespace mhc::datasets
