#include "mhc/trace/model.hpp"

#include <array>

namespace mhc::trace {
namespace {
constexpr std::array<std::string_view, kCategoryCount> kCategoryNames = {
    "param", "grad", "optimizer", "activation", "workspace", "comm", "other"};
constexpr std::array<std::string_view, kCopyKindCount> kCopyNames = {"H2D", "D2H", "D2D",
                                                                      "P2P", "memset", "H2H"};
}  // namespace

std::string_view to_string(Category c) { return kCategoryNames[static_cast<int>(c)]; }

std::string_view to_string(AccessMode m) {
    switch (m) {
        case AccessMode::Read: return "read";
        case AccessMode::Write: return "write";
        case AccessMode::ReadWrite: return "read-write";
    }
    return "?";
}

std::string_view to_string(CopyKind k) { return kCopyNames[static_cast<int>(k)]; }

std::string_view to_string(Phase p) {
    switch (p) {
        case Phase::Forward: return "forward";
        case Phase::Backward: return "backward";
        case Phase::Optimizer: return "optimizer";
        case Phase::Recompute: return "recompute";
        case Phase::Other: return "other";
    }
    return "?";
}

std::string_view to_string(MarkerKind k) {
    switch (k) {
        case MarkerKind::Step: return "step";
        case MarkerKind::Layer: return "layer";
        case MarkerKind::Range: return "range";
    }
    return "?";
}

}  // namespace mhc::trace
