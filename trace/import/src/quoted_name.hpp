#pragma once
// A name from the input (an event's, an NVTX range's) as meta and warnings quote it.
#include <algorithm>
#include <string>
#include <string_view>

#include "mhc/common/error.hpp"

namespace mhc::trace::import {

// At most 80 bytes, cut where a UTF-8 character begins, control bytes as '?': a warning is one
// line whatever the file holds.
inline std::string quoted_name(std::string_view name) {
    size_t cut = std::min<size_t>(name.size(), 80);
    while (cut > 0 && cut < name.size() && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
    return printable(std::string(name.substr(0, cut)));
}

}   // namespace mhc::trace::import
