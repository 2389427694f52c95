// `mhc record [-o run.db] [--torch] [--no-accesses] -- CMD...`: runs CMD with the CUPTI
// injection library (libmhc_record.so) loaded by the CUDA driver, and reports the trace
// file each CUDA process wrote (docs/recording.md).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "command.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/message_line.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/record/output.hpp"

namespace fs = std::filesystem;

namespace mhc::cli {
namespace {

constexpr const char* kLibraryName = "libmhc_record.so";

// The library named by --library or MHC_RECORD_LIBRARY: a file, and a shared library (an ELF
// file). Anything else was handed to the CUDA driver, which cannot load it and records nothing,
// after the program ran (a folder was said to be "no such file").
std::string checked_library(const std::string& what, const std::string& path) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) throw Error(what + ": " + path + ": is a directory", Error::Kind::BadInput);
    if (!fs::exists(path, ec)) throw Error(what + ": " + no_such_file(path), Error::Kind::BadInput);
    if (!fs::is_regular_file(path, ec)) throw Error(what + ": " + path + ": not a regular file", Error::Kind::BadInput);
    std::ifstream in(path, std::ios::binary);
    char magic[4] = {};
    if (!in.read(magic, sizeof magic) || std::memcmp(magic,
                                                     "\x7f"
                                                     "ELF",
                                                     4) != 0)
        throw Error(what + ": " + path + ": not a shared library (no ELF header)", Error::Kind::BadInput);
    return fs::absolute(path).string();
}

std::string find_library(const std::string& given) {
    if (!given.empty() && given != "auto") return checked_library("--library", given);
    if (const char* env = std::getenv("MHC_RECORD_LIBRARY"); env && *env)
        return checked_library("MHC_RECORD_LIBRARY", env);
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        fs::path dir = exe.parent_path();
        // Installed (bin/ + lib/), beside the binary, or the build tree (cli/ + trace/record/).
        for (const fs::path& p : {dir / kLibraryName, dir / ".." / "lib" / kLibraryName,
                                  dir / ".." / "trace" / "record" / kLibraryName})
            if (fs::is_regular_file(p, ec)) return fs::canonical(p, ec).string();
    }
    throw Error(std::string("cannot find ") + kLibraryName +
                    " (it is built only when the CUDA toolkit is found); pass --library PATH "
                    "or set MHC_RECORD_LIBRARY",
                Error::Kind::BadInput);
}

// NVTX ranges reach CUPTI only when NVTX_INJECTION64_PATH names libcupti; the build writes
// its path beside the injection library (relative to that folder in the release, which
// bundles libcupti there).
void point_nvtx_at_cupti(const std::string& library) {
    if (std::getenv("NVTX_INJECTION64_PATH")) return;
    const fs::path dir = fs::path(library).parent_path();
    std::ifstream f(dir / "mhc_record_cupti_path.txt");
    std::string name;
    if (!f || !std::getline(f, name) || name.empty()) return;
    const fs::path cupti = dir / name;   // an absolute name stays as it is
    if (fs::exists(cupti)) setenv("NVTX_INJECTION64_PATH", cupti.c_str(), 1);
}

void set_torch_allocator() {
    const char* cur = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
    std::string conf = cur ? cur : "";
    if (conf.find("backend:") != std::string::npos) {
        mhc::say(
                     "mhc record: --torch: PYTORCH_CUDA_ALLOC_CONF already chooses a backend "
                     "(%s); left as is\n",
                     conf.c_str());
        return;
    }
    conf = conf.empty() ? "backend:cudaMallocAsync" : conf + ",backend:cudaMallocAsync";
    setenv("PYTORCH_CUDA_ALLOC_CONF", conf.c_str(), 1);
    mhc::say(
                 "mhc record: --torch: PYTORCH_CUDA_ALLOC_CONF=%s, so that each tensor is its "
                 "own cudaMallocAsync allocation (not a slice of a cached segment)\n",
                 conf.c_str());
}

pid_t g_child = -1;
void forward_signal(int sig) {
    if (g_child > 0) kill(g_child, sig);
}

struct Written {
    std::string path, status, detail;
};

std::vector<Written> read_manifest(const std::string& manifest) {
    std::vector<Written> out;
    std::ifstream f(manifest);
    std::string line;
    while (std::getline(f, line)) {
        size_t a = line.find('\t');
        if (a == std::string::npos) continue;
        size_t b = line.find('\t', a + 1);
        Written w{line.substr(0, a), line.substr(a + 1, b == std::string::npos ? b : b - a - 1), ""};
        if (b != std::string::npos) {
            w.detail = line.substr(b + 1);
            for (char& c : w.detail)
                if (c == '\t') c = ',';
        }
        out.push_back(std::move(w));
    }
    return out;
}

// The output, checked as every command checks its own, before the program runs (it may run for
// hours): a folder or a device (/dev/stdout, /dev/null) is never replaced, even with --force.
// Returns the recorder library (found between the checks, as the messages have always come).
std::string check_output_and_find_library(const std::string& output, bool force, const std::string& library_opt) {
    const std::string dir = fs::path(output).has_parent_path() ? fs::path(output).parent_path().string() : ".";
    std::error_code ec;
    if (!fs::exists(dir, ec))
        throw Error(output + ": cannot write into " + dir + ": no such directory", Error::Kind::BadInput);
    if (!fs::is_directory(dir, ec))
        throw Error(output + ": cannot write into " + dir + ": not a directory", Error::Kind::BadInput);
    if (fs::is_directory(output, ec)) throw Error(output + ": is a directory", Error::Kind::BadInput);
    refuse_special_file(output);
    std::string library = find_library(library_opt);
    // Refused before the program runs; the recorder refuses rank and pid names that exist too
    // (MHC_RECORD_FORCE).
    if (!force && fs::exists(fs::absolute(output)))
        throw Error(mhc::already_exists(output, "everything in it"), Error::Kind::BadInput);
    return library;
}

// An empty temporary file the recorder lists what it wrote in (one line a trace).
std::string make_manifest() {
    char manifest_tmpl[] = "/tmp/mhc-record-XXXXXX";
    int mfd = mkstemp(manifest_tmpl);
    if (mfd < 0) throw Error(std::string("cannot create a temporary file: ") + std::strerror(errno),
                             Error::Kind::Internal);
    close(mfd);
    return manifest_tmpl;
}

// The variables the CUDA driver and the recorder read (docs/recording.md), for the program to inherit.
void set_recorder_environment(const std::string& library, const fs::path& out, const std::string& manifest,
                              bool no_accesses, bool force, bool torch) {
    if (const char* prev = std::getenv("CUDA_INJECTION64_PATH"); prev && library != prev)
        mhc::say("mhc record: replacing CUDA_INJECTION64_PATH=%s\n", prev);
    setenv("CUDA_INJECTION64_PATH", library.c_str(), 1);
    setenv("MHC_RECORD_OUTPUT", out.c_str(), 1);
    setenv("MHC_RECORD_MANIFEST", manifest.c_str(), 1);
    // Every process this command starts is one job (unless its launcher names the job itself).
    char host[256] = "host";
    gethostname(host, sizeof host - 1);
    const std::string job = std::string("mhc-record:") + host + ":" + std::to_string(getpid()) + ":" +
                            std::to_string(static_cast<long long>(std::time(nullptr)));
    setenv("MHC_RECORD_JOB", job.c_str(), 1);
    setenv("MHC_RECORD_ACCESSES", no_accesses ? "0" : "1", 1);
    setenv("MHC_RECORD_FORCE", force ? "1" : "0", 1);
    point_nvtx_at_cupti(library);
    if (torch) set_torch_allocator();
}

struct Finished {
    int status = 0;       // waitpid's
    int exec_errno = 0;   // why the command never started (0: it ran)
};

// Runs the command and waits for it. Ctrl-C reaches the whole process group, the child
// included: it is waited for to write its trace instead of dying first; SIGTERM sent to us is
// passed on. The manifest is removed when the command cannot be started.
Finished run_command(const std::vector<std::string>& cmd, const std::string& manifest) {
    std::vector<char*> argv;
    argv.reserve(cmd.size() + 1);
    for (const auto& arg : cmd) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);

    // A close-on-exec pipe tells a command that never started (not found, not executable)
    // from one that ran: exec closes it, a failed exec writes its errno into it.
    int exec_pipe[2];
    if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
        unlink(manifest.c_str());
        throw Error(std::string("pipe: ") + std::strerror(errno), Error::Kind::Internal);
    }
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid < 0) {
        unlink(manifest.c_str());
        throw Error(std::string("fork: ") + std::strerror(errno), Error::Kind::Internal);
    }
    if (pid == 0) {
        // The process started here writes `output` itself; others get rank or pid names.
        close(exec_pipe[0]);
        setenv("MHC_RECORD_ROOT_PID", std::to_string(getpid()).c_str(), 1);
        execvp(argv[0], argv.data());
        int err = errno;
        ssize_t ignored = write(exec_pipe[1], &err, sizeof err);
        (void)ignored;
        _exit(err == ENOENT ? 127 : 126);
    }
    close(exec_pipe[1]);
    Finished finished;
    ssize_t got;
    while ((got = read(exec_pipe[0], &finished.exec_errno, sizeof finished.exec_errno)) < 0 && errno == EINTR) {}
    close(exec_pipe[0]);
    if (got != static_cast<ssize_t>(sizeof finished.exec_errno)) finished.exec_errno = 0;
    g_child = pid;
    struct sigaction ign {}, fwd {}, old_int {}, old_quit {}, old_term {};
    ign.sa_handler = SIG_IGN;
    fwd.sa_handler = forward_signal;
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    sigaction(SIGTERM, &fwd, &old_term);
    while (waitpid(pid, &finished.status, 0) < 0 && errno == EINTR) {}
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    g_child = -1;
    return finished;
}

// What was written and how the command ended; the exit status (the command's, or why no trace).
int report(const std::vector<std::string>& cmd, const std::vector<Written>& written, const Finished& finished) {
    for (const auto& trace : written)
        std::printf("mhc record: wrote %s (%s; %s)\n", trace.path.c_str(), trace.status.c_str(), trace.detail.c_str());
    if (finished.exec_errno != 0) {
        // The shell's statuses: 127 not found, 126 found but not runnable.
        mhc::say("mhc record: %s: %s; no trace written\n", cmd[0].c_str(),
                     finished.exec_errno == ENOENT ? "command not found" : std::strerror(finished.exec_errno));
        return finished.exec_errno == ENOENT ? 127 : 126;
    }
    // Without an NVIDIA device node no program initialises CUDA: say that, and the way to a trace
    // without a GPU, rather than "never initialised CUDA" of a program that tried.
    const bool gpu_node = fs::exists("/dev/nvidiactl") || fs::exists("/dev/nvidia0") || fs::exists("/dev/dxg");
    if (written.empty() && !gpu_node)
        std::printf("mhc record: no trace written: this machine has no NVIDIA GPU (no /dev/nvidia0)\n"
                    "mhc record: without a GPU, mhc-torch capture (docs/torch.md) or mhc generate writes a trace\n");
    else if (written.empty())
        std::printf("mhc record: no trace written: %s ran but never initialised CUDA, or the recorder "
                    "could not start (its messages, if any, are above)\n",
                    cmd[0].c_str());

    const int status = finished.status;
    int code;
    if (WIFEXITED(status)) {
        code = WEXITSTATUS(status);
        std::printf("mhc record: %s exited with status %d\n", cmd[0].c_str(), code);
    } else if (WIFSIGNALED(status)) {
        code = 128 + WTERMSIG(status);
        std::printf("mhc record: %s was ended by signal %d (%s)\n", cmd[0].c_str(),
                    WTERMSIG(status), strsignal(WTERMSIG(status)));
    } else {
        code = kExitInternal;
    }
    // A successful command that left no trace is not a successful recording.
    if (written.empty() && code == 0) {
        std::printf("mhc record: exit status %d: no trace\n", kExitNoTrace);
        return kExitNoTrace;
    }
    return code;
}

int run_record(const std::string& output, bool torch, bool no_accesses, bool force, const std::string& library_opt,
               const std::vector<std::string>& cmd) {
    if (cmd.empty()) throw Error("record: no command given (mhc record [options] -- CMD ...)", Error::Kind::BadInput);
    // The recorder's variables (docs/recording.md): the library names a value outside them and
    // records with the default, inside a program that may run for hours; here it is refused first.
    const record::EnvSettings env = record::settings_from_env(
        [](const char* name) { return std::getenv(name); },
        [](const std::string& problem, const std::string&) {
            throw Error(printable(problem) + " (docs/recording.md)", Error::Kind::BadInput);
        });
    // A variable the user set counts as its flag (MHC_RECORD_FORCE=1 as --force,
    // MHC_RECORD_ACCESSES=0 as --no-accesses): the command passes both on to the recorder, and
    // a value it overwrote would be a setting dropped in silence.
    force = force || env.replace;
    no_accesses = no_accesses || !env.accesses;
    const std::string library = check_output_and_find_library(output, force, library_opt);
    const fs::path out = fs::absolute(output);   // the program may change directory
    const std::string manifest = make_manifest();
    set_recorder_environment(library, out, manifest, no_accesses, force, torch);
    const Finished finished = run_command(cmd, manifest);
    const std::vector<Written> written = read_manifest(manifest);
    unlink(manifest.c_str());
    return report(cmd, written, finished);
}

std::function<int()> setup(CLI::App& sub) {
    struct Opts {
        std::string output = "run.db", library;
        bool torch = false, no_accesses = false, force = false;
        std::vector<std::string> cmd;
    };
    auto o = std::make_shared<Opts>();
    sub.add_option("-o,--output", o->output, "Trace file; other processes get .rankN / .pidN names")
        ->type_name("FILE")
        ->default_str(o->output);
    sub.add_flag("--force", o->force, "Replace existing trace files (and the runs stored in them)");
    sub.add_flag("--torch", o->torch,
                 "PyTorch: set PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync so tensors are "
                 "recorded one by one");
    sub.add_flag("--no-accesses", o->no_accesses,
                 "Do not infer accesses from kernel arguments (cheaper; coarser simulation)");
    sub.add_option("--library", o->library, "Path of libmhc_record.so; auto is $MHC_RECORD_LIBRARY, else beside mhc")
        ->type_name("FILE")
        ->default_str("auto");
    sub.add_option("command", o->cmd, "The program and its arguments, after --")->required();
    sub.footer("Exit status: the command's (128+N if it died of signal N; 127 not found, 126 not runnable); "
               "5 when it exited 0 but no trace was written; 2 for bad options or an existing output without --force.");
    return [o] { return run_record(o->output, o->torch, o->no_accesses, o->force, o->library, o->cmd); };
}

Registration reg{Command{"record", "Run a CUDA program under the CUPTI recorder and write its trace", setup}};

}  // namespace
}  // namespace mhc::cli
