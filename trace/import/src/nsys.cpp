// Nsight Systems SQLite export (`nsys export --type sqlite`) -> trace. Tables and columns
// differ between versions: both are looked up in sqlite_master / pragma table_info, what
// exists is used and what is missing is written to meta (and warned about on stderr).
#include <sqlite3.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <unordered_map>

#include "limits.hpp"
#include "mhc/common/error.hpp"
#include "mhc/trace/import/import.hpp"
#include "mhc/trace/import/rows.hpp"
#include "sqlite_util.hpp"

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

// CUPTI_ACTIVITY_MEMCPY_KIND (cupti_activity.h): 0 unknown, 1 HtoD, 2 DtoH, 3 HtoA, 4 AtoH,
// 5 AtoA, 6 AtoD, 7 DtoA, 8 DtoD, 9 HtoH, 10 PtoP; other codes are refused as the row is read.
constexpr int64_t kMaxCuptiMemcpyKind = 10;
CopyKind copy_kind(int64_t k) {
    switch (k) {
        case 1: case 3: return CopyKind::H2D;   // HtoD, HtoA (a CUDA array is device memory)
        case 2: case 4: return CopyKind::D2H;   // DtoH, AtoH
        case 10: return CopyKind::P2P;
        case 9: return CopyKind::H2H;
        default: return CopyKind::D2D;          // DtoD, AtoA, AtoD, DtoA, and unknown (0)
    }
}

}  // namespace

void import_nsys(const std::string& in, Rows& w, Result& r) {
    Db db(in);
    std::set<std::string> tables, views;
    {
        sql::Stmt s(db.db, in, "SELECT name, type FROM sqlite_master WHERE type IN ('table','view')");
        while (s.step()) (s.text(1) == "view" ? views : tables).insert(s.text(0));
    }
    // What nsys writes are tables; a view of the same name computes rows nsys never recorded.
    for (const char* t : {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                          "CUDA_GPU_MEMORY_USAGE_EVENTS", "NVTX_EVENTS", "StringIds", "TARGET_INFO_GPU",
                          "EXPORT_META_DATA"})
        if (views.count(t)) throw Error(where(in, std::string(t) + " is a view, not a table: not an nsys export"));
    const char* wanted[] = {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                            "CUDA_GPU_MEMORY_USAGE_EVENTS", "NVTX_EVENTS", "StringIds", "TARGET_INFO_GPU"};
    std::string missing;
    for (const char* t : wanted)
        if (!tables.count(t)) {
            if (!missing.empty()) missing += ',';
            missing += t;
        }
    std::string version = "unknown";
    if (tables.count("EXPORT_META_DATA")) {
        sql::Stmt s(db.db, in, "SELECT name, value FROM EXPORT_META_DATA");
        while (s.step()) {
            std::string k = s.text(0);
            if (k == "EXPORT_PRODUCT_VERSION") r.meta["nsys.version"] = s.text(1);
            if (k == "EXPORT_SCHEMA_VERSION") version = s.text(1);
        }
    }
    r.meta["nsys.schema_version"] = version;
    bool any = tables.count("CUPTI_ACTIVITY_KIND_KERNEL") || tables.count("CUPTI_ACTIVITY_KIND_MEMCPY") ||
               tables.count("CUPTI_ACTIVITY_KIND_MEMSET") || tables.count("CUDA_GPU_MEMORY_USAGE_EVENTS");
    if (!any)
        throw Error(where(in, "Nsight Systems export (schema " + version +
                                  ") has none of the tables mhc reads (CUPTI_ACTIVITY_KIND_KERNEL, "
                                  "_MEMCPY, _MEMSET, CUDA_GPU_MEMORY_USAGE_EVENTS): unknown version or "
                                  "nothing was traced"));
    if (!missing.empty()) {
        r.meta["nsys.missing_tables"] = missing;
        r.meta["missing"] = "nsys tables " + missing;   // import_file says so, naming the input as given
    }
    auto need = [&](const std::string& t, const std::set<std::string>& cols, std::initializer_list<const char*> names) {
        for (const char* n : names)
            if (!cols.count(n)) throw Error(where(in, "table " + t + " has no column '" + n + "' (unknown nsys version)"));
    };

    std::unordered_map<int64_t, std::string> strings;
    if (tables.count("StringIds")) {
        auto c = db.columns("StringIds");
        need("StringIds", c, {"id", "value"});
        sql::Stmt s(db.db, in, "SELECT id, value FROM StringIds");
        while (s.step()) strings[s.i64(0)] = s.text(1);
    }
    auto str = [&](int64_t id) -> std::string {
        auto it = strings.find(id);
        return it == strings.end() ? "string " + std::to_string(id) : it->second;
    };

    // Base time: the earliest start among the tables read.
    int64_t base = INT64_MAX;
    for (const char* t : {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                          "CUDA_GPU_MEMORY_USAGE_EVENTS", "NVTX_EVENTS"}) {
        if (!tables.count(t)) continue;
        auto c = db.columns(t);
        need(t, c, {"start"});
        // Integers only: each row's own check below names any other value.
        sql::Stmt s(db.db, in, (std::string("SELECT MIN(start) FROM ") + t + " WHERE typeof(start) = 'integer'").c_str());
        if (s.step() && !s.is_null(0)) base = std::min(base, std::max(s.i64(0), -kMaxTime));
    }
    if (base == INT64_MAX) base = 0;
    // Times relative to base; values whose difference does not fit in int64 are bad input.
    auto rel = [&](int64_t t, const char* table) {
        int64_t out;
        if (__builtin_sub_overflow(t, base, &out))
            throw Error(where(in, std::string("table ") + table + ": time " + std::to_string(t) + " is out of range"));
        return out;
    };
    int64_t events = 0;

    if (tables.count("TARGET_INFO_GPU")) {
        auto c = db.columns("TARGET_INFO_GPU");
        std::string q = "SELECT " + col(c, "name", "''") + ", " + col(c, "totalMemory") + ", " + col(c, "id") +
                        ", rowid FROM TARGET_INFO_GPU ORDER BY " + col(c, "totalMemory") + " DESC LIMIT 1";
        sql::Stmt s(db.db, in, q.c_str());
        if (s.step()) {
            r.meta["device_name"] = s.text(0);
            r.meta["device_memory"] = std::to_string(Cells{s, in, "TARGET_INFO_GPU", 3}.get(1, "totalMemory", 0, kMaxBytes, false));
        }
    }

    // Allocations: alloc/free pairs by (device, address).
    int64_t reconstructed = 0;
    if (tables.count("CUDA_GPU_MEMORY_USAGE_EVENTS")) {
        auto c = db.columns("CUDA_GPU_MEMORY_USAGE_EVENTS");
        need("CUDA_GPU_MEMORY_USAGE_EVENTS", c, {"address", "bytes", "memoryOperationType"});
        std::string q = "SELECT start, " + col(c, "deviceId") + ", address, bytes, " + col(c, "memKind", "2") +
                        ", memoryOperationType, rowid FROM CUDA_GPU_MEMORY_USAGE_EVENTS ORDER BY start, rowid";
        sql::Stmt s(db.db, in, q.c_str());
        Cells cell{s, in, "CUDA_GPU_MEMORY_USAGE_EVENTS", 6};
        std::map<std::pair<int32_t, int64_t>, int64_t> live;
        int64_t next = 1;
        while (s.step()) {
            ++events;
            int64_t t = rel(cell.get(0, "start", -kMaxTime, kMaxTime), "CUDA_GPU_MEMORY_USAGE_EVENTS");
            // memKind 0 pageable, 1 pinned: host memory (device -1); the rest is on the GPU.
            int64_t kind = cell.get(4, "memKind", INT64_MIN, INT64_MAX, false, 2);
            int64_t device = cell.get(1, "deviceId", -1, INT32_MAX, false);
            int32_t dev = kind == 0 || kind == 1 ? -1 : static_cast<int32_t>(device);
            int64_t addr = cell.get(2, "address", INT64_MIN, INT64_MAX), bytes = cell.get(3, "bytes", 0, kMaxBytes),
                    op = cell.get(5, "memoryOperationType", 0, 1);   // nsys: 0 allocation, 1 free
            auto key = std::make_pair(dev, addr);
            if (op == 0) {
                if (bytes <= 0) throw Error(where_row(in, "CUDA_GPU_MEMORY_USAGE_EVENTS", s.i64(6), "allocation of " + std::to_string(bytes) + " bytes"));
                auto it = live.find(key);
                if (it != live.end()) { w.set_free_time(it->second, t); live.erase(it); }
                Allocation a;
                a.id = next++;
                a.device = dev;
                a.address = addr;
                a.bytes = bytes;
                a.t_alloc = t;
                w.add(a);
                live[key] = a.id;
            } else if (op == 1) {
                auto it = live.find(key);
                if (it != live.end()) {
                    w.set_free_time(it->second, t);
                    live.erase(it);
                } else if (bytes > 0) {   // allocated before the capture began
                    Allocation a;
                    a.id = next++;
                    a.device = dev;
                    a.address = addr;
                    a.bytes = bytes;
                    a.t_alloc = 0;
                    a.t_free = t;
                    a.label = w.intern("(allocated before recording)");
                    w.add(a);
                    ++reconstructed;
                }
            }
        }
    }

    // Kernels, serial per stream (starts that overlap the previous kernel are clamped).
    int64_t clamped = 0, nkernels = 0;
    if (tables.count("CUPTI_ACTIVITY_KIND_KERNEL")) {
        auto c = db.columns("CUPTI_ACTIVITY_KIND_KERNEL");
        need("CUPTI_ACTIVITY_KIND_KERNEL", c, {"start", "end"});
        std::string name = c.count("demangledName") ? "demangledName" : c.count("shortName") ? "shortName" : "-1";
        std::string q = "SELECT start, end, " + col(c, "deviceId") + ", " + col(c, "streamId") + ", " + name + ", " +
                        col(c, "correlationId") + ", " + col(c, "gridX") + ", " + col(c, "gridY") + ", " + col(c, "gridZ") +
                        ", " + col(c, "blockX") + ", " + col(c, "blockY") + ", " + col(c, "blockZ") + ", " +
                        col(c, "staticSharedMemory") + " + " + col(c, "dynamicSharedMemory") + ", " +
                        col(c, "registersPerThread") + ", rowid FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start, rowid";
        sql::Stmt s(db.db, in, q.c_str());
        Cells cell{s, in, "CUPTI_ACTIVITY_KIND_KERNEL", 14};
        std::map<std::pair<int32_t, int64_t>, int64_t> stream_end;
        std::unordered_map<int64_t, int64_t> name_ids;
        while (s.step()) {
            ++events;
            Kernel k;
            k.id = ++nkernels;
            k.device = static_cast<int32_t>(cell.get(2, "deviceId", -1, INT32_MAX, false));
            k.stream = cell.get(3, "streamId", INT64_MIN, INT64_MAX, false);
            int64_t sid = cell.get(4, "demangledName", INT64_MIN, INT64_MAX, false, -1);
            auto ni = name_ids.find(sid);
            k.name = ni != name_ids.end() ? ni->second : (name_ids[sid] = w.intern(str(sid)));
            auto [ks, ke] = cell.interval(0, 1);
            k.t_start = rel(ks, "CUPTI_ACTIVITY_KIND_KERNEL");
            k.t_end = rel(ke, "CUPTI_ACTIVITY_KIND_KERNEL");
            auto& end = stream_end[{k.device, k.stream}];
            if (k.t_start < end) {
                k.t_start = end;
                k.t_end = std::max(k.t_end, k.t_start);
                ++clamped;
            }
            end = std::max(end, k.t_end);
            k.correlation = cell.get(5, "correlationId", INT64_MIN, INT64_MAX, false);
            static const char* grid[] = {"gridX", "gridY", "gridZ"}, *block[] = {"blockX", "blockY", "blockZ"};
            for (int i = 0; i < 3; ++i) {
                k.grid[i] = static_cast<int32_t>(cell.get(6 + i, grid[i], 0, INT32_MAX, false));
                k.block[i] = static_cast<int32_t>(cell.get(9 + i, block[i], 0, INT32_MAX, false));
            }
            k.shared_mem = static_cast<int32_t>(cell.get(12, "staticSharedMemory + dynamicSharedMemory", 0, INT32_MAX, false));
            k.registers = static_cast<int32_t>(cell.get(13, "registersPerThread", 0, INT32_MAX, false));
            w.add(k);
        }
    }
    int64_t ncopies = 0;
    for (const char* t : {"CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"}) {
        if (!tables.count(t)) continue;
        bool memset = std::string(t) == "CUPTI_ACTIVITY_KIND_MEMSET";
        auto c = db.columns(t);
        need(t, c, {"start", "end"});
        std::string q = "SELECT start, end, " + col(c, "deviceId") + ", " + col(c, "streamId") + ", " + col(c, "bytes") +
                        ", " + (memset ? std::string("-1") : col(c, "copyKind")) + ", rowid FROM " + t + " ORDER BY start, rowid";
        sql::Stmt s(db.db, in, q.c_str());
        Cells cell{s, in, t, 6};
        while (s.step()) {
            ++events;
            Copy cp;
            cp.id = ++ncopies;
            cp.device = static_cast<int32_t>(cell.get(2, "deviceId", -1, INT32_MAX, false));
            cp.stream = cell.get(3, "streamId", INT64_MIN, INT64_MAX, false);
            cp.kind = memset ? CopyKind::Memset : copy_kind(cell.get(5, "copyKind", 0, kMaxCuptiMemcpyKind, false));
            cp.bytes = cell.get(4, "bytes", 0, kMaxBytes, false);
            auto [cs, ce] = cell.interval(0, 1);
            cp.t_start = rel(cs, t);
            cp.t_end = rel(ce, t);
            w.add(cp);
        }
    }
    int64_t nmarkers = 0;
    if (tables.count("NVTX_EVENTS")) {
        auto c = db.columns("NVTX_EVENTS");
        std::string q = "SELECT start, " + col(c, "end", "NULL") + ", " + col(c, "text", "NULL") + ", " +
                        col(c, "textId", "NULL") + ", rowid FROM NVTX_EVENTS ORDER BY start, rowid";
        sql::Stmt s(db.db, in, q.c_str());
        Cells cell{s, in, "NVTX_EVENTS", 4};
        while (s.step()) {
            ++events;
            Marker m;
            m.id = ++nmarkers;
            std::string text = !s.is_null(2) ? s.text(2) : !s.is_null(3) ? str(cell.get(3, "textId", INT64_MIN, INT64_MAX)) : "nvtx";
            m.name = w.intern(text);
            m.t_start = rel(cell.get(0, "start", -kMaxTime, kMaxTime), "NVTX_EVENTS");
            m.t_end = s.is_null(1) ? m.t_start : rel(cell.interval(0, 1).second, "NVTX_EVENTS");
            m.kind = MarkerKind::Range;
            w.add(m);
        }
    }
    r.events = events;
    r.meta["source"] = "nsight-systems-sqlite";
    r.meta["import.format"] = "nsys";
    r.meta["import.events"] = std::to_string(events);
    r.meta["timing"] = "exact";
    r.meta["accesses"] = "none";   // nsys records no kernel arguments
    r.meta["categories"] = "unknown";
    r.meta["reconstructed_blocks"] = std::to_string(reconstructed);
    r.meta["nsys.kernel_starts_clamped"] = std::to_string(clamped);
    if (!tables.count("CUDA_GPU_MEMORY_USAGE_EVENTS"))
        r.meta["allocations"] = "none (no CUDA_GPU_MEMORY_USAGE_EVENTS: export with --cuda-memory-usage=true)";
}

}  // namespace mhc::trace::import
