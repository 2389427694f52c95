#pragma once
// Where a recorded process writes its trace. `mhc record -o run.db` passes "run.db" to every
// process it starts; one file per process: "run.rank3.db" when RANK (or else LOCAL_RANK) is
// set, "run.db" for the process `mhc record` started itself, "run.pid1234.db" for others.
#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace mhc::record {

// `rank` and `local_rank` are the environment values (null or empty when unset).
std::string output_path(std::string_view base, const char* rank, const char* local_rank,
                        long pid, bool is_root);

// The job a recorded process belongs to (docs/trace-format.md, "Multi-rank traces"), from what
// its launcher put in the environment: meta `rank` and `world_size` (torchrun, Open MPI, PMI,
// Slurm) and `job.id` (torchrun's rendezvous id, the Slurm job and step, the Open MPI job, the
// PMIx namespace, torch.distributed's MASTER_ADDR:MASTER_PORT, else the `mhc record` that started
// it), each only when the environment says it. `env` looks a variable up, as std::getenv does.
std::map<std::string, std::string> job_identity(const std::function<const char*(const char*)>& env);

// The recorder's settings from MHC_RECORD_ACCESSES, _SIGNALS, _FORCE (0 or 1) and _BUFFER_MB,
// _DEVICE_BUFFER_MB (1..4096) (docs/recording.md). A value outside those is no setting: it is
// given to `warn` with the default that is used instead ("MHC_RECORD_FORCE=yes: not 0 or 1", "0"; the
// library prints "mhc-record: MHC_RECORD_FORCE=yes: not 0 or 1; using 0", `mhc record` refuses it) (the library runs
// inside the user's program and does not stop it). Before 2026-12-03 such a value was ignored in silence (FORCE=yes: no
// replacing; ACCESSES=no: scanning).
struct EnvSettings {
    bool accesses = true, signals = true, replace = false;
    size_t buffer_bytes = size_t{8} << 20, device_buffer_bytes = size_t{32} << 20;
};
using Warn = std::function<void(const std::string& problem, const std::string& fallback)>;
EnvSettings settings_from_env(const std::function<const char*(const char*)>& env, const Warn& warn);

}  // namespace mhc::record
