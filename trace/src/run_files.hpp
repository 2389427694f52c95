#pragma once
// Where runs are written and read, and what ties each run to the trace it was computed on
// (docs/trace-format.md, "Durability and concurrency" and "Runs databases"). Private to trace/.
//
// A store is one SQLite connection and one transaction: into the traces themselves (the first
// trace opened, the others ATTACHed, so that SQLite's super-journal commits the runs of every
// trace together or none), or into one runs database. Inside that transaction each trace's
// fingerprint is compared with the one taken when it was read: a run computed on a trace that was
// replaced meanwhile is refused. A store that fails rolls back and leaves no journal behind.
#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mhc::trace {
class Reader;
}

namespace mhc::trace::runfiles {

// A trace whose runs are stored, and its fingerprint when the runs were computed from it
// (empty: taken now, nothing to compare).
struct Target {
    std::string trace;
    std::string fingerprint;
};

// Whether schema `schema` of `db` (main, or an attached file's) has table `name`.
bool has_table(sqlite3* db, const std::string& file, const char* name, const std::string& schema = "main");
// Whether that table has the column `column`.
bool has_column(sqlite3* db, const std::string& file, const char* table, const char* column,
                const std::string& schema = "main");
// The largest rowid of `schema`'s run_events (0 when empty): where a run's events start and end.
int64_t max_event_rowid(sqlite3* db, const std::string& path, const std::string& schema);

// Why runs cannot be stored in the run tables of schema `schema` of `db` (the file `file`), one
// sentence each naming the table and the column; empty when they can. The store writes the columns
// trace/schema.sql declares (its inserts name them): each must be there, and a column of the file's
// own may not need a value the store never gives (NOT NULL without a default). A table the file
// lacks is left to the store, which makes it (run_event_rows, a runs database's). `runs_db`: the
// file is a runs database (its traces and run_trace tables are written too).
std::vector<std::string> run_table_problems(sqlite3* db, const std::string& file, const std::string& schema,
                                            bool runs_db);

// The most trace files one transaction can span: the main database and SQLite's limit of
// attached ones (SQLITE_MAX_ATTACHED, 10 unless SQLite was built otherwise).
int max_files_per_transaction();

class RunWriter {
public:
    // Opens where the runs of `targets` go (the traces, or `runs_db` when it is not empty and
    // none of them) and begins one transaction. Throws mhc::Error naming the file: not a trace,
    // read-only, another trace's runs database, a fingerprint that no longer matches.
    RunWriter(const std::vector<Target>& targets, const std::string& runs_db);
    // Without commit(): rolled back, and a journal a failed write left is rolled back too.
    ~RunWriter();
    RunWriter(const RunWriter&) = delete;
    RunWriter& operator=(const RunWriter&) = delete;

    sqlite3* db() const { return db_; }
    // Where target i's runs go (for messages) and the schema that names its tables ("main" or
    // the alias its trace is attached as).
    const std::string& file(size_t i) const;
    const std::string& schema(size_t i) const;
    // The fingerprint of target i's trace inside the transaction (the one its runs were computed
    // from: runs.trace_fingerprint, which every reader compares with the trace's then).
    const std::string& print(size_t target) const;
    // Records that `run` belongs to target i (a runs database only; a trace's runs are its own).
    void claim(size_t i, int64_t run);
    // Commits; throws mhc::Error naming the file when one of them was renamed over or removed
    // meanwhile (before the commit: nothing written; after it: the rows went with the old file).
    void commit();
    // Rolls back and closes now. Returns an empty string, or a sentence saying which journal
    // could not be rolled back (the next command that can write the file will).
    std::string abort();

private:
    void open_traces(const std::vector<Target>& targets);
    void open_runs_db(const std::vector<Target>& targets, const std::string& runs_db);
    // The first file whose name no longer leads to the file this transaction writes, or "".
    std::string moved() const;
    sqlite3* db_ = nullptr;
    std::vector<std::string> files_;            // per target
    std::vector<std::string> schemas_;          // per target
    std::vector<int64_t> trace_ids_;            // per target: its row in a runs database's `traces`
    std::vector<std::string> prints_;           // per target: its trace's fingerprint
    std::vector<std::string> opened_;           // every file the transaction writes
    bool runs_db_ = false;
};

// A read connection on where a trace's runs are: the trace itself (through its Reader), or a
// runs database checked to hold runs of this trace.
struct RunReader {
    RunReader(const std::string& trace_path, const std::string& runs_db);
    ~RunReader();
    RunReader(const RunReader&) = delete;
    RunReader& operator=(const RunReader&) = delete;
    sqlite3* db() const;

    std::unique_ptr<Reader> trace;
    std::string file;                   // where the runs are
    // An SQL condition on `runs.id` that keeps this trace's runs ("1" when every run is).
    std::string runs_of_trace = "1";
    // The trace's fingerprint now (its meta and row counts, read on first use), and what selects a
    // run's recorded one ("NULL" in a file made before runs.trace_fingerprint).
    const std::string& print() const;
    std::string print_column = "NULL";
    // Why a run recorded as computed from the trace of fingerprint `stored` (empty: not recorded)
    // is not a run of the trace as it is now, as a predicate ("was computed from other data than
    // T.db holds now (...)"); empty when it is (docs/trace-format.md, "Runs and their data").
    std::string stale_reason(const std::string& stored) const;
    const std::string& trace_path() const { return trace_path_; }

private:
    sqlite3* own_ = nullptr;
    std::string trace_path_;
    mutable std::string print_;
    // A run without a recorded fingerprint counts as the trace's unless the trace's rows were
    // changed after it was written (meta content_digest 'edited:…', or a digest the rows no longer
    // give in a file without its digest triggers): this says which.
    mutable std::string edited_;
    // The content digest of a trace without its digest triggers, which print() compares with what
    // the rows give (empty: the triggers are there, or there is no digest).
    std::string unguarded_digest_;
};

// Rolls back the journal a failed or killed writer left beside `file` (a read by a connection
// that may write the file does it). Returns false when it could not.
bool roll_back_hot_journal(const std::string& file) noexcept;

}  // namespace mhc::trace::runfiles
