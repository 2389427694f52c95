#pragma once
// The one JSON string writer of the C++ side (nlohmann's escaping): for exports and --json
// outputs written by hand for speed or layout.
#include <string>
#include <string_view>

namespace mhc {

// `text` as a JSON string, quotes included: quotes, backslashes and control characters escaped,
// and each byte that is not part of valid UTF-8 (names from imported traces) as U+FFFD, as
// browsers decode them, so that the output is always valid JSON.
std::string json_string(std::string_view text);
// The same appended to `out`.
void append_json_string(std::string& out, std::string_view text);

}  // namespace mhc
