#pragma once
// What colours the memory view's bands: a colour key per allocation. Generated and recorded
// traces carry categories (param, grad, activation...). Imported traces mostly do not: every
// allocation is "other". There the bands are coloured by the allocation's label (for PyTorch
// snapshots the top user stack frame) when labels repeat, else by size class, with the classes'
// bounds taken from the trace's own sizes so that the drawn bands do not all fall in one class.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mhc/trace/event_order.hpp"
#include "mhc/viewer/bands.hpp"
#include "mhc/viewer/curve.hpp"
#include "mhc/viewer/data.hpp"

namespace mhc::viewer {

enum class BandColoring { Category, Label, SizeClass };
const char* coloring_name(BandColoring c);   // "category", "source frame", "size"

// Category when any allocation has a category other than "other"; else Label when at least
// two distinct non-empty labels exist and labels repeat (distinct <= 3/4 of the allocations:
// an execution trace's one-label-per-storage does not group anything);
// else SizeClass.
BandColoring choose_band_coloring(const ViewTrace& t);

// The colour keys of one colouring: categories; the labels with the most bytes (7, then "other
// labels"); or up to five size classes, each holding about a fifth of the allocated bytes.
struct BandKeys {
    BandColoring coloring = BandColoring::Category;
    std::vector<uint8_t> key;           // per allocation
    std::vector<uint32_t> color;        // per key
    std::vector<std::string> name;      // per key: "activation", "model.py:41 forward", "12-24.5 MiB"
    // Live bytes of every allocation of a key in one group, over time:
    // series[2 * key + (long-lived ? 0 : 1)] (they add up to the live-bytes curve).
    std::vector<StepSeries> series;
    size_t count() const { return color.size(); }
};
inline constexpr size_t kLabelKeys = 7;
BandKeys band_keys(const ViewTrace& t, BandColoring c);
// The same with the allocations' events already in the trace's order (the loader's).
BandKeys band_keys(const ViewTrace& t, BandColoring c, const std::vector<trace::MemoryEvent>& events);

// Size-class bounds from the sizes present: the sizes at which a fifth, two fifths... of the
// allocated bytes are in smaller allocations (distinct, ascending; empty for one size only).
std::vector<int64_t> size_bounds(const AllocationTable& a);
// "12 MiB", "1.5 GiB": a size with the decimals it needs.
std::string short_bytes(int64_t bytes);

// A band: its key's colour, a little lighter or darker by a hash of the allocation's id, so that
// neighbouring bands of one key stay apart.
uint32_t band_color(const BandKeys& k, const AllocationTable& a, size_t allocation);
// A key's smaller allocations drawn together: its colour, muted towards the background.
uint32_t summary_color(const BandKeys& k, uint8_t key);

struct LegendEntry {
    LegendEntry() = default;
    LegendEntry(uint32_t colour, std::string words, std::string hover = {})
        : color(colour), text(std::move(words)), tip(std::move(hover)) {}
    uint32_t color = 0;
    std::string text;
    std::string tip;   // shown when the entry is hovered ("" for none)
};
// What the muted bands hold at the range's peak ("muted: 13894 smaller allocations, 45.12 GiB",
// when any), then the keys present there with their bytes ("activation: 60.25 GiB"), largest first.
std::vector<LegendEntry> band_legend(const BandKeys& k, const BandLayout& b);

}  // namespace mhc::viewer
