#pragma once
// Trace validation (`mhc check`, and the same rules run by importers and the simulator).
#include <cstdint>
#include <string>
#include <vector>

#include "mhc/trace/columns.hpp"

namespace mhc::trace {

struct Problem {
    std::string rule;     // short rule name, e.g. "free-before-alloc"
    std::string table;    // table the row is in ("file" for file-level problems)
    int64_t row = 0;      // row id (allocation id, kernel id, access rowid, ...), 0 for file
    std::string message;  // a plain sentence
};

struct CheckReport {
    std::vector<Problem> problems;
    bool ok() const { return problems.empty(); }
};

// Checks a loaded trace: every rule of docs/trace-format.md except file-level ones.
CheckReport check_trace(const TraceData& t);
// The rules a model capture keeps (`mhc advise` plans on them; check_file runs them): the
// capture.* meta advise reads are well formed and name rows that exist (rule `meta`, table
// "meta", the key first in the message); and where the trace has modules (mhc-torch capture),
// its kernels run one after another on each device (`capture-overlap`) and each has a
// kernel_info row (`kernel-info`). Opens trace.path for the capture tables (none when it is empty).
CheckReport check_capture(const TraceData& trace);
// The rows (dense indices, ascending) of allocations that lie in no segment of their device
// alive when they were made (rule `outside-segment`; devices without segments are not
// judged). Importers that drop an inconsistent segments table ask it before writing one.
std::vector<size_t> allocations_outside_segments(const TraceData& t);
// The same over these allocations and segments (mhc allocator's `blocks_outside_segments`).
std::vector<size_t> allocations_outside_segments(const AllocationColumns& allocs, const std::vector<Segment>& segments);

// Checks a file: opens it (file-level problems: missing, not SQLite, truncated, corrupt,
// wrong version, missing tables, invalid codes), then loads it and runs check_trace.
// Never throws for problems in the file; they become Problems. SQLite's quick_check reads
// every page; with `full`, its integrity_check also matches every index with its table.
// Throws mhc::Error when the file stays locked by another process past the busy timeout (the
// file is not at fault) or MHC_BUSY_TIMEOUT_MS is malformed.
CheckReport check_file(const std::string& path, bool full = false);

// Checks a runs database (`--runs-db FILE`) against the trace it must belong to: the trace's
// fingerprint is one of its traces' (else one problem of rule "file": another trace's runs, or no
// runs database), every run of the trace loads, and the run rows of the trace's runs refer to its
// kernels and allocations and to runs that exist (as check_file's run checks); rows of runs that
// have no runs row, and runs whose run_trace names no trace of the database, are problems too.
CheckReport check_runs_db(const std::string& trace, const std::string& runs_db);

// Throws mhc::Error naming the file and the first problem (with the count of others) when
// the report is not ok: what importers and the simulator do with bad input.
void require_ok(const CheckReport& report, const std::string& path);

// load_trace (whose Reader applies the value rules) followed by check_trace: what a command
// that computes on a trace calls, so that none computes on a trace `mhc check` rejects.
TraceData load_checked_trace(const std::string& path);

}  // namespace mhc::trace
