// The `mhc` command: a thin front-end over the libraries. Every subcommand is a
// cmd_*.cpp file that registers itself (see command.hpp).
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <iostream>

#include "command.hpp"
#include "mhc/common/error.hpp"
#include "mhc/kernels/device.hpp"

namespace mhc::cli {

std::vector<Command>& registry() {
    static std::vector<Command> commands;
    return commands;
}

namespace {
bool g_quiet = false;
}
void set_quiet(bool quiet) { g_quiet = quiet; }
bool show_progress() { return !g_quiet && isatty(STDERR_FILENO); }

}  // namespace mhc::cli

int main(int argc, char** argv) {
    using namespace mhc::cli;
    CLI::App app{"mhc: GPU memory scheduling simulator and profiling toolkit"};
    app.require_subcommand(1);
    bool quiet = false;
    app.add_flag("-q,--quiet", quiet, "No progress output");
    // The version, and whether this machine's driver can run the CUDA parts of this build.
    app.set_version_flag("--version", [] { return "mhc " MHC_VERSION "\n" + mhc::kernels::cuda_summary(); });
    std::function<int()> action;
    for (auto& cmd : registry()) {
        CLI::App* sub = app.add_subcommand(cmd.name, cmd.help);
        auto run = cmd.setup(*sub);
        sub->callback([&action, run] { action = run; });
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::Success& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        // One line, exit 2: unknown options, missing files, wrong values.
        std::fprintf(stderr, "mhc: %s\n", e.what());
        return kExitBadInput;
    }
    set_quiet(quiet);
    try {
        return action ? action() : kExitBadInput;
    } catch (const mhc::Error& e) {
        std::fprintf(stderr, "mhc: %s\n", e.what());
        return e.exit_code();
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "mhc: out of host memory\n");
        return kExitInternal;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mhc: internal error: %s\n", e.what());
        return kExitInternal;
    }
}
