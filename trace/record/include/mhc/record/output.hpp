#pragma once
// Where a recorded process writes its trace. `mhc record -o run.db` passes "run.db" to every
// process it starts; one file per process: "run.rank3.db" when RANK (or else LOCAL_RANK) is
// set, "run.db" for the process `mhc record` started itself, "run.pid1234.db" for others.
#include <string>
#include <string_view>

namespace mhc::record {

// `rank` and `local_rank` are the environment values (null or empty when unset).
std::string output_path(std::string_view base, const char* rank, const char* local_rank,
                        long pid, bool is_root);

}  // namespace mhc::record
