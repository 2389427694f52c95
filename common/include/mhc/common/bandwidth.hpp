#pragma once
// A bandwidth option or field with the bounds it takes, said of the text as the user wrote it.
#include <string_view>

namespace mhc {

// A bandwidth as parse_bandwidth() reads one (mhc/common/units.hpp), within [min, max] B/s; outside
// them "'1B/s': not in [1kB/s, 1000TB/s]", the bounds as a user writes a bandwidth (a bound said in
// bytes per second, "[1000, 1e16] B/s", or the value as read, "'1'", reads as another value).
double parse_bandwidth_in(std::string_view text, double min, double max);

}  // namespace mhc
