// The job identity a recorded process writes (docs/trace-format.md, "Multi-rank traces"): from
// what its launcher put in the environment, never guessed.
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "mhc/record/output.hpp"

using mhc::record::EnvSettings;
using mhc::record::job_identity;
using mhc::record::settings_from_env;
using mhc::record::Translator;
using mhc::record::TranslatorOptions;

namespace {
std::map<std::string, std::string> identity(const std::map<std::string, std::string>& env) {
    return job_identity([&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
    });
}
}  // namespace

TEST_CASE("recorder: the job identity comes from the launcher's environment", "[record]") {
    using M = std::map<std::string, std::string>;
    // torchrun: rank and world size, and its rendezvous id shared by every worker of the run.
    CHECK(identity({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"TORCHELASTIC_RUN_ID", "abc"},
                    {"MASTER_ADDR", "node1"}, {"MASTER_PORT", "29500"}}) ==
          M{{"rank", "3"}, {"world_size", "8"}, {"job.id", "torchrun:abc"}});
    // torchrun's default rendezvous id ("none") is no identity: the rendezvous address is.
    CHECK(identity({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_RUN_ID", "none"}, {"MASTER_ADDR", "10.0.0.1"},
                    {"MASTER_PORT", "29500"}}).at("job.id") == "torch.distributed:10.0.0.1:29500");
    // Slurm (job and step), Open MPI, PMIx.
    CHECK(identity({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "16"}, {"SLURM_JOB_ID", "991"}, {"SLURM_STEP_ID", "2"}}) ==
          M{{"rank", "5"}, {"world_size", "16"}, {"job.id", "slurm:991.2"}});
    CHECK(identity({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_MCA_ess_base_jobid", "77"}}) ==
          M{{"rank", "1"}, {"world_size", "4"}, {"job.id", "openmpi:77"}});
    CHECK(identity({{"PMIX_RANK", "2"}, {"PMIX_NAMESPACE", "ns.4"}}) == M{{"rank", "2"}, {"job.id", "pmix:ns.4"}});
    // What `mhc record` gives every process it starts, when nothing else says.
    CHECK(identity({{"MHC_RECORD_JOB", "mhc-record:host:42:1700000000"}}) == M{{"job.id", "mhc-record:host:42:1700000000"}});
    // Nothing known: nothing written (the coupled simulation then says what it assumed).
    CHECK(identity({}).empty());
    CHECK(identity({{"RANK", "x"}, {"WORLD_SIZE", ""}}).empty());
}

TEST_CASE("recorder: the translator writes the job identity beside the time origin", "[record]") {
    TranslatorOptions opt;
    opt.origin = 1000;
    opt.job = {{"job.id", "torchrun:abc"}, {"rank", "1"}, {"world_size", "2"}};
    auto data = mhc::record::test::translate([](Translator&) {}, opt);
    CHECK(data.meta.at("job.id") == "torchrun:abc");
    CHECK(data.meta.at("rank") == "1");
    CHECK(data.meta.at("world_size") == "2");
    CHECK(data.meta.at("time_origin_ns") == "1000");
}

TEST_CASE("recorder: MHC_RECORD_* values outside the documented ones are named once and the default used", "[record]") {
    using M = std::map<std::string, std::string>;
    const auto settings = [](const M& env, std::vector<std::string>& said) {
        return settings_from_env(
            [&](const char* name) -> const char* {
                auto it = env.find(name);
                return it == env.end() ? nullptr : it->second.c_str();
            },
            [&](const std::string& problem, const std::string& fallback) {
                said.push_back(problem + "; using " + fallback);
            });
    };
    std::vector<std::string> said;
    // Documented values (and unset or empty ones) say nothing.
    EnvSettings got = settings({{"MHC_RECORD_ACCESSES", "0"},
                                {"MHC_RECORD_SIGNALS", "0"},
                                {"MHC_RECORD_FORCE", "1"},
                                {"MHC_RECORD_BUFFER_MB", "64"},
                                {"MHC_RECORD_DEVICE_BUFFER_MB", ""}},
                               said);
    CHECK(said.empty());
    CHECK((!got.accesses && !got.signals && got.replace));
    CHECK(got.buffer_bytes == (size_t{64} << 20));
    CHECK(got.device_buffer_bytes == (size_t{32} << 20));
    // Before 2026-12-03 each of these was ignored without a word (FORCE=yes did not replace,
    // ACCESSES=no still scanned, a buffer of 0 or "8M" MB was the default).
    got = settings({{"MHC_RECORD_ACCESSES", "no"},
                    {"MHC_RECORD_SIGNALS", "off"},
                    {"MHC_RECORD_FORCE", "yes"},
                    {"MHC_RECORD_BUFFER_MB", "8M"},
                    {"MHC_RECORD_DEVICE_BUFFER_MB", "0"}},
                   said);
    CHECK(said == std::vector<std::string>{
                      "MHC_RECORD_ACCESSES=no: not 0 or 1; using 1", "MHC_RECORD_SIGNALS=off: not 0 or 1; using 1",
                      "MHC_RECORD_FORCE=yes: not 0 or 1; using 0",
                      "MHC_RECORD_BUFFER_MB=8M: not a whole number of MB in 1..4096; using 8",
                      "MHC_RECORD_DEVICE_BUFFER_MB=0: not a whole number of MB in 1..4096; using 32"});
    CHECK((got.accesses && got.signals && !got.replace));
    CHECK(got.buffer_bytes == (size_t{8} << 20));
    said.clear();
    settings({{"MHC_RECORD_BUFFER_MB", "4097"}, {"MHC_RECORD_DEVICE_BUFFER_MB", "99999999999999999999"}}, said);
    CHECK(said.size() == 2);
}
