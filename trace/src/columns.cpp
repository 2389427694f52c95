#include "mhc/trace/columns.hpp"

#include <algorithm>

#include "mhc/common/error.hpp"
#include "mhc/trace/cache.hpp"
#include "mhc/trace/limits.hpp"
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

void AllocationColumns::reserve(size_t n) {
    id.reserve(n); address.reserve(n); bytes.reserve(n); t_alloc.reserve(n); t_free.reserve(n);
    stream.reserve(n); label.reserve(n); device.reserve(n); category.reserve(n); requested_bytes.reserve(n);
}

void AllocationColumns::push(const Allocation& a) {
    id.push_back(a.id);
    device.push_back(a.device);
    address.push_back(a.address);
    bytes.push_back(a.bytes);
    t_alloc.push_back(a.t_alloc);
    t_free.push_back(a.t_free);
    stream.push_back(a.stream);
    category.push_back(a.category);
    label.push_back(a.label);
    requested_bytes.resize(id.size() - 1, kNoBytes);   // rows pushed column by column before this one
    requested_bytes.push_back(a.requested_bytes);
}

Allocation AllocationColumns::row(size_t index) const {
    Allocation out;
    out.id = id[index];
    out.device = device[index];
    out.address = address[index];
    out.bytes = bytes[index];
    out.t_alloc = t_alloc[index];
    out.t_free = t_free[index];
    out.stream = stream[index];
    out.category = category[index];
    out.label = label[index];
    out.requested_bytes = requested_at(index);
    return out;
}

void KernelColumns::reserve(size_t n) {
    id.reserve(n); stream.reserve(n); name.reserve(n); t_start.reserve(n); t_end.reserve(n);
    correlation.reserve(n); device.reserve(n); step.reserve(n);
}

void KernelColumns::push(const Kernel& k) {
    id.push_back(k.id);
    device.push_back(k.device);
    stream.push_back(k.stream);
    name.push_back(k.name);
    t_start.push_back(k.t_start);
    t_end.push_back(k.t_end);
    step.push_back(k.step);
    correlation.push_back(k.correlation);
}

Kernel KernelColumns::row(size_t index) const {
    Kernel out;
    out.id = id[index];
    out.device = device[index];
    out.stream = stream[index];
    out.name = name[index];
    out.t_start = t_start[index];
    out.t_end = t_end[index];
    out.step = step[index];
    out.correlation = correlation[index];
    return out;
}

void CopyColumns::reserve(size_t n) {
    id.reserve(n); stream.reserve(n); bytes.reserve(n); t_start.reserve(n); t_end.reserve(n);
    device.reserve(n); kind.reserve(n);
}

void CopyColumns::push(const Copy& c) {
    id.push_back(c.id);
    device.push_back(c.device);
    stream.push_back(c.stream);
    kind.push_back(c.kind);
    bytes.push_back(c.bytes);
    t_start.push_back(c.t_start);
    t_end.push_back(c.t_end);
}

void MarkerColumns::reserve(size_t n) {
    id.reserve(n); name.reserve(n); t_start.reserve(n); t_end.reserve(n); kind.reserve(n);
    index.reserve(n);
}

void MarkerColumns::push(const Marker& m) {
    id.push_back(m.id);
    name.push_back(m.name);
    t_start.push_back(m.t_start);
    t_end.push_back(m.t_end);
    kind.push_back(m.kind);
    index.push_back(m.index);
}

const std::string& TraceData::str(int64_t id) const {
    static const std::string empty;
    return (id >= 0 && static_cast<size_t>(id) < strings.size()) ? strings[static_cast<size_t>(id)]
                                                                  : empty;
}

bool order_only_timing(std::string_view timing) { return timing == "order-only" || timing == "order"; }

bool TraceData::order_only() const {
    auto it = meta.find("timing");
    return it != meta.end() && order_only_timing(it->second);
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

// Reads accesses and groups them by kernel index with a counting sort.
void load_accesses(const Reader& r, TraceData& t, int64_t n) {
    std::vector<int32_t> kernel_of, alloc_of;
    std::vector<AccessMode> mode_of;
    kernel_of.reserve(n); alloc_of.reserve(n); mode_of.reserve(n);
    r.for_each([&](const Access& x) {
        int64_t k = t.kernel_at(x.kernel);
        int64_t a = t.allocation_at(x.allocation);
        if (k < 0 || a < 0) {
            t.dangling_accesses.push_back({x.kernel, x.allocation});
            return;
        }
        kernel_of.push_back(static_cast<int32_t>(k));
        alloc_of.push_back(static_cast<int32_t>(a));
        mode_of.push_back(x.mode);
    });
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

}  // namespace

namespace {

// Every array load_trace fills, by name: the one list the cache writes and reads.
template <class Data, class F>
void each_column(Data& t, F&& f) {
    auto& a = t.allocations;
    f("allocations.id", a.id); f("allocations.address", a.address); f("allocations.bytes", a.bytes);
    f("allocations.t_alloc", a.t_alloc); f("allocations.t_free", a.t_free); f("allocations.stream", a.stream);
    f("allocations.label", a.label); f("allocations.device", a.device); f("allocations.category", a.category);
    f("allocations.requested_bytes", a.requested_bytes);
    auto& k = t.kernels;
    f("kernels.id", k.id); f("kernels.stream", k.stream); f("kernels.name", k.name); f("kernels.t_start", k.t_start);
    f("kernels.t_end", k.t_end); f("kernels.correlation", k.correlation); f("kernels.device", k.device);
    f("kernels.step", k.step); f("kernels.access_begin", k.access_begin);
    f("accesses.allocation", t.accesses.allocation); f("accesses.mode", t.accesses.mode);
    auto& c = t.copies;
    f("copies.id", c.id); f("copies.stream", c.stream); f("copies.bytes", c.bytes); f("copies.t_start", c.t_start);
    f("copies.t_end", c.t_end); f("copies.device", c.device); f("copies.kind", c.kind);
    auto& m = t.markers;
    f("markers.id", m.id); f("markers.name", m.name); f("markers.t_start", m.t_start); f("markers.t_end", m.t_end);
    f("markers.kind", m.kind); f("markers.index", m.index);
    f("dangling_accesses", t.dangling_accesses);
    f("segments", t.segments);
}

// Columns of one table have one length, and accesses point into the allocations: a cache entry
// that does not hold that is not used.
bool consistent(const TraceData& t) {
    const auto& a = t.allocations;
    const size_t na = a.size();
    bool ok = a.address.size() == na && a.bytes.size() == na && a.t_alloc.size() == na && a.t_free.size() == na &&
              a.stream.size() == na && a.label.size() == na && a.device.size() == na && a.category.size() == na &&
              a.requested_bytes.size() <= na;
    const auto& k = t.kernels;
    const size_t nk = k.size();
    ok = ok && k.stream.size() == nk && k.name.size() == nk && k.t_start.size() == nk && k.t_end.size() == nk &&
         k.correlation.size() == nk && k.device.size() == nk && k.step.size() == nk &&
         k.access_begin.size() == nk + 1 && k.access_begin.front() == 0 &&
         std::is_sorted(k.access_begin.begin(), k.access_begin.end()) &&
         static_cast<size_t>(k.access_begin.back()) == t.accesses.size() && t.accesses.mode.size() == t.accesses.size();
    ok = ok && std::all_of(t.accesses.allocation.begin(), t.accesses.allocation.end(),
                           [na](int32_t x) { return x >= 0 && static_cast<size_t>(x) < na; });
    const auto& c = t.copies;
    ok = ok && c.stream.size() == c.size() && c.bytes.size() == c.size() && c.t_start.size() == c.size() &&
         c.t_end.size() == c.size() && c.device.size() == c.size() && c.kind.size() == c.size();
    const auto& m = t.markers;
    return ok && m.name.size() == m.size() && m.t_start.size() == m.size() && m.t_end.size() == m.size() &&
           m.kind.size() == m.size() && m.index.size() == m.size();
}

// The columns from the file's cache entry, when it holds one for this fingerprint; the rows
// it was made from passed load_trace's checks, and nothing has changed them since.
bool load_cached(const Reader& r, TraceData& t) {
    auto c = read_cache(r.handle(), kTraceCacheKey, t.fingerprint, false);
    if (!c) return false;
    bool ok = true;
    each_column(t, [&](const char* name, auto& v) { ok = ok && c->get(name, v); });
    if (ok && c->finish() && consistent(t)) {
        t.allocation_index.build(t.allocations.id);
        t.kernel_index.build(t.kernels.id);
        t.from_cache = true;
        return true;
    }
    each_column(t, [](const char*, auto& v) { v.clear(); });   // damaged: the rows decide
    return false;
}

void load_rows(const Reader& r, TraceData& t, const TableCounts& n) {
    const std::string& path = r.path();
    // Rows are decoded once, by the Reader, and appended through the columns' push().
    t.allocations.reserve(static_cast<size_t>(n.allocations));
    // All allocations together bound every sum of live bytes the toolkit forms (limits.hpp).
    int64_t total = 0;
    r.for_each([&](const Allocation& a) {
        if (total > limits::kMaxTotalBytes - a.bytes)
            throw Error(where_row(path, "allocations", a.id,
                                  "the allocations up to this one hold more than 2^62 bytes together [total-size]"));
        total += a.bytes;
        t.allocations.push(a);
    });
    t.kernels.reserve(static_cast<size_t>(n.kernels));
    r.for_each([&](const Kernel& k) { t.kernels.push(k); });
    t.allocation_index.build(t.allocations.id);
    t.kernel_index.build(t.kernels.id);
    load_accesses(r, t, n.accesses);
    t.copies.reserve(static_cast<size_t>(n.copies));
    r.for_each([&](const Copy& c) { t.copies.push(c); });
    t.markers.reserve(static_cast<size_t>(n.markers));
    r.for_each([&](const Marker& m) { t.markers.push(m); });
    r.for_each([&](const Segment& g) { t.segments.push_back(g); });
}

}  // namespace

void cache_columns(const TraceData& t, CacheWriter& w) {
    each_column(t, [&](const char* name, const auto& v) { w.put(name, v); });
}

TraceData load_trace(const std::string& file, const std::string& name, LoadFrom from) {
    Reader r(file, name);
    TraceData t;
    t.path = r.path();
    // One read transaction: the fingerprint, the change counter and the rows are of one version
    // of the file even while other processes store runs in it.
    sql::exec(r.handle(), t.path, "BEGIN");
    try {
        t.meta = r.meta();
        t.strings = r.strings();
        TableCounts n = r.counts();
        t.fingerprint = fingerprint(t.meta, n);
        t.change_counter = change_counter(r.handle());
        if (from == LoadFrom::Rows || !load_cached(r, t)) load_rows(r, t, n);
    } catch (...) {
        sqlite3_exec(r.handle(), "COMMIT", nullptr, nullptr, nullptr);
        throw;
    }
    sqlite3_exec(r.handle(), "COMMIT", nullptr, nullptr, nullptr);
    return t;
}

}  // namespace mhc::trace
