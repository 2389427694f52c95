// mhc import FILE -o trace.db: PyTorch memory snapshots, Kineto JSON, execution traces
// (optionally joined with Kineto) and Nsight Systems SQLite exports (docs/import.md).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "command.hpp"
#include "trace_notes.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/message_line.hpp"
#include "mhc/common/units.hpp"
#include "mhc/common/wrap.hpp"
#include "mhc/trace/import/import.hpp"

namespace {

namespace imp = mhc::trace::import;

// An input that may wait for someone else before it gives a byte: a named pipe (mkfifo) waits
// for its writer to open it, a terminal for what is typed. Said on stderr before reading, so
// that a command that waits is not taken for one that hangs. Process substitution (<(cmd)) and
// a redirected stdin are pipes or files whose writer already runs: nothing is said.
void say_if_waiting(const std::string& path, const std::string& what) {
    struct stat st {};
    if (path.empty() || ::stat(path.c_str(), &st) != 0) return;
    if (S_ISCHR(st.st_mode)) {
        const bool stdin_name = path == "/dev/stdin" || path == "/dev/fd/0" || path == "/proc/self/fd/0";
        if (stdin_name && ::isatty(STDIN_FILENO))
            mhc::say("mhc: import: reading %s from the terminal until Ctrl-D\n", what.c_str());
        return;
    }
    if (!S_ISFIFO(st.st_mode)) return;
    // An anonymous pipe (/dev/fd/63 of <(cmd), a | into /dev/stdin) resolves to no path.
    char real[PATH_MAX];
    struct stat lst {};
    if (::realpath(path.c_str(), real) == nullptr || ::lstat(real, &lst) != 0 || !S_ISFIFO(lst.st_mode)) return;
    mhc::say(
                 "mhc: import: %s is a named pipe: reading it until its writer closes it (waiting for a "
                 "writer to open it)\n",
                 what.c_str());
}

// Whether `path` is a regular file that starts neither as gzip (0x1f 0x8b) nor as a zip ("PK\3\4": a
// torch.save archive) does: --max-input-size bounds the decompressed bytes of those, and what a pipe
// gives, nothing of such a file.
bool plain_file(const std::string& path) {
    struct stat st {};
    if (path.empty() || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
    std::FILE* file = std::fopen(path.c_str(), "rb");
    if (file == nullptr) return false;
    unsigned char magic[4] = {0, 0, 0, 0};
    const size_t got = std::fread(magic, 1, 4, file);
    std::fclose(file);
    const bool gzip = got >= 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    const bool zip = got == 4 && std::memcmp(magic, "PK\x03\x04", 4) == 0;
    return !gzip && !zip;
}

mhc::cli::Registration reg{mhc::cli::Command{
    "import", "Import a PyTorch memory snapshot, Kineto trace, execution trace or nsys SQLite export",
    [](CLI::App& app) -> std::function<int()> {
        auto in = std::make_shared<std::string>();
        auto out = std::make_shared<std::string>();
        auto format = std::make_shared<std::string>("auto");
        auto kineto = std::make_shared<std::string>();
        auto max_input = std::make_shared<std::string>(std::to_string(imp::kDefaultMaxInputSize >> 20) + "MiB");
        auto force = std::make_shared<bool>(false);
        // "-" is standard input, as for most tools (read through /dev/stdin: a pipe is copied first).
        // A directory passes here: the importer refuses it naming the profiler traces it holds.
        app.add_option("file", *in, "Input file (- for standard input)")
            ->required()
            ->check(CLI::Validator(
                [](std::string& path) { return path == "-" ? std::string() : CLI::ExistingPath(path); }, ""));
        app.add_option("-o,--output", *out, "Trace file to write (.db)")->required()->type_name("FILE");
        app.add_option("--format", *format, "Input format: snapshot, kineto, et, nsys, or auto (from the content)")
            ->check(mhc::cli::one_of({"auto", "snapshot", "kineto", "et", "nsys"}))
            ->type_name("FORMAT")
            ->default_str(*format);
        app.add_option("--kineto", *kineto, "Kineto trace of the same run (execution traces: timing)")
            ->check(CLI::ExistingPath)
            ->type_name("FILE");
        auto* max_input_option = app.add_option("--max-input-size", *max_input,
                       "Most decompressed bytes of a gzip input held at once (a snapshot, one ET node or "
                       "Kineto event), or of a torch.save archive's snapshot")
            ->type_name("SIZE")
            ->default_str(*max_input);
        app.add_flag("--force", *force, "Replace an existing output file (and the runs stored in it)");
        return [in, out, format, kineto, max_input, force, max_input_option] {
            imp::Options opt;
            opt.format = imp::format_from_string(*format);
            opt.kineto_path = *kineto;
            opt.max_input_size = static_cast<uint64_t>(
                mhc::cli::option_value("--max-input-size", [&] { return mhc::parse_size(*max_input, 1); }));
            opt.if_exists = *force ? mhc::IfExists::Replace : mhc::IfExists::Refuse;
            // The execution trace's Kineto trace is read twice, in place: a pipe would give nothing
            // the second time (<(cmd): "the document is empty") or wait forever for a writer (mkfifo).
            struct stat kst {};
            if (!kineto->empty() && ::stat(kineto->c_str(), &kst) == 0 && !S_ISREG(kst.st_mode) &&
                !S_ISDIR(kst.st_mode))   // a directory: the importer names the traces in it
                throw mhc::Error(*kineto +
                                 ": --kineto reads a regular file, not a pipe or device (it is read "
                                 "twice); save it to a file first");
            // "-" with no standard input at all (`<&-`, a daemon's closed descriptor 0) was said
            // as "/dev/stdin: no such file".
            if (*in == "-" && ::fcntl(STDIN_FILENO, F_GETFD) == -1 && errno == EBADF)
                throw mhc::Error("import -: standard input is closed; pipe the trace into mhc or name a file");
            // "-" is read as /dev/stdin, and said as "standard input" (its errors named /dev/stdin).
            const bool from_stdin = *in == "-";
            if (from_stdin) *in = "/dev/stdin";
            const std::string shown = from_stdin ? "standard input" : *in;
            const auto as_given = [&](std::string text) {
                if (!from_stdin) return text;
                for (size_t at = 0; (at = text.find("/dev/stdin", at)) != std::string::npos; at += shown.size())
                    text.replace(at, 10, shown);
                return text;
            };
            // Not when the output is refused without reading (one line, as for any refusal).
            // -q leaves it out, as it does the note of a locked trace's wait.
            if (!mhc::cli::quiet() && (*force || !std::filesystem::exists(*out)))
                say_if_waiting(*in, from_stdin ? shown : "the input " + *in);
            // The input decides whether the bound did anything: said (after the import, so that a refusal
            // stays one line), not refused.
            const bool unbounded =
                max_input_option->count() > 0 && plain_file(*in) && (kineto->empty() || plain_file(*kineto));
            imp::Result result;
            try {
                result = imp::import_file(*in, *out, opt);
            } catch (const mhc::Error& e) {
                if (!from_stdin) throw;
                throw mhc::Error(as_given(e.what()), e.kind());
            }
            if (unbounded)
                mhc::say(
                             "mhc: warning: --max-input-size had no effect: %s is not gzip-compressed (it bounds a "
                             "gzip input's decompressed bytes, and a pipe's)\n",
                             mhc::printable(shown).c_str());
            std::printf(
                "%s: %s, %lld input event%s -> %lld allocations, %lld kernels, %lld accesses, "
                "%lld copies, %lld markers\n",
                mhc::printable(*out).c_str(), std::string(imp::to_string(result.format)).c_str(),
                static_cast<long long>(result.events), result.events == 1 ? "" : "s",
                static_cast<long long>(result.allocations), static_cast<long long>(result.kernels),
                static_cast<long long>(result.accesses), static_cast<long long>(result.copies),
                static_cast<long long>(result.markers));
            // What the trace is and lacks, as `mhc info` says it later (an ET's join with its Kineto trace).
            // Under a label column, wrapped within 100 columns as mhc info's lines are.
            const auto note_line = [](std::string label, const std::string& value) {
                label.resize(11, ' ');
                std::printf("  %s %s", label.c_str(), mhc::wrap(value, 100, 14, 14).substr(14).c_str());
            };
            for (const auto& note : mhc::cli::trace_notes(result.meta)) note_line(note.label, note.value);
            // Where a Kineto trace's Total Allocated and the imported curve disagree: one line per device.
            for (const auto& [k, v] : result.meta)
                if ((k.rfind("kineto.total_allocated.", 0) == 0 && v.rfind("agrees", 0) != 0) ||
                    k == "kineto.negative_durations")
                    note_line("warning", mhc::printable(v));
            return mhc::cli::kExitOk;
        };
    }}};

}  // namespace
