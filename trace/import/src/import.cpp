// import_file: run one importer into a temporary trace, check it, rename it into place.
#include "mhc/trace/import/import.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "mhc/common/error.hpp"
#include "mhc/common/message_line.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/import/rows.hpp"
#include "mhc/trace/store.hpp"
#include "limits.hpp"
#include "source.hpp"

namespace mhc::trace::import {

namespace {

// A pipe or a device (`mhc import <(zcat t.json.gz)`, /dev/stdin): format detection reads its
// head and the importers open it again (and Nsight Systems' SQLite needs random access), so it
// is first copied into a private temporary file, at most max_input_size bytes, and imported
// from there under the user's name. Regular files are read in place.
class Spool {
public:
    Spool(const std::string& in, uint64_t limit) {
        struct stat st {};
        if (in.empty() || ::stat(in.c_str(), &st) != 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) return;
        const int src = ::open(in.c_str(), O_RDONLY | O_CLOEXEC);
        if (src < 0) throw Error(where(in, std::string("cannot open: ") + std::strerror(errno)));
        // Named with our pid and removed on SIGINT/SIGTERM/SIGHUP, or by the next import after a SIGKILL.
        std::unique_ptr<TempFile> copy;
        try {
            copy = std::make_unique<TempFile>("import");
        } catch (const Error& e) {
            ::close(src);
            throw Error(std::string(e.what()) + " (for a copy of " + in + ", which is not a regular file)");
        }
        const int dst = copy->fd();
        const std::string& path = copy->path();
        std::string err;
        uint64_t total = 0;
        std::vector<char> buf(1 << 16);
        for (;;) {
            ssize_t n = ::read(src, buf.data(), buf.size());
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) { err = where(in, std::string("read failed: ") + std::strerror(errno)); break; }
            if (n == 0) break;
            total += static_cast<uint64_t>(n);
            if (total > limit) {
                err = where(in, "not a regular file, and reads past " + human_bytes(limit) + "; raise with --max-input-size");
                break;
            }
            for (ssize_t off = 0; off < n;) {
                ssize_t w = ::write(dst, buf.data() + off, static_cast<size_t>(n - off));
                if (w < 0 && errno == EINTR) continue;
                if (w < 0) { err = where(path, std::string("cannot write the temporary copy of the input: ") + std::strerror(errno)); break; }
                off += w;
            }
            if (!err.empty()) break;
        }
        ::close(src);
        if (!copy->close() && err.empty()) err = where(path, "cannot write the temporary copy of the input");
        if (!err.empty()) throw Error(err);   // the copy is removed with `copy`
        copy_ = std::move(copy);
    }
    Spool(const Spool&) = delete;
    Spool& operator=(const Spool&) = delete;
    // The path to read: the copy, or the input itself.
    const std::string& read_path(const std::string& in) const { return copy_ ? copy_->path() : in; }
    // An error about the copy is an error about the input: the copy's name becomes the user's.
    [[noreturn]] void rethrow(const Error& e, const std::string& in) const {
        std::string m = e.what();
        const std::string path = copy_ ? copy_->path() : std::string();
        for (size_t at; !path.empty() && (at = m.find(path)) != std::string::npos;) m.replace(at, path.size(), in);
        throw Error(m, e.kind());
    }
    bool active() const { return copy_ != nullptr; }

private:
    std::unique_ptr<TempFile> copy_;
};

}  // namespace

static Result import_regular(const std::string& in, const std::string& shown, const std::string& out, const Options& opt);

Result import_file(const std::string& in, const std::string& out, const Options& opt) {
    refuse_input_as_output(in, out);
    refuse_input_as_output(opt.kineto_path, out);
    refuse_directory(in);   // also under --format, which skips detection
    refuse_directory(opt.kineto_path);
    // An output that may not be replaced is refused before a pipe is read (as for a file).
    if (opt.if_exists == IfExists::Refuse && std::filesystem::exists(out)) Writer refuse(out, opt.if_exists);
    Spool spool(in, opt.max_input_size);
    if (!spool.active()) return import_regular(in, in, out, opt);
    try {
        return import_regular(spool.read_path(in), in, out, opt);
    } catch (const Error& e) {
        spool.rethrow(e, in);
    }
}

// `in` is read; `shown` is the input's name in errors, in the meta and for the trace's check.
static Result import_regular(const std::string& in, const std::string& shown, const std::string& out, const Options& opt) {
    Result r;
    refuse_nvidia_file(in);   // also under --format, which skips detection
    refuse_nvidia_file(opt.kineto_path);
    r.format = opt.format == Format::Auto ? detect_format(in) : opt.format;
    if (!opt.kineto_path.empty() && r.format != Format::ExecutionTrace)
        throw Error(where(in, "--kineto is only for execution traces (this is " +
                                  std::string(to_string(r.format)) + ")"));
    TraceData t;
    bool in_memory = false;
    Writer writer(out, opt.if_exists);   // refuses an existing output before reading the input
    Rows w(writer);
    switch (r.format) {
        case Format::Snapshot: import_snapshot(in, w, r, opt.max_input_size); break;
        case Format::Kineto: import_kineto(in, w, r, opt.max_input_size, opt.parse_threads); break;
        case Format::ExecutionTrace: import_et(in, opt.kineto_path, w, r, opt.max_input_size); break;
        case Format::Nsys: import_nsys(in, w, r); break;
        case Format::Auto: break;
    }
    std::vector<std::string> said = r.warnings;
    if (auto it = r.meta.find("nsys.missing_tables"); it != r.meta.end())
        said.insert(said.begin(), "missing tables " + it->second + " (imported without them)");
    r.meta["import.input"] = std::filesystem::path(shown).filename().string();
    // Named as the user gave it (a pipe's private copy is not the user's file).
    if (opt.warn)
        for (const auto& warning : said) mhc::say("mhc: warning: %s: %s\n", shown.c_str(), warning.c_str());
    // Kept with the trace, one per line: `mhc info` says them long after the import's stderr is gone.
    if (!said.empty()) {
        std::string kept;
        for (const auto& warning : said) {
            std::string line = warning;
            std::replace(line.begin(), line.end(), '\n', ' ');
            kept += (kept.empty() ? "" : "\n") + line;
        }
        r.meta["import.warnings"] = kept;
    }
    for (auto& [k, v] : r.meta) w.set_meta(k, v);
    // Checked on the complete temporary file, which only then becomes `out`; errors name `out`.
    writer.finish([&](const std::string& tmp) {
        in_memory = w.take(t);
        if (in_memory) {
            // The check runs on the rows as written; the file must open as a trace and
            // hold that many rows (the Writer's own tests cover the values).
            TableCounts n = Reader(tmp, out).counts();
            if (n.allocations != static_cast<int64_t>(t.allocations.size()) ||
                n.kernels != static_cast<int64_t>(t.kernels.size()) || n.copies != static_cast<int64_t>(t.copies.size()) ||
                n.markers != static_cast<int64_t>(t.markers.size()) ||
                n.strings + 1 != static_cast<int64_t>(t.strings.size()) ||
                n.accesses != static_cast<int64_t>(t.accesses.size() + t.dangling_accesses.size()))
                throw Error(where(out, "the trace written holds other row counts than the rows imported"),
                            Error::Kind::Internal);
            t.path = out;
        } else {
            t = load_trace(tmp, out);
        }
        // Problems in the imported rows are problems of the input file.
        require_ok(check_trace(t), shown);
    });
    r.allocations = static_cast<int64_t>(t.allocations.size());
    r.kernels = static_cast<int64_t>(t.kernels.size());
    r.accesses = static_cast<int64_t>(t.accesses.size());
    r.copies = static_cast<int64_t>(t.copies.size());
    r.markers = static_cast<int64_t>(t.markers.size());
    return r;
}

}  // namespace mhc::trace::import
