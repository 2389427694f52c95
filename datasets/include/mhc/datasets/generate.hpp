#pragma once
// The synthetic trace generator (docs/datasets.md): one GPU's view of a few training steps
// of a decoder-only transformer, written through mhc::trace::Writer.
#include <atomic>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "mhc/datasets/config.hpp"
#include "mhc/trace/store.hpp"

namespace mhc::datasets {

struct GenerateStats {
    int64_t rows = 0;                 // rows the writer wrote (strings included)
    int64_t allocations = 0, kernels = 0, accesses = 0, copies = 0, markers = 0;
    int64_t parameters = 0;           // whole model (parameter_count)
    int64_t local_parameters = 0;     // on the traced GPU (local_parameter_count)
    int64_t param_bytes = 0;          // bytes of category param allocations
    double flops_per_step = 0;        // summed over the emitted kernels, averaged per step
    double gemm_flops_per_step = 0;   // cuBLAS GEMM part of it
    int64_t activation_bytes_per_layer = 0;   // activation_bytes_per_layer(cfg, 0)
    int64_t end_time_ns = 0;          // end of the last step
    double seconds = 0;               // wall time generate() took
};

// Thrown when the cancel flag of GenerateHooks becomes true; the writer is left unfinished
// so that its destructor removes the temporary file.
class Cancelled : public std::runtime_error {
public:
    Cancelled() : std::runtime_error("generation interrupted") {}
};

struct GenerateHooks {
    const std::atomic<bool>* cancel = nullptr;       // checked often; true: throw Cancelled
    std::function<void(double)> progress;            // fraction done, called now and then
    mhc::IfExists if_exists = mhc::IfExists::Replace;   // generate_file: an existing `path`
};

// Validates `cfg` (mhc::Error on bad values), then streams the trace into `w` and sets its
// meta keys. Does not call w.finish().
GenerateStats generate(const GeneratorConfig& cfg, trace::Writer& w,
                       const GenerateHooks& hooks = {});

// generate() into a new file at `path`, made to appear atomically (Writer::finish).
GenerateStats generate_file(const GeneratorConfig& cfg, const std::string& path,
                            const GenerateHooks& hooks = {});

// How large a generated trace will be, known before writing it: the rows of the first two steps
// counted (nothing written) and the rest extrapolated (every step after the first adds the same
// rows), or, where those two steps alone pass `count_budget` rows, extrapolated from the share of
// them counted (`exact` false: then within a few percent).
struct OutputEstimate {
    trace::TableCounts rows;   // per table
    int64_t bytes = 0;         // trace::estimated_file_bytes(rows)
    bool exact = true;         // rows counted (steps 1-2) and extrapolated step by step
};
OutputEstimate estimate_output(const GeneratorConfig& cfg, int64_t count_budget = 4000000);

// One rank of a multi-rank layout (cfg.pp x cfg.dp x cfg.tp) and the file it goes to.
struct RankFile {
    int pp_stage = 0, dp_rank = 0, tp_rank = 0;
    std::string path;
};
// Multi-rank traces (docs/datasets.md, "Multi-rank traces"): every pipeline stage of each
// (dp, tp) pair asked for is generated together (1F1B with SendRecv kernels between the
// stages); each file gets its rank's trace and its communicators in meta. Stats in `files`
// order. Throws mhc::Error for a rank outside the layout.
std::vector<GenerateStats> generate_ranks(const GeneratorConfig& cfg, const std::vector<RankFile>& files,
                                          const GenerateHooks& hooks = {});

}  // namespace mhc::datasets
