// An Nsight Systems export's kernels, CUDA graph launches, copies and memsets (nsys_import.hpp).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kineto_map.hpp"
#include "quoted_name.hpp"
#include "nsys_import.hpp"

namespace mhc::trace::import::nsys {

void NsysImport::read_kernels() {
    if (!has("CUPTI_ACTIVITY_KIND_KERNEL")) return;
    auto cols = columns("CUPTI_ACTIVITY_KIND_KERNEL", {"start", "end"});
    std::string name = cols.count("demangledName") ? "demangledName" : cols.count("shortName") ? "shortName" : "-1";
    std::string query = "SELECT start, end, " + col(cols, "deviceId") + ", " + col(cols, "streamId") + ", " + name +
                        ", " + col(cols, "correlationId") + ", " + col(cols, "gridX") + ", " + col(cols, "gridY") +
                        ", " + col(cols, "gridZ") + ", " + col(cols, "blockX") + ", " + col(cols, "blockY") + ", " +
                        col(cols, "blockZ") + ", " + col(cols, "staticSharedMemory") + " + " +
                        col(cols, "dynamicSharedMemory") + ", " + col(cols, "registersPerThread") + ", " +
                        col(cols, "globalPid") + ", rowid FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start, rowid";
    sql::Stmt stmt(db_.db, in_, query.c_str());
    Cells cell{stmt, in_, "CUPTI_ACTIVITY_KIND_KERNEL", 15};
    std::unordered_map<int64_t, int64_t> name_ids;
    while (stmt.step()) {
        ++events_;
        Kernel kernel;
        std::tie(kernel.device, kernel.stream) = lane(cell, 14);
        int64_t sid = cell.get(4, "demangledName", INT64_MIN, INT64_MAX, false, -1);
        auto ni = name_ids.find(sid);
        kernel.name = ni != name_ids.end() ? ni->second : (name_ids[sid] = w_.intern(str(sid)));
        auto [ks, ke] = cell.interval(0, 1);
        kernel.t_start = rel(ks, "CUPTI_ACTIVITY_KIND_KERNEL");
        kernel.t_end = rel(ke, "CUPTI_ACTIVITY_KIND_KERNEL");
        kernel.correlation = cell.get(5, "correlationId", INT64_MIN, INT64_MAX, false);
        const int64_t pid = cell.get(14, "globalPid", INT64_MIN, INT64_MAX, false);
        kernel.step = kernel_step(kernel, pid);
        if (kernel.correlation != 0) kernel_calls_.emplace(pid, kernel.correlation);
        static const char* grid[] = {"gridX", "gridY", "gridZ"}, *block[] = {"blockX", "blockY", "blockZ"};
        for (int i = 0; i < 3; ++i) {
            kernel.grid[i] = static_cast<int32_t>(cell.get(6 + i, grid[i], 0, INT32_MAX, false));
            kernel.block[i] = static_cast<int32_t>(cell.get(9 + i, block[i], 0, INT32_MAX, false));
        }
        kernel.shared_mem = static_cast<int32_t>(
            cell.get(12, "staticSharedMemory + dynamicSharedMemory", 0, INT32_MAX, false));
        kernel.registers = static_cast<int32_t>(cell.get(13, "registersPerThread", 0, INT32_MAX, false));
        kernels_.push_back(kernel);
    }
}

void NsysImport::read_graph_launches() {
    if (!has(kGraphTrace)) return;
    auto cols = columns(kGraphTrace, {"start", "end"});
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
        const int64_t pid = cell.get(6, "globalPid", INT64_MIN, INT64_MAX, false);
        auto [gs, ge] = cell.interval(0, 1);
        if (launch.correlation != 0 && kernel_calls_.count({pid, launch.correlation})) {
            ++also_as_kernels;
            continue;
        }
        launch.name = w_.intern("CUDA graph " + std::to_string(graph));
        launch.t_start = rel(gs, kGraphTrace);
        launch.t_end = rel(ge, kGraphTrace);
        launch.step = kernel_step(launch, pid);   // before 2026-12-06 none: every graph launch in no step
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

void NsysImport::write_kernels() {
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

void NsysImport::say_uvm_migrations() {
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

void NsysImport::read_copies(const char* table) {
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

void NsysImport::say_launches_without_kernels() {
    if (!has("CUPTI_ACTIVITY_KIND_RUNTIME") || !has("StringIds")) return;
    auto cols = columns("CUPTI_ACTIVITY_KIND_RUNTIME", {"start", "nameId"});
    if (!cols.count("correlationId")) return;
    // A call ran where a GPU row has its correlationId and process: correlation ids are per
    // process, and a call's process is its globalTid's (the PID in bits 24-47, globalPid the same
    // bits). A row without globalPid, or calls without globalTid (exports of one process,
    // before nsys wrote them), match by the id alone. Both lookups are uncorrelated subqueries, indexed once by SQLite.
    std::string by_process, by_id;
    for (const char* table :
         {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", kGraphTrace}) {
        if (!has(table)) continue;
        const std::set<std::string> gpu = db_.columns(table);
        if (!gpu.count("correlationId")) continue;
        const bool pid = gpu.count("globalPid") > 0 && cols.count("globalTid") > 0;
        by_id += std::string(by_id.empty() ? "" : " UNION ") + "SELECT correlationId FROM " + table +
                 (pid ? " WHERE globalPid IS NULL" : "");
        if (pid)
            by_process += std::string(by_process.empty() ? "" : " UNION ") + "SELECT globalPid, correlationId FROM " +
                          table + " WHERE globalPid IS NOT NULL";
    }
    const std::string process = "(" + col(cols, "globalTid") + " & ~16777215)";
    std::string ran_call = "0";
    if (!by_process.empty()) ran_call += " OR (" + process + ", r.correlationId) IN (" + by_process + ")";
    if (!by_id.empty()) ran_call += " OR r.correlationId IN (" + by_id + ")";
    const std::string ok = cols.count("returnValue") ? "r.returnValue = 0" : "1";
    std::string query = "SELECT s.value, r.start, " + col(cols, "globalTid") + ", (" + ran_call +
                        "), r.rowid FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
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

}  // namespace mhc::trace::import::nsys
