#include "mhc/trace/import/rows.hpp"

#include <algorithm>

#include "mhc/trace/store.hpp"

namespace mhc::trace::import {

namespace {
// Writes `row` to the file and keeps it in `kept` (a table's columns, or a vector of rows). Ids
// must grow strictly, as load_trace's ORDER BY id would return them: `ordered` says whether they did.
template <class Row, class Kept>
void add_row(Writer& writer, const Row& row, Kept& kept, bool& ordered) {
    writer.add(row);
    if constexpr (requires { kept.id; }) {
        if (!kept.id.empty() && row.id <= kept.id.back()) ordered = false;
        kept.push(row);
    } else {
        if (!kept.empty() && row.id <= kept.back().id) ordered = false;
        kept.push_back(row);
    }
}
}  // namespace

Rows::Rows(Writer& w) : w_(w) { t_.strings.emplace_back(); }   // id 0: the empty name

int64_t Rows::intern(std::string_view text) {
    int64_t id = w_.intern(text);
    if (id == static_cast<int64_t>(t_.strings.size())) t_.strings.emplace_back(text);   // new: ids are dense
    return id;
}

void Rows::set_meta(const std::string& key, const std::string& value) {
    w_.set_meta(key, value);
    t_.meta[key] = value;
}

void Rows::reserve(size_t allocations, size_t kernels, size_t copies) {
    t_.allocations.reserve(t_.allocations.size() + allocations);
    t_.kernels.reserve(t_.kernels.size() + kernels);
    t_.copies.reserve(t_.copies.size() + copies);
}

void Rows::add(const Allocation& allocation) { add_row(w_, allocation, t_.allocations, ordered_); }

void Rows::add(const Kernel& kernel) { add_row(w_, kernel, t_.kernels, ordered_); }

void Rows::add(const Access& a) {
    w_.add(a);
    accesses_.push_back({a.kernel, a.allocation, a.mode});
}

void Rows::add(const Copy& copy) { add_row(w_, copy, t_.copies, ordered_); }

void Rows::add(const Marker& marker) { add_row(w_, marker, t_.markers, ordered_); }

void Rows::add(const Segment& segment) { add_row(w_, segment, t_.segments, ordered_); }

void Rows::set_free_time(int64_t allocation_id, int64_t t_free) {
    w_.set_free_time(allocation_id, t_free);
    auto& ids = t_.allocations.id;
    auto it = std::lower_bound(ids.begin(), ids.end(), allocation_id);   // ids sorted while ordered_
    if (ordered_ && it != ids.end() && *it == allocation_id) t_.allocations.t_free[static_cast<size_t>(it - ids.begin())] = t_free;
    else ordered_ = false;   // let the file decide
}

bool Rows::take(TraceData& out) {
    if (!ordered_) return false;
    t_.meta["format"] = kFormatName;   // what Writer::finish adds
    t_.meta["schema_version"] = std::to_string(kSchemaVersion);
    // and, once closed, what its close() wrote with them (the content digest)
    for (const auto& [key, value] : w_.meta()) t_.meta[key] = value;
    t_.allocation_index.build(t_.allocations.id);
    t_.kernel_index.build(t_.kernels.id);
    // The accesses table is keyed by (kernel, allocation), a repeated pair keeps the union
    // of the modes (the Writer's ON CONFLICT), and it is read back in key order, grouped
    // by kernel index.
    std::sort(accesses_.begin(), accesses_.end(), [](const RawAccess& a, const RawAccess& b) {
        return a.kernel != b.kernel ? a.kernel < b.kernel : a.allocation < b.allocation;
    });
    std::vector<RawAccess> merged;
    merged.reserve(accesses_.size());
    for (const auto& a : accesses_) {
        if (!merged.empty() && merged.back().kernel == a.kernel && merged.back().allocation == a.allocation)
            merged.back().mode = static_cast<AccessMode>(static_cast<int>(merged.back().mode) | static_cast<int>(a.mode));
        else
            merged.push_back(a);
    }
    auto& begin = t_.kernels.access_begin;
    begin.assign(t_.kernels.size() + 1, 0);
    for (const auto& a : merged) {
        int64_t k = t_.kernel_at(a.kernel), al = t_.allocation_at(a.allocation);
        if (k < 0 || al < 0) {
            t_.dangling_accesses.push_back({a.kernel, a.allocation});
            continue;
        }
        int m = static_cast<int>(a.mode);
        t_.accesses.allocation.push_back(static_cast<int32_t>(al));
        t_.accesses.mode.push_back(m >= 1 && m <= 3 ? a.mode : AccessMode::ReadWrite);
        ++begin[static_cast<size_t>(k) + 1];
    }
    // Key order is kernel-id order, which is kernel-index order: already grouped.
    for (size_t i = 1; i < begin.size(); ++i) begin[i] += begin[i - 1];
    out = std::move(t_);
    accesses_.clear();
    return true;
}

}  // namespace mhc::trace::import
