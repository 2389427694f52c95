#pragma once
// Which communicator each stream's NCCL kernels belong to, from the process group PyTorch's
// profiler writes on them (args.Process Group Name and Ranks, which Kineto copies from the
// collective's record_param_comms op; PyTorch 2.x).
#include "kineto_parse.hpp"
#include "mhc/trace/import/import.hpp"

namespace mhc::trace::import {

// Where every NCCL kernel of a stream that names a process group names the same one and its
// members are known (its args.Process Group Ranks, or distributedInfo.pg_config where that list is
// cut short), writes meta nccl.stream.N = "pg NAME:R0,R1,..." (the key simulate --ranks matches
// cross-rank kernels by; docs/trace-format.md). Says in meta kineto.process_groups what each
// stream's kernels name, and warns for a stream no communicator could be written for (two groups
// on it, members not known, the trace's own rank not among them). Call once the streams are final.
void write_process_groups(const KinetoData& data, Result& result);

}  // namespace mhc::trace::import
