// The `mhc` command: a thin front-end over the libraries. Every subcommand is a
// cmd_*.cpp file that registers itself (see command.hpp).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <exception>
#include <filesystem>
#include <iostream>
#include <optional>

#include "command.hpp"
#include "mhc/common/command_line.hpp"
#include "mhc/common/cut_short.hpp"
#include "mhc/common/environment.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/message_line.hpp"
#include "mhc/common/help_format.hpp"
#include "mhc/common/numbers.hpp"
#include "mhc/dist/process.hpp"
#include "mhc/kernels/device.hpp"
#include "mhc/kernels/sinkhorn.hpp"
#include "mhc/sim/config.hpp"
#include "mhc/trace/store.hpp"

namespace mhc::cli {

std::vector<Command>& registry() {
    static std::vector<Command> commands;
    return commands;
}

namespace {
bool g_quiet = false;
}   // namespace
void set_quiet(bool quiet) { g_quiet = quiet; }
bool show_progress() { return !g_quiet && isatty(STDERR_FILENO); }
bool quiet() { return g_quiet; }

}  // namespace mhc::cli

namespace {

using mhc::dist::Outcome;

// Every MHC_* variable mhc reads, checked before any work, whichever command runs: a value the
// variable does not document is one line naming it and exit 2 (docs/cli.md, "Environment"),
// never read as a default. MHC_STORE_WARN_SIZE is checked by the commands that store runs,
// MHC_TORCH and MHC_RECORD_LIBRARY (commands to run, files to load) where they are used.
void check_environment() {
    mhc::trace::check_environment();   // MHC_BUSY_TIMEOUT_MS, MHC_TRACE_CACHE
    // MHC_CPU_BUFFER_RATIO, MHC_MAX_SWAP_OPS_PER_SEC, MHC_EVICTION_STRATEGY
    mhc::sim::Config sim_defaults;
    mhc::sim::apply_environment(sim_defaults, {});
    mhc::env_switch("MHC_VALIDATE_POOL_PER_REPLAY", false);
    if (const auto isa = mhc::env_value("MHC_CPU_ISA")) {
        const auto names = mhc::kernels::available_cpu_isas();
        if (std::find(names.begin(), names.end(), *isa) == names.end()) {
            std::string list;
            for (const auto& name : names) list += (list.empty() ? "" : ", ") + name;
            throw mhc::Error(mhc::env_refusal("MHC_CPU_ISA", *isa,
                                              "not a CPU code path of this build on this machine; use one of " + list +
                                                  mhc::did_you_mean(*isa, names)));
        }
    }
    // Read only by --device cuda, which a machine without a GPU never reaches: checked here too.
    mhc::kernels::resolve_cuda_kernels(mhc::kernels::CudaSinkhornKernels::Default);
}

// One line, whatever it quotes: a value or a file name with a newline, a tab or an escape in it
// (`--top $'7\n'`, a trace named so) printed its message over two lines, or sent the byte to
// the terminal; each such byte is shown as '?'.
Outcome failure(int code, const std::string& what) { return {code, "mhc: " + mhc::message_line(what)}; }

// A reader of the standard output that went away (`mhc sweep T.db | head -1`, `| true`, a closed
// terminal) killed the command with SIGPIPE at its first line printed: a sweep or simulate that
// prints its result before it stores it stored nothing, and validate left its finished replays
// marked incomplete. The signal is caught instead (a handler, not SIG_IGN: a program `mhc record`
// or `advise --verify` starts gets the default back when it is exec'd), so that a write to the
// closed pipe fails, the command finishes its work, and finish_stdout() says how it ended.
volatile sig_atomic_t g_broken_pipe = 0;
extern "C" void note_broken_pipe(int) { g_broken_pipe = 1; }

void catch_broken_pipe() {
    struct sigaction current {};
    if (::sigaction(SIGPIPE, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;   // ignored: left so
    struct sigaction sa {};
    sa.sa_handler = note_broken_pipe;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(SIGPIPE, &sa, nullptr);
}

// A file past the user's limit on file sizes (`ulimit -f`, a batch system's) killed the command
// with SIGXFSZ at that write: exit 153, nothing said, the temporary file left beside the output.
// Caught (a handler, which exec resets, as for SIGPIPE), the write fails with EFBIG and the
// command says so in one line, as on a full disk, and removes what it began.
extern "C" void note_file_size_limit(int) {}

void catch_file_size_limit() {
    struct sigaction current {};
    if (::sigaction(SIGXFSZ, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;   // ignored: left so
    struct sigaction sa {};
    sa.sa_handler = note_file_size_limit;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(SIGXFSZ, &sa, nullptr);
}

// What the command printed reached the standard output whole, or that is said: `mhc info --json >
// out.json` on a full disk (or `> /dev/full`) exited 0 with the JSON cut short and nothing said.
// A write that failed is one line and exit 2 where the command had succeeded (its own status is
// kept otherwise); a reader that went away ends it as SIGPIPE would have (141), with nothing said,
// after the work (and its store) is done.
Outcome finish_stdout(Outcome out) {
    errno = 0;
    const bool flushed = std::fflush(stdout) == 0;
    const int err = errno;
    if (flushed && !std::ferror(stdout) && !g_broken_pipe) return out;
    // The reader of a pipe or socket went away (EPIPE; also where SIGPIPE was ignored, and the
    // error of an earlier write, whose errno is gone by now, is not known).
    struct stat st {};
    const bool stream = ::fstat(STDOUT_FILENO, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
    if (g_broken_pipe || err == EPIPE || (stream && err == 0)) {
        if (out.code == 0) out.code = 128 + SIGPIPE;
        return out;
    }
    if (!out.message.empty()) return out;   // the command's own line says why it failed first
    out.message = std::string("mhc: standard output: cannot be written: ") +
                  (err != 0 ? std::strerror(err) : "a write failed (a full disk?)") + "; what was printed is cut short";
    if (out.code == 0) out.code = mhc::cli::kExitBadInput;
    return out;
}

// The commands' names: as a list (for the typo a word most likely meant), and as said after a
// refusal that needs a command ("; commands: a, b, ... (mhc --help)").
struct CommandNames {
    std::vector<std::string> list;
    std::string joined;
    std::string hint() const { return "; commands: " + joined + " (mhc --help)"; }
};

CommandNames command_names() {
    CommandNames names;
    for (const auto& cmd : mhc::cli::registry()) {
        if (cmd.hidden) continue;
        names.joined += (names.joined.empty() ? "" : ", ") + cmd.name;
        names.list.push_back(cmd.name);
    }
    return names;
}

// mhc's options and a subcommand per registered command; `action` is set to the chosen
// command's when the command line is parsed.
void add_commands(CLI::App& app, bool& quiet, std::function<int()>& action) {
    app.require_subcommand(1);
    // Wrapped at the terminal's width; each option's default is the text users write, given
    // where the option is declared (default_str), never the C++ value (-2147483648).
    app.formatter(std::make_shared<mhc::HelpFormatter>(mhc::help_width()));
    app.add_flag("-q,--quiet", quiet, "No progress output, nor notes while waiting (for a lock, a named pipe)");
    // The version, and whether this machine's driver can run the CUDA parts of this build.
    app.set_version_flag("--version", [] { return "mhc " MHC_VERSION "\n" + mhc::kernels::cuda_summary(); });
    for (auto& cmd : mhc::cli::registry()) {
        CLI::App* sub = app.add_subcommand(cmd.name, cmd.help);
        sub->group(cmd.hidden ? "" : "Commands");   // as docs/cli.md and `mhc help` name them (CLI11: "Subcommands")
        auto setup = cmd.setup(*sub);
        // Its examples after its options (and after a footer of its own): whole lines, each run as is.
        if (const std::vector<std::string> examples = mhc::cli::command_examples(cmd.name); !examples.empty()) {
            std::string footer = sub->get_footer().empty() ? "" : sub->get_footer() + "\n\n";
            footer += "Examples:";
            for (const std::string& example : examples) footer += "\n$ " + example;
            sub->footer(footer);
        }
        sub->callback([&action, setup] { action = setup; });
        mhc::command_line::apply_number_grammar(*sub);
    }
}

// The words before CLI11 reads them. The first word that is not an option must be a command; say
// so when it is not one, with the command a typo most likely meant (CLI11 would only say that a
// subcommand is required). The options before it, and the command's own words, by mhc's rules.
// `chosen`: the command named, if any; the refusal, if one.
std::optional<Outcome> check_command_word(CLI::App& app, const CommandNames& names, int argc, char** argv,
                                          CLI::App*& chosen) {
    using mhc::cli::kExitBadInput;
    using mhc::command_line::flag_with_value, mhc::command_line::missing_command,
        mhc::command_line::short_with_equals;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--") return failure(kExitBadInput, "a command is required before --" + names.hint());
        if (!a.empty() && a[0] == '-') {
            std::vector<std::string> top;   // the options before the command
            for (const CLI::Option* o : app.get_options())
                for (const auto& l : o->get_lnames()) top.push_back("--" + l);
            for (const CLI::Option* o : app.get_options())
                for (const auto& s : o->get_snames()) top.push_back("-" + s);
            if (std::string valued = flag_with_value(app, {a}); !valued.empty()) return failure(kExitBadInput, valued);
            if (std::find(top.begin(), top.end(), a) == top.end())
                return failure(kExitBadInput, "unknown option " + a + mhc::did_you_mean(a, top) + " (mhc --help)");
            continue;
        }
        bool known = false;
        for (const auto& cmd : mhc::cli::registry()) known |= cmd.name == a;
        if (!known) {
            std::string guess = mhc::cli::done_elsewhere(a);
            if (guess.empty()) guess = mhc::did_you_mean(a, names.list);
            return failure(kExitBadInput, "'" + a + "' is not a command" + (guess.empty() ? names.hint() : guess));
        }
        chosen = app.get_subcommand(a);
        const std::vector<std::string> rest(argv + i + 1, argv + argc);
        for (const std::string& said :
             {flag_with_value(*chosen, rest), short_with_equals(*chosen, rest), missing_command(*chosen, rest)})
            if (!said.empty()) return failure(kExitBadInput, said);
        break;
    }
    return std::nullopt;
}

// CLI11's parse; its refusals in mhc's words. The outcome when mhc is to stop here (help, the
// version, a refusal).
std::optional<Outcome> parse_words(CLI::App& app, CLI::App* chosen, const CommandNames& names, int argc,
                                   char** argv) {
    using mhc::cli::kExitBadInput;
    using mhc::command_line::contrary_flags, mhc::command_line::dash_file, mhc::command_line::empty_value,
        mhc::command_line::in_our_words, mhc::command_line::missing_value, mhc::command_line::path_first,
        mhc::command_line::repeated_flag, mhc::command_line::required_in_context, mhc::command_line::unexpected;
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return Outcome{app.exit(e), ""};
    } catch (const CLI::CallForAllHelp& e) {
        return Outcome{app.exit(e), ""};
    } catch (const CLI::Success& e) {
        return Outcome{app.exit(e), ""};
    } catch (const CLI::ExtrasError&) {
        return failure(kExitBadInput, unexpected(app, chosen));
    } catch (const CLI::ParseError& e) {
        // One line, exit 2: unknown options, missing files, wrong values.
        std::string msg =
            mhc::command_line::as_typed(in_our_words(path_first(e.what())), app, std::vector<std::string>(argv + 1, argv + argc));
        // No command among the words (`mhc -q`): said as for `mhc` alone.
        if (!chosen && msg == "A subcommand is required") msg = "a command is required";
        if (chosen) msg = required_in_context(msg, *chosen, std::vector<std::string>(argv + 1, argv + argc));
        if (chosen) msg = missing_value(msg, *chosen, std::vector<std::string>(argv + 1, argv + argc));
        // An input that must exist, given "-" (`export - -o e.json`): said as dash_file says it.
        if (chosen && msg == mhc::no_such_file("-"))
            msg = chosen->get_name() + ": '-' names a file to read, not standard input; name a file (./- for one " +
                  "called -) (mhc " + chosen->get_name() + " --help)";
        if (argc < 2 || !chosen) msg += names.hint();
        return failure(kExitBadInput, msg);
    }
    const std::vector<std::string> words(argv + 1, argv + argc);
    for (const std::string& said : {empty_value(chosen), contrary_flags(chosen, words), repeated_flag(app, chosen, words),
                                    dash_file(chosen)})
        if (!said.empty()) return failure(kExitBadInput, said);
    return std::nullopt;
}

// The chosen command, run: its exit code, or its failure in one line.
Outcome run_command(const std::function<int()>& action) {
    using mhc::cli::kExitBadInput, mhc::cli::kExitInternal;
    try {
        check_environment();
        return {action ? action() : kExitBadInput, ""};
    } catch (const mhc::dist::AgreedFailure&) {
        throw;   // for main()
    } catch (const mhc::Error& e) {
        return failure(e.exit_code(), e.what());
    } catch (const std::bad_alloc&) {
        return failure(kExitInternal, "out of host memory");
    } catch (const std::filesystem::filesystem_error& e) {
        // A path the user gave that the file system refuses (a name too long, a loop of links)
        // where a command asked std::filesystem without an error code: bad input naming the path,
        // not an internal error.
        // One that names no path says what it was doing (it was "a file: cannot be reached").
        if (e.path1().empty()) return failure(kExitBadInput, e.what());
        return failure(kExitBadInput, e.path1().string() + ": cannot be reached: " + e.code().message());
    } catch (const std::exception& e) { return failure(kExitInternal, std::string("internal error: ") + e.what()); }
}

// The command line, run: its exit code, and the one line to print when it failed (printed by
// main(), once per job under mpirun).
Outcome run(int argc, char** argv) {
    CLI::App app{"mhc: GPU memory scheduling simulator and profiling toolkit", "mhc"};
    bool quiet = false;
    std::function<int()> action;
    add_commands(app, quiet, action);
    const CommandNames names = command_names();
    CLI::App* chosen = nullptr;
    if (auto refused = check_command_word(app, names, argc, argv, chosen)) return *refused;
    if (auto stop = parse_words(app, chosen, names, argc, argv)) return *stop;
    mhc::cli::set_quiet(quiet);
    // A trace another process holds: said once on stderr, terminal or not (a silent wait of up to
    // MHC_BUSY_TIMEOUT_MS reads as a hang in a log); -q keeps it quiet.
    mhc::trace::set_lock_wait_note(!quiet);
    return run_command(action);
}

}  // namespace

int main(int argc, char** argv) {
    using namespace mhc::cli;
    // Under mpirun (a build with MPI): MPI_Init here, MPI_Finalize on every way out.
    struct MpiSession {
        MpiSession(int* c, char*** v) { mhc::dist::init(c, v); }
        ~MpiSession() { mhc::dist::finalize(); }
    } mpi_session(&argc, &argv);
    catch_broken_pipe();
    catch_file_size_limit();
    mhc::catch_files_cut_short("mhc");   // a trace truncated while read: one line, exit 2 (it was SIGBUS, 135)
    Outcome out;
    bool agreed = false;
    try {
        out = finish_stdout(run(argc, argv));
    } catch (const mhc::dist::AgreedFailure& f) {   // another process failed first: every one knows
        out = f.outcome;
        agreed = true;
    }
    if (mhc::dist::size() > 1 && !agreed) {
        // Failed while the other processes may wait for this one: end them all.
        if (out.code != 0 && mhc::dist::in_parallel()) {
            if (!out.message.empty()) std::fprintf(stderr, "%s\n", out.message.c_str());
            mhc::dist::abort_job(out.code);
        }
        out = mhc::dist::agree(out);
    }
    if (!out.message.empty() && mhc::dist::is_root()) std::fprintf(stderr, "%s\n", out.message.c_str());
    return out.code;
}
