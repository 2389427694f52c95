#pragma once
// The schema of a trace file, version kSchemaVersion. docs/trace-format.md explains it.
namespace mhc::trace::schema {

// Tables of the trace itself and of runs, without secondary indexes (bulk loads are faster
// with indexes built once at the end).
extern const char* const kTables;
// Lookup tables that give the integer codes their names, for people querying with sqlite3.
extern const char* const kLookups;
extern const char* const kIndexes;
// Tables a file must have to be read as a trace.
extern const char* const kRequiredTables[];

}  // namespace mhc::trace::schema
