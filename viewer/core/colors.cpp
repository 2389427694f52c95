#include "mhc/viewer/colors.hpp"

#include <algorithm>
#include <cmath>

#include "mhc/common/hash.hpp"

namespace mhc::viewer {

namespace {
uint32_t hsv(float h, float s, float v) {
    float c = v * s, x = c * (1 - std::fabs(std::fmod(h * 6, 2.f) - 1)), m = v - c;
    float r = 0, g = 0, b = 0;
    int i = static_cast<int>(h * 6) % 6;
    if (i == 0) { r = c; g = x; } else if (i == 1) { r = x; g = c; } else if (i == 2) { g = c; b = x; }
    else if (i == 3) { g = x; b = c; } else if (i == 4) { r = x; b = c; } else { r = c; b = x; }
    auto q = [&](float f) { return static_cast<uint8_t>(std::lround((f + m) * 255)); };
    return rgb(q(r), q(g), q(b));
}

// The colour of value `v` (an enumeration's member or a class number) from its palette, in
// declaration order; `fallback` for a value outside it.
template <class Value, size_t N>
uint32_t from_palette(const uint32_t (&palette)[N], Value value, uint32_t fallback) {
    const auto index = static_cast<size_t>(value);   // a negative value wraps past N
    return index < N ? palette[index] : fallback;
}
}  // namespace

uint32_t name_color(std::string_view name) {
    const uint64_t hash = Fnv1a().add(name).value();
    float hue = static_cast<float>(hash % 360) / 360.f;
    float sat = 0.45f + static_cast<float>((hash >> 16) % 25) / 100.f;
    float val = 0.70f + static_cast<float>((hash >> 24) % 20) / 100.f;
    return hsv(hue, sat, val);
}

uint32_t family_color(KernelFamily f) {
    static constexpr uint32_t k[kFamilyCount] = {
        rgb(70, 130, 220),   // GEMM: blue
        rgb(40, 170, 200),   // conv: cyan
        rgb(220, 90, 80),    // attention: red
        rgb(230, 190, 60),   // norm: yellow
        rgb(110, 190, 90),   // elementwise: green
        rgb(170, 120, 220),  // reduce/softmax: violet
        rgb(240, 140, 40),   // NCCL/comm: orange
        rgb(230, 90, 190),   // Sinkhorn: magenta
        rgb(200, 140, 170),  // mHC mix: pink
        rgb(150, 160, 100),  // memory/copy: olive
        rgb(80, 190, 170),   // optimizer: teal
        rgb(140, 140, 150),  // other: grey
    };
    return from_palette(k, f, k[kFamilyCount - 1]);
}

uint32_t kernel_color(std::string_view name) { return kernel_color(name, classify_kernel(name)); }

uint32_t kernel_color(std::string_view name, KernelFamily family) {
    uint32_t base = family_color(family);
    const uint64_t hash = Fnv1a().add(name).value();
    float factor = 0.82f + static_cast<float>(hash % 31) / 100.f;   // 0.82 .. 1.12
    auto scale = [&](uint8_t channel) {
        return static_cast<uint8_t>(std::min(255.f, std::round(static_cast<float>(channel) * factor)));
    };
    return rgb(scale(red(base)), scale(green(base)), scale(blue(base)));
}

int size_class(int64_t bytes) {
    constexpr int64_t MiB = int64_t{1} << 20;
    if (bytes < MiB) return 0;
    if (bytes < 16 * MiB) return 1;
    if (bytes < 128 * MiB) return 2;
    if (bytes < 1024 * MiB) return 3;
    return 4;
}

const char* size_class_name(int c) {
    static constexpr const char* k[kSizeClassCount] = {"< 1 MiB", "1-16 MiB", "16-128 MiB", "128 MiB-1 GiB", ">= 1 GiB"};
    return (c >= 0 && c < kSizeClassCount) ? k[c] : "?";
}

uint32_t size_class_color(int c) {
    static constexpr uint32_t k[kSizeClassCount] = {rgb(120, 190, 230), rgb(90, 200, 140), rgb(230, 200, 80),
                                                    rgb(240, 140, 60), rgb(220, 70, 90)};
    return from_palette(k, c, kSummary);
}

uint32_t category_color(trace::Category c) {
    static constexpr uint32_t k[trace::kCategoryCount] = {
        rgb(76, 120, 200),   // param
        rgb(220, 130, 50),   // grad
        rgb(160, 90, 200),   // optimizer
        rgb(80, 180, 100),   // activation
        rgb(200, 190, 70),   // workspace
        rgb(60, 190, 200),   // comm
        rgb(175, 150, 120),  // other: tan, not the summary band's slate
    };
    return from_palette(k, c, k[6]);
}

uint32_t event_color(trace::EventKind e) {
    static constexpr uint32_t k[trace::kEventKindCount] = {
        rgb(235, 110, 60),   // swap_out
        rgb(70, 160, 240),   // swap_in
        rgb(150, 150, 150),  // evict_clean
        rgb(190, 100, 190),  // drop
        rgb(230, 180, 60),   // recompute
        rgb(230, 50, 50),    // stall
        rgb(255, 0, 0),      // oom
        rgb(100, 200, 160),  // prefetch
    };
    return from_palette(k, e, kFolded);
}

uint32_t copy_color(trace::CopyKind c) {
    static constexpr uint32_t k[trace::kCopyKindCount] = {
        rgb(70, 160, 240), rgb(235, 110, 60), rgb(120, 200, 120), rgb(200, 120, 200),
        rgb(170, 170, 120), rgb(140, 140, 160)};
    return from_palette(k, c, kFolded);
}

uint32_t marker_color(trace::MarkerKind m) {
    switch (m) {
        case trace::MarkerKind::Step: return rgb(90, 110, 150);
        case trace::MarkerKind::Layer: return rgb(100, 140, 120);
        default: return rgb(140, 120, 100);
    }
}

uint32_t series_color(size_t i) {
    // Ten hues before they repeat (a sweep compares more runs than six).
    static constexpr uint32_t k[] = {rgb(90, 170, 250), rgb(250, 150, 60), rgb(110, 210, 110), rgb(230, 90, 160),
                                     rgb(200, 200, 90), rgb(160, 130, 240), rgb(70, 210, 200), rgb(240, 110, 90),
                                     rgb(180, 230, 60), rgb(210, 160, 250)};
    return k[i % (sizeof k / sizeof k[0])];
}

}  // namespace mhc::viewer
