#include "mhc/trace/import/rows.hpp"

#include <algorithm>

#include "mhc/trace/store.hpp"

namespace mhc::trace::import {

namespace {
// Ids must grow strictly, as load_trace's ORDER BY id would return them.
void check_order(const std::vector<int64_t>& ids, int64_t id, bool& ordered) {
    if (!ids.empty() && id <= ids.back()) ordered = false;
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

void Rows::add(const Allocation& a) {
    w_.add(a);
    check_order(t_.allocations.id, a.id, ordered_);
    t_.allocations.push(a);
}

void Rows::add(const Kernel& k) {
    w_.add(k);
    check_order(t_.kernels.id, k.id, ordered_);
    t_.kernels.push(k);
}

void Rows::add(const Access& a) {
    w_.add(a);
    accesses_.push_back({a.kernel, a.allocation, a.mode});
}

void Rows::add(const Copy& c) {
    w_.add(c);
    check_order(t_.copies.id, c.id, ordered_);
    t_.copies.push(c);
}

void Rows::add(const Marker& m) {
    w_.add(m);
    check_order(t_.markers.id, m.id, ordered_);
    t_.markers.push(m);
}

void Rows::add(const Segment& s) {
    w_.add(s);
    if (!t_.segments.empty() && s.id <= t_.segments.back().id) ordered_ = false;
    t_.segments.push_back(s);
}

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
