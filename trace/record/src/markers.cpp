#include "mhc/record/markers.hpp"

#include <cctype>

namespace mhc::record {

namespace {
bool contains_ci(std::string_view hay, std::string_view needle) {
    if (needle.size() > hay.size()) return false;
    for (size_t i = 0; i + needle.size() <= hay.size(); ++i) {
        size_t matched = 0;
        while (matched < needle.size() && std::tolower(static_cast<unsigned char>(hay[i + matched])) == needle[matched])
            ++matched;
        if (matched == needle.size()) return true;
    }
    return false;
}
}  // namespace

int32_t last_number(std::string_view name) {
    size_t end = name.size();
    while (end > 0 && !std::isdigit(static_cast<unsigned char>(name[end - 1]))) --end;
    if (end == 0) return -1;
    size_t begin = end;
    while (begin > 0 && std::isdigit(static_cast<unsigned char>(name[begin - 1]))) --begin;
    if (end - begin > 9) begin = end - 9;   // keep it inside int32
    int32_t value = 0;
    for (size_t i = begin; i < end; ++i) value = value * 10 + (name[i] - '0');
    return value;
}

MarkerClass classify_marker(std::string_view name, int32_t steps_seen) {
    if (contains_ci(name, "step")) {
        int32_t number = last_number(name);
        return {trace::MarkerKind::Step, number >= 0 ? number : steps_seen};
    }
    if (contains_ci(name, "layer")) return {trace::MarkerKind::Layer, last_number(name)};
    return {trace::MarkerKind::Range, -1};
}

}  // namespace mhc::record
