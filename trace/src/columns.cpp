#include "mhc/trace/columns.hpp"

#include <algorithm>
#include <concepts>
#include <type_traits>

#include "mhc/common/error.hpp"
#include "mhc/trace/cache.hpp"
#include "mhc/trace/limits.hpp"
#include "mhc/trace/store.hpp"
#include "sqlite_util.hpp"

namespace mhc::trace {

// Ids anywhere in int64 (an id of -2^63 is a valid id): the span and the offset are computed
// without overflow (208 - -2^63 was signed overflow, UBSan's finding in every command).
void IdIndex::build(const std::vector<int64_t>& ids) {
    base_ = ids.empty() ? 0 : ids.front();
    int64_t span = 0;
    contiguous_ = ids.empty() || (!__builtin_sub_overflow(ids.back(), ids.front(), &span) &&
                                  span == static_cast<int64_t>(ids.size()) - 1);
}

int64_t IdIndex::find(const std::vector<int64_t>& ids, int64_t id) const {
    if (ids.empty()) return -1;
    if (contiguous_) {
        int64_t i = 0;
        if (__builtin_sub_overflow(id, base_, &i)) return -1;
        return (i >= 0 && i < static_cast<int64_t>(ids.size())) ? i : -1;
    }
    auto it = std::lower_bound(ids.begin(), ids.end(), id);
    return (it != ids.end() && *it == id) ? it - ids.begin() : -1;
}

namespace {

template <class C, class T>
concept ColumnsOf = std::same_as<std::remove_const_t<C>, T>;

// Each column of a table beside the member of its row that it holds, under the name the cache
// gives it: the one list that push(), row(), reserve(), the cache and its check follow (in the
// cache's order). AllocationColumns::requested_bytes is apart: it may be shorter (push() pads it).
template <ColumnsOf<AllocationColumns> C, class Row, class F>
void row_columns(C& cols, Row& row, F&& each) {
    each("id", cols.id, row.id); each("address", cols.address, row.address); each("bytes", cols.bytes, row.bytes);
    each("t_alloc", cols.t_alloc, row.t_alloc); each("t_free", cols.t_free, row.t_free);
    each("stream", cols.stream, row.stream); each("label", cols.label, row.label);
    each("device", cols.device, row.device); each("category", cols.category, row.category);
}

template <ColumnsOf<KernelColumns> C, class Row, class F>
void row_columns(C& cols, Row& row, F&& each) {
    each("id", cols.id, row.id); each("stream", cols.stream, row.stream); each("name", cols.name, row.name);
    each("t_start", cols.t_start, row.t_start); each("t_end", cols.t_end, row.t_end);
    each("correlation", cols.correlation, row.correlation); each("device", cols.device, row.device);
    each("step", cols.step, row.step);
}

template <ColumnsOf<CopyColumns> C, class Row, class F>
void row_columns(C& cols, Row& row, F&& each) {
    each("id", cols.id, row.id); each("stream", cols.stream, row.stream); each("bytes", cols.bytes, row.bytes);
    each("t_start", cols.t_start, row.t_start); each("t_end", cols.t_end, row.t_end);
    each("device", cols.device, row.device); each("kind", cols.kind, row.kind);
}

template <ColumnsOf<MarkerColumns> C, class Row, class F>
void row_columns(C& cols, Row& row, F&& each) {
    each("id", cols.id, row.id); each("name", cols.name, row.name); each("t_start", cols.t_start, row.t_start);
    each("t_end", cols.t_end, row.t_end); each("kind", cols.kind, row.kind); each("index", cols.index, row.index);
}

template <class Row, class C>
void push_row(C& cols, const Row& row) {
    row_columns(cols, row, [](const char*, auto& column, const auto& value) { column.push_back(value); });
}

template <class Row, class C>
Row row_at(const C& cols, size_t index) {
    Row out;
    row_columns(cols, out, [index](const char*, const auto& column, auto& value) { value = column[index]; });
    return out;
}

template <class Row, class C>
void reserve_rows(C& cols, size_t n) {
    Row unused;
    row_columns(cols, unused, [n](const char*, auto& column, auto&) { column.reserve(n); });
}

// Every column of the table as long as its ids.
template <class Row, class C>
bool same_length(const C& cols) {
    Row unused;
    bool ok = true;
    row_columns(cols, unused, [&](const char*, const auto& column, auto&) { ok = ok && column.size() == cols.size(); });
    return ok;
}

}  // namespace

void AllocationColumns::reserve(size_t n) {
    reserve_rows<Allocation>(*this, n);
    requested_bytes.reserve(n);
}

void AllocationColumns::push(const Allocation& allocation) {
    push_row(*this, allocation);
    requested_bytes.resize(id.size() - 1, kNoBytes);   // rows pushed column by column before this one
    requested_bytes.push_back(allocation.requested_bytes);
}

Allocation AllocationColumns::row(size_t index) const {
    Allocation out = row_at<Allocation>(*this, index);
    out.requested_bytes = requested_at(index);
    return out;
}

void KernelColumns::reserve(size_t n) { reserve_rows<Kernel>(*this, n); }
void KernelColumns::push(const Kernel& kernel) { push_row(*this, kernel); }
Kernel KernelColumns::row(size_t index) const { return row_at<Kernel>(*this, index); }

void CopyColumns::reserve(size_t n) { reserve_rows<Copy>(*this, n); }
void CopyColumns::push(const Copy& copy) { push_row(*this, copy); }

void MarkerColumns::reserve(size_t n) { reserve_rows<Marker>(*this, n); }
void MarkerColumns::push(const Marker& marker) { push_row(*this, marker); }

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
    auto table = [&f]<class Row>(const char* prefix, auto& columns, Row unused) {
        row_columns(columns, unused,
                    [&](const char* name, auto& column, auto&) { f((std::string(prefix) + name).c_str(), column); });
    };
    table("allocations.", t.allocations, Allocation{});
    f("allocations.requested_bytes", t.allocations.requested_bytes);
    table("kernels.", t.kernels, Kernel{});
    f("kernels.access_begin", t.kernels.access_begin);
    f("accesses.allocation", t.accesses.allocation); f("accesses.mode", t.accesses.mode);
    table("copies.", t.copies, Copy{});
    table("markers.", t.markers, Marker{});
    f("dangling_accesses", t.dangling_accesses);
    f("segments", t.segments);
}

// Columns of one table have one length, and accesses point into the allocations: a cache entry
// that does not hold that is not used.
bool consistent(const TraceData& t) {
    const auto& a = t.allocations;
    const size_t na = a.size();
    bool ok = same_length<Allocation>(a) && a.requested_bytes.size() <= na;
    const auto& k = t.kernels;
    const size_t nk = k.size();
    ok = ok && same_length<Kernel>(k) && k.access_begin.size() == nk + 1 && k.access_begin.front() == 0 &&
         std::is_sorted(k.access_begin.begin(), k.access_begin.end()) &&
         static_cast<size_t>(k.access_begin.back()) == t.accesses.size() && t.accesses.mode.size() == t.accesses.size();
    ok = ok && std::all_of(t.accesses.allocation.begin(), t.accesses.allocation.end(),
                           [na](int32_t x) { return x >= 0 && static_cast<size_t>(x) < na; });
    return ok && same_length<Copy>(t.copies) && same_length<Marker>(t.markers);
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
        t.fingerprint = r.fingerprint(n);
        t.change_counter = change_counter(r.handle());
        if (from == LoadFrom::Rows || !load_cached(r, t)) load_rows(r, t, n);
    } catch (...) {
        sqlite3_exec(r.handle(), "COMMIT", nullptr, nullptr, nullptr);
        throw;
    }
    sqlite3_exec(r.handle(), "COMMIT", nullptr, nullptr, nullptr);
    r.require_unchanged();
    return t;
}

}  // namespace mhc::trace
