// The accesses by allocation: read (cache or rows), grouped by a counting sort, looked up per hover.
#include "accesses.hpp"

#include <algorithm>

#include "mhc/trace/cache.hpp"
#include "mhc/trace/columns.hpp"

namespace mhc::viewer {

namespace detail {

namespace {

// The cache entry's three access columns (load_trace's, trace/columns.hpp), when the file holds a
// valid entry for this fingerprint and its arrays fit the trace's row counts.
bool read_cached(const trace::Reader& reader, const std::string& fingerprint, const trace::TableCounts& counts,
                 AccessRows& out) {
    auto cache = trace::read_cache(reader.handle(), trace::kTraceCacheKey, fingerprint, false);
    if (!cache) return false;
    bool ok = cache->get("kernels.access_begin", out.group_begin) && cache->get("accesses.allocation", out.allocation) &&
              cache->get("accesses.mode", out.mode);
    ok = cache->finish() && ok;
    const std::vector<int64_t>& begin = out.group_begin;
    ok = ok && begin.size() == static_cast<size_t>(counts.kernels) + 1 && begin.front() == 0 &&
         std::is_sorted(begin.begin(), begin.end()) && static_cast<size_t>(begin.back()) == out.allocation.size() &&
         out.mode.size() == out.allocation.size() &&
         std::all_of(out.allocation.begin(), out.allocation.end(),
                     [&](int32_t index) { return index >= 0 && index < counts.allocations; });
    if (!ok) {
        out = {};
        return false;
    }
    out.from_cache = true;
    return true;
}

}  // namespace

AccessRows read_access_rows(const trace::Reader& reader, const std::string& fingerprint,
                            const trace::TableCounts& counts, const std::function<void(int64_t)>& tick) {
    AccessRows out;
    if (read_cached(reader, fingerprint, counts, out)) {
        tick(counts.accesses);
        return out;
    }
    out.allocation_id.reserve(static_cast<size_t>(counts.accesses));
    out.mode.reserve(static_cast<size_t>(counts.accesses));
    trace::Scan scan = reader.scan(trace::TraceTable::Accesses, {"kernel", "allocation", "mode"});
    constexpr int64_t kTick = 262144;
    int64_t rows = 0;
    while (scan.next()) {
        const int64_t kernel = scan[0], mode = scan[2];
        if (out.kernel_id.empty() || out.kernel_id.back() != kernel) {
            out.kernel_id.push_back(kernel);
            out.group_begin.push_back(rows);
        }
        out.allocation_id.push_back(scan[1]);
        out.mode.push_back(mode >= 1 && mode <= 3 ? static_cast<trace::AccessMode>(mode) : trace::AccessMode::ReadWrite);
        if (++rows % kTick == 0) tick(kTick);
    }
    out.group_begin.push_back(rows);
    tick(rows % kTick);
    return out;
}

std::shared_ptr<const AccessIndex> group_by_allocation(AccessRows&& rows, const std::vector<int64_t>& kernel_ids,
                                                       const ViewTrace& view) {
    auto index = std::make_shared<AccessIndex>();
    index->from_cache = rows.from_cache;
    const std::vector<int64_t>& alloc_ids = view.allocations.id;
    trace::IdIndex kernel_at, alloc_at;
    kernel_at.build(kernel_ids);
    alloc_at.build(alloc_ids);
    // Each group's dense kernel and each access's dense allocation (-1: not in the trace).
    const size_t groups = rows.group_begin.size() - 1;
    std::vector<int64_t> group_kernel(groups);
    for (size_t group = 0; group < groups; ++group)
        group_kernel[group] = rows.from_cache ? static_cast<int64_t>(group)
                                              : kernel_at.find(kernel_ids, rows.kernel_id[group]);
    if (!rows.from_cache) {
        rows.allocation.resize(rows.allocation_id.size());
        for (size_t row = 0; row < rows.allocation_id.size(); ++row)
            rows.allocation[row] = static_cast<int32_t>(alloc_at.find(alloc_ids, rows.allocation_id[row]));
        std::vector<int64_t>().swap(rows.allocation_id);
    }
    // Counting sort by allocation; within one, kernel id order (the order of the groups).
    auto each = [&](auto&& fn) {
        for (size_t group = 0; group < groups; ++group) {
            if (group_kernel[group] < 0) continue;
            const auto first = static_cast<size_t>(rows.group_begin[group]);
            const auto last = static_cast<size_t>(rows.group_begin[group + 1]);
            for (size_t row = first; row < last; ++row)
                if (rows.allocation[row] >= 0)
                    fn(static_cast<uint32_t>(group_kernel[group]), static_cast<size_t>(rows.allocation[row]), row);
        }
    };
    std::vector<uint64_t>& begin = index->begin;
    begin.assign(alloc_ids.size() + 1, 0);
    each([&](uint32_t, size_t alloc, size_t) { ++begin[alloc + 1]; });
    for (size_t i = 1; i < begin.size(); ++i) begin[i] += begin[i - 1];
    index->kernel.resize(begin.back());
    index->mode.resize(begin.back());
    std::vector<uint64_t> next(begin.begin(), begin.end() - 1);
    each([&](uint32_t kernel, size_t alloc, size_t row) {
        const uint64_t at = next[alloc]++;
        index->kernel[at] = kernel;
        index->mode[at] = rows.mode[row];
    });
    // Where each kernel sits in the lanes.
    index->kernel_lane.assign(kernel_ids.size(), 0);
    index->kernel_item.assign(kernel_ids.size(), 0);
    for (size_t lane = 0; lane < view.kernel_lanes.size(); ++lane) {
        const std::vector<int64_t>& ref = view.kernel_lanes[lane].ref;
        for (size_t item = 0; item < ref.size(); ++item) {
            const int64_t kernel = kernel_at.find(kernel_ids, ref[item]);
            if (kernel < 0) continue;
            index->kernel_lane[static_cast<size_t>(kernel)] = static_cast<uint32_t>(lane);
            index->kernel_item[static_cast<size_t>(kernel)] = static_cast<uint32_t>(item);
        }
    }
    return index;
}

}  // namespace detail

size_t AccessIndex::bytes() const {
    return begin.capacity() * sizeof(uint64_t) + kernel.capacity() * sizeof(uint32_t) +
           mode.capacity() * sizeof(trace::AccessMode) +
           (kernel_lane.capacity() + kernel_item.capacity()) * sizeof(uint32_t);
}

int64_t access_count_of(const ViewTrace& view, int64_t allocation_id) {
    if (!view.access_index) return view.reader->access_count(allocation_id);
    const int64_t at = view.allocations.index_of(allocation_id);
    return at < 0 ? 0 : static_cast<int64_t>(view.access_index->count(static_cast<size_t>(at)));
}

std::vector<AccessHit> accesses_of(const ViewTrace& view, int64_t allocation_id) {
    std::vector<AccessHit> out;
    if (!view.access_index) {
        for (const trace::TimedAccess& hit : view.reader->accesses_to(allocation_id))
            out.push_back({hit.kernel, hit.stream, hit.t_start, hit.t_end, hit.device, hit.mode});
        return out;
    }
    const AccessIndex& index = *view.access_index;
    const int64_t at = view.allocations.index_of(allocation_id);
    if (at < 0) return out;
    const uint64_t first = index.begin[static_cast<size_t>(at)], last = index.begin[static_cast<size_t>(at) + 1];
    out.reserve(last - first);
    for (uint64_t entry = first; entry < last; ++entry) {
        const uint32_t kernel = index.kernel[entry];
        const Lane& lane = view.kernel_lanes[index.kernel_lane[kernel]];
        const uint32_t item = index.kernel_item[kernel];
        out.push_back({lane.ref[item], lane.stream, lane.t_start[item], lane.t_end[item], lane.device, index.mode[entry]});
    }
    // Kernel id order already: a stable sort leaves ties by kernel id, as the file's query orders them.
    std::stable_sort(out.begin(), out.end(),
                     [](const AccessHit& lhs, const AccessHit& rhs) { return lhs.t_start < rhs.t_start; });
    return out;
}

}  // namespace mhc::viewer
