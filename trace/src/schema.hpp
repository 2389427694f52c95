#pragma once
// The schema of a trace file, version kSchemaVersion: the sections of trace/schema.sql (embedded at
// build time). docs/trace-format.md explains it.
namespace mhc::trace::schema {

// Tables of the trace itself, and of runs (in a trace, or alone in a runs database made by
// --runs-db), without secondary indexes (bulk loads are faster with indexes built at the end).
extern const char* const kTraceTables;
extern const char* const kRunTables;
// The tables only a runs database has: which traces (of a job) its runs belong to.
extern const char* const kRunsDbTables;
// Lookup tables that give the integer codes their names, for people querying with sqlite3.
extern const char* const kLookups;
extern const char* const kIndexes;      // of the trace tables
extern const char* const kRunIndexes;   // of the run tables
// Where each run's events lie in run_events (rowid ranges) and the triggers that keep it true;
// every statement is CREATE … IF NOT EXISTS, so it also runs on files made before it.
extern const char* const kRunEventRows;
// The triggers that mark a trace's content digest edited when a content table's row changes.
extern const char* const kContentDigestTriggers;
// Tables a file must have to be read as a trace.
extern const char* const kRequiredTables[];
// Tables a runs database must have.
extern const char* const kRunTableNames[];

}  // namespace mhc::trace::schema
