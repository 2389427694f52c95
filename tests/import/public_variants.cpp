// Helpers of the tests of real public traces and their variants (public_variants.hpp).
#include "public_variants.hpp"

#include <algorithm>

#include <catch2/catch.hpp>
#include <sqlite3.h>

#include "mhc/common/error.hpp"
#include "mhc/trace/check.hpp"

namespace imp = mhc::trace::import;
using mhc::trace::TraceData;

namespace test {

TraceData import_public_path(const TempDir& dir, const std::string& path, imp::Result& result, const std::string& db) {
    imp::Options opt;
    opt.warn = false;
    const std::string out = dir.file(db);
    result = imp::import_file(path, out, opt);
    TraceData trace = mhc::trace::load_trace(out);
    REQUIRE(mhc::trace::check_trace(trace).ok());
    return trace;
}

TraceData import_public(const TempDir& dir, const std::string& name, imp::Result& result) {
    return import_public_path(dir, pub(name), result, "t.db");
}

bool warned(const imp::Result& result, const std::string& text) {
    return std::any_of(result.warnings.begin(), result.warnings.end(),
                       [&](const std::string& warning) { return warning.find(text) != std::string::npos; });
}

// A copy of a public file at `path` changed by the SQL `change` (a variant a test needs).
void public_variant(const std::string& name, const std::string& path, const std::string& change) {
    write_file(path, read_file(pub(name)));
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    char* msg = nullptr;
    const int rc = sqlite3_exec(db, change.c_str(), nullptr, nullptr, &msg);
    INFO((msg ? msg : ""));
    sqlite3_free(msg);
    sqlite3_close(db);
    REQUIRE(rc == SQLITE_OK);
}

TraceData import_variant(const TempDir& dir, const std::string& name, const std::string& change, imp::Result& result) {
    const std::string path = dir.file("variant-" + name.substr(name.rfind('/') + 1));
    public_variant(name, path, change);
    return import_public_path(dir, path, result);
}

bool unsaid(const TempDir& dir, const std::string& name, const std::string& key) {
    imp::Result result;
    return import_public(dir, name, result).meta.count(key) == 0;
}

std::string variant_error(const TempDir& dir, const std::string& name, const std::string& change) {
    const std::string path = dir.file("variant-" + name.substr(name.rfind('/') + 1));
    public_variant(name, path, change);
    return import_error(dir, path);
}

std::string import_error(const TempDir& dir, const std::string& in) {
    imp::Options opt;
    opt.warn = false;
    try {
        imp::import_file(in, dir.file("refused.db"), opt);
    } catch (const mhc::Error& e) { return e.what(); }
    return "";
}

Steps kernels_per_step(const TraceData& trace) {
    Steps steps;
    for (int32_t step : trace.kernels.step) ++steps[step];
    return steps;
}

int64_t kernel_time(const TraceData& trace) {
    int64_t ns = 0;
    for (size_t i = 0; i < trace.kernels.size(); ++i) ns += trace.kernels.t_end[i] - trace.kernels.t_start[i];
    return ns;
}

}  // namespace test
