#pragma once
// Simulated and replayed runs live in the trace file beside the trace (docs/design.md §2):
// tables runs, run_config, run_metrics, run_events, run_kernels, run_memory.
#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct sqlite3;

namespace mhc::trace {

// What happened to an allocation or a kernel during a simulated or replayed run.
enum class EventKind : uint8_t {
    SwapOut = 0,   // D2H copy of a dirty allocation; memory released at t_end
    SwapIn,        // H2D copy back before use (prefetch or on demand)
    EvictClean,    // eviction whose host copy was still valid: no transfer
    Drop,          // activation dropped, to be recomputed
    Recompute,     // recomputation of a dropped activation (its producer's duration)
    Stall,         // kernel waited for its operands; kernel = the waiting kernel
    Oom,           // the run stopped: bytes = bytes short
    Prefetch,      // a prefetch decision (the SwapIn that follows carries the transfer)
};
inline constexpr int kEventKindCount = 8;
std::string_view to_string(EventKind k);

// A run's kind and status. Stored as text in table runs (docs/trace-format.md) and printed as
// that text (to_string); the text is parsed once, where the store is read.
enum class RunKind : uint8_t { Simulated, Replayed };
enum class RunStatus : uint8_t {
    Complete,     // ran to the end
    Oom,          // stopped out of memory
    Incomplete,   // begun and not finished: interrupted, or stopped waiting for a rank out of memory
    Failed,       // did not run as planned (an invariant broken, a replay that failed)
};
std::string_view to_string(RunKind kind);
std::string_view to_string(RunStatus status);
// The kind or status a stored text names; any other text (a damaged or foreign file) throws
// mhc::Error naming `file` and the run.
RunKind run_kind_from(std::string_view text, const std::string& file, int64_t run);
RunStatus run_status_from(std::string_view text, const std::string& file, int64_t run);

struct RunEvent {
    EventKind kind = EventKind::Stall;
    int64_t t_start = 0;
    int64_t t_end = 0;
    int64_t allocation = 0;   // allocation id, 0 if none
    int64_t kernel = 0;       // kernel id, 0 if none
    int64_t bytes = 0;
};

struct RunKernelTime {
    int64_t kernel = 0;       // kernel id
    int64_t t_start = 0;
    int64_t t_end = 0;
};

struct RunMemorySample {
    int64_t t = 0;
    int64_t device_bytes = 0;  // resident + in-flight reservations
    int64_t host_bytes = 0;
};

// One run as it is written in one transaction.
struct Run {
    RunKind kind = RunKind::Simulated;
    std::string name;                 // e.g. "cost_aware+periodic@60%/pcie4"
    RunStatus status = RunStatus::Complete;
    int64_t base_run = 0;             // for a replay: the simulated run it executed
    std::map<std::string, std::string> config;
    std::map<std::string, double> metrics;
    std::vector<RunEvent> events;
    // Every kernel the run reached, at its time; a kernel without one was never reached (an OOM
    // run stopped before it). A run stored without its timeline (`--no-events`) has none.
    std::vector<RunKernelTime> kernel_times;
    std::vector<RunMemorySample> memory;
};

// The values a run metric may take, by its name (docs/trace-format.md, "Stored runs"): every
// reader of run_metrics (list_runs, load_run, so info, export, check and the viewer) refuses a
// value outside it. Names ending in _bytes, _ns or _seconds are amounts (0 or more), but
// capacity_bytes and host_capacity_bytes are capacities (-1: unlimited); the counts are listed in
// runs.cpp; every other metric (a loss, a reduction, an error) may take any sign.
enum class MetricDomain : uint8_t { Amount, Capacity, Count, Signed };
MetricDomain metric_domain(std::string_view key);

struct RunInfo {
    int64_t id = 0;
    RunKind kind = RunKind::Simulated;
    std::string name;
    RunStatus status = RunStatus::Complete;
    std::string created;
    int64_t base_run = 0;
    std::map<std::string, double> metrics;   // the run's key figures (run_metrics), no events
    std::map<std::string, std::string> config;   // its settings (run_config: eviction, prefetch, link, ...)
    // The fingerprint of the trace it was computed from (runs.trace_fingerprint; empty: stored by
    // an mhc before 2026-12-06, which did not record it).
    std::string trace_fingerprint;
    // Empty for a run of the trace as it is now; else the one line that refuses the run: it was
    // computed from other data (the trace's rows or meta changed after it was stored).
    std::string stale;
};

// The device a run simulated (its config's `device`, mhc simulate --device; -1 the host); nullopt
// when the run does not say (a replay, a run stored before the key was kept, a value not a number).
std::optional<int32_t> run_device(const RunInfo& run);
// How a device is named beside a run or a rank: "host" (-1), "GPU 1".
std::string device_name(int32_t device);
// A run's name with its device when that is not GPU 0, as `mhc info` and mhc-view list runs:
// "lru+none@70%/pcie4/caching (host)", "... (GPU 1)". Two runs of one setting on GPU 0 and on the
// host had the same name, in every list.
std::string run_name_with_device(const RunInfo& run);
// What is said in brackets after a run's name, in one pair: its device when not GPU 0 and `more`
// when not empty (" (host; out of memory, short by 8.75 MiB)", " (oom)"); empty when there is
// nothing to say. Two pairs side by side ("(host) (out of memory ...)") read as two names.
std::string run_name_notes(const RunInfo& run, const std::string& more = {});

// Where runs are stored. By default in the trace file itself. `runs_db` (when not empty and
// not the trace itself) names a separate SQLite file holding only the run tables and a meta
// table (format mhc-runs, the trace's absolute path and fingerprint): created on the first
// run stored, refused by every function here when it belongs to another trace. It lets runs
// be stored when the trace cannot be written (read-only file or medium), and keeps sets of
// runs apart. docs/trace-format.md, "Runs databases".
inline constexpr const char* kRunsFormatName = "mhc-runs";

// Adds runs in one transaction (all or none); returns their ids. Waits for other writers and
// readers (busy timeout), so concurrent processes each store every run, under distinct ids.
// `trace_fingerprint`: the trace's fingerprint when the runs were computed from it
// (TraceData::fingerprint); inside the storing transaction a trace that no longer has it (it was
// replaced meanwhile) is refused, so that a run is never stored in another trace than its own.
// Throws mhc::Error naming the file when the runs cannot be stored (read-only, locked past
// the timeout, disk full, not a trace, changed); the file is then as it was, with no journal left.
std::vector<int64_t> add_runs(const std::string& trace_path, const std::vector<Run>& runs,
                              const std::string& runs_db = "", const std::string& trace_fingerprint = "");
int64_t add_run(const std::string& trace_path, const Run& run, const std::string& runs_db = "",
                const std::string& trace_fingerprint = "");
// Marks a run begun earlier (status "incomplete") as finished: used by replays that write
// the run's row first, so that an interruption leaves a run marked incomplete.
int64_t begin_run(const std::string& trace_path, RunKind kind, const std::string& name,
                  const std::string& runs_db = "", const std::string& trace_fingerprint = "");
void finish_run(const std::string& trace_path, int64_t run_id, const Run& run,
                const std::string& runs_db = "", const std::string& trace_fingerprint = "");

// One rank's run of a coupled job, with the trace it was computed on and that trace's
// fingerprint when it was read.
struct JobRun {
    std::string trace;
    std::string fingerprint;
    Run run;
};
// Stores a job's runs whole: every rank's run or none. In the rank traces themselves, one
// transaction spans them all (SQLite commits attached databases together through a
// super-journal), so a job of more ranks than one transaction can span
// (max_job_files()) is refused; with `runs_db`, all of them go to that one file, which then
// belongs to the job (each run to its rank's trace). Throws mhc::Error as add_runs does.
std::vector<int64_t> add_job_runs(const std::vector<JobRun>& ranks, const std::string& runs_db = "");
// The most trace files whose runs one transaction can store together.
int max_job_files();

// About how many bytes storing `run` adds to a file: its rows with their index entries, at the
// sizes measured on files of stored runs (docs/trace-format.md, "How big runs are").
int64_t stored_size(const Run& run);

// A trace's runs (docs/trace-format.md, "Runs and their data"): those computed from the trace as
// it is now, and the stale ones, computed from other data (its rows or meta were changed after
// they were stored), which no reader shows as the trace's: `note` says so in one line (empty when
// none is stale).
struct RunList {
    std::vector<RunInfo> runs;
    std::vector<RunInfo> stale;
    std::string note;
};
// `figures`: false reads the runs' rows only (no metrics and config, so none of their values is
// refused), for a reader that copies the rows as they are (export --format csv).
RunList list_all_runs(const std::string& trace_path, const std::string& runs_db = "", bool figures = true);
// The runs of the trace as it is now (list_all_runs(...).runs).
std::vector<RunInfo> list_runs(const std::string& trace_path, const std::string& runs_db = "");
// The one line for a run id the file does not hold, in every command and the viewer: "t.db: run 9
// does not exist (2 runs in the file: mhc info t.db lists them)"; `runs_db` (when given) is the file.
std::string no_such_run(const std::string& trace_path, int64_t run_id, size_t runs, const std::string& runs_db = "");
// Loads one run whole. Throws mhc::Error naming the file when the id does not exist, or when the
// run is stale (RunInfo::stale: computed from other data than the trace holds now). A
// simulated run stored before runs kept every kernel's time (no `kernels_reached` metric: only
// kernels that moved were stored) gets its unmoved kernels back at their recorded times.
Run load_run(const std::string& trace_path, int64_t run_id, const std::string& runs_db = "");

// Deletes runs of the trace in one transaction (all or none; `mhc prune`): those of `ids`, or the
// stale ones (RunList::stale) when `ids` is empty. An id that is no run of the trace, or a set that
// takes a replay's simulated run (base_run) without the replay, is refused (mhc::Error naming the
// file) and nothing is deleted. Which runs are stale is decided under the write lock. Returns the
// runs deleted; with `dry_run`, those it would delete, and nothing is written.
std::vector<RunInfo> delete_runs(const std::string& trace_path, const std::vector<int64_t>& ids,
                                 const std::string& runs_db = "", bool dry_run = false);

// Before the work of a command that stores runs: the pages the store will read are sound, so
// that damage it would meet after the work (exit 4, the work's result lost) is refused before it
// (mhc::Error, bad input, naming the file and the damaged page). The store appends: it reads the
// schema, the last pages of each tree it writes (with `runs_db`, a runs database of this trace or
// a file that does not exist yet or is empty, every table of it; without, the trace's run tables)
// and the free-page list; so does this check, at a cost that does not grow with the file (SQLite's
// quick_check of every page took 1.8 s for a 236 MB runs database: bench/trace/runs_db_check.sh).
// Damage elsewhere (an older run's rows) costs no store: the command that reads those rows, and
// `mhc check`, which reads every page, find it.
void check_run_pages(const std::string& trace_path, const std::string& runs_db = "");

namespace runfiles {
struct RunReader;
}

// A runs database (--runs-db) open for reading beside its trace, checked to hold runs of it as
// list_runs checks, on a connection of its own: a lock on it is waited for, and said, under its
// own name (attached to the trace's connection, the wait would be said as the trace's). Its
// tables are those of schema "main" on handle().
class RunsDbReader {
public:
    RunsDbReader(const std::string& trace_path, const std::string& runs_db);
    ~RunsDbReader();
    RunsDbReader(const RunsDbReader&) = delete;
    RunsDbReader& operator=(const RunsDbReader&) = delete;
    sqlite3* handle() const;
    const std::string& path() const;

private:
    std::unique_ptr<runfiles::RunReader> reader_;
};

}  // namespace mhc::trace
