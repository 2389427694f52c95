// An Nsight Systems export's CUDA memory: CUDA_GPU_MEMORY_USAGE_EVENTS as allocations
// (nsys_import.hpp).
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nsys_import.hpp"

namespace mhc::trace::import::nsys {

int64_t NsysImport::add_block(int32_t device, int64_t address, int64_t bytes, int64_t t_alloc, int64_t t_free, int64_t label,
                              int64_t stream) {
    Allocation alloc;
    alloc.id = ++allocations_;
    alloc.device = device;
    alloc.address = address;
    alloc.bytes = bytes;
    alloc.t_alloc = t_alloc;
    alloc.t_free = t_free;
    alloc.label = label;
    alloc.stream = stream;
    w_.add(alloc);
    return alloc.id;
}

std::set<int64_t> NsysImport::memory_kinds() const {
    std::set<int64_t> kinds;
    if (has("ENUM_CUDA_MEM_KIND") && db_.columns("ENUM_CUDA_MEM_KIND").count("id")) {
        sql::Stmt rows(db_.db, in_, "SELECT id FROM ENUM_CUDA_MEM_KIND WHERE typeof(id) = 'integer'");
        while (rows.step()) kinds.insert(rows.i64(0));
    }
    if (kinds.empty())
        for (int64_t kind = 0; kind <= 7; ++kind) kinds.insert(kind);
    return kinds;
}

void NsysImport::read_allocations() {
    if (!has("CUDA_GPU_MEMORY_USAGE_EVENTS")) return;
    auto cols = columns("CUDA_GPU_MEMORY_USAGE_EVENTS", {"address", "bytes", "memoryOperationType"});
    // Columns 2 and 3 are deviceId and streamId, as lane() reads a kernel's.
    std::string query = "SELECT start, address, " + col(cols, "deviceId") + ", " + col(cols, "streamId", "NULL") +
                        ", bytes, " + col(cols, "memKind", "2") + ", memoryOperationType, " + col(cols, "globalPid") +
                        ", rowid FROM CUDA_GPU_MEMORY_USAGE_EVENTS ORDER BY start, rowid";
    sql::Stmt stmt(db_.db, in_, query.c_str());
    Cells cell{stmt, in_, "CUDA_GPU_MEMORY_USAGE_EVENTS", 8};
    std::map<std::tuple<int32_t, int64_t, int64_t>, int64_t> live;
    std::map<int32_t, int64_t> first_process;   // device -> the first globalPid seen allocating on it
    int64_t unaddressed = 0, unknown_kinds = 0, first_unknown_kind = 0, realloc_live = 0, sizeless_frees = 0;
    const std::set<int64_t> mem_kinds = memory_kinds();
    while (stmt.step()) {
        ++events_;
        int64_t time_ns = rel(cell.get(0, "start", -kMaxTime, kMaxTime), "CUDA_GPU_MEMORY_USAGE_EVENTS");
        // memKind 0 pageable, 1 pinned: host memory (device -1); the rest is on the GPU.
        int64_t kind = cell.get(5, "memKind", INT64_MIN, INT64_MAX, false, 2);
        if (!mem_kinds.count(kind) && unknown_kinds++ == 0) first_unknown_kind = kind;
        // No stream: NULL, or CUPTI_INVALID_STREAM_ID (cupti_activity.h: a memory operation that is not async).
        const bool ordered = sqlite3_column_type(stmt.get(), 3) != SQLITE_NULL && stmt.i64(3) != 0xFFFFFFFF;
        const auto [device, stream] =
            ordered ? lane(cell, 7) : std::pair<int32_t, int64_t>{device_and_stream(cell).first, 0};
        int32_t dev = kind == 0 || kind == 1 ? -1 : device;
        int64_t addr = cell.get(1, "address", INT64_MIN, INT64_MAX), bytes = cell.get(4, "bytes", 0, kMaxBytes),
                op = cell.get(6, "memoryOperationType", 0, 1);   // nsys: 0 allocation, 1 free
        const int64_t pid = cell.get(7, "globalPid", INT64_MIN, INT64_MAX, false);
        auto key = std::make_tuple(dev, pid, addr);
        if (first_process.try_emplace(dev, pid).first->second != pid) {
            addr = 0;
            ++unaddressed;
        }
        auto it = live.find(key);
        if (op == 0 && bytes <= 0)
            throw Error(where_row(in_, "CUDA_GPU_MEMORY_USAGE_EVENTS", stmt.i64(cell.rowid_col),
                                  "allocation of " + std::to_string(bytes) + " bytes"));
        if (it != live.end()) {   // an allocation at a live block's address: its free was not recorded
            w_.set_free_time(it->second, time_ns);
            live.erase(it);
            if (op == 0) {
                ++realloc_live;
                live[key] = add_block(dev, addr, bytes, time_ns, kNoTime, kNoString, stream);
            }
        } else if (op == 0) {
            live[key] = add_block(dev, addr, bytes, time_ns, kNoTime, kNoString, stream);
        } else if (bytes > 0) {   // a free of a block allocated before the capture began
            add_block(dev, addr, bytes, 0, time_ns, w_.intern("(allocated before recording)"), stream);
            ++reconstructed_;
        } else {
            ++sizeless_frees;
        }
    }
    say_unpaired_memory(realloc_live, sizeless_frees);
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

// Both leave the trace's memory a guess the file does not confirm: the earlier block ends when its
// address is allocated again (CUDA hands out a live address to no one), a sizeless free is left out.
void NsysImport::say_unpaired_memory(int64_t realloc_live, int64_t sizeless_frees) {
    std::string said;
    if (realloc_live > 0)
        said = std::to_string(realloc_live) + " allocations at an address their process still held (the free "
               "before each was not recorded: the earlier block is taken as freed when its address was allocated again)";
    if (sizeless_frees > 0)
        said += (said.empty() ? "" : "; ") + std::to_string(sizeless_frees) +
                " frees of 0 bytes at an address not allocated in the export (a block from before recording "
                "of unknown size: left out)";
    if (said.empty()) return;
    r_.meta["nsys.memory_events_unpaired"] = said;
    r_.warnings.push_back(said);
}

}  // namespace mhc::trace::import::nsys
