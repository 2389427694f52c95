// Which tables and columns an Nsight Systems export has, its strings, time base and GPUs
// (nsys_import.hpp).
#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include "nsys_import.hpp"

namespace mhc::trace::import::nsys {

std::set<std::string> NsysImport::columns(const std::string& table, std::initializer_list<const char*> needed) const {
    std::set<std::string> cols = db_.columns(table);
    for (const char* name : needed)
        if (!cols.count(name))
            throw Error(where(in_, "table " + table + " has no column '" + name + "' (unknown nsys version)"));
    return cols;
}

void NsysImport::find_tables() {
    std::set<std::string> views;
    {
        sql::Stmt stmt(db_.db, in_, "SELECT name, type FROM sqlite_master WHERE type IN ('table','view')");
        while (stmt.step()) (stmt.text(1) == "view" ? views : tables_).insert(stmt.text(0));
    }
    // What nsys writes are tables; a view of the same name computes rows nsys never recorded.
    for (const char* table_name : {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                                   "CUPTI_ACTIVITY_KIND_MEMSET", "CUDA_GPU_MEMORY_USAGE_EVENTS", "NVTX_EVENTS",
                                   "StringIds", "TARGET_INFO_GPU", "EXPORT_META_DATA", "META_DATA_EXPORT", kGraphTrace})
        if (views.count(table_name))
            throw Error(where(in_, std::string(table_name) + " is a view, not a table: not an nsys export"));
    std::string missing;
    for (const char* table_name :
         {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
          "CUDA_GPU_MEMORY_USAGE_EVENTS", "NVTX_EVENTS", "StringIds", "TARGET_INFO_GPU"})
        if (!has(table_name)) missing += (missing.empty() ? "" : ",") + std::string(table_name);
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

void NsysImport::say_unread_tables() {
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

void NsysImport::read_capture() {
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

std::string NsysImport::why_no_gpu_tables() const {
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

void NsysImport::find_shared_devices() {
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

std::pair<int32_t, int64_t> NsysImport::lane(const Cells& cell, int pid_col) const {
    auto [device, stream] = device_and_stream(cell);
    if (stream_base_.empty()) return {device, stream};
    auto base = stream_base_.find({device, cell.get(pid_col, "globalPid", INT64_MIN, INT64_MAX, false)});
    return {device, base == stream_base_.end() ? stream : stream + base->second};
}

void NsysImport::read_strings() {
    if (!has("StringIds")) return;
    columns("StringIds", {"id", "value"});
    sql::Stmt stmt(db_.db, in_, "SELECT id, value FROM StringIds");
    while (stmt.step()) strings_[stmt.i64(0)] = stmt.text(1);
}

std::string NsysImport::str(int64_t id) const {
    auto it = strings_.find(id);
    return it == strings_.end() ? "string " + std::to_string(id) : it->second;
}

void NsysImport::find_base_time() {
    for (const char* table : {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                              "CUDA_GPU_MEMORY_USAGE_EVENTS", "NVTX_EVENTS", kGraphTrace}) {
        if (!has(table)) continue;
        columns(table, {"start"});
        // Integers only: each row's own check names any other value. NVTX rows: markers only.
        std::string query = std::string("SELECT MIN(start) FROM ") + table + " WHERE typeof(start) = 'integer'";
        if (std::string(table) == "NVTX_EVENTS") query += nvtx_ranges_and_marks();
        if (std::string(table) == kGraphTrace) query += kGraphTimed;
        sql::Stmt earliest(db_.db, in_, query.c_str());
        if (earliest.step() && !earliest.is_null(0)) base_ = std::min(base_, std::max(earliest.i64(0), -kMaxTime));
    }
    if (base_ == INT64_MAX) base_ = 0;
}

int64_t NsysImport::rel(int64_t time_ns, const char* table) const {
    int64_t out;
    if (__builtin_sub_overflow(time_ns, base_, &out))
        throw Error(
            where(in_, std::string("table ") + table + ": time " + std::to_string(time_ns) + " is out of range"));
    return out;
}

void NsysImport::read_gpu() {
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

}  // namespace mhc::trace::import::nsys
