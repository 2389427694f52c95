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

}  // namespace mhc::trace
