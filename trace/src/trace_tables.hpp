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

// What the rows give for the digest `stored` (meta content_digest as written): a "v1:" digest
// (traces written on 2026-12-05 before v2: every row in key order) or a "v2:" one (any other
// value: an order-free sum, content_digest.hpp); one scan of the rows of the content tables.
std::string content_digest_of(sqlite3* db, const std::string& file, const std::string& stored,
                              const std::string& schema = "main");

// Whether every digest trigger of trace/schema.sql is in the file as it made them: without them an
// edit leaves content_digest as written, so the digest no longer vouches for the rows.
bool digest_guarded(sqlite3* db, const std::string& file, const std::string& schema = "main");

// The meta rows as a trace's identity takes them: meta_rows, with a content_digest ("v1:"/"v2:")
// replaced by what the rows give when the file lacks its digest triggers (dropped, so a row could
// be changed without a trace): one scan of the content tables then, none while they are there.
// Every fingerprint that ties runs to a trace is computed from these (fingerprint_of).
std::map<std::string, std::string> identity_meta(sqlite3* db, const std::string& file,
                                                 const std::string& schema = "main");
std::string fingerprint_of(sqlite3* db, const std::string& file, const std::string& schema = "main");

}  // namespace mhc::trace
