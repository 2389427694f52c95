#include "segments.hpp"

#include <algorithm>
#include <cstdio>

#include "mhc/common/error.hpp"

namespace mhc::trace::import {

namespace {
std::string at_event(int32_t dev, size_t k, const char* action) {
    return "device_traces[" + std::to_string(dev) + "][" + std::to_string(k) + "] (" + action + "): ";
}
}  // namespace

std::string SegmentLog::hex(int64_t a) const {
    char b[32];
    std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(a));
    return b;
}

SegmentLog::Device& SegmentLog::dev(int32_t d) { return devices_[d]; }

size_t SegmentLog::add_row(int32_t dev, int64_t stream, int64_t addr, int64_t bytes, int64_t t_alloc,
                           int64_t t_free, bool expandable) {
    Segment s;
    s.device = dev;
    s.stream = stream;
    s.address = addr;
    s.bytes = bytes;
    s.t_alloc = t_alloc;
    s.t_free = t_free;
    s.expandable = expandable;
    rows_.push_back(s);
    return rows_.size() - 1;
}

std::vector<size_t> SegmentLog::live_overlapping(Device& d, int64_t addr, int64_t size) const {
    std::vector<size_t> out;
    const int64_t end = addr + size;
    auto it = d.live.upper_bound(addr);
    if (it != d.live.begin()) {
        auto p = std::prev(it);
        const Segment& r = rows_[p->second];
        if (r.address + r.bytes > addr) it = p;
    }
    for (; it != d.live.end() && it->first < end; ++it) out.push_back(it->second);
    return out;
}

void SegmentLog::add_range(std::map<int64_t, int64_t>& u, int64_t s, int64_t e) {
    auto it = u.upper_bound(s);
    if (it != u.begin()) {
        auto p = std::prev(it);
        if (p->second >= s) {
            s = p->first;
            e = std::max(e, p->second);
            it = u.erase(p);
        }
    }
    while (it != u.end() && it->first <= e) {
        e = std::max(e, it->second);
        it = u.erase(it);
    }
    u[s] = e;
}

bool SegmentLog::overlaps(const std::map<int64_t, int64_t>& u, int64_t s, int64_t e) {
    auto it = u.upper_bound(s);
    if (it != u.begin() && std::prev(it)->second > s) return true;
    return it != u.end() && it->first < e;
}

void SegmentLog::alloc(int32_t d, size_t k, const char* action, int64_t t, int64_t addr, int64_t size,
                       int64_t stream, bool expandable) {
    if (size <= 0) throw Error(where(file_, at_event(d, k, action) + "size is missing or not positive"));
    Device& D = dev(d);
    auto ov = live_overlapping(D, addr, size);
    if (!ov.empty()) {
        const Segment& r = rows_[ov.front()];
        throw Error(where(file_, at_event(d, k, action) + std::to_string(size) + " bytes at " + hex(addr) +
                                     " overlap the live segment at " + hex(r.address) + " of " +
                                     std::to_string(r.bytes) + " bytes"));
    }
    size_t i = add_row(d, stream, addr, size, t, kNoTime, expandable);
    D.live[addr] = i;
    add_range(D.ever, addr, addr + size);
}

void SegmentLog::free(int32_t d, size_t k, const char* action, int64_t t, int64_t addr, int64_t size,
                      int64_t stream, bool expandable) {
    const std::string at = at_event(d, k, action);
    if (size <= 0) throw Error(where(file_, at + "size is missing or not positive"));
    Device& D = dev(d);
    const int64_t end = addr + size;
    if (!expandable) {   // segment_free: a whole cudaMalloc'd segment
        auto it = D.live.find(addr);
        if (it != D.live.end()) {
            Segment& r = rows_[it->second];
            if (r.expandable)
                throw Error(where(file_, at + "frees the expandable mapping at " + hex(addr) +
                                             " (mappings end with segment_unmap)"));
            if (r.bytes != size)
                throw Error(where(file_, at + "frees " + std::to_string(size) + " bytes at " + hex(addr) +
                                             ", but the live segment there holds " + std::to_string(r.bytes)));
            r.t_free = t;
            D.live.erase(it);
            return;
        }
        auto ov = live_overlapping(D, addr, size);
        if (!ov.empty()) {
            const Segment& r = rows_[ov.front()];
            throw Error(where(file_, at + "free of an unknown segment: none starts at " + hex(addr) +
                                         ", whose range overlaps the live segment at " + hex(r.address) + " of " +
                                         std::to_string(r.bytes) + " bytes"));
        }
        if (overlaps(D.ever, addr, end))
            throw Error(where(file_, at + "free of an unknown segment: none is live at " + hex(addr) +
                                         " and the trace saw this range in use earlier (freed twice?)"));
        rows_[add_row(d, stream, addr, size, 0, t, false)].reconstructed = true;   // allocated before recording began
        add_range(D.ever, addr, end);
        ++reconstructed;
        return;
    }
    // segment_unmap: pages of expandable segments; may cover parts of several mappings.
    auto ov = live_overlapping(D, addr, size);
    int64_t covered_to = addr;
    std::vector<std::pair<int64_t, int64_t>> gaps;
    for (size_t idx : ov) {
        Segment r = rows_[idx];   // a copy: rows_ grows below
        if (!r.expandable)
            throw Error(where(file_, at + "unmaps part of the cudaMalloc'd segment at " + hex(r.address) + " of " +
                                         std::to_string(r.bytes) + " bytes"));
        const int64_t s = r.address, e = r.address + r.bytes;
        if (s > covered_to) gaps.emplace_back(covered_to, s);
        covered_to = std::max(covered_to, std::min(e, end));
        const int64_t mid_s = std::max(s, addr), mid_e = std::min(e, end);
        if (s < addr) {
            rows_[idx].bytes = addr - s;   // the part before stays mapped
            rows_[add_row(d, r.stream, mid_s, mid_e - mid_s, r.t_alloc, t, true)].reconstructed = r.reconstructed;
        } else {
            D.live.erase(s);
            rows_[idx].bytes = mid_e - mid_s;
            rows_[idx].t_free = t;
        }
        if (e > end) {   // the part after stays mapped
            size_t j = add_row(d, r.stream, end, e - end, r.t_alloc, kNoTime, true);
            rows_[j].reconstructed = r.reconstructed;
            D.live[end] = j;
        }
    }
    if (covered_to < end) gaps.emplace_back(covered_to, end);
    for (auto [gs, ge] : gaps) {
        if (overlaps(D.ever, gs, ge))
            throw Error(where(file_, at + "unmaps " + hex(gs) + ".." + hex(ge) +
                                         ", which no live mapping covers and the trace saw in use earlier"));
        rows_[add_row(d, stream, gs, ge - gs, 0, t, true)].reconstructed = true;   // mapped before recording began
        ++reconstructed;
    }
    add_range(D.ever, addr, end);
}

void SegmentLog::end_state(size_t i, int32_t d, int64_t addr, int64_t size, int64_t stream, bool expandable) {
    const std::string at = "segments[" + std::to_string(i) + "]: ";
    if (size <= 0) throw Error(where(file_, at + "total_size is missing or not positive"));
    Device& D = dev(d);
    const int64_t end = addr + size;
    if (overlaps(D.end, addr, end))
        throw Error(where(file_, at + "the segment at " + hex(addr) + " of " + std::to_string(size) +
                                     " bytes overlaps another end-state segment"));
    add_range(D.end, addr, end);
    auto ov = live_overlapping(D, addr, size);
    auto since = [&](int64_t s, int64_t e) {
        // Alive from the start, or from the last end of a row the trace saw at this place.
        int64_t t = 0;
        for (const Segment& r : rows_)
            if (r.device == d && r.t_free != kNoTime && r.address < e && r.address + r.bytes > s)
                t = std::max(t, r.t_free);
        return t;
    };
    if (!expandable) {
        if (ov.size() == 1 && rows_[ov[0]].address == addr && rows_[ov[0]].bytes == size && !rows_[ov[0]].expandable)
            return;
        if (!ov.empty()) {
            const Segment& r = rows_[ov.front()];
            throw Error(where(file_, at + "the segment at " + hex(addr) + " of " + std::to_string(size) +
                                         " bytes disagrees with the live segment at " + hex(r.address) + " of " +
                                         std::to_string(r.bytes) + " bytes that the trace events leave"));
        }
        size_t j = add_row(d, stream, addr, size, since(addr, end), kNoTime, false);
        rows_[j].reconstructed = true;
        D.live[addr] = j;
        add_range(D.ever, addr, end);
        ++reconstructed;
        return;
    }
    int64_t covered_to = addr;
    std::vector<std::pair<int64_t, int64_t>> gaps;
    for (size_t idx : ov) {
        const Segment& r = rows_[idx];
        if (!r.expandable || r.address < addr || r.address + r.bytes > end)
            throw Error(where(file_, at + "the expandable segment at " + hex(addr) + " of " + std::to_string(size) +
                                         " bytes disagrees with the live segment at " + hex(r.address) + " of " +
                                         std::to_string(r.bytes) + " bytes that the trace events leave"));
        if (r.address > covered_to) gaps.emplace_back(covered_to, r.address);
        covered_to = r.address + r.bytes;
    }
    if (covered_to < end) gaps.emplace_back(covered_to, end);
    for (auto [gs, ge] : gaps) {
        size_t j = add_row(d, stream, gs, ge - gs, since(gs, ge), kNoTime, true);
        rows_[j].reconstructed = true;
        D.live[gs] = j;
        add_range(D.ever, gs, ge);
        ++reconstructed;
    }
}

std::vector<Segment> SegmentLog::take() {
    live_not_in_end_state = 0;
    for (auto& [d, D] : devices_) {
        if (D.end.empty()) continue;
        for (auto& [a, idx] : D.live) {
            const Segment& r = rows_[idx];
            auto it = D.end.upper_bound(r.address);
            bool inside = it != D.end.begin() && std::prev(it)->second >= r.address + r.bytes;
            if (!inside) ++live_not_in_end_state;
        }
    }
    std::stable_sort(rows_.begin(), rows_.end(), [](const Segment& a, const Segment& b) {
        if (a.t_alloc != b.t_alloc) return a.t_alloc < b.t_alloc;
        if (a.device != b.device) return a.device < b.device;
        return a.address < b.address;
    });
    for (size_t i = 0; i < rows_.size(); ++i) rows_[i].id = static_cast<int64_t>(i) + 1;
    devices_.clear();
    return std::move(rows_);
}

}  // namespace mhc::trace::import
