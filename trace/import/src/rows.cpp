#include "mhc/trace/import/rows.hpp"

#include <algorithm>

#include "mhc/trace/store.hpp"

namespace mhc::trace::import {

namespace {
// Ids must grow strictly, as load_trace's ORDER BY id would return them.
void next_id(std::vector<int64_t>& ids, int64_t id, bool& ordered) {
    if (!ids.empty() && id <= ids.back()) ordered = false;
    ids.push_back(id);
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
    auto& a = t_.allocations;
    size_t n = a.size() + allocations;
    a.id.reserve(n); a.device.reserve(n); a.address.reserve(n); a.bytes.reserve(n); a.t_alloc.reserve(n);
    a.t_free.reserve(n); a.stream.reserve(n); a.category.reserve(n); a.label.reserve(n);
    auto& k = t_.kernels;
    n = k.size() + kernels;
    k.id.reserve(n); k.device.reserve(n); k.stream.reserve(n); k.name.reserve(n); k.t_start.reserve(n);
    k.t_end.reserve(n); k.step.reserve(n); k.correlation.reserve(n);
    auto& c = t_.copies;
    n = c.size() + copies;
    c.id.reserve(n); c.device.reserve(n); c.stream.reserve(n); c.kind.reserve(n); c.bytes.reserve(n);
    c.t_start.reserve(n); c.t_end.reserve(n);
}

void Rows::add(const Allocation& a) {
    w_.add(a);
    auto& c = t_.allocations;
    next_id(c.id, a.id, ordered_);
    c.device.push_back(a.device);
    c.address.push_back(a.address);
    c.bytes.push_back(a.bytes);
    c.t_alloc.push_back(a.t_alloc);
    c.t_free.push_back(a.t_free);
    c.stream.push_back(a.stream);
    c.category.push_back(a.category);
    c.label.push_back(a.label);
}

void Rows::add(const Kernel& k) {
    w_.add(k);
    auto& c = t_.kernels;
    next_id(c.id, k.id, ordered_);
    c.device.push_back(k.device);
    c.stream.push_back(k.stream);
    c.name.push_back(k.name);
    c.t_start.push_back(k.t_start);
    c.t_end.push_back(k.t_end);
    c.step.push_back(k.step);
    c.correlation.push_back(k.correlation);
}

void Rows::add(const Access& a) {
    w_.add(a);
    accesses_.push_back({a.kernel, a.allocation, a.mode});
}

void Rows::add(const Copy& cp) {
    w_.add(cp);
    auto& c = t_.copies;
    next_id(c.id, cp.id, ordered_);
    c.device.push_back(cp.device);
    c.stream.push_back(cp.stream);
    c.kind.push_back(cp.kind);
    c.bytes.push_back(cp.bytes);
    c.t_start.push_back(cp.t_start);
    c.t_end.push_back(cp.t_end);
}

void Rows::add(const Marker& m) {
    w_.add(m);
    auto& c = t_.markers;
    next_id(c.id, m.id, ordered_);
    c.name.push_back(m.name);
    c.t_start.push_back(m.t_start);
    c.t_end.push_back(m.t_end);
    c.kind.push_back(m.kind);
    c.index.push_back(m.index);
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
