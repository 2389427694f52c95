// Nsight Systems SQLite export (`nsys export --type sqlite`) -> trace. Tables and columns
// differ between versions: both are looked up in sqlite_master / pragma table_info, what
// exists is used and what is missing is written to meta (and warned about on stderr).
#include <sqlite3.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kineto_map.hpp"
#include "limits.hpp"
#include "quoted_name.hpp"
#include "mhc/common/error.hpp"
#include "mhc/trace/import/import.hpp"
#include "mhc/trace/import/rows.hpp"
#include "sqlite_util.hpp"
#include "steps.hpp"

namespace mhc::trace::import {

namespace {

struct Db {
    sqlite3* db = nullptr;
    std::string path;
    explicit Db(const std::string& p) : path(p) {
        if (sqlite3_open_v2(p.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
            std::string m = db ? sqlite3_errmsg(db) : "cannot open";
            sqlite3_close(db);
            throw Error(where(p, "cannot open as SQLite: " + m));
        }
    }
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
std::string col(const std::set<std::string>& cols, const char* name, const char* fallback = "0") {
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
std::pair<int32_t, int64_t> device_and_stream(const Cells& cell) {
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
CopyKind copy_kind(int64_t k) {
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
    std::set<std::string> columns(const std::string& t, std::initializer_list<const char*> needed) const {
        std::set<std::string> cols = db_.columns(t);
        for (const char* n : needed)
            if (!cols.count(n)) throw Error(where(in_, "table " + t + " has no column '" + n + "' (unknown nsys version)"));
        return cols;
    }

    // The tables present (views refused), the export's versions, and which tables are missing.
    void find_tables() {
        std::set<std::string> views;
        {
            sql::Stmt s(db_.db, in_, "SELECT name, type FROM sqlite_master WHERE type IN ('table','view')");
            while (s.step()) (s.text(1) == "view" ? views : tables_).insert(s.text(0));
        }
        // What nsys writes are tables; a view of the same name computes rows nsys never recorded.
        for (const char* t : {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                              "CUDA_GPU_MEMORY_USAGE_EVENTS", "NVTX_EVENTS", "StringIds", "TARGET_INFO_GPU",
                              "EXPORT_META_DATA", "META_DATA_EXPORT", kGraphTrace})
            if (views.count(t)) throw Error(where(in_, std::string(t) + " is a view, not a table: not an nsys export"));
        std::string missing;
        for (const char* t : {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                              "CUDA_GPU_MEMORY_USAGE_EVENTS", "NVTX_EVENTS", "StringIds", "TARGET_INFO_GPU"})
            if (!has(t)) missing += (missing.empty() ? "" : ",") + std::string(t);
        std::string version = "unknown";
        // nsys 2022 names the table EXPORT_META_DATA, nsys 2024.5 META_DATA_EXPORT (the same rows).
        for (const char* table : {"EXPORT_META_DATA", "META_DATA_EXPORT"}) {
            if (!has(table)) continue;
            sql::Stmt rows(db_.db, in_, ("SELECT name, value FROM " + std::string(table)).c_str());
            while (rows.step()) {
                std::string key = rows.text(0);
                if (key == "EXPORT_PRODUCT_VERSION") r_.meta["nsys.version"] = rows.text(1);
                if (key == "EXPORT_SCHEMA_VERSION") version = rows.text(1);
            }
        }
        r_.meta["nsys.schema_version"] = version;
        schema_version_ = version;
        read_capture();
        if (!has("CUPTI_ACTIVITY_KIND_KERNEL") && !has("CUPTI_ACTIVITY_KIND_MEMCPY") &&
            !has("CUPTI_ACTIVITY_KIND_MEMSET") && !has("CUDA_GPU_MEMORY_USAGE_EVENTS") && !has(kGraphTrace))
            throw Error(where(in_, "Nsight Systems export (schema " + version +
                                       ") has none of the tables mhc reads (CUPTI_ACTIVITY_KIND_KERNEL, "
                                       "_MEMCPY, _MEMSET, _GRAPH_TRACE, CUDA_GPU_MEMORY_USAGE_EVENTS): " +
                                       why_no_gpu_tables()));
        say_unread_tables();
        if (!missing.empty()) {
            r_.meta["nsys.missing_tables"] = missing;
            r_.meta["missing"] = "nsys tables " + missing;   // import_file says so, naming the input as given
        }
    }

    // Tables of GPU memory or GPU samples that the trace has no rows for, with their row counts, in
    // meta nsys.unread_tables and a warning: never left out in silence. CUDA memory pools'
    // reservations (cudaMallocAsync; the pools' allocations are CUDA_GPU_MEMORY_USAGE_EVENTS rows),
    // unified-memory page faults (the migrations are memcpy rows of kinds 11-13), Windows' video
    // memory manager's per-process usage and budget (WDDM: the driver's and context's reservations
    // too, not the allocations) and GPU metrics samples.
    void say_unread_tables() {
        std::string unread;
        for (const char* table :
             {"CUDA_GPU_MEMORY_POOL_EVENTS", "CUDA_UM_GPU_PAGE_FAULT_EVENTS", "CUDA_UM_CPU_PAGE_FAULT_EVENTS",
              "GPU_MEMORY_USAGE_EVENTS", "GPU_MEMORY_BUDGET_EVENTS", "GPU_METRICS"}) {
            if (!has(table)) continue;
            sql::Stmt count(db_.db, in_, (std::string("SELECT COUNT(*) FROM \"") + table + "\"").c_str());
            const int64_t rows = count.step() ? count.i64(0) : 0;
            if (rows > 0) unread += (unread.empty() ? "" : ", ") + std::string(table) + " " + std::to_string(rows);
        }
        if (unread.empty()) return;
        r_.meta["nsys.unread_tables"] = unread;
        r_.warnings.push_back("rows of tables mhc does not read were left out (" + unread +
                              "): memory pools' reservations, unified-memory page faults, Windows' per-process video "
                              "memory and GPU metrics have no rows in a trace; allocations are "
                              "CUDA_GPU_MEMORY_USAGE_EVENTS'");
    }

    // META_DATA_CAPTURE (nsys 2023 and later): the options the recording ran with, per process
    // (PROCESS_0:COLLECT_CUDA_TRACE) or for the session. Only whether CUDA and its memory usage
    // were collected is kept: "true", "false", or empty when the export does not say.
    void read_capture() {
        if (!has("META_DATA_CAPTURE")) return;
        const std::set<std::string> cols = db_.columns("META_DATA_CAPTURE");
        if (!cols.count("name") || !cols.count("value")) return;
        sql::Stmt rows(db_.db, in_, "SELECT name, value FROM META_DATA_CAPTURE");
        auto merge = [](std::string& into, const std::string& value) {   // any process with it on: on
            if (value == "true" || value == "false") into = into == "true" ? into : value;
        };
        while (rows.step()) {
            if (rows.is_null(0) || rows.is_null(1)) continue;
            const std::string key = rows.text(0);
            const std::string option = key.substr(key.rfind(':') == std::string::npos ? 0 : key.rfind(':') + 1);
            if (option == "COLLECT_CUDA_TRACE") merge(cuda_traced_, rows.text(1));
            if (option == "COLLECT_GPU_MEMORY_USAGE") merge(memory_usage_traced_, rows.text(1));
            if (option == "MODE" && key.find("CUDA_GRAPH_TRACE_OPTIONS") != std::string::npos && graph_mode_.empty())
                graph_mode_ = rows.text(1).substr(0, 40);   // Graph or Node (--cuda-graph-trace)
        }
    }

    // Why an export holds none of the GPU tables, from what it recorded instead.
    std::string why_no_gpu_tables() const {
        if (cuda_traced_ == "false")
            return "CUDA was not traced (META_DATA_CAPTURE COLLECT_CUDA_TRACE=false: record with nsys profile "
                   "--trace=cuda)";
        for (const char* table : {"CUPTI_ACTIVITY_KIND_RUNTIME", "CUDA_CALLCHAINS"})
            if (has(table))
                return std::string("CUDA was traced (") + table +
                       " holds its API calls) but no kernel, copy, memset or memory event was recorded";
        if (cuda_traced_ == "true")
            return "CUDA tracing was on (META_DATA_CAPTURE COLLECT_CUDA_TRACE=true) but nsys recorded no CUDA call "
                   "and no GPU activity";
        if (schema_version_ != "unknown")   // a known export (nsys 2023.1 writes no capture options)
            return "no CUDA call and no GPU activity was traced (no CUPTI_ACTIVITY_KIND_RUNTIME: record with nsys "
                   "profile --trace=cuda)";
        return "unknown version or nothing was traced";
    }

    // An export of several processes (nsys profile over a launcher: globalPid) numbers streams per
    // process, so two processes on one GPU can both have stream 7: their kernels would share one
    // lane and be clamped as overlaps. On such a GPU the second and later processes (by globalPid)
    // have their streams numbered k * 2^40 + streamId; said in meta nsys.processes and a warning.
    void find_shared_devices() {
        std::string rows;
        for (const char* table :
             {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", kGraphTrace}) {
            if (!has(table)) continue;
            const auto cols = db_.columns(table);
            if (!cols.count("globalPid") || !cols.count("deviceId")) return;   // older exports: one process
            rows += (rows.empty() ? "" : " UNION ") + std::string("SELECT DISTINCT deviceId, globalPid FROM ") + table +
                    " WHERE typeof(deviceId) = 'integer' AND typeof(globalPid) = 'integer'";
        }
        if (rows.empty()) return;
        sql::Stmt pairs(db_.db, in_,
                        ("SELECT deviceId, globalPid FROM (" + rows + ") ORDER BY deviceId, globalPid").c_str());
        std::map<int64_t, std::vector<int64_t>> processes;   // device -> its processes, by globalPid
        std::set<int64_t> all;
        while (pairs.step()) {
            processes[pairs.i64(0)].push_back(pairs.i64(1));
            all.insert(pairs.i64(1));
        }
        std::string shared;
        for (const auto& [device, pids] : processes) {
            if (pids.size() < 2) continue;
            for (size_t k = 1; k < pids.size(); ++k) stream_base_[{device, pids[k]}] = static_cast<int64_t>(k) << 40;
            shared += (shared.empty() ? "" : ", ") + std::to_string(pids.size()) + " on device " +
                      std::to_string(device);
        }
        if (all.size() < 2) return;
        std::string said = std::to_string(all.size()) + " processes (globalPid) in the export";
        if (!shared.empty())
            said += "; " + shared +
                    ": streams are per process, so on a shared GPU the k-th process's (k = 0, 1, ... by globalPid) "
                    "are numbered k * 2^40 + streamId, each keeping its own lanes";
        r_.meta["nsys.processes"] = said;
        if (!shared.empty()) r_.warnings.push_back(said);
    }

    // A kernel's or copy's device and stream (columns 2 and 3 of its query) and, on a GPU that
    // several processes used, its process's stream numbers (globalPid in column pid_col).
    std::pair<int32_t, int64_t> lane(const Cells& cell, int pid_col) const {
        auto [device, stream] = device_and_stream(cell);
        if (stream_base_.empty()) return {device, stream};
        auto base = stream_base_.find({device, cell.get(pid_col, "globalPid", INT64_MIN, INT64_MAX, false)});
        return {device, base == stream_base_.end() ? stream : stream + base->second};
    }

    void read_strings() {
        if (!has("StringIds")) return;
        columns("StringIds", {"id", "value"});
        sql::Stmt s(db_.db, in_, "SELECT id, value FROM StringIds");
        while (s.step()) strings_[s.i64(0)] = s.text(1);
    }

    std::string str(int64_t id) const {
        auto it = strings_.find(id);
        return it == strings_.end() ? "string " + std::to_string(id) : it->second;
    }

    // Base time: the earliest start among the tables read.
    void find_base_time() {
        for (const char* t : {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                              "CUDA_GPU_MEMORY_USAGE_EVENTS", "NVTX_EVENTS", kGraphTrace}) {
            if (!has(t)) continue;
            columns(t, {"start"});
            // Integers only: each row's own check names any other value. NVTX rows: markers only.
            std::string query = std::string("SELECT MIN(start) FROM ") + t + " WHERE typeof(start) = 'integer'";
            if (std::string(t) == "NVTX_EVENTS") query += nvtx_ranges_and_marks();
            if (std::string(t) == kGraphTrace) query += kGraphTimed;
            sql::Stmt earliest(db_.db, in_, query.c_str());
            if (earliest.step() && !earliest.is_null(0)) base_ = std::min(base_, std::max(earliest.i64(0), -kMaxTime));
        }
        if (base_ == INT64_MAX) base_ = 0;
    }

    // Times relative to the base; values whose difference does not fit in int64 are bad input.
    int64_t rel(int64_t t, const char* table) const {
        int64_t out;
        if (__builtin_sub_overflow(t, base_, &out))
            throw Error(where(in_, std::string("table ") + table + ": time " + std::to_string(t) + " is out of range"));
        return out;
    }

    // The GPU with the most memory: TARGET_INFO_GPU.totalMemory (nsys 2022 and later); exports of
    // nsys 2021 keep the size in TARGET_INFO_CUDA_GPU.globalMemorySize instead. The memory column
    // is named, never a literal: ORDER BY 0 is an SQL error, not an order.
    void read_gpu() {
        for (const auto& [table, memory] : {std::pair{"TARGET_INFO_GPU", "totalMemory"},
                                            std::pair{"TARGET_INFO_CUDA_GPU", "globalMemorySize"}}) {
            if (!has(table)) continue;
            auto cols = db_.columns(table);
            if (!cols.count(memory)) continue;
            std::string query = "SELECT " + col(cols, "name", "''") + ", " + col(cols, memory) + ", rowid FROM " + table +
                                " ORDER BY " + col(cols, memory) + " DESC LIMIT 1";
            sql::Stmt row(db_.db, in_, query.c_str());
            if (row.step()) {
                r_.meta["device_name"] = row.text(0);
                r_.meta["device_memory"] = std::to_string(Cells{row, in_, table, 2}.get(1, memory, 0, kMaxBytes, false));
            }
            return;
        }
    }

    int64_t add_block(int32_t device, int64_t address, int64_t bytes, int64_t t_alloc, int64_t t_free, int64_t label) {
        Allocation a;
        a.id = ++allocations_;
        a.device = device;
        a.address = address;
        a.bytes = bytes;
        a.t_alloc = t_alloc;
        a.t_free = t_free;
        a.label = label;
        w_.add(a);
        return a.id;
    }

    // The memKind values the export lists (ENUM_CUDA_MEM_KIND: 0 pageable, 1 pinned, 2 device, 3
    // array, 4 managed, 5 device static, 6 managed static, 7 unknown in nsys 2022 to 2026), or
    // those eight where it lists none; a memory event of another kind is read as the GPU's and said.
    std::set<int64_t> memory_kinds() const {
        std::set<int64_t> kinds;
        if (has("ENUM_CUDA_MEM_KIND") && db_.columns("ENUM_CUDA_MEM_KIND").count("id")) {
            sql::Stmt rows(db_.db, in_, "SELECT id FROM ENUM_CUDA_MEM_KIND WHERE typeof(id) = 'integer'");
            while (rows.step()) kinds.insert(rows.i64(0));
        }
        if (kinds.empty())
            for (int64_t kind = 0; kind <= 7; ++kind) kinds.insert(kind);
        return kinds;
    }

    // Allocations: alloc/free pairs by (device, process, address): an export of several processes
    // (globalPid) holds each one's own address space, where the same address can be live in two.
    // The trace has one address space per device, so the allocations of a device's processes after
    // the first one seen there are written with address 0 (unknown), counted in meta.
    void read_allocations() {
        if (!has("CUDA_GPU_MEMORY_USAGE_EVENTS")) return;
        auto c = columns("CUDA_GPU_MEMORY_USAGE_EVENTS", {"address", "bytes", "memoryOperationType"});
        std::string q = "SELECT start, " + col(c, "deviceId") + ", address, bytes, " + col(c, "memKind", "2") +
                        ", memoryOperationType, " + col(c, "globalPid") +
                        ", rowid FROM CUDA_GPU_MEMORY_USAGE_EVENTS ORDER BY start, rowid";
        sql::Stmt s(db_.db, in_, q.c_str());
        Cells cell{s, in_, "CUDA_GPU_MEMORY_USAGE_EVENTS", 7};
        std::map<std::tuple<int32_t, int64_t, int64_t>, int64_t> live;
        std::map<int32_t, int64_t> first_process;   // device -> the first globalPid seen allocating on it
        int64_t unaddressed = 0, unknown_kinds = 0, first_unknown_kind = 0;
        const std::set<int64_t> mem_kinds = memory_kinds();
        while (s.step()) {
            ++events_;
            int64_t t = rel(cell.get(0, "start", -kMaxTime, kMaxTime), "CUDA_GPU_MEMORY_USAGE_EVENTS");
            // memKind 0 pageable, 1 pinned: host memory (device -1); the rest is on the GPU.
            int64_t kind = cell.get(4, "memKind", INT64_MIN, INT64_MAX, false, 2);
            if (!mem_kinds.count(kind) && unknown_kinds++ == 0) first_unknown_kind = kind;
            int64_t device = cell.get(1, "deviceId", -1, INT32_MAX, false);
            int32_t dev = kind == 0 || kind == 1 ? -1 : static_cast<int32_t>(device);
            int64_t addr = cell.get(2, "address", INT64_MIN, INT64_MAX), bytes = cell.get(3, "bytes", 0, kMaxBytes),
                    op = cell.get(5, "memoryOperationType", 0, 1);   // nsys: 0 allocation, 1 free
            const int64_t pid = cell.get(6, "globalPid", INT64_MIN, INT64_MAX, false);
            auto key = std::make_tuple(dev, pid, addr);
            if (first_process.try_emplace(dev, pid).first->second != pid) {
                addr = 0;
                ++unaddressed;
            }
            auto it = live.find(key);
            if (op == 0 && bytes <= 0)
                throw Error(where_row(in_, "CUDA_GPU_MEMORY_USAGE_EVENTS", s.i64(7),
                                      "allocation of " + std::to_string(bytes) + " bytes"));
            if (it != live.end()) {   // an allocation at a live block's address frees it first
                w_.set_free_time(it->second, t);
                live.erase(it);
                if (op == 0) live[key] = add_block(dev, addr, bytes, t, kNoTime, kNoString);
            } else if (op == 0) {
                live[key] = add_block(dev, addr, bytes, t, kNoTime, kNoString);
            } else if (bytes > 0) {   // a free of a block allocated before the capture began
                add_block(dev, addr, bytes, 0, t, w_.intern("(allocated before recording)"));
                ++reconstructed_;
            }
        }
        if (unknown_kinds > 0) {   // a kind a later nsys added: on the GPU, but not in silence
            const std::string said = std::to_string(unknown_kinds) + " memory events of a memKind the export's " +
                                     "ENUM_CUDA_MEM_KIND does not list (the first: " +
                                     std::to_string(first_unknown_kind) + ") were read as the GPU's memory";
            r_.meta["nsys.unknown_memory_kinds"] = said;
            r_.warnings.push_back(said);
        }
        if (unaddressed > 0)
            r_.meta["nsys.memory_processes"] =
                std::to_string(unaddressed) +
                " memory events of processes after the first on their device: their allocations have address 0 "
                "(the trace holds one address space per device; each process's are paired within its own)";
    }

    // Kernels, in the order of their starts; written by write_kernels with the graph launches.
    void read_kernels() {
        if (!has("CUPTI_ACTIVITY_KIND_KERNEL")) return;
        auto c = columns("CUPTI_ACTIVITY_KIND_KERNEL", {"start", "end"});
        std::string name = c.count("demangledName") ? "demangledName" : c.count("shortName") ? "shortName" : "-1";
        std::string q = "SELECT start, end, " + col(c, "deviceId") + ", " + col(c, "streamId") + ", " + name + ", " +
                        col(c, "correlationId") + ", " + col(c, "gridX") + ", " + col(c, "gridY") + ", " +
                        col(c, "gridZ") + ", " + col(c, "blockX") + ", " + col(c, "blockY") + ", " + col(c, "blockZ") +
                        ", " + col(c, "staticSharedMemory") + " + " + col(c, "dynamicSharedMemory") + ", " +
                        col(c, "registersPerThread") + ", " + col(c, "globalPid") +
                        ", rowid FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start, rowid";
        sql::Stmt s(db_.db, in_, q.c_str());
        Cells cell{s, in_, "CUPTI_ACTIVITY_KIND_KERNEL", 15};
        std::unordered_map<int64_t, int64_t> name_ids;
        while (s.step()) {
            ++events_;
            Kernel k;
            std::tie(k.device, k.stream) = lane(cell, 14);
            int64_t sid = cell.get(4, "demangledName", INT64_MIN, INT64_MAX, false, -1);
            auto ni = name_ids.find(sid);
            k.name = ni != name_ids.end() ? ni->second : (name_ids[sid] = w_.intern(str(sid)));
            auto [ks, ke] = cell.interval(0, 1);
            k.t_start = rel(ks, "CUPTI_ACTIVITY_KIND_KERNEL");
            k.t_end = rel(ke, "CUPTI_ACTIVITY_KIND_KERNEL");
            k.correlation = cell.get(5, "correlationId", INT64_MIN, INT64_MAX, false);
            k.step = kernel_step(k, cell.get(14, "globalPid", INT64_MIN, INT64_MAX, false));
            static const char* grid[] = {"gridX", "gridY", "gridZ"}, *block[] = {"blockX", "blockY", "blockZ"};
            for (int i = 0; i < 3; ++i) {
                k.grid[i] = static_cast<int32_t>(cell.get(6 + i, grid[i], 0, INT32_MAX, false));
                k.block[i] = static_cast<int32_t>(cell.get(9 + i, block[i], 0, INT32_MAX, false));
            }
            k.shared_mem = static_cast<int32_t>(cell.get(12, "staticSharedMemory + dynamicSharedMemory", 0, INT32_MAX, false));
            k.registers = static_cast<int32_t>(cell.get(13, "registersPerThread", 0, INT32_MAX, false));
            kernels_.push_back(k);
        }
    }

    // nsys --cuda-graph-trace=graph records a CUDA graph's launch as one row of
    // CUPTI_ACTIVITY_KIND_GRAPH_TRACE (the graph's start to its end on the launch's stream) and
    // none of the graph's kernels in CUPTI_ACTIVITY_KIND_KERNEL. Each such launch is one kernel
    // row named "CUDA graph G", so the stream's busy time is the file's; meta and a warning say
    // how many and that the graphs' own kernels are not in the file. A launch whose kernels are
    // in the kernel table too (the same correlation id: node-level tracing) is not counted twice.
    void read_graph_launches() {
        if (!has(kGraphTrace)) return;
        auto cols = columns(kGraphTrace, {"start", "end"});
        std::set<int64_t> traced;   // correlation ids of the kernels read
        for (const Kernel& kernel : kernels_)
            if (kernel.correlation != 0) traced.insert(kernel.correlation);
        sql::Stmt untimed(
            db_.db, in_,
            (std::string("SELECT COUNT(*) FROM ") + kGraphTrace + " WHERE NOT (1" + kGraphTimed + ")").c_str());
        const int64_t no_time = untimed.step() ? untimed.i64(0) : 0;
        std::string query = "SELECT start, end, " + col(cols, "deviceId") + ", " + col(cols, "streamId") + ", " +
                            col(cols, "graphId") + ", " + col(cols, "correlationId") + ", " + col(cols, "globalPid") +
                            ", rowid FROM " + kGraphTrace + " WHERE 1" + kGraphTimed + " ORDER BY start, rowid";
        sql::Stmt rows(db_.db, in_, query.c_str());
        Cells cell{rows, in_, kGraphTrace, 7};
        int64_t launches = 0, also_as_kernels = 0, busy_ns = 0;
        std::set<int64_t> graphs;
        while (rows.step()) {
            ++events_;
            Kernel launch;
            std::tie(launch.device, launch.stream) = lane(cell, 6);
            const int64_t graph = cell.get(4, "graphId", 0, INT64_MAX, false);
            launch.correlation = cell.get(5, "correlationId", INT64_MIN, INT64_MAX, false);
            auto [gs, ge] = cell.interval(0, 1);
            if (launch.correlation != 0 && traced.count(launch.correlation)) {
                ++also_as_kernels;
                continue;
            }
            launch.name = w_.intern("CUDA graph " + std::to_string(graph));
            launch.t_start = rel(gs, kGraphTrace);
            launch.t_end = rel(ge, kGraphTrace);
            kernels_.push_back(launch);
            ++launches;
            busy_ns += ge - gs;
            graphs.insert(graph);
        }
        if (launches == 0 && also_as_kernels == 0 && no_time == 0) return;
        std::string said = std::to_string(launches) + " CUDA graph launches of " + std::to_string(graphs.size()) +
                           " graphs traced whole (" + kGraphTrace + ", nsys --cuda-graph-trace=graph; " +
                           std::to_string(busy_ns) + " ns on the GPU): each is one kernel row named 'CUDA graph G'";
        if (also_as_kernels > 0)
            said += "; " + std::to_string(also_as_kernels) +
                    " more whose kernels the kernel table holds were not added";
        if (no_time > 0)   // CUPTI: start and end 0, the timestamps could not be collected
            said += "; " + std::to_string(no_time) + " without timestamps (start and end 0) left out";
        r_.meta["nsys.graph_launches"] = said;
        if (launches > 0 || no_time > 0)
            r_.warnings.push_back(said +
                                  ": the graphs' own kernels are not in the file (record with nsys profile "
                                  "--cuda-graph-trace=node for them)");
    }

    // Kernels and graph launches by start, serial per stream (a start that overlaps the
    // previous one on its stream is clamped to its end).
    void write_kernels() {
        std::stable_sort(kernels_.begin(), kernels_.end(),
                         [](const Kernel& lhs, const Kernel& rhs) { return lhs.t_start < rhs.t_start; });
        std::map<std::pair<int32_t, int64_t>, int64_t> stream_end;
        int64_t kernels = 0;
        for (Kernel& kernel : kernels_) {
            kernel.id = ++kernels;
            auto [it, first] = stream_end.try_emplace({kernel.device, kernel.stream}, kernel.t_end);
            if (!first) {
                if (kernel.t_start < it->second) {
                    const int64_t duration = kernel.t_end - kernel.t_start;
                    clamp_largest_ns_ = std::max(clamp_largest_ns_, it->second - kernel.t_start);
                    kernel.t_start = it->second;
                    kernel.t_end = std::max(kernel.t_end, kernel.t_start);
                    clamp_lost_ns_ += duration - (kernel.t_end - kernel.t_start);
                    ++clamped_;
                }
                it->second = std::max(it->second, kernel.t_end);
            }
            w_.add(kernel);
        }
        kernels_.clear();
    }

    // Memcpy rows of kinds 11-13 are unified memory's page migrations (cudaMallocManaged memory moved
    // by the driver on a page fault or a prefetch), not cudaMemcpy calls; CUPTI gives
    // them no stream (streamId 0). They are copies of the trace (H2D, D2H, D2D) on stream 0, as
    // before, and said: meta nsys.uvm_migrations and a warning, with their causes (migrationCause,
    // named by the export's ENUM_CUDA_UNIF_MEM_MIGRATION). Before 2026-12-05 they were read as the
    // program's copies without a word (cestwc/balinski-and-gomory-cuda's 2025.5 export: 49 of its
    // 56 memcpy rows).
    void say_uvm_migrations() {
        if (!has("CUPTI_ACTIVITY_KIND_MEMCPY")) return;
        auto cols = db_.columns("CUPTI_ACTIVITY_KIND_MEMCPY");
        if (!cols.count("copyKind")) return;
        const std::string cause = col(cols, "migrationCause", "NULL");
        const std::string query =
            "SELECT copyKind, " + cause +
            ", COUNT(*), SUM(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind IN (11, 12, 13) "
            "GROUP BY copyKind, " +
            cause + " ORDER BY copyKind, " + cause;
        sql::Stmt rows(db_.db, in_, query.c_str());
        std::map<int64_t, std::string> names;   // ENUM_CUDA_UNIF_MEM_MIGRATION: 2 "Page fault", ...
        if (has("ENUM_CUDA_UNIF_MEM_MIGRATION")) {
            sql::Stmt rows_of_enum(db_.db, in_, "SELECT * FROM ENUM_CUDA_UNIF_MEM_MIGRATION");
            while (rows_of_enum.step())
                if (sqlite3_column_count(rows_of_enum.get()) >= 3 &&
                    sqlite3_column_type(rows_of_enum.get(), 0) == SQLITE_INTEGER)
                    names[rows_of_enum.i64(0)] = rows_of_enum.text(2);
        }
        std::map<int64_t, std::pair<int64_t, int64_t>> by_kind;   // copyKind -> rows, bytes
        std::map<std::string, int64_t> by_cause;
        int64_t total = 0;
        while (rows.step()) {
            const int64_t kind = rows.i64(0), count = rows.i64(2);
            by_kind[kind].first += count;
            by_kind[kind].second += rows.is_null(3) ? 0 : rows.i64(3);
            std::string why = "not given";
            if (sqlite3_column_type(rows.get(), 1) == SQLITE_INTEGER) {
                auto name = names.find(rows.i64(1));
                why = name != names.end() ? name->second : "cause " + std::to_string(rows.i64(1));
            }
            by_cause[why] += count;
            total += count;
        }
        if (total == 0) return;
        static const std::map<int64_t, const char*> kinds = {{11, "UVM HtoD"}, {12, "UVM DtoH"}, {13, "UVM DtoD"}};
        std::string what, causes;
        for (const auto& [kind, counts] : by_kind)
            what += (what.empty() ? "" : ", ") + std::to_string(counts.first) + " " + kinds.at(kind) + " (" +
                    std::to_string(counts.second) + " B)";
        for (const auto& [why, count] : by_cause)
            causes += (causes.empty() ? "" : ", ") + std::to_string(count) + " " + why;
        const std::string said = std::to_string(total) + " memcpy rows are unified-memory page migrations (" + what +
                                 "; migration cause: " + causes +
                                 "): the driver moving managed memory, not cudaMemcpy calls; imported as copies "
                                 "on stream 0 (CUPTI gives them no stream)";
        r_.meta["nsys.uvm_migrations"] = said;
        r_.warnings.push_back(said);
    }

    void read_copies(const char* table) {
        if (!has(table)) return;
        const bool memset = std::string(table) == "CUPTI_ACTIVITY_KIND_MEMSET";
        auto cols = columns(table, {"start", "end"});
        std::string query = "SELECT start, end, " + col(cols, "deviceId") + ", " + col(cols, "streamId") + ", " +
                            col(cols, "bytes") + ", " + (memset ? std::string("-1") : col(cols, "copyKind")) + ", " +
                            col(cols, "globalPid") + ", rowid FROM " + table + " ORDER BY start, rowid";
        sql::Stmt rows(db_.db, in_, query.c_str());
        Cells cell{rows, in_, table, 7};
        while (rows.step()) {
            ++events_;
            Copy cp;
            cp.id = ++copies_;
            std::tie(cp.device, cp.stream) = lane(cell, 6);
            cp.kind = memset ? CopyKind::Memset : copy_kind(cell.get(5, "copyKind", 0, kMaxCuptiMemcpyKind, false));
            cp.bytes = cell.get(4, "bytes", 0, kMaxBytes, false);
            auto [cs, ce] = cell.interval(0, 1);
            cp.t_start = rel(cs, table);
            cp.t_end = rel(ce, table);
            w_.add(cp);
        }
    }

    // Kernel launches (CUPTI_ACTIVITY_KIND_RUNTIME rows named cudaLaunchKernel_v7000, cuLaunchKernel,
    // cudaGraphLaunch_v10000, ...: kineto_map.hpp's launch_call_kind) that returned success and whose
    // correlationId no kernel, memcpy, memset or graph-launch row carries: none in an export whose
    // GPU activity was recorded whole (every export read here, 2026-12-05). Those made while a
    // stream capture of their process was open were captured into a graph, not run (said in meta);
    // the others ran and their rows are not in the file (said in meta and a warning), as a Kineto
    // trace's are (kineto.cpp, say_launches_without_kernels).
    void say_launches_without_kernels() {
        if (!has("CUPTI_ACTIVITY_KIND_RUNTIME") || !has("StringIds")) return;
        auto cols = columns("CUPTI_ACTIVITY_KIND_RUNTIME", {"start", "nameId"});
        if (!cols.count("correlationId")) return;
        std::string ran;   // the correlation ids of the GPU rows
        for (const char* table :
             {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", kGraphTrace})
            if (has(table) && db_.columns(table).count("correlationId"))
                ran += std::string(ran.empty() ? "" : " UNION ") + "SELECT correlationId FROM " + table;
        if (ran.empty()) ran = "SELECT NULL WHERE 0";
        const std::string ok = cols.count("returnValue") ? "r.returnValue = 0" : "1";
        std::string query = "SELECT s.value, r.start, " + col(cols, "globalTid") + ", r.correlationId IN (" + ran +
                            ") , r.rowid FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
                            "WHERE " +
                            ok + " AND (s.value LIKE '%Launch%' OR s.value LIKE '%Capture%') ORDER BY r.start, r.rowid";
        sql::Stmt rows(db_.db, in_, query.c_str());
        struct Call {
            int64_t start, process, row;
            bool ran;
            std::string name;
        };
        std::vector<Call> launches;
        std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> open;   // process -> captures [begin, end)
        while (rows.step()) {
            const std::string name = rows.text(0);
            const auto kind = launch_call_kind(name);
            if (!kind) continue;
            const int64_t process = rows.i64(2) >> 24;   // globalTid: the PID in bits 24-47
            auto& spans = open[process];
            if (*kind == KCallKind::CaptureBegin) spans.emplace_back(rows.i64(1), INT64_MAX);
            else if (*kind == KCallKind::CaptureEnd && !spans.empty() && spans.back().second == INT64_MAX)
                spans.back().second = rows.i64(1);
            else if (*kind == KCallKind::Launch)
                launches.push_back(Call{rows.i64(1), process, rows.i64(4), rows.i64(3) != 0, name});
        }
        int64_t in_capture = 0, lost = 0;
        const Call* first = nullptr;
        for (const Call& call : launches) {
            if (call.ran) continue;
            const auto& spans = open[call.process];
            if (std::any_of(spans.begin(), spans.end(),
                            [&](const auto& span) { return span.first <= call.start && call.start < span.second; }))
                ++in_capture;
            else if (lost++ == 0) first = &call;
        }
        if (in_capture + lost == 0) return;
        std::string said = std::to_string(in_capture + lost) + " of " + std::to_string(launches.size()) +
                           " kernel launches (CUPTI_ACTIVITY_KIND_RUNTIME calls that launch kernels or CUDA graphs, "
                           "returning success) have no kernel, memcpy, memset or graph row of their correlationId";
        if (in_capture > 0)
            said += ": " + std::to_string(in_capture) +
                    " made while a stream capture was open (captured into a CUDA graph, not run)";
        if (lost > 0) {
            said += std::string(in_capture > 0 ? ", " : ": ") + std::to_string(lost) +
                    " not recorded (the first: CUPTI_ACTIVITY_KIND_RUNTIME row " + std::to_string(first->row) + " '" +
                    first->name + "')";
            r_.warnings.push_back(std::to_string(lost) + " of the export's " + std::to_string(launches.size()) +
                                  " kernel launches have no kernel, memcpy, memset or graph row (the first: "
                                  "CUPTI_ACTIVITY_KIND_RUNTIME row " +
                                  std::to_string(first->row) + " '" + first->name +
                                  "'): nsys did not record their GPU activity, so the export's kernel time, its "
                                  "duration and a simulation of it lack them");
        }
        r_.meta["nsys.launches_without_kernel"] = said;
    }

    // Steps (steps.hpp): NVTX ranges named ProfilerStep#N (torch.profiler under emit_nvtx appends
    // ", op_id = ..."), else the optimizer's step ranges (Optimizer.step#<Class>.step, recorded under
    // emit_nvtx or pushed by hand). A kernel is in the step its launch (the CUPTI runtime call of its
    // correlation id and process) fell in, else the step its start falls in; read_markers writes
    // the step markers. Meta steps_from says where they came from. Before 2026-12-05 an nsys
    // export had no steps at all.
    void find_steps() {
        if (!has("NVTX_EVENTS")) return;
        auto cols = db_.columns("NVTX_EVENTS");
        if (!cols.count("end")) return;
        const std::string text = cols.count("textId") && has("StringIds")
                                     ? "COALESCE(n.text, (SELECT value FROM StringIds WHERE id = n.textId))"
                                     : "n.text";
        // A range never ended while nsys recorded (end NULL; not a mark, 34 or 65) was open when the
        // recording stopped: it ends there (recording_end), so a loop stopped inside its last
        // optimizer step or ProfilerStep#N keeps that step. Before 2026-12-05 (fifth) it was passed
        // over, and the export lost its last step (kernels launched in it were in no step).
        const std::string end = nvtx_end("n.");
        const std::string unended = "(" + end + " IS NULL" +
                                    std::string(cols.count("eventType") ? " AND n.eventType NOT IN (34, 65))" : ")");
        const std::string query = "SELECT n.start, " + end + ", " + (cols.count("text") ? text : std::string("NULL")) +
                                  ", " + (cols.count("globalTid") ? "n.globalTid" : "NULL") + ", n.rowid" +
                                  " FROM NVTX_EVENTS n WHERE typeof(n.start) = 'integer' AND (typeof(" + end +
                                  ") = 'integer' OR " + unended + ")" + nvtx_ranges_and_marks();
        sql::Stmt rows(db_.db, in_, query.c_str());
        std::vector<NamedSpan> spans;
        std::vector<std::pair<size_t, int64_t>> threads;   // optimizer range (index in spans) -> its globalTid
        while (rows.step()) {
            if (rows.is_null(2)) continue;
            const std::string name = rows.text(2);
            const bool open = rows.is_null(1);
            if (open && !profiler_step_number(name) && !is_optimizer_step(name)) continue;
            const int64_t t_start = rel(rows.i64(0), "NVTX_EVENTS"),
                          t_end = std::max(t_start, open ? recording_end() : rel(rows.i64(1), "NVTX_EVENTS"));
            if (open) open_step_ends_[rows.i64(4)] = t_end;
            if (auto number = profiler_step_number(name)) profiler_steps_.push_back(StepSpan{*number, t_start, t_end});
            else if (is_optimizer_step(name) || is_loop_range(name)) {
                if (is_optimizer_step(name) && !rows.is_null(3)) threads.emplace_back(spans.size(), rows.i64(3));
                spans.push_back(NamedSpan{name, t_start, t_end});
            }
        }
        if (profiler_steps_.empty()) optimizer_work(spans, threads);
        if (!profiler_steps_.empty()) {
            steps_ = profiler_steps_;
            r_.meta["steps_from"] = kStepsFromProfiler;
        } else {
            const OptimizerSteps found = optimizer_steps(spans, 0);
            steps_ = found.steps;
            if (!steps_.empty()) r_.meta["steps_from"] = found.said(), r_.meta["steps_optimizers"] = found.optimizers_said();
            if (const std::string warning = found.warning(); !warning.empty()) r_.warnings.push_back(warning);
        }
        std::sort(steps_.begin(), steps_.end(),
                  [](const StepSpan& lhs, const StepSpan& rhs) { return lhs.t_start < rhs.t_start; });
        if (steps_.empty() || !has("CUPTI_ACTIVITY_KIND_RUNTIME")) return;
        auto rc = db_.columns("CUPTI_ACTIVITY_KIND_RUNTIME");
        if (!rc.count("correlationId") || !rc.count("start") || !rc.count("globalTid")) return;
        sql::Stmt calls(db_.db, in_,
                        "SELECT globalTid, correlationId, start FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE typeof(start) = "
                        "'integer' AND typeof(correlationId) = 'integer' AND typeof(globalTid) = 'integer'");
        while (calls.step())   // globalTid = globalPid + thread id (the low 24 bits)
            launch_at_[{calls.i64(0) & ~int64_t{0xFFFFFF}, calls.i64(1)}] = rel(calls.i64(2),
                                                                                "CUPTI_ACTIVITY_KIND_RUNTIME");
    }

    // Where the recording stopped (relative): the latest start or end in the tables read (kernels,
    // copies, memsets, memory events, runtime calls, NVTX rows, graph launches). Computed once.
    int64_t recording_end() {
        if (recording_end_) return *recording_end_;
        int64_t last = INT64_MIN;
        for (const char* table : {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                                  "CUPTI_ACTIVITY_KIND_RUNTIME", "CUDA_GPU_MEMORY_USAGE_EVENTS", "NVTX_EVENTS",
                                  kGraphTrace}) {
            if (!has(table)) continue;
            const std::set<std::string> cols = db_.columns(table);
            for (const char* column : {"start", "end"}) {
                if (!cols.count(column)) continue;
                const std::string query = std::string("SELECT MAX(\"") + column + "\") FROM " + table + " WHERE typeof(\"" +
                                          column + "\") = 'integer'";
                sql::Stmt latest(db_.db, in_, query.c_str());
                if (latest.step() && !latest.is_null(0)) last = std::max(last, std::min(latest.i64(0), kMaxTime));
            }
        }
        recording_end_ = last == INT64_MIN ? 0 : rel(last, "NVTX_EVENTS");
        return *recording_end_;
    }

    int32_t kernel_step(const Kernel& kernel, int64_t global_pid) const {
        if (steps_.empty()) return -1;
        auto call = launch_at_.find({global_pid & ~int64_t{0xFFFFFF}, kernel.correlation});
        return step_at(steps_, call != launch_at_.end() ? call->second : kernel.t_start);
    }

    // NVTX_EVENTS also holds rows that are no range or mark (ENUM_NSYS_EVENT_TYPE): domain
    // creation (75, 76), category and thread names (33, 39, 64, 72-74), CUDA object names (97-99).
    // Only marks and ranges are markers: 34 Mark, 35/37 Push/Start, 59 PushPop, 60 StartEnd, and
    // the NVTXT ones (65, 66, 68, 70, 71). Exports without eventType are read whole.
    // An optimizer range's work (steps.hpp): the CUDA runtime calls of its thread (globalTid) that
    // begin within it. Left unknown (-1) where a range has no thread or the export no runtime table.
    void optimizer_work(std::vector<NamedSpan>& spans, const std::vector<std::pair<size_t, int64_t>>& threads) {
        if (threads.empty() || !has("CUPTI_ACTIVITY_KIND_RUNTIME")) return;
        auto rc = db_.columns("CUPTI_ACTIVITY_KIND_RUNTIME");
        if (!rc.count("start") || !rc.count("globalTid")) return;
        std::map<int64_t, std::vector<int64_t>> starts;
        for (const auto& [index, thread] : threads) starts[thread];
        sql::Stmt calls(db_.db, in_,
                        "SELECT globalTid, start FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE typeof(start) = 'integer' AND "
                        "typeof(globalTid) = 'integer'");
        while (calls.step()) {
            auto found = starts.find(calls.i64(0));
            if (found != starts.end()) found->second.push_back(rel(calls.i64(1), "CUPTI_ACTIVITY_KIND_RUNTIME"));
        }
        for (auto& [thread, times] : starts) std::sort(times.begin(), times.end());
        for (const auto& [index, thread] : threads) {
            const std::vector<int64_t>& times = starts[thread];
            NamedSpan& span = spans[index];
            span.work = std::upper_bound(times.begin(), times.end(), span.t_end) -
                        std::lower_bound(times.begin(), times.end(), span.t_start);
        }
    }

    // NVTX_EVENTS.end as SQL (`prefix`: a table alias and its dot). Exports of 2021 and before declared
    // every column NOT NULL and wrote a default value where a field had none (nsys's export
    // documentation of 2020 and 2021.5: "all fields are declared as NOT NULL, even where actual value
    // may be missing, instead default value for that field is exported"): a mark's end and a range's
    // never ended. There an end of 0 or less before its start is that default, read as the NULL later
    // exports write; counted in meta nsys.nvtx_default_ends. Elsewhere an end before its start is a
    // corrupt row, refused.
    std::string nvtx_end(const std::string& prefix) const {
        std::string end = prefix + "\"end\"";
        if (!db_.not_null("NVTX_EVENTS", "end")) return end;
        return "(CASE WHEN " + end + " <= 0 AND " + end + " < " + prefix + "start THEN NULL ELSE " + end + " END)";
    }

    std::string nvtx_ranges_and_marks() {
        if (!db_.columns("NVTX_EVENTS").count("eventType")) return "";
        return " AND (eventType IS NULL OR eventType IN (34, 35, 37, 59, 60, 65, 66, 68, 70, 71))";
    }

    void read_markers() {
        if (!has("NVTX_EVENTS")) return;
        auto c = db_.columns("NVTX_EVENTS");
        const std::string only = nvtx_ranges_and_marks();
        if (!only.empty()) {
            sql::Stmt skipped(db_.db, in_, ("SELECT COUNT(*) FROM NVTX_EVENTS WHERE NOT (1" + only + ")").c_str());
            if (skipped.step() && skipped.i64(0) > 0)
                r_.meta["nsys.nvtx_rows_not_ranges"] = std::to_string(skipped.i64(0)) +
                                                       " (domain, category and thread names: not markers)";
        }
        // A range (not a mark: 34, 65) whose end is NULL was never ended while nsys recorded.
        const std::string unended = c.count("eventType") ? "(eventType NOT IN (34, 65))" : "0";
        if (c.count("end") && db_.not_null("NVTX_EVENTS", "end")) {
            sql::Stmt defaults(db_.db, in_,
                               ("SELECT COUNT(*) FROM NVTX_EVENTS WHERE " + nvtx_end("") + " IS NULL" + only).c_str());
            if (defaults.step() && defaults.i64(0) > 0)
                r_.meta["nsys.nvtx_default_ends"] =
                    std::to_string(defaults.i64(0)) +
                    " NVTX marks or ranges with end 0 in a table that declares end NOT NULL (an export of 2021 "
                    "or before, which wrote a default where a field had none): read as no end";
        }
        std::string query = "SELECT start, " + (c.count("end") ? nvtx_end("") : std::string("NULL")) + ", " +
                        col(c, "text", "NULL") + ", " + col(c, "textId", "NULL") + ", " + unended +
                        ", rowid FROM NVTX_EVENTS WHERE 1" + only + " ORDER BY start, rowid";
        sql::Stmt rows(db_.db, in_, query.c_str());
        Cells cell{rows, in_, "NVTX_EVENTS", 5};
        int64_t markers = 0, open_ranges = 0;
        while (rows.step()) {
            ++events_;
            Marker m;
            m.id = ++markers;
            std::string text = !rows.is_null(2) ? rows.text(2) : !rows.is_null(3) ? str(cell.get(3, "textId", INT64_MIN, INT64_MAX)) : "nvtx";
            m.name = w_.intern(text);
            m.t_start = rel(cell.get(0, "start", -kMaxTime, kMaxTime), "NVTX_EVENTS");
            m.t_end = rows.is_null(1) ? m.t_start : rel(cell.interval(0, 1).second, "NVTX_EVENTS");
            if (rows.is_null(1) && rows.i64(4) == 1 && open_ranges++ == 0) first_open_range_ = quoted_name(text);
            // An unended ProfilerStep#N or optimizer step (find_steps): to the end of recording.
            const auto open_step = rows.is_null(1) ? open_step_ends_.find(rows.i64(5)) : open_step_ends_.end();
            if (open_step != open_step_ends_.end()) m.t_end = open_step->second;
            const std::optional<int32_t> step =
                rows.is_null(1) && open_step == open_step_ends_.end() ? std::nullopt : profiler_step_number(text);
            m.kind = step ? MarkerKind::Step : MarkerKind::Range;
            m.index = step.value_or(-1);
            w_.add(m);
        }
        if (profiler_steps_.empty())   // steps from the optimizer's ranges (find_steps)
            for (const StepSpan& step : steps_)
                w_.add(Marker{++markers, w_.intern("step#" + std::to_string(step.step)), step.t_start, step.t_end,
                              MarkerKind::Step, step.step});
        if (open_ranges > 0) {
            const std::string said = std::to_string(open_ranges) +
                                     " NVTX ranges have no end (pushed or started and never ended while nsys "
                                     "recorded; the first: '" +
                                     first_open_range_ + "'): each is a marker of no length at its start" +
                                     (open_step_ends_.empty()
                                          ? std::string()
                                          : ", but " + std::to_string(open_step_ends_.size()) +
                                                " ProfilerStep#N or optimizer-step ranges, which end at the end of "
                                                "recording (" +
                                                std::to_string(recording_end()) + " ns): the step open there");
            r_.meta["nsys.nvtx_unended_ranges"] = said;
            r_.warnings.push_back(said);
        }
    }

    void write_meta() {
        r_.events = events_;
        r_.meta["source"] = "nsight-systems-sqlite";
        r_.meta["import.format"] = "nsys";
        r_.meta["import.events"] = std::to_string(events_);
        r_.meta["timing"] = "exact";
        r_.meta["accesses"] = "none";   // nsys records no kernel arguments
        r_.meta["categories"] = "unknown";
        r_.meta["reconstructed_blocks"] = std::to_string(reconstructed_);
        r_.meta["nsys.kernel_starts_clamped"] = std::to_string(clamped_);
        if (clamped_ > 0) {   // the kernel time is no longer the export's own sum of end - start: say so
            const std::string said = std::to_string(clamped_) +
                                     " kernels started before the previous kernel on their stream ended (by up to " +
                                     std::to_string(clamp_largest_ns_) + " ns; " + std::to_string(clamp_lost_ns_) +
                                     " ns of kernel time in all)";
            r_.meta["nsys.kernel_clamp"] = said;
            r_.warnings.push_back(
                said + ": their starts were moved to that end, since a trace keeps one kernel at a time per stream");
        }
        if (!graph_mode_.empty())
            r_.meta["nsys.cuda_graph_trace"] =
                graph_mode_ + (graph_mode_ == "Graph"
                                   ? " (META_DATA_CAPTURE: a CUDA graph launch is one CUPTI_ACTIVITY_KIND_GRAPH_TRACE row, "
                                     "its kernels are not recorded)"
                                   : " (META_DATA_CAPTURE CUDA_GRAPH_TRACE_OPTIONS:MODE)");
        if (!has("CUDA_GPU_MEMORY_USAGE_EVENTS"))
            r_.meta["allocations"] =
                memory_usage_traced_ == "false"
                    ? "none (recorded without GPU memory usage, META_DATA_CAPTURE COLLECT_GPU_MEMORY_USAGE=false: "
                      "record with nsys profile --cuda-memory-usage=true)"
                : memory_usage_traced_ == "true"
                    ? "none (GPU memory usage was recorded, META_DATA_CAPTURE COLLECT_GPU_MEMORY_USAGE=true, and nothing "
                      "was allocated or freed while it was; what was in use is not in the file)"
                    : "none (no CUDA_GPU_MEMORY_USAGE_EVENTS: record with nsys profile --cuda-memory-usage=true)";
    }

    const std::string& in_;
    Db db_;
    Rows& w_;
    Result& r_;
    std::set<std::string> tables_;
    std::vector<Kernel> kernels_;                     // read, not yet written (write_kernels)
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
    std::map<int64_t, int64_t> open_step_ends_;   // unended step-making NVTX range (rowid) -> its end (find_steps)
    std::optional<int64_t> recording_end_;
    std::string first_open_range_;   // the first NVTX range without an end, for the warning   // the clamped starts'
                                     // largest move, the kernel time taken off
};

}  // namespace

void import_nsys(const std::string& in, Rows& w, Result& r) { NsysImport(in, w, r).run(); }

}  // namespace mhc::trace::import
