#pragma once
// An Nsight Systems SQLite export being read (nsys.cpp, docs/import.md): the connection and the
// typed cells of its rows, and NsysImport, whose steps read one group of tables each:
// nsys_tables.cpp (which tables and columns the export has, its strings, time base and GPUs),
// nsys_memory.cpp (CUDA_GPU_MEMORY_USAGE_EVENTS), nsys_kernels.cpp (kernels, graph launches,
// copies and memsets), nsys_steps.cpp (NVTX ranges: steps and markers); nsys.cpp writes the meta.
#include <sqlite3.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "limits.hpp"
#include "mhc/common/error.hpp"
#include "mhc/trace/import/import.hpp"
#include "mhc/trace/import/rows.hpp"
#include "sqlite_input.hpp"
#include "sqlite_util.hpp"
#include "steps.hpp"

namespace mhc::trace::import::nsys {

struct Db {
    sqlite3* db = nullptr;
    std::string path;
    explicit Db(const std::string& file) : db(open_sqlite_input(file)), path(file) {}
    ~Db() { sqlite3_close(db); }
    std::set<std::string> columns(const std::string& table) const {
        std::set<std::string> out;
        sql::Stmt s(db, path, ("PRAGMA table_info(\"" + table + "\")").c_str());
        while (s.step()) out.insert(s.text(1));
        return out;
    }
    // Whether the table declares the column NOT NULL (PRAGMA table_info's notnull).
    bool not_null(const std::string& table, const std::string& column) const {
        sql::Stmt info(db, path, ("PRAGMA table_info(\"" + table + "\")").c_str());
        while (info.step())
            if (info.text(1) == column) return info.i64(3) != 0;
        return false;
    }
};

// "col" when the table has it, else the fallback expression.
inline std::string col(const std::set<std::string>& cols, const char* name, const char* fallback = "0") {
    return cols.count(name) ? std::string("\"") + name + "\"" : std::string(fallback);
}

// One integer cell of the current row, by the column's stored type (typeof): an INTEGER in
// [lo, hi], or NULL for an optional column (then `absent`). Text, REAL, BLOB, a NULL in a
// required column or an out-of-range value is bad input naming table, row and column (the
// rowid is the statement's last column). sqlite3_column_int64 would read all of them as 0.
struct Cells {
    const sql::Stmt& s;
    const std::string& file;
    const char* table;
    int rowid_col;
    int64_t get(int col, const char* name, int64_t lo, int64_t hi, bool required = true, int64_t absent = 0) const {
        int type = sqlite3_column_type(s.get(), col);
        if (type == SQLITE_NULL && !required) return absent;
        if (type != SQLITE_INTEGER) {
            const char* what = type == SQLITE_NULL ? "NULL" : type == SQLITE_TEXT ? "text" : type == SQLITE_FLOAT ? "a real number" : "a blob";
            throw Error(where_row(file, table, s.i64(rowid_col), std::string("column '") + name + "' is " + what + ", not an integer"));
        }
        int64_t v = s.i64(col);
        if (v < lo || v > hi)
            throw Error(where_row(file, table, s.i64(rowid_col),
                                  std::string("column '") + name + "' = " + std::to_string(v) + " is out of range"));
        return v;
    }
    // The row's interval [start, end]: an end before its start is a corrupt row, not a
    // zero-length event (it used to be clamped silently).
    std::pair<int64_t, int64_t> interval(int start_col, int end_col) const {
        const int64_t a = get(start_col, "start", -kMaxTime, kMaxTime);
        const int64_t b = get(end_col, "end", -kMaxTime, kMaxTime);
        if (b < a)
            throw Error(where_row(file, table, s.i64(rowid_col),
                                  "end " + std::to_string(b) + " is before start " + std::to_string(a)));
        return {a, b};
    }
};

// A kernel's or copy's device and stream: columns 2 and 3 of their queries, optional.
inline std::pair<int32_t, int64_t> device_and_stream(const Cells& cell) {
    return {static_cast<int32_t>(cell.get(2, "deviceId", -1, INT32_MAX, false)),
            cell.get(3, "streamId", INT64_MIN, INT64_MAX, false)};
}

// CUPTI_ACTIVITY_MEMCPY_KIND (cupti_activity.h): 0 unknown, 1 HtoD, 2 DtoH, 3 HtoA, 4 AtoH,
// 5 AtoA, 6 AtoD, 7 DtoA, 8 DtoD, 9 HtoH, 10 PtoP; nsys adds its unified-memory migrations
// (ENUM_CUDA_MEMCPY_OPER in its exports): 11 UVM HtoD, 12 UVM DtoH, 13 UVM DtoD. Other codes
// are refused as the row is read.
constexpr int64_t kMaxCuptiMemcpyKind = 13;

// Whole CUDA graph launches (nsys --cuda-graph-trace=graph): read_graph_launches.
constexpr const char* kGraphTrace = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE";
// Its rows with times: CUPTI writes start = end = 0 when it could not time a graph.
constexpr const char* kGraphTimed = " AND NOT (start = 0 AND end = 0)";
inline CopyKind copy_kind(int64_t k) {
    switch (k) {
        case 1: case 3: case 11: return CopyKind::H2D;   // HtoD, HtoA (a CUDA array is device memory), UVM HtoD
        case 2: case 4: case 12: return CopyKind::D2H;   // DtoH, AtoH, UVM DtoH
        case 10: return CopyKind::P2P;
        case 9: return CopyKind::H2H;
        default: return CopyKind::D2D;          // DtoD, AtoA, AtoD, DtoA, and unknown (0)
    }
}

// One nsys export being read: its tables, strings and time base, and the counts the meta
// reports. Each table is read by its own step into the trace's rows.
class NsysImport {
public:
    NsysImport(const std::string& in, Rows& w, Result& r) : in_(in), db_(in), w_(w), r_(r) {}

    void run() {
        find_tables();
        find_shared_devices();
        read_strings();
        find_base_time();
        read_gpu();
        read_allocations();
        find_steps();
        read_kernels();
        read_graph_launches();
        write_kernels();
        read_copies("CUPTI_ACTIVITY_KIND_MEMCPY");
        say_uvm_migrations();
        read_copies("CUPTI_ACTIVITY_KIND_MEMSET");
        say_launches_without_kernels();
        read_markers();
        write_meta();
    }

private:
    bool has(const char* table) const { return tables_.count(table) > 0; }

    // Throws naming the table when it lacks one of the columns the import cannot do without.
    std::set<std::string> columns(const std::string& table, std::initializer_list<const char*> needed) const;

    // The tables present (views refused), the export's versions, and which tables are missing.
    void find_tables();

    // Tables of GPU memory or GPU samples that the trace has no rows for, with their row counts, in
    // meta nsys.unread_tables and a warning: never left out in silence. CUDA memory pools'
    // reservations (cudaMallocAsync; the pools' allocations are CUDA_GPU_MEMORY_USAGE_EVENTS rows),
    // unified-memory page faults (the migrations are memcpy rows of kinds 11-13), Windows' video
    // memory manager's per-process usage and budget (WDDM: the driver's and context's reservations
    // too, not the allocations) and GPU metrics samples.
    void say_unread_tables();

    // META_DATA_CAPTURE (nsys 2023 and later): the options the recording ran with, per process
    // (PROCESS_0:COLLECT_CUDA_TRACE) or for the session. Only whether CUDA and its memory usage
    // were collected is kept: "true", "false", or empty when the export does not say.
    void read_capture();

    // Why an export holds none of the GPU tables, from what it recorded instead.
    std::string why_no_gpu_tables() const;

    // An export of several processes (nsys profile over a launcher: globalPid) numbers streams per
    // process, so two processes on one GPU can both have stream 7: their kernels would share one
    // lane and be clamped as overlaps. On such a GPU the second and later processes (by globalPid)
    // have their streams numbered k * 2^40 + streamId; said in meta nsys.processes and a warning.
    void find_shared_devices();

    // A kernel's or copy's device and stream (columns 2 and 3 of its query) and, on a GPU that
    // several processes used, its process's stream numbers (globalPid in column pid_col).
    std::pair<int32_t, int64_t> lane(const Cells& cell, int pid_col) const;

    void read_strings();

    std::string str(int64_t id) const;

    // Base time: the earliest start among the tables read.
    void find_base_time();

    // Times relative to the base; values whose difference does not fit in int64 are bad input.
    int64_t rel(int64_t time_ns, const char* table) const;

    // The GPU with the most memory: TARGET_INFO_GPU.totalMemory (nsys 2022 and later); exports of
    // nsys 2021 keep the size in TARGET_INFO_CUDA_GPU.globalMemorySize instead. The memory column
    // is named, never a literal: ORDER BY 0 is an SQL error, not an order.
    void read_gpu();

    int64_t add_block(int32_t device, int64_t address, int64_t bytes, int64_t t_alloc, int64_t t_free, int64_t label,
                      int64_t stream = 0);

    // The memKind values the export lists (ENUM_CUDA_MEM_KIND: 0 pageable, 1 pinned, 2 device, 3
    // array, 4 managed, 5 device static, 6 managed static, 7 unknown in nsys 2022 to 2026), or
    // those eight where it lists none; a memory event of another kind is read as the GPU's and said.
    std::set<int64_t> memory_kinds() const;

    // Allocations: alloc/free pairs by (device, process, address): an export of several processes
    // (globalPid) holds each one's own address space, where the same address can be live in two.
    // The trace has one address space per device, so the allocations of a device's processes after
    // the first one seen there are written with address 0 (unknown), counted in meta. A
    // stream-ordered allocation (cudaMallocAsync: streamId, nsys 2023 on) is on its stream, numbered
    // as the kernels of its process are (lane); cudaMalloc's rows have none (stream 0). Events the
    // export cannot have recorded as they are (an allocation at an address its process still holds,
    // a free of no size at an address never allocated) are counted and said (say_unpaired_memory).
    void read_allocations();
    void say_unpaired_memory(int64_t realloc_live, int64_t sizeless_frees);

    // Kernels, in the order of their starts; written by write_kernels with the graph launches.
    void read_kernels();

    // nsys --cuda-graph-trace=graph records a CUDA graph's launch as one row of
    // CUPTI_ACTIVITY_KIND_GRAPH_TRACE (the graph's start to its end on the launch's stream) and
    // none of the graph's kernels in CUPTI_ACTIVITY_KIND_KERNEL. Each such launch is one kernel
    // row named "CUDA graph G", so the stream's busy time is the file's; meta and a warning say
    // how many and that the graphs' own kernels are not in the file. A launch whose kernels are
    // in the kernel table too (the same correlation id: node-level tracing) is not counted twice.
    void read_graph_launches();

    // Kernels and graph launches by start, serial per stream (a start that overlaps the
    // previous one on its stream is clamped to its end).
    void write_kernels();

    // Memcpy rows of kinds 11-13 are unified memory's page migrations (cudaMallocManaged memory moved
    // by the driver on a page fault or a prefetch), not cudaMemcpy calls; CUPTI gives
    // them no stream (streamId 0). They are copies of the trace (H2D, D2H, D2D) on stream 0, as
    // before, and said: meta nsys.uvm_migrations and a warning, with their causes (migrationCause,
    // named by the export's ENUM_CUDA_UNIF_MEM_MIGRATION). Before 2026-12-05 they were read as the
    // program's copies without a word (cestwc/balinski-and-gomory-cuda's 2025.5 export: 49 of its
    // 56 memcpy rows).
    void say_uvm_migrations();

    void read_copies(const char* table);

    // Kernel launches (CUPTI_ACTIVITY_KIND_RUNTIME rows named cudaLaunchKernel_v7000, cuLaunchKernel,
    // cudaGraphLaunch_v10000, ...: kineto_map.hpp's launch_call_kind) that returned success and whose
    // correlationId no kernel, memcpy, memset or graph-launch row carries: none in an export whose
    // GPU activity was recorded whole (every export read here, 2026-12-05). Those made while a
    // stream capture of their process was open were captured into a graph, not run (said in meta);
    // the others ran and their rows are not in the file (said in meta and a warning), as a Kineto
    // trace's are (kineto.cpp, say_launches_without_kernels).
    void say_launches_without_kernels();

    // Steps (steps.hpp): NVTX ranges named ProfilerStep#N (torch.profiler under emit_nvtx appends
    // ", op_id = ..."), else the optimizer's step ranges (Optimizer.step#<Class>.step, recorded under
    // emit_nvtx or pushed by hand). A kernel is in the step its launch (the CUPTI runtime call of its
    // correlation id and process) fell in, else the step its start falls in (none where launched
    // before capture: kernel_step); read_markers writes
    // the step markers. Meta steps_from says where they came from. Before 2026-12-05 an nsys
    // export had no steps at all.
    void find_steps();
    // find_steps: several processes' ProfilerStep#N (`process`: each range's, globalTid >> 24).
    void join_process_steps(size_t processes, const std::vector<int64_t>& process);
    void process_optimizer_steps(const std::vector<NamedSpan>& spans, const std::vector<int64_t>& process);

    // Where the recording stopped (relative): the latest start or end in the tables read (kernels,
    // copies, memsets, memory events, runtime calls, NVTX rows, graph launches). Computed once.
    int64_t recording_end();

    int32_t kernel_step(const Kernel& kernel, int64_t global_pid);
    // The most by which the ranges of one step begin apart across process_steps_' processes.
    int64_t process_skew() const;

    // NVTX_EVENTS also holds rows that are no range or mark (ENUM_NSYS_EVENT_TYPE): domain
    // creation (75, 76), category and thread names (33, 39, 64, 72-74), CUDA object names (97-99).
    // Only marks and ranges are markers: 34 Mark, 35/37 Push/Start, 59 PushPop, 60 StartEnd, and
    // the NVTXT ones (65, 66, 68, 70, 71). Exports without eventType are read whole.
    // An optimizer range's work (steps.hpp): the CUDA runtime calls of its thread (globalTid) that
    // begin within it. Left unknown (-1) where a range has no thread or the export no runtime table.
    void optimizer_work(std::vector<NamedSpan>& spans, const std::vector<std::pair<size_t, int64_t>>& threads);

    // NVTX_EVENTS.end as SQL (`prefix`: a table alias and its dot). Exports of 2021 and before declared
    // every column NOT NULL and wrote a default value where a field had none (nsys's export
    // documentation of 2020 and 2021.5: "all fields are declared as NOT NULL, even where actual value
    // may be missing, instead default value for that field is exported"): a mark's end and a range's
    // never ended. There an end of 0 or less before its start is that default, read as the NULL later
    // exports write; counted in meta nsys.nvtx_default_ends. Elsewhere an end before its start is a
    // corrupt row, refused.
    std::string nvtx_end(const std::string& prefix) const;

    std::string nvtx_ranges_and_marks();

    void read_markers();

    void write_meta();

    const std::string& in_;
    Db db_;
    Rows& w_;
    Result& r_;
    std::set<std::string> tables_;
    std::vector<Kernel> kernels_;                     // read, not yet written (write_kernels)
    // (globalPid, correlationId) of the kernel rows read: CUPTI numbers correlations per process, so
    // in an export of several processes one id names one call in each (read_graph_launches).
    std::set<std::pair<int64_t, int64_t>> kernel_calls_;
    std::map<std::pair<int64_t, int64_t>, int64_t> stream_base_;   // (device, globalPid) -> added to its streams
    std::string cuda_traced_, memory_usage_traced_;   // META_DATA_CAPTURE: "true", "false" or unknown ("")
    std::string schema_version_ = "unknown";          // EXPORT_SCHEMA_VERSION, as meta nsys.schema_version
    std::string graph_mode_;   // META_DATA_CAPTURE CUDA_GRAPH_TRACE_OPTIONS:MODE: "Graph", "Node" or unknown ("")
    std::unordered_map<int64_t, std::string> strings_;
    int64_t base_ = INT64_MAX;
    int64_t events_ = 0, allocations_ = 0, reconstructed_ = 0, clamped_ = 0, copies_ = 0;
    int64_t clamp_largest_ns_ = 0, clamp_lost_ns_ = 0;
    std::vector<StepSpan> steps_, profiler_steps_;               // find_steps
    std::map<std::pair<int64_t, int64_t>, int64_t> launch_at_;   // (globalPid, correlationId) -> call start
    std::map<int64_t, int64_t> first_call_id_;   // globalPid -> its lowest runtime call's correlationId
    LaunchedBeforeRecording before_recording_;   // kernels launched before capture (kernel_step)
    bool steps_joined_ = false;   // several processes' ProfilerStep#N joined (join_process_steps)
    // Where several processes' steps were joined: each process's own (globalTid >> 24 -> by start),
    // which its kernels' steps are looked up in (kernel_step).
    std::map<int64_t, std::vector<StepSpan>> process_steps_;
    std::map<int64_t, int64_t> open_step_ends_;   // unended step-making NVTX range (rowid) -> its end (find_steps)
    std::optional<int64_t> recording_end_;
    std::string first_open_range_;   // the first NVTX range without an end, for the warning   // the clamped starts'
                                     // largest move, the kernel time taken off
};

}  // namespace mhc::trace::import::nsys
