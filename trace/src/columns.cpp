#include "mhc/trace/columns.hpp"

#include <algorithm>

#include "mhc/trace/store.hpp"
#include "sqlite_util.hpp"

namespace mhc::trace {

void IdIndex::build(const std::vector<int64_t>& ids) {
    base_ = ids.empty() ? 0 : ids.front();
    contiguous_ = ids.empty() || ids.back() - ids.front() + 1 == static_cast<int64_t>(ids.size());
}

int64_t IdIndex::find(const std::vector<int64_t>& ids, int64_t id) const {
    if (ids.empty()) return -1;
    if (contiguous_) {
        int64_t i = id - base_;
        return (i >= 0 && i < static_cast<int64_t>(ids.size())) ? i : -1;
    }
    auto it = std::lower_bound(ids.begin(), ids.end(), id);
    return (it != ids.end() && *it == id) ? it - ids.begin() : -1;
}

const std::string& TraceData::str(int64_t id) const {
    static const std::string empty;
    return (id >= 0 && static_cast<size_t>(id) < strings.size()) ? strings[static_cast<size_t>(id)]
                                                                  : empty;
}

std::string TraceData::meta_or(const std::string& key, const std::string& fallback) const {
    auto it = meta.find(key);
    return it == meta.end() ? fallback : it->second;
}

int64_t TraceData::rows() const {
    return static_cast<int64_t>(allocations.size() + kernels.size() + accesses.size() +
                                copies.size() + markers.size() + strings.size());
}

int64_t TraceData::t_begin() const {
    int64_t t = INT64_MAX;
    if (!kernels.t_start.empty()) t = std::min(t, *std::min_element(kernels.t_start.begin(), kernels.t_start.end()));
    if (!allocations.t_alloc.empty()) t = std::min(t, *std::min_element(allocations.t_alloc.begin(), allocations.t_alloc.end()));
    if (!copies.t_start.empty()) t = std::min(t, *std::min_element(copies.t_start.begin(), copies.t_start.end()));
    return t == INT64_MAX ? 0 : t;
}

int64_t TraceData::t_end() const {
    int64_t t = INT64_MIN;
    if (!kernels.t_end.empty()) t = std::max(t, *std::max_element(kernels.t_end.begin(), kernels.t_end.end()));
    for (int64_t f : allocations.t_free)
        if (f != kNoTime) t = std::max(t, f);
    if (!allocations.t_alloc.empty()) t = std::max(t, *std::max_element(allocations.t_alloc.begin(), allocations.t_alloc.end()));
    if (!copies.t_end.empty()) t = std::max(t, *std::max_element(copies.t_end.begin(), copies.t_end.end()));
    return t == INT64_MIN ? 0 : t;
}

namespace {

// The columns are read with raw statements rather than Reader::for_each: one virtual call
// per row is measurable at 10M rows.
void load_allocations(const Reader& r, AllocationColumns& a, int64_t n) {
    a.id.reserve(n); a.address.reserve(n); a.bytes.reserve(n); a.t_alloc.reserve(n);
    a.t_free.reserve(n); a.stream.reserve(n); a.label.reserve(n); a.device.reserve(n);
    a.category.reserve(n);
    sql::Stmt s(r.handle(), r.path(),
                "SELECT id, device, address, bytes, t_alloc, t_free, stream, category, label "
                "FROM allocations ORDER BY id");
    while (s.step()) {
        a.id.push_back(s.i64(0));
        a.device.push_back(static_cast<int32_t>(s.i64(1)));
        a.address.push_back(s.i64(2));
        a.bytes.push_back(s.i64(3));
        a.t_alloc.push_back(s.i64(4));
        a.t_free.push_back(s.is_null(5) ? kNoTime : s.i64(5));
        a.stream.push_back(s.i64(6));
        int64_t c = s.i64(7);
        a.category.push_back((c >= 0 && c < kCategoryCount) ? static_cast<Category>(c)
                                                            : Category::Other);
        a.label.push_back(s.i64(8));
    }
}

void load_kernels(const Reader& r, KernelColumns& k, int64_t n) {
    k.id.reserve(n); k.stream.reserve(n); k.name.reserve(n); k.t_start.reserve(n);
    k.t_end.reserve(n); k.correlation.reserve(n); k.device.reserve(n); k.step.reserve(n);
    sql::Stmt s(r.handle(), r.path(),
                "SELECT id, device, stream, name, t_start, t_end, step, correlation FROM kernels "
                "ORDER BY id");
    while (s.step()) {
        k.id.push_back(s.i64(0));
        k.device.push_back(static_cast<int32_t>(s.i64(1)));
        k.stream.push_back(s.i64(2));
        k.name.push_back(s.i64(3));
        k.t_start.push_back(s.i64(4));
        k.t_end.push_back(s.i64(5));
        k.step.push_back(static_cast<int32_t>(s.i64(6)));
        k.correlation.push_back(s.i64(7));
    }
}

// Reads accesses and groups them by kernel index with a counting sort.
void load_accesses(const Reader& r, TraceData& t, int64_t n) {
    std::vector<int32_t> kernel_of, alloc_of;
    std::vector<AccessMode> mode_of;
    kernel_of.reserve(n); alloc_of.reserve(n); mode_of.reserve(n);
    sql::Stmt s(r.handle(), r.path(),
                "SELECT kernel, allocation, mode FROM accesses");
    while (s.step()) {
        int64_t k = t.kernel_at(s.i64(0));
        int64_t a = t.allocation_at(s.i64(1));
        if (k < 0 || a < 0) {
            t.dangling_accesses.push_back({s.i64(0), s.i64(1)});
            continue;
        }
        int64_t m = s.i64(2);
        kernel_of.push_back(static_cast<int32_t>(k));
        alloc_of.push_back(static_cast<int32_t>(a));
        mode_of.push_back((m >= 1 && m <= 3) ? static_cast<AccessMode>(m) : AccessMode::ReadWrite);
    }
    auto& begin = t.kernels.access_begin;
    begin.assign(t.kernels.size() + 1, 0);
    for (int32_t k : kernel_of) ++begin[static_cast<size_t>(k) + 1];
    for (size_t i = 1; i < begin.size(); ++i) begin[i] += begin[i - 1];
    t.accesses.allocation.resize(kernel_of.size());
    t.accesses.mode.resize(kernel_of.size());
    std::vector<int64_t> cursor(begin.begin(), begin.end() - 1);
    for (size_t i = 0; i < kernel_of.size(); ++i) {
        int64_t pos = cursor[static_cast<size_t>(kernel_of[i])]++;
        t.accesses.allocation[static_cast<size_t>(pos)] = alloc_of[i];
        t.accesses.mode[static_cast<size_t>(pos)] = mode_of[i];
    }
}

void load_copies(const Reader& r, CopyColumns& c, int64_t n) {
    c.id.reserve(n); c.stream.reserve(n); c.bytes.reserve(n); c.t_start.reserve(n);
    c.t_end.reserve(n); c.device.reserve(n); c.kind.reserve(n);
    sql::Stmt s(r.handle(), r.path(),
                "SELECT id, device, stream, kind, bytes, t_start, t_end FROM copies ORDER BY id");
    while (s.step()) {
        c.id.push_back(s.i64(0));
        c.device.push_back(static_cast<int32_t>(s.i64(1)));
        c.stream.push_back(s.i64(2));
        int64_t k = s.i64(3);
        c.kind.push_back((k >= 0 && k < kCopyKindCount) ? static_cast<CopyKind>(k) : CopyKind::D2D);
        c.bytes.push_back(s.i64(4));
        c.t_start.push_back(s.i64(5));
        c.t_end.push_back(s.i64(6));
    }
}

}  // namespace

TraceData load_trace(const std::string& path) {
    Reader r(path);
    TraceData t;
    t.path = path;
    t.meta = r.meta();
    t.strings = r.strings();
    TableCounts n = r.counts();
    load_allocations(r, t.allocations, n.allocations);
    load_kernels(r, t.kernels, n.kernels);
    t.allocation_index.build(t.allocations.id);
    t.kernel_index.build(t.kernels.id);
    load_accesses(r, t, n.accesses);
    load_copies(r, t.copies, n.copies);
    r.for_each([&](const Marker& m) {
        t.markers.id.push_back(m.id);
        t.markers.name.push_back(m.name);
        t.markers.t_start.push_back(m.t_start);
        t.markers.t_end.push_back(m.t_end);
        t.markers.kind.push_back(m.kind);
        t.markers.index.push_back(m.index);
    });
    return t;
}

}  // namespace mhc::trace
