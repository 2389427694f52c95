#include "mhc/record/params.hpp"

#include <algorithm>
#include <cstring>

namespace mhc::record {

namespace {
// Aligned word offsets k (relative to the buffer) with [k, k+8) inside [off, off+size).
template <typename Read>
void words_of(const ParamSlot& s, Read read, std::vector<uint64_t>& out) {
    uint64_t begin = (static_cast<uint64_t>(s.offset) + 7) & ~uint64_t{7};
    uint64_t end = static_cast<uint64_t>(s.offset) + s.size;
    for (uint64_t k = begin; k + 8 <= end; k += 8) out.push_back(read(k - s.offset));
}
}  // namespace

void gather_words(const ParamSlot* slots, size_t n, void* const* values,
                  std::vector<uint64_t>& out) {
    if (!values) return;
    for (size_t i = 0; i < n; ++i) {
        const auto* p = static_cast<const unsigned char*>(values[i]);
        if (!p) continue;
        words_of(slots[i], [p](uint64_t rel) {
            uint64_t w;
            std::memcpy(&w, p + rel, 8);   // the value may sit at any host alignment
            return w;
        }, out);
    }
}

void gather_words_packed(const ParamSlot* slots, size_t n, const void* buffer, size_t size,
                         std::vector<uint64_t>& out) {
    if (!buffer) return;
    const auto* b = static_cast<const unsigned char*>(buffer);
    for (size_t i = 0; i < n; ++i) {
        const ParamSlot& s = slots[i];
        if (static_cast<uint64_t>(s.offset) + s.size > size) continue;
        words_of(s, [b, &s](uint64_t rel) {
            uint64_t w;
            std::memcpy(&w, b + s.offset + rel, 8);
            return w;
        }, out);
    }
}

int64_t LiveMap::insert(uint64_t start, uint64_t bytes, int64_t id, Layer layer) {
    Map& m = layer == Layer::Fine ? fine_ : vmm_;
    Entry e{start + bytes, id};
    auto [it, added] = m.try_emplace(start, e);
    if (added) return -1;
    int64_t old = it->second.id;
    it->second = e;
    return old;
}

int64_t LiveMap::erase(uint64_t start, Layer layer) {
    Map& m = layer == Layer::Fine ? fine_ : vmm_;
    auto it = m.find(start);
    if (it == m.end()) return -1;
    int64_t id = it->second.id;
    m.erase(it);
    return id;
}

int64_t LiveMap::at(uint64_t start, Layer layer) const {
    const Map& m = layer == Layer::Fine ? fine_ : vmm_;
    auto it = m.find(start);
    return it == m.end() ? -1 : it->second.id;
}

void LiveMap::erase_range(uint64_t start, uint64_t bytes, std::vector<int64_t>& ids) {
    auto it = vmm_.lower_bound(start);
    while (it != vmm_.end() && it->first < start + bytes) {
        if (it->second.end <= start + bytes) {
            ids.push_back(it->second.id);
            it = vmm_.erase(it);
        } else {
            ++it;
        }
    }
}

int64_t LiveMap::find_in(const Map& m, uint64_t value) {
    auto it = m.upper_bound(value);   // first start > value
    if (it == m.begin()) return -1;
    --it;
    return value < it->second.end ? it->second.id : -1;
}

int64_t LiveMap::find(uint64_t value) const {
    int64_t id = find_in(fine_, value);
    return id >= 0 ? id : find_in(vmm_, value);
}

void scan_words(const std::vector<uint64_t>& words, const LiveMap& live,
                std::vector<int64_t>& ids) {
    ids.clear();
    for (uint64_t w : words) {
        if (w == 0) continue;
        int64_t id = live.find(w);
        if (id >= 0) ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
}

}  // namespace mhc::record
