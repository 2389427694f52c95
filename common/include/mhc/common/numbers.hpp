#pragma once
// The one integer parser, for every number read from text that is not a size or a duration
// (units.hpp): meta values of traces, environment variables, option arguments.
#include <charconv>
#include <optional>
#include <string>
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

// The grammar of the numbers a command-line option takes (docs/cli.md, "Numbers"), for mhc and
// mhc-view alike. "" when `text` is a whole number: decimal digits, a '-' first only if
// `negative_ok`, no '+', space, other base or exponent, no leading 0, within 64 bits; else why
// not, quoting `text` ("'0x10': not a whole number ...").
std::string whole_number_refusal(std::string_view text, bool negative_ok);
// Likewise for any other number: decimal digits with an optional '-', fraction and exponent
// ("1.5", "-2", "1e-3"); no '+', space, hexadecimal, nan or inf.
std::string decimal_refusal(std::string_view text);

}  // namespace mhc
