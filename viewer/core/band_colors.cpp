#include "mhc/viewer/band_colors.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "mhc/viewer/colors.hpp"

namespace mhc::viewer {

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
    std::unordered_set<int64_t> labels;
    for (int64_t l : a.label)
        if (!t.str(l).empty()) labels.insert(l);
    if (labels.size() >= 2 && labels.size() * 4 <= a.size() * 3) return BandColoring::Label;
    return BandColoring::SizeClass;
}

uint32_t band_color(const ViewTrace& t, size_t i, BandColoring c) {
    const AllocationTable& a = t.allocations;
    switch (c) {
        case BandColoring::Category: return category_color(a.category[i]);
        case BandColoring::Label: return name_color(t.str(a.label[i]));
        case BandColoring::SizeClass: return size_class_color(size_class(a.bytes[i]));
    }
    return kSummary;
}

std::vector<LegendEntry> band_legend(const ViewTrace& t, const BandLayout& b, BandColoring c, size_t max_labels) {
    const AllocationTable& a = t.allocations;
    std::vector<LegendEntry> out;
    if (c == BandColoring::Category) {
        std::vector<bool> seen(trace::kCategoryCount, false);
        for (uint32_t i : b.bands) seen[static_cast<size_t>(a.category[i])] = true;
        for (int k = 0; k < trace::kCategoryCount; ++k)
            if (seen[static_cast<size_t>(k)])
                out.push_back({category_color(static_cast<trace::Category>(k)),
                               std::string(trace::to_string(static_cast<trace::Category>(k)))});
    } else if (c == BandColoring::SizeClass) {
        std::vector<bool> seen(kSizeClassCount, false);
        for (uint32_t i : b.bands) seen[static_cast<size_t>(size_class(a.bytes[i]))] = true;
        for (int k = 0; k < kSizeClassCount; ++k)
            if (seen[static_cast<size_t>(k)]) out.push_back({size_class_color(k), size_class_name(k)});
    } else {
        std::unordered_map<int64_t, int64_t> bytes;   // label -> bytes of its drawn bands
        for (uint32_t i : b.bands) bytes[a.label[i]] += a.bytes[i];
        std::vector<std::pair<int64_t, int64_t>> v(bytes.begin(), bytes.end());
        std::sort(v.begin(), v.end(), [](auto& x, auto& y) { return x.second != y.second ? x.second > y.second : x.first < y.first; });
        for (size_t k = 0; k < v.size() && k < max_labels; ++k) {
            const std::string& s = t.str(v[k].first);
            out.push_back({name_color(s), s.empty() ? "(no label)" : s});
        }
        if (v.size() > max_labels) out.push_back({0, std::to_string(v.size() - max_labels) + " more labels"});
    }
    return out;
}

}  // namespace mhc::viewer
