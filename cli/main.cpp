// The `mhc` command: a thin front-end over the libraries. Every subcommand is a
// cmd_*.cpp file that registers itself (see command.hpp).
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <string>
#include <exception>
#include <iostream>

#include "command.hpp"
#include "mpi_job.hpp"
#include "mhc/common/error.hpp"
#include "mhc/kernels/device.hpp"

namespace mhc::cli {

std::vector<Command>& registry() {
    static std::vector<Command> commands;
    return commands;
}

namespace {
bool g_quiet = false;

// CLI11 says "<option>: File does not exist: <path>"; the documented form of every input error
// is "<file>: <what is wrong>", so the path leads.
std::string path_first(const std::string& msg) {
    static const char* reasons[] = {"File does not exist: ", "File is actually a directory: ",
                                    "Directory does not exist: ", "Directory is actually a file: ",
                                    "Path does not exist: ", "Path already exists: "};
    for (const char* reason : reasons) {
        auto at = msg.find(reason);
        if (at == std::string::npos) continue;
        std::string what(reason, std::strlen(reason) - 2);   // without ": "
        what[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(what[0])));
        return msg.substr(at + std::strlen(reason)) + ": " + what;
    }
    return msg;
}
}  // namespace
void set_quiet(bool quiet) { g_quiet = quiet; }
bool show_progress() { return !g_quiet && isatty(STDERR_FILENO); }

}  // namespace mhc::cli

namespace {

using mhc::cli::mpi::Outcome;

Outcome failure(int code, const std::string& what) { return {code, "mhc: " + what}; }

// The command line, run: its exit code, and the one line to print when it failed (printed by
// main(), once per job under mpirun).
Outcome run(int argc, char** argv) {
    using namespace mhc::cli;
    CLI::App app{"mhc: GPU memory scheduling simulator and profiling toolkit"};
    app.require_subcommand(1);
    app.option_defaults()->always_capture_default();   // --help shows every default
    bool quiet = false;
    app.add_flag("-q,--quiet", quiet, "No progress output");
    // The version, and whether this machine's driver can run the CUDA parts of this build.
    app.set_version_flag("--version", [] { return "mhc " MHC_VERSION "\n" + mhc::kernels::cuda_summary(); });
    std::function<int()> action;
    for (auto& cmd : registry()) {
        CLI::App* sub = app.add_subcommand(cmd.name, cmd.help);
        auto setup = cmd.setup(*sub);
        sub->callback([&action, setup] { action = setup; });
    }
    // The first word that is not an option must be a command; say so when it is not one
    // (CLI11 would only say that a subcommand is required).
    std::string names;
    for (const auto& cmd : registry()) names += (names.empty() ? "" : ", ") + cmd.name;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (!a.empty() && a[0] == '-') continue;
        bool known = false;
        for (const auto& cmd : registry()) known |= cmd.name == a;
        if (!known) return failure(kExitBadInput, "'" + a + "' is not a command; commands: " + names + " (mhc --help)");
        break;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return {app.exit(e), ""};
    } catch (const CLI::CallForAllHelp& e) {
        return {app.exit(e), ""};
    } catch (const CLI::Success& e) {
        return {app.exit(e), ""};
    } catch (const CLI::ParseError& e) {
        // One line, exit 2: unknown options, missing files, wrong values.
        std::string msg = path_first(e.what());
        if (argc < 2) msg += "; commands: " + names + " (mhc --help)";
        return failure(kExitBadInput, msg);
    }
    set_quiet(quiet);
    try {
        return {action ? action() : kExitBadInput, ""};
    } catch (const mpi::AgreedFailure&) {
        throw;   // for main()
    } catch (const mhc::Error& e) {
        return failure(e.exit_code(), e.what());
    } catch (const std::bad_alloc&) {
        return failure(kExitInternal, "out of host memory");
    } catch (const std::exception& e) {
        return failure(kExitInternal, std::string("internal error: ") + e.what());
    }
}

}  // namespace

int main(int argc, char** argv) {
    using namespace mhc::cli;
    // Under mpirun (a build with MPI): MPI_Init here, MPI_Finalize on every way out.
    struct MpiSession {
        MpiSession(int* c, char*** v) { mpi::init(c, v); }
        ~MpiSession() { mpi::finalize(); }
    } mpi_session(&argc, &argv);
    Outcome out;
    bool agreed = false;
    try {
        out = run(argc, argv);
    } catch (const mpi::AgreedFailure& f) {   // another process failed first: every one knows
        out = f.outcome;
        agreed = true;
    }
    if (mpi::size() > 1 && !agreed) {
        // Failed while the other processes may wait for this one: end them all.
        if (out.code != 0 && mpi::in_parallel()) {
            if (!out.message.empty()) std::fprintf(stderr, "%s\n", out.message.c_str());
            mpi::abort_job(out.code);
        }
        out = mpi::agree(out);
    }
    if (!out.message.empty() && mpi::is_root()) std::fprintf(stderr, "%s\n", out.message.c_str());
    return out.code;
}
