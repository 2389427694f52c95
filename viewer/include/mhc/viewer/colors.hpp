#pragma once
// Colours as ImGui packs them (0xAABBGGRR), chosen here so that tests can predict pixels.
#include <cstdint>
#include <string_view>

#include "mhc/trace/model.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/viewer/families.hpp"

namespace mhc::viewer {

constexpr uint32_t rgb(uint8_t r, uint8_t g, uint8_t b, uint8_t a = 255) {
    return (uint32_t{a} << 24) | (uint32_t{b} << 16) | (uint32_t{g} << 8) | r;
}
constexpr uint8_t red(uint32_t c) { return c & 0xff; }
constexpr uint8_t green(uint32_t c) { return (c >> 8) & 0xff; }
constexpr uint8_t blue(uint32_t c) { return (c >> 16) & 0xff; }

inline constexpr uint32_t kBackground = rgb(30, 30, 34);
inline constexpr uint32_t kFolded = rgb(110, 110, 120);       // folded runs of narrow items
inline constexpr uint32_t kHighlight = rgb(255, 230, 40);
// Every match of the timeline's find field: a lime no family, event or band colour is near (an
// amber mark vanished on the yellow norm kernels).
inline constexpr uint32_t kFindMark = rgb(200, 255, 40);
inline constexpr uint32_t kSelected = rgb(255, 255, 255);     // outline of the selected kernel
inline constexpr uint32_t kCapacity = rgb(230, 60, 60);
inline constexpr uint32_t kCurve = rgb(90, 170, 250);
inline constexpr uint32_t kRecorded = rgb(150, 150, 160);   // the recorded curve beside a run's
// The memory view's summary band (allocations too small to draw): a dark slate, distinct from
// every category colour (the "other" category included) and from the size-class colours.
inline constexpr uint32_t kSummary = rgb(72, 78, 104);

// A stable colour per kernel name (hash of the text, not of the string id).
uint32_t name_color(std::string_view name);
// One hue per kernel family (the timeline's legend).
uint32_t family_color(KernelFamily f);
// A kernel: its family's hue, lighter or darker by a hash of the name, so that neighbouring
// kernels of one family stay apart. Without a family: the built-in rules' (classify_kernel).
uint32_t kernel_color(std::string_view name, KernelFamily family);
uint32_t kernel_color(std::string_view name);
uint32_t category_color(trace::Category c);
// Allocation size classes for traces without categories: < 1 MiB, < 16 MiB, < 128 MiB,
// < 1 GiB, >= 1 GiB.
inline constexpr int kSizeClassCount = 5;
int size_class(int64_t bytes);
const char* size_class_name(int c);
uint32_t size_class_color(int c);
uint32_t event_color(trace::EventKind k);
uint32_t copy_color(trace::CopyKind k);
uint32_t marker_color(trace::MarkerKind k);
// Distinct colours for runs overlaid in the compare view.
uint32_t series_color(size_t i);

}  // namespace mhc::viewer
