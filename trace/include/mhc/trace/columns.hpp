#pragma once
// A whole trace in columnar in-memory arrays, as the simulator, checks and summaries use it.
// Rows keep their file order (id order). References between tables are resolved to dense
// indices once, here: accesses are grouped by kernel (CSR) and point at allocation indices.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "mhc/trace/model.hpp"

namespace mhc::trace {

// id -> dense index. O(1) when ids are contiguous (every writer of ours), else binary search.
// Holds no pointer into the ids, so TraceData stays movable.
class IdIndex {
public:
    void build(const std::vector<int64_t>& ids);   // ids must be strictly increasing
    // Returns -1 for an unknown id; `ids` is the vector given to build().
    int64_t find(const std::vector<int64_t>& ids, int64_t id) const;

private:
    bool contiguous_ = true;
    int64_t base_ = 0;
};

struct AllocationColumns {
    std::vector<int64_t> id, address, bytes, t_alloc, t_free, stream, label;
    std::vector<int32_t> device;
    std::vector<Category> category;
    // One per row from push(); may be shorter (rows built column by column): kNoBytes past its end.
    std::vector<int64_t> requested_bytes;
    size_t size() const { return id.size(); }
    int64_t requested_at(size_t i) const { return i < requested_bytes.size() ? requested_bytes[i] : kNoBytes; }
    void reserve(size_t n);
    void push(const Allocation& r);   // appends one row
    Allocation row(size_t index) const;   // the row at index as push() took it
};

struct KernelColumns {
    std::vector<int64_t> id, stream, name, t_start, t_end, correlation;
    std::vector<int32_t> device, step;
    // Accesses of kernel i are TraceData::accesses rows [access_begin[i] .. access_begin[i+1]).
    std::vector<int64_t> access_begin;
    size_t size() const { return id.size(); }
    void reserve(size_t n);
    void push(const Kernel& r);   // appends one row; access_begin is filled once all are in (load_trace)
    Kernel row(size_t index) const;   // the row at index as push() took it (launch geometry not kept: zeros)
};

struct AccessColumns {
    std::vector<int32_t> allocation;   // dense allocation index
    std::vector<AccessMode> mode;
    size_t size() const { return allocation.size(); }
};

struct CopyColumns {
    std::vector<int64_t> id, stream, bytes, t_start, t_end;
    std::vector<int32_t> device;
    std::vector<CopyKind> kind;
    size_t size() const { return id.size(); }
    void reserve(size_t n);
    void push(const Copy& r);   // appends one row
};

struct MarkerColumns {
    std::vector<int64_t> id, name, t_start, t_end;
    std::vector<MarkerKind> kind;
    std::vector<int32_t> index;
    size_t size() const { return id.size(); }
    void reserve(size_t n);
    void push(const Marker& r);   // appends one row
};

// An access whose kernel or allocation id is not in the trace (kept for `mhc check`).
struct DanglingAccess {
    int64_t kernel, allocation;
};

struct TraceData {
    std::string path;
    std::map<std::string, std::string> meta;
    std::string fingerprint;            // of the file as it was read (trace::fingerprint): runs stored from it must match
    int64_t change_counter = -1;        // the file's change counter then (trace::change_counter): caches of it are written only if unchanged
    bool from_cache = false;            // the columns came from the file's cache (trace_cache), not its rows
    std::vector<std::string> strings;   // strings[id]
    AllocationColumns allocations;
    KernelColumns kernels;
    AccessColumns accesses;
    CopyColumns copies;
    MarkerColumns markers;
    IdIndex allocation_index, kernel_index;
    std::vector<DanglingAccess> dangling_accesses;
    // The allocator's segments (docs/trace-format.md "segments"), in id order; empty for a
    // trace without the table.
    std::vector<Segment> segments;

    // Dense index of an allocation / kernel id, -1 if unknown.
    int64_t allocation_at(int64_t id) const { return allocation_index.find(allocations.id, id); }
    int64_t kernel_at(int64_t id) const { return kernel_index.find(kernels.id, id); }

    const std::string& str(int64_t id) const;
    std::string meta_or(const std::string& key, const std::string& fallback) const;
    // meta timing says the source had no timestamps: times are event numbers (order_only_timing).
    bool order_only() const;
    int64_t rows() const;
    // First kernel start / allocation to last end, over all tables.
    int64_t t_begin() const;
    int64_t t_end() const;
};

// meta "timing" of a trace whose source has no timestamps: `order-only` (`order` reads the
// same). Its times are event numbers; durations, losses, stalls and makespans say nothing.
bool order_only_timing(std::string_view timing);

class CacheWriter;
// The cache entry load_trace reads (trace/cache.hpp): every column of `t`.
inline constexpr const char* kTraceCacheKey = "trace";
void cache_columns(const TraceData& t, CacheWriter& w);

// Loads the whole trace, from the file's cache entry when it holds a valid one (trace/cache.hpp). Throws mhc::Error (file problems) like Reader.
// `name`: what errors call the file (import reads its temporary file as the output it becomes).
// Rows: always from the rows (mhc check, which judges the file itself).
enum class LoadFrom { CacheOrRows, Rows };
TraceData load_trace(const std::string& path, const std::string& name = "", LoadFrom from = LoadFrom::CacheOrRows);

}  // namespace mhc::trace
