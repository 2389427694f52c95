#include "mhc/record/params.hpp"

#include <algorithm>
#include <cstring>

namespace mhc::record {

namespace {
// Aligned word offsets k (relative to the buffer) with [k, k+8) inside [off, off+size).
template <typename Read>
void words_of(const ParamSlot& slot, Read read, std::vector<uint64_t>& out) {
    uint64_t begin = (static_cast<uint64_t>(slot.offset) + 7) & ~uint64_t{7};
    uint64_t end = static_cast<uint64_t>(slot.offset) + slot.size;
    for (uint64_t k = begin; k + 8 <= end; k += 8) out.push_back(read(k - slot.offset));
}
}  // namespace

void gather_words(const ParamSlot* slots, size_t n, void* const* values,
                  std::vector<uint64_t>& out) {
    if (!values) return;
    for (size_t i = 0; i < n; ++i) {
        const auto* value = static_cast<const unsigned char*>(values[i]);
        if (!value) continue;
        words_of(slots[i], [value](uint64_t rel) {
            uint64_t word;
            std::memcpy(&word, value + rel, 8);   // the value may sit at any host alignment
            return word;
        }, out);
    }
}

void gather_words_packed(const ParamSlot* slots, size_t n, const void* buffer, size_t size,
                         std::vector<uint64_t>& out) {
    if (!buffer) return;
    const auto* base = static_cast<const unsigned char*>(buffer);
    for (size_t i = 0; i < n; ++i) {
        const ParamSlot& slot = slots[i];
        if (static_cast<uint64_t>(slot.offset) + slot.size > size) continue;
        words_of(slot, [base, &slot](uint64_t rel) {
            uint64_t word;
            std::memcpy(&word, base + slot.offset + rel, 8);
            return word;
        }, out);
    }
}

int64_t LiveMap::insert(uint64_t start, uint64_t bytes, int64_t id, Layer layer) {
    Map& entries = layer == Layer::Fine ? fine_ : vmm_;
    Entry entry{start + bytes, id};
    auto [it, added] = entries.try_emplace(start, entry);
    if (added) return -1;
    int64_t old = it->second.id;
    it->second = entry;
    return old;
}

int64_t LiveMap::erase(uint64_t start, Layer layer) {
    Map& entries = layer == Layer::Fine ? fine_ : vmm_;
    auto it = entries.find(start);
    if (it == entries.end()) return -1;
    int64_t id = it->second.id;
    entries.erase(it);
    return id;
}

int64_t LiveMap::at(uint64_t start, Layer layer) const {
    const Map& entries = layer == Layer::Fine ? fine_ : vmm_;
    auto it = entries.find(start);
    return it == entries.end() ? -1 : it->second.id;
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

int64_t LiveMap::find_in(const Map& entries, uint64_t value) {
    auto it = entries.upper_bound(value);   // first start > value
    if (it == entries.begin()) return -1;
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
    for (uint64_t word : words) {
        if (word == 0) continue;
        int64_t id = live.find(word);
        if (id >= 0) ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
}

}  // namespace mhc::record
