#pragma once
// The one integer parser, for every number read from text that is not a size or a duration
// (units.hpp): meta values of traces, environment variables, option arguments.
#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>

namespace mhc {

// The whole of `text` as a decimal integer of type Int: an optional '-' (signed types only),
// then digits, nothing else (no '+', no spaces, no other base); nullopt when it is not one or
// does not fit in Int.
template <class Int>
std::optional<Int> parse_integer(std::string_view text) {
    Int value{};
    const char* end = text.data() + text.size();
    auto [stop, error] = std::from_chars(text.data(), end, value);
    if (text.empty() || error != std::errc() || stop != end) return std::nullopt;
    return value;
}

}  // namespace mhc
