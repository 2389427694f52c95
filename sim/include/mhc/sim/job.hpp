#pragma once
// Whether per-rank traces are the ranks of one job (docs/trace-format.md, "Multi-rank traces",
// job identity): checked before they are coupled, so that unrelated traces are never simulated,
// and their runs stored, as one job.
#include <string>
#include <vector>

#include "mhc/sim/coupled.hpp"

namespace mhc::sim {

// The meta keys of a job identity.
inline constexpr const char* kJobIdKey = "job.id";
inline constexpr const char* kWorldSizeKey = "world_size";
inline constexpr const char* kRankKey = "rank";
inline constexpr const char* kTimeOriginKey = "time_origin_ns";

// Throws mhc::Error (bad input), one line naming the file, the rank and the meta field, when
// the traces cannot be one job: different job ids, different world sizes, fewer or more traces
// than the world size, a rank outside it, a key on some ranks and not on others, or time
// origins that put a rank's trace entirely before or after another's (the ranks of a job run at
// the same time); one trace too (one rank of a larger job is not the job). Returns one sentence
// per thing assumed for keys two traces or more lack (older traces, sources that do not record
// them), and one naming the ranks whose collectives ran on the host
// (meta kineto.host_collectives: not coupled); empty when nothing was assumed.
std::vector<std::string> check_job_identity(const std::vector<RankTrace>& ranks);

}  // namespace mhc::sim
