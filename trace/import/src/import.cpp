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
    TraceData t;
    bool in_memory = false;
    refuse_input_as_output(in, out);
    refuse_input_as_output(opt.kineto_path, out);
    Writer writer(out, opt.if_exists);   // refuses an existing output before reading the input
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
        require_ok(check_trace(t), in);
    });
    r.allocations = static_cast<int64_t>(t.allocations.size());
    r.kernels = static_cast<int64_t>(t.kernels.size());
    r.accesses = static_cast<int64_t>(t.accesses.size());
    r.copies = static_cast<int64_t>(t.copies.size());
    r.markers = static_cast<int64_t>(t.markers.size());
    return r;
}

}  // namespace mhc::trace::import
