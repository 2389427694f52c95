// Nsight Systems SQLite export (`nsys export --type sqlite`) -> trace. Tables and columns
// differ between versions: both are looked up in sqlite_master / pragma table_info, what
// exists is used and what is missing is written to meta (and warned about on stderr).
#include <string>

#include "nsys_import.hpp"

namespace mhc::trace::import {

namespace nsys {

void NsysImport::write_meta() {
    r_.events = events_;
    r_.meta["source"] = "nsight-systems-sqlite";
    r_.meta["import.format"] = "nsys";
    r_.meta["import.events"] = std::to_string(events_);
    r_.meta["timing"] = "exact";
    before_recording_.say(r_, "nsys.kernels_launched_before_recording");
    r_.meta["accesses"] = "none";   // nsys records no kernel arguments
    r_.meta["categories"] = "unknown";
    r_.meta["reconstructed_blocks"] = std::to_string(reconstructed_);
    r_.meta["nsys.kernel_starts_clamped"] = std::to_string(clamped_);
    if (clamped_ > 0) {   // the kernel time is no longer the export's own sum of end - start: say so
        const std::string said = std::to_string(clamped_) +
                                 " kernels started before the previous kernel on their stream ended (by up to " +
                                 std::to_string(clamp_largest_ns_) + " ns; " + std::to_string(clamp_lost_ns_) +
                                 " ns of kernel time in all)";
        r_.meta["nsys.kernel_clamp"] = said;
        r_.warnings.push_back(
            said + ": their starts were moved to that end, since a trace keeps one kernel at a time per stream");
    }
    if (!graph_mode_.empty())
        r_.meta["nsys.cuda_graph_trace"] =
            graph_mode_ + (graph_mode_ == "Graph"
                               ? " (META_DATA_CAPTURE: a CUDA graph launch is one CUPTI_ACTIVITY_KIND_GRAPH_TRACE row, "
                                 "its kernels are not recorded)"
                               : " (META_DATA_CAPTURE CUDA_GRAPH_TRACE_OPTIONS:MODE)");
    if (!has("CUDA_GPU_MEMORY_USAGE_EVENTS"))
        r_.meta["allocations"] =
            memory_usage_traced_ == "false"
                ? "none (recorded without GPU memory usage, META_DATA_CAPTURE COLLECT_GPU_MEMORY_USAGE=false: "
                  "record with nsys profile --cuda-memory-usage=true)"
            : memory_usage_traced_ == "true"
                ? "none (GPU memory usage was recorded, META_DATA_CAPTURE COLLECT_GPU_MEMORY_USAGE=true, and nothing "
                  "was allocated or freed while it was; what was in use is not in the file)"
                : "none (no CUDA_GPU_MEMORY_USAGE_EVENTS: record with nsys profile --cuda-memory-usage=true)";
}

}  // namespace nsys

void import_nsys(const std::string& in, Rows& rows, Result& result) { nsys::NsysImport(in, rows, result).run(); }

}  // namespace mhc::trace::import
