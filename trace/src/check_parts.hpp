#pragma once
// The parts of `mhc check` (mhc/trace/check.hpp) that its files share. check.cpp reads the file
// (its pages, value rules, runs and digest) and runs the others: check_rows.cpp holds a trace's
// rows to their rules, check_references.cpp the references between tables, check_meta.cpp the meta
// that readers parse and a model capture's own rules.
#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <string>

#include "mhc/trace/check.hpp"
#include "mhc/trace/store.hpp"

namespace mhc::trace::checks {

// A time in a problem's message: "<t> ns".
std::string exact_ns(int64_t time_ns);

// A meta value quoted in a problem: its first 40 bytes, a control byte shown as '?'.
std::string quoted(const std::string& value);

// Where references are judged: a connection, the file named in errors, the schema of the trace's
// tables ("" when they are in the same file, "tr." for a trace attached to its runs database) and
// which runs count ("" for all; else a condition on `run`, the runs of this trace).
struct Scope {
    sqlite3* db;
    std::string file;
    std::string trace_schema;
    std::string runs_filter;
};

// The references of the run tables, and what a base run must be: the simulated run a replay
// executed (a replay of itself, of another replay, or a simulated run with a base is no result
// mhc stores).
void check_run_references(const Scope& where, const std::function<bool(const char*)>& has_table, CheckReport& report);

// Every reference between the trace's own tables (check_references.cpp says which).
void check_references(const Reader& reader, CheckReport& report);

// The job meta of a rank's trace (docs/trace-format.md, "Multi-rank traces"), which a coupled
// run (`mhc simulate --ranks`) reads: rank and world_size are whole numbers >= 0, the rank below
// the world size, time_origin_ns a time in ns.
void check_job_meta(const TraceData& trace, CheckReport& report);

}  // namespace mhc::trace::checks
