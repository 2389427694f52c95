// import_file: run one importer into a temporary trace, check it, rename it into place.
#include "mhc/trace/import/import.hpp"

#include <unistd.h>

#include <filesystem>

#include "mhc/common/error.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/import/rows.hpp"
#include "mhc/trace/store.hpp"

namespace mhc::trace::import {

Result import_file(const std::string& in, const std::string& out, const Options& opt) {
    Result r;
    r.format = opt.format == Format::Auto ? detect_format(in) : opt.format;
    if (!opt.kineto_path.empty() && r.format != Format::ExecutionTrace)
        throw Error(where(in, "--kineto is only for execution traces (this is " +
                                  std::string(to_string(r.format)) + ")"));
    const std::string tmp = out + ".importing-" + std::to_string(getpid());
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    try {
        TraceData t;
        bool in_memory = false;
        {
            Writer writer(tmp);
            Rows w(writer);
            switch (r.format) {
                case Format::Snapshot: import_snapshot(in, w, r, opt.max_input_size); break;
                case Format::Kineto: import_kineto(in, w, r, opt.max_input_size); break;
                case Format::ExecutionTrace: import_et(in, opt.kineto_path, w, r, opt.max_input_size); break;
                case Format::Nsys: import_nsys(in, w, r, opt.warn); break;
                case Format::Auto: break;
            }
            r.meta["import.input"] = std::filesystem::path(in).filename().string();
            for (auto& [k, v] : r.meta) w.set_meta(k, v);
            writer.finish();
            in_memory = w.take(t);
        }
        if (in_memory) {
            // The check runs on the rows as written; the file must open as a trace and
            // hold that many rows (the Writer's own tests cover the values).
            TableCounts n = Reader(tmp).counts();
            if (n.allocations != static_cast<int64_t>(t.allocations.size()) ||
                n.kernels != static_cast<int64_t>(t.kernels.size()) || n.copies != static_cast<int64_t>(t.copies.size()) ||
                n.markers != static_cast<int64_t>(t.markers.size()) ||
                n.strings + 1 != static_cast<int64_t>(t.strings.size()) ||
                n.accesses != static_cast<int64_t>(t.accesses.size() + t.dangling_accesses.size()))
                throw Error(where(out, "the trace written holds other row counts than the rows imported"),
                            Error::Kind::Internal);
            t.path = tmp;
        } else {
            t = load_trace(tmp);
        }
        // Problems in the imported rows are problems of the input file.
        require_ok(check_trace(t), in);
        r.allocations = static_cast<int64_t>(t.allocations.size());
        r.kernels = static_cast<int64_t>(t.kernels.size());
        r.accesses = static_cast<int64_t>(t.accesses.size());
        r.copies = static_cast<int64_t>(t.copies.size());
        r.markers = static_cast<int64_t>(t.markers.size());
        std::filesystem::rename(tmp, out, ec);
        if (ec) throw Error(where(out, "cannot write: " + ec.message()), Error::Kind::Internal);
    } catch (const Error& e) {
        std::filesystem::remove(tmp, ec);
        // The temporary trace is an implementation detail: messages of the Writer and Reader
        // that name it (cannot create, disk full, ...) name the output the user asked for.
        std::string m = e.what();
        for (size_t p = 0; (p = m.find(tmp, p)) != std::string::npos; p += out.size()) m.replace(p, tmp.size(), out);
        throw Error(m, e.kind());
    } catch (...) {
        std::filesystem::remove(tmp, ec);
        throw;
    }
    return r;
}

}  // namespace mhc::trace::import
