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
bool read_cached(const trace::Reader& r, const std::string& fingerprint, const trace::TableCounts& n, AccessRows& out) {
    auto c = trace::read_cache(r.handle(), trace::kTraceCacheKey, fingerprint, false);
    if (!c) return false;
    bool ok = c->get("kernels.access_begin", out.group_begin) && c->get("accesses.allocation", out.allocation) &&
              c->get("accesses.mode", out.mode);
    ok = c->finish() && ok;
    const auto& b = out.group_begin;
    ok = ok && b.size() == static_cast<size_t>(n.kernels) + 1 && b.front() == 0 && std::is_sorted(b.begin(), b.end()) &&
         static_cast<size_t>(b.back()) == out.allocation.size() && out.mode.size() == out.allocation.size() &&
         std::all_of(out.allocation.begin(), out.allocation.end(),
                     [&](int32_t a) { return a >= 0 && a < n.allocations; });
    if (!ok) {
        out = {};
        return false;
    }
    out.from_cache = true;
    return true;
}

}   // namespace

AccessRows read_access_rows(const trace::Reader& r, const std::string& fingerprint, const trace::TableCounts& counts,
                            const std::function<void(int64_t)>& tick) {
    AccessRows out;
    if (read_cached(r, fingerprint, counts, out)) {
        tick(counts.accesses);
        return out;
    }
    out.allocation_id.reserve(static_cast<size_t>(counts.accesses));
    out.mode.reserve(static_cast<size_t>(counts.accesses));
    trace::Scan s = r.scan(trace::TraceTable::Accesses, {"kernel", "allocation", "mode"});
    constexpr int64_t kTick = 262144;
    int64_t n = 0;
    while (s.next()) {
        const int64_t k = s[0], m = s[2];
        if (out.kernel_id.empty() || out.kernel_id.back() != k) {
            out.kernel_id.push_back(k);
            out.group_begin.push_back(n);
        }
        out.allocation_id.push_back(s[1]);
        out.mode.push_back(m >= 1 && m <= 3 ? static_cast<trace::AccessMode>(m) : trace::AccessMode::ReadWrite);
        if (++n % kTick == 0) tick(kTick);
    }
    out.group_begin.push_back(n);
    tick(n % kTick);
    return out;
}

std::shared_ptr<const AccessIndex> group_by_allocation(AccessRows&& rows, const std::vector<int64_t>& kernel_ids,
                                                       const ViewTrace& t) {
    auto x = std::make_shared<AccessIndex>();
    x->from_cache = rows.from_cache;
    const std::vector<int64_t>& alloc_ids = t.allocations.id;
    trace::IdIndex kernel_index, alloc_index;
    kernel_index.build(kernel_ids);
    alloc_index.build(alloc_ids);
    // Each group's dense kernel and each access's dense allocation (-1: not in the trace).
    const size_t groups = rows.group_begin.size() - 1;
    std::vector<int64_t> group_kernel(groups);
    for (size_t g = 0; g < groups; ++g)
        group_kernel[g] = rows.from_cache ? static_cast<int64_t>(g) : kernel_index.find(kernel_ids, rows.kernel_id[g]);
    if (!rows.from_cache) {
        rows.allocation.resize(rows.allocation_id.size());
        for (size_t j = 0; j < rows.allocation_id.size(); ++j)
            rows.allocation[j] = static_cast<int32_t>(alloc_index.find(alloc_ids, rows.allocation_id[j]));
        std::vector<int64_t>().swap(rows.allocation_id);
    }
    // Counting sort by allocation; within one, kernel id order (the order of the groups).
    x->begin.assign(alloc_ids.size() + 1, 0);
    auto each = [&](auto&& fn) {
        for (size_t g = 0; g < groups; ++g) {
            if (group_kernel[g] < 0) continue;
            for (auto j = static_cast<size_t>(rows.group_begin[g]); j < static_cast<size_t>(rows.group_begin[g + 1]);
                 ++j)
                if (rows.allocation[j] >= 0)
                    fn(static_cast<uint32_t>(group_kernel[g]), static_cast<size_t>(rows.allocation[j]), j);
        }
    };
    each([&](uint32_t, size_t a, size_t) { ++x->begin[a + 1]; });
    for (size_t i = 1; i < x->begin.size(); ++i) x->begin[i] += x->begin[i - 1];
    x->kernel.resize(x->begin.back());
    x->mode.resize(x->begin.back());
    std::vector<uint64_t> at(x->begin.begin(), x->begin.end() - 1);
    each([&](uint32_t k, size_t a, size_t j) {
        const uint64_t p = at[a]++;
        x->kernel[p] = k;
        x->mode[p] = rows.mode[j];
    });
    // Where each kernel sits in the lanes.
    x->kernel_lane.assign(kernel_ids.size(), 0);
    x->kernel_item.assign(kernel_ids.size(), 0);
    for (size_t l = 0; l < t.kernel_lanes.size(); ++l) {
        const std::vector<int64_t>& ref = t.kernel_lanes[l].ref;
        for (size_t i = 0; i < ref.size(); ++i) {
            const int64_t k = kernel_index.find(kernel_ids, ref[i]);
            if (k < 0) continue;
            x->kernel_lane[static_cast<size_t>(k)] = static_cast<uint32_t>(l);
            x->kernel_item[static_cast<size_t>(k)] = static_cast<uint32_t>(i);
        }
    }
    return x;
}

}   // namespace detail

size_t AccessIndex::bytes() const {
    return begin.capacity() * sizeof(uint64_t) + kernel.capacity() * sizeof(uint32_t) +
           mode.capacity() * sizeof(trace::AccessMode) +
           (kernel_lane.capacity() + kernel_item.capacity()) * sizeof(uint32_t);
}

int64_t access_count_of(const ViewTrace& t, int64_t allocation_id) {
    if (!t.access_index) return t.reader->access_count(allocation_id);
    const int64_t i = t.allocations.index_of(allocation_id);
    return i < 0 ? 0 : static_cast<int64_t>(t.access_index->count(static_cast<size_t>(i)));
}

std::vector<AccessHit> accesses_of(const ViewTrace& t, int64_t allocation_id) {
    std::vector<AccessHit> out;
    if (!t.access_index) {
        for (const trace::TimedAccess& a : t.reader->accesses_to(allocation_id))
            out.push_back({a.kernel, a.stream, a.t_start, a.t_end, a.device, a.mode});
        return out;
    }
    const AccessIndex& x = *t.access_index;
    const int64_t i = t.allocations.index_of(allocation_id);
    if (i < 0) return out;
    for (uint64_t j = x.begin[static_cast<size_t>(i)]; j < x.begin[static_cast<size_t>(i) + 1]; ++j) {
        const uint32_t k = x.kernel[j];
        const Lane& l = t.kernel_lanes[x.kernel_lane[k]];
        const uint32_t p = x.kernel_item[k];
        out.push_back({l.ref[p], l.stream, l.t_start[p], l.t_end[p], l.device, x.mode[j]});
    }
    // Kernel id order already: a stable sort leaves ties by kernel id, as the file's query orders them.
    std::stable_sort(out.begin(), out.end(),
                     [](const AccessHit& a, const AccessHit& b) { return a.t_start < b.t_start; });
    return out;
}

}   // namespace mhc::viewer
