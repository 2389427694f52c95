#include "mhc/viewer/band_colors.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>
#include <unordered_set>

#include "mhc/common/units.hpp"
#include "mhc/trace/event_order.hpp"
#include "mhc/viewer/colors.hpp"

namespace mhc::viewer {

namespace {

// Distinct hues for the labels with the most bytes, the last for "other labels".
constexpr uint32_t kLabelColors[kLabelKeys + 1] = {
    rgb(76, 120, 200), rgb(220, 130, 50), rgb(80, 180, 100), rgb(160, 90, 200),
    rgb(60, 190, 200), rgb(210, 80, 110), rgb(200, 190, 70), rgb(150, 150, 140)};

uint64_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

void category_keys(const ViewTrace& t, BandKeys& k) {
    for (int c = 0; c < trace::kCategoryCount; ++c) {
        k.color.push_back(category_color(static_cast<trace::Category>(c)));
        k.name.emplace_back(trace::to_string(static_cast<trace::Category>(c)));
    }
    for (trace::Category c : t.allocations.category) k.key.push_back(static_cast<uint8_t>(c));
}

void label_keys(const ViewTrace& t, BandKeys& k) {
    const AllocationTable& a = t.allocations;
    std::unordered_map<int64_t, int64_t> bytes;   // label -> allocated bytes
    for (size_t i = 0; i < a.size(); ++i) bytes[a.label[i]] += a.bytes[i];
    std::vector<std::pair<int64_t, int64_t>> v(bytes.begin(), bytes.end());
    std::sort(v.begin(), v.end(), [](auto& x, auto& y) { return x.second != y.second ? x.second > y.second : x.first < y.first; });
    std::unordered_map<int64_t, uint8_t> key_of;
    for (size_t r = 0; r < v.size() && r < kLabelKeys; ++r) {
        key_of[v[r].first] = static_cast<uint8_t>(r);
        const std::string& s = t.str(v[r].first);
        k.name.push_back(s.empty() ? "(no label)" : s);
        k.color.push_back(kLabelColors[r]);
    }
    const auto other = static_cast<uint8_t>(k.name.size());
    if (v.size() > kLabelKeys) {
        k.name.push_back(std::to_string(v.size() - kLabelKeys) + " other labels");
        k.color.push_back(kLabelColors[kLabelKeys]);
    }
    for (size_t i = 0; i < a.size(); ++i) {
        auto it = key_of.find(a.label[i]);
        k.key.push_back(it == key_of.end() ? other : it->second);
    }
}

// "24.5-45 MiB"; "512 KiB-1.5 MiB" across units.
std::string size_range(int64_t lo, int64_t hi) {
    std::string a = short_bytes(lo), b = short_bytes(hi);
    auto unit = [](const std::string& s) { return s.substr(s.find(' ')); };
    if (unit(a) == unit(b)) a.erase(a.find(' '));
    return a + "-" + b;
}

void size_keys(const ViewTrace& t, BandKeys& k) {
    const AllocationTable& a = t.allocations;
    std::vector<int64_t> b = size_bounds(a);
    for (size_t c = 0; c <= b.size(); ++c) {
        std::string n = c == 0 ? (b.empty() ? "all sizes" : "< " + short_bytes(b[0]))
                        : c == b.size() ? ">= " + short_bytes(b[c - 1])
                                        : size_range(b[c - 1], b[c]);
        k.name.push_back(n);
        k.color.push_back(size_class_color(static_cast<int>(c)));
    }
    for (size_t i = 0; i < a.size(); ++i)
        k.key.push_back(static_cast<uint8_t>(std::upper_bound(b.begin(), b.end(), a.bytes[i]) - b.begin()));
}

}  // namespace

const char* coloring_name(BandColoring c) {
    switch (c) {
        case BandColoring::Category: return "category";
        case BandColoring::Label: return "source frame";
        case BandColoring::SizeClass: return "size";
    }
    return "?";
}

BandColoring choose_band_coloring(const ViewTrace& t) {
    const AllocationTable& a = t.allocations;
    for (trace::Category c : a.category)
        if (c != trace::Category::Other) return BandColoring::Category;
    std::unordered_map<int64_t, double> labels;   // label -> allocated bytes
    double total = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        total += static_cast<double>(a.bytes[i]);
        if (!t.str(a.label[i]).empty()) labels[a.label[i]] += static_cast<double>(a.bytes[i]);
    }
    // Labels that group (at most 3/4 as many as allocations), unless one of them holds 90% of the
    // bytes: a recording's "cuMemAllocAsync (pool)" held 555.83 of its 556 MiB at the peak, and
    // every band was one blue.
    double largest = 0;
    for (const auto& entry : labels) largest = std::max(largest, entry.second);
    if (labels.size() >= 2 && labels.size() * 4 <= a.size() * 3 && largest < 0.9 * total) return BandColoring::Label;
    return BandColoring::SizeClass;
}

std::vector<int64_t> size_bounds(const AllocationTable& a) {
    // by_size is largest first: walk it from the smallest, cutting at each fifth of the bytes.
    double total = 0;
    for (int64_t b : a.bytes) total += static_cast<double>(b);
    std::vector<int64_t> out;
    double below = 0;
    int next = 1;
    for (size_t r = a.by_size.size(); r-- > 0;) {
        int64_t size = a.bytes[a.by_size[r]];
        if (next < kSizeClassCount && below >= total * next / kSizeClassCount && (out.empty() || size > out.back())) {
            out.push_back(size);
            while (next < kSizeClassCount && below >= total * next / kSizeClassCount) ++next;
        }
        below += static_cast<double>(size);
    }
    return out;
}

std::string short_bytes(int64_t bytes) {
    std::string s = format_bytes(bytes);   // "12.00 MiB"
    auto dot = s.find('.');
    auto space = s.find(' ');
    if (dot != std::string::npos && space != std::string::npos && dot < space) {
        size_t end = space;
        while (end > dot + 1 && s[end - 1] == '0') --end;
        if (end == dot + 1) --end;
        s.erase(end, space - end);
    }
    return s;
}

BandKeys band_keys(const ViewTrace& t, BandColoring c) {
    return band_keys(t, c, trace::memory_events(t.allocations.t_alloc, t.allocations.t_free));
}

BandKeys band_keys(const ViewTrace& t, BandColoring c, const std::vector<trace::MemoryEvent>& events) {
    BandKeys k;
    k.coloring = c;
    if (c == BandColoring::Category) category_keys(t, k);
    else if (c == BandColoring::Label) label_keys(t, k);
    else size_keys(t, k);
    // Live bytes per (key, group), in the trace's event order, one pass.
    const AllocationTable& a = t.allocations;
    k.series.resize(2 * k.count());
    std::vector<double> live(k.series.size(), 0.0);
    for (const trace::MemoryEvent& e : events) {
        auto i = static_cast<size_t>(e.row);
        size_t s = 2 * k.key[i] + (long_lived(static_cast<StackGroup>(a.group[i])) ? 0 : 1);
        live[s] += e.free ? -static_cast<double>(a.bytes[i]) : static_cast<double>(a.bytes[i]);
        k.series[s].push(e.time, live[s]);
    }
    return k;
}

uint32_t band_color(const BandKeys& k, const AllocationTable& a, size_t i) {
    uint32_t base = k.color[k.key[i]];
    float f = 0.86f + static_cast<float>(mix(static_cast<uint64_t>(a.id[i])) % 29) / 100.f;   // 0.86 .. 1.14
    auto scale = [&](uint8_t v) { return static_cast<uint8_t>(std::min(255.f, std::round(static_cast<float>(v) * f))); };
    return rgb(scale(red(base)), scale(green(base)), scale(blue(base)));
}

uint32_t summary_color(const BandKeys& k, uint8_t key) {
    uint32_t c = k.color[key];
    auto towards = [](uint8_t v, uint8_t bg) { return static_cast<uint8_t>((v * 5 + bg * 4) / 9); };
    return rgb(towards(red(c), red(kBackground)), towards(green(c), green(kBackground)), towards(blue(c), blue(kBackground)));
}

std::vector<LegendEntry> band_legend(const BandKeys& k, const BandLayout& b) {
    std::vector<LegendEntry> out;
    if (b.summarised > 0) {
        // None of them live at the peak: said so, not "64 smaller allocations, 0 B" (TraceLens's
        // H100 FalconsAI trace), which read as allocations of no bytes.
        const std::string text = "muted: " + std::to_string(b.summarised) + " smaller allocations" +
                                 (b.peak_summarised_bytes < 1
                                      ? std::string(", none live at the peak")
                                      : ", " + short_bytes(static_cast<int64_t>(b.peak_summarised_bytes)));
        out.push_back({0, text});
    }
    std::vector<size_t> order;
    for (size_t key = 0; key < b.peak_key_bytes.size(); ++key)
        if (b.peak_key_bytes[key] >= 1) order.push_back(key);
    // Size classes read as a scale, largest first (by bytes they came out of order: ">= 939.12 MiB",
    // "17.47-34.94 MiB", "48.04-939.12 MiB", "< 17.47 MiB" on TraceLens's H100 Qwen trace); the other
    // keys by their bytes at the peak, the most first.
    if (k.coloring == BandColoring::SizeClass) std::reverse(order.begin(), order.end());
    else
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t one, size_t other) { return b.peak_key_bytes[one] > b.peak_key_bytes[other]; });
    for (size_t key : order)
        out.push_back({k.color[key], k.name[key] + ": " + short_bytes(static_cast<int64_t>(b.peak_key_bytes[key]))});
    return out;
}

}  // namespace mhc::viewer
