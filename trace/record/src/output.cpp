#include "mhc/record/output.hpp"

#include <cctype>
#include <cstdlib>
#include <cstring>

namespace mhc::record {

namespace {
bool usable(const char* text) {
    if (!text || !*text) return false;
    for (const char* p = text; *p; ++p)   // a rank is a number; anything else is not a name part
        if (!std::isdigit(static_cast<unsigned char>(*p))) return false;
    return true;
}

std::string with_tag(std::string_view base, const std::string& tag) {
    // Insert before the extension of the last path component: run.db -> run.rank0.db.
    size_t slash = base.find_last_of('/');
    size_t dot = base.find_last_of('.');
    size_t name = slash == std::string_view::npos ? 0 : slash + 1;
    if (dot == std::string_view::npos || dot <= name)
        return std::string(base) + "." + tag;
    return std::string(base.substr(0, dot)) + "." + tag + std::string(base.substr(dot));
}
}  // namespace

std::string output_path(std::string_view base, const char* rank, const char* local_rank,
                        long pid, bool is_root) {
    if (usable(rank)) return with_tag(base, std::string("rank") + rank);
    if (usable(local_rank)) return with_tag(base, std::string("rank") + local_rank);
    if (is_root) return std::string(base);
    return with_tag(base, "pid" + std::to_string(pid));
}

std::map<std::string, std::string> job_identity(const std::function<const char*(const char*)>& env) {
    std::map<std::string, std::string> out;
    auto first = [&](std::initializer_list<const char*> names, bool number) -> std::string {
        for (const char* name : names) {
            const char* value = env(name);
            if (value && *value && (!number || usable(value))) return value;
        }
        return {};
    };
    if (std::string rank = first({"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}, true);
        !rank.empty())
        out["rank"] = rank;
    if (std::string world_size = first({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, true);
        !world_size.empty())
        out["world_size"] = world_size;
    std::string id;
    if (const char* run_id = env("TORCHELASTIC_RUN_ID"); run_id && *run_id && std::string_view(run_id) != "none")
        id = std::string("torchrun:") + run_id;
    else if (const char* slurm_job = env("SLURM_JOB_ID"); slurm_job && *slurm_job)
        id = std::string("slurm:") + slurm_job + (env("SLURM_STEP_ID") ? std::string(".") + env("SLURM_STEP_ID") : "");
    else if (std::string ompi_job = first({"OMPI_MCA_ess_base_jobid"}, false); !ompi_job.empty())
        id = "openmpi:" + ompi_job;
    else if (std::string pmix_namespace = first({"PMIX_NAMESPACE"}, false); !pmix_namespace.empty())
        id = "pmix:" + pmix_namespace;
    else if (const char* master_addr = env("MASTER_ADDR"); master_addr && *master_addr && env("MASTER_PORT"))
        id = std::string("torch.distributed:") + master_addr + ":" + env("MASTER_PORT");
    else if (std::string job = first({"MHC_RECORD_JOB"}, false); !job.empty()) id = job;
    if (!id.empty()) out["job.id"] = id;
    return out;
}

namespace {
// A 0/1 switch; unset or empty: the default.
bool flag_from(const std::function<const char*(const char*)>& env, const Warn& warn, const char* name, bool fallback) {
    const char* value = env(name);
    if (!value || !*value) return fallback;
    if (std::string_view(value) == "0") return false;
    if (std::string_view(value) == "1") return true;
    warn(std::string(name) + "=" + value + ": not 0 or 1", fallback ? "1" : "0");
    return fallback;
}

// Megabytes, 1..4096; unset or empty: the default.
size_t mb_from(const std::function<const char*(const char*)>& env, const Warn& warn, const char* name,
               size_t fallback) {
    const char* value = env(name);
    if (!value || !*value) return fallback;
    bool digits = true;
    for (const char* p = value; *p; ++p) digits = digits && std::isdigit(static_cast<unsigned char>(*p));
    const unsigned long mb = digits && std::strlen(value) <= 4 ? std::strtoul(value, nullptr, 10) : 0;
    if (mb >= 1 && mb <= 4096) return static_cast<size_t>(mb) << 20;
    warn(std::string(name) + "=" + value + ": not a whole number of MB in 1..4096", std::to_string(fallback >> 20));
    return fallback;
}
}   // namespace

EnvSettings settings_from_env(const std::function<const char*(const char*)>& env, const Warn& warn) {
    EnvSettings out;
    out.accesses = flag_from(env, warn, "MHC_RECORD_ACCESSES", out.accesses);
    out.signals = flag_from(env, warn, "MHC_RECORD_SIGNALS", out.signals);
    out.replace = flag_from(env, warn, "MHC_RECORD_FORCE", out.replace);
    out.buffer_bytes = mb_from(env, warn, "MHC_RECORD_BUFFER_MB", out.buffer_bytes);
    out.device_buffer_bytes = mb_from(env, warn, "MHC_RECORD_DEVICE_BUFFER_MB", out.device_buffer_bytes);
    return out;
}

}  // namespace mhc::record
