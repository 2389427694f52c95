#pragma once
// What a trace's fingerprint is computed from (fingerprint(), store.hpp), read from a connection:
// by the Reader, and by the run store inside its storing transaction (run_files.cpp).
#include <sqlite3.h>

#include <map>
#include <string>

#include "mhc/trace/store.hpp"

namespace mhc::trace {

// The meta rows and the row counts of the trace whose tables `schema` names on `db` ("main", or
// the name an attached trace has); `file` names the file in errors.
std::map<std::string, std::string> meta_rows(sqlite3* db, const std::string& file, const std::string& schema);
TableCounts table_counts(sqlite3* db, const std::string& file, const std::string& schema);

// The trace's content identity (docs/trace-format.md, "Content digest"): meta `content_digest`,
// written by the Writer when it closes a trace, so that the fingerprint (meta and row counts)
// changes with any row a run depends on, not only with the counts.
inline constexpr const char* kContentDigestKey = "content_digest";
// What the digest triggers (trace/schema.sql, content_digest_triggers) write into it when a row of a content table is inserted, changed or
// deleted after the trace was written (by sqlite3, pandas, anything): this prefix and a random
// value, so every edit gives the trace a new identity.
inline constexpr const char* kEditedDigestPrefix = "edited:";

// A digest ("v1:" and 32 hex digits) of every row of the trace's content tables (strings,
// allocations, kernels, accesses, copies, markers, segments, modules, kernel_info,
// saved_tensors), each in its primary key's order, each value with its type; one scan of the rows.
std::string content_digest(sqlite3* db, const std::string& file, const std::string& schema = "main");

}  // namespace mhc::trace
