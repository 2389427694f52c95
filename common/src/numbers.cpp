// The options' number grammar (numbers.hpp): whole numbers and other numbers, in decimal.
#include "mhc/common/numbers.hpp"

#include <cctype>
#include <cstdint>
#include <string>

#include "mhc/common/error.hpp"

namespace mhc {

namespace {

bool all_digits(std::string_view text, size_t from, size_t to) {
    if (from >= to) return false;
    for (size_t i = from; i < to; ++i)
        if (!std::isdigit(static_cast<unsigned char>(text[i]))) return false;
    return true;
}

}   // namespace

std::string whole_number_refusal(std::string_view text, bool negative_ok) {
    const size_t start = !text.empty() && text[0] == '-' ? 1 : 0;
    if (start == 1 && !negative_ok) return quoted_value(text) + ": must be 0 or more";
    if (!all_digits(text, start, text.size()))
        return quoted_value(text) +
               ": not a whole number (decimal digits only: no sign '+', space, 0x or exponent)";
    if (text.size() - start > 1 && text[start] == '0')
        return quoted_value(text) + ": a whole number starts with no 0 (it is decimal, not octal)";
    // Zero has no sign: "-0" passed the ranges of options that take a negative number (kernels
    // --threads -0 ran, mhc-view --device -0 read GPU 0) where every other whole number is one way.
    if (start == 1 && text == "-0") return quoted_value(text) + ": zero has no sign; write 0";
    // Past 64 bits CLI11 took the largest value instead (export --run 99999999999999999999 looked
    // for run 9223372036854775807); an option's own range says the rest.
    const bool fits = negative_ok ? parse_integer<int64_t>(text).has_value()
                                  : parse_integer<uint64_t>(text).has_value();
    if (!fits) return quoted_value(text) + ": too large a number";
    return "";
}

std::string decimal_refusal(std::string_view text) {
    const std::string lower = [&] {
        std::string folded(text);
        for (char& byte : folded) byte = static_cast<char>(std::tolower(static_cast<unsigned char>(byte)));
        return folded;
    }();
    if (lower == "nan" || lower == "-nan" || lower.find("inf") != std::string::npos)
        return quoted_value(text) + ": not a finite number";
    size_t at = !text.empty() && text[0] == '-' ? 1 : 0;
    const size_t int_from = at;
    while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at]))) ++at;
    bool digits = at > int_from;
    if (at < text.size() && text[at] == '.') {
        const size_t frac_from = ++at;
        while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at]))) ++at;
        digits = digits || at > frac_from;
    }
    if (digits && at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
        ++at;
        if (at < text.size() && (text[at] == '+' || text[at] == '-')) ++at;
        const size_t exp_from = at;
        while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at]))) ++at;
        if (at == exp_from) digits = false;
    }
    if (!digits || at != text.size())
        return quoted_value(text) + ": not a number (decimal: 1.5, -2, 1e-3; no sign '+', space or 0x)";
    return "";
}

}   // namespace mhc
