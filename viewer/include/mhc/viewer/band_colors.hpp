#pragma once
// What colours the memory view's bands. Generated and recorded traces carry categories
// (param, grad, activation...). Imported traces mostly do not: every allocation is "other".
// There the bands are coloured by the allocation's label (for PyTorch snapshots the top user
// stack frame) when labels repeat, else by size class, so that the picture is not one grey.
#include <cstdint>
#include <string>
#include <vector>

#include "mhc/viewer/bands.hpp"
#include "mhc/viewer/data.hpp"

namespace mhc::viewer {

enum class BandColoring { Category, Label, SizeClass };
const char* coloring_name(BandColoring c);   // "category", "source frame", "size"

// Category when any allocation has a category other than "other"; else Label when at least
// two distinct non-empty labels exist and labels repeat (distinct <= 3/4 of the allocations:
// an execution trace's one-label-per-storage does not group anything);
// else SizeClass.
BandColoring choose_band_coloring(const ViewTrace& t);
uint32_t band_color(const ViewTrace& t, size_t allocation, BandColoring c);

struct LegendEntry {
    uint32_t color = 0;
    std::string text;
};
// Legend for the drawn bands: the categories or size classes present among them, or the
// `max_labels` labels with the most drawn bytes (then "N more labels").
std::vector<LegendEntry> band_legend(const ViewTrace& t, const BandLayout& b, BandColoring c, size_t max_labels = 6);

}  // namespace mhc::viewer
