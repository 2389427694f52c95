// Numbers as a Kineto trace writes them: the tokenizer keeps each JSON number as its text
// (kParseNumbersAsStringsFlag) and these read the fields it needs, exactly.
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "kineto_numbers.hpp"
#include "mhc/common/numbers.hpp"

namespace mhc::trace::import {

// Microseconds as written ("4458676983543.183") -> integer nanoseconds, exactly.
bool parse_us_to_ns(const char* text, size_t n, int64_t& out, int64_t lo, int64_t hi) {
    size_t pos = 0;
    bool neg = false;
    if (pos < n && text[pos] == '-') {
        neg = true;
        ++pos;
    }
    int64_t ip = 0;
    size_t digits = 0;
    while (pos < n && text[pos] >= '0' && text[pos] <= '9') {
        if (ip > (INT64_MAX / 1000 - 9) / 10) return false;
        ip = ip * 10 + (text[pos++] - '0');
        ++digits;
    }
    int64_t frac = 0;
    int fd = 0;
    if (pos < n && text[pos] == '.') {
        ++pos;
        while (pos < n && text[pos] >= '0' && text[pos] <= '9') {
            if (fd < 3) {
                frac = frac * 10 + (text[pos] - '0');
                ++fd;
            }
            ++pos;
        }
    }
    if (pos != n || digits == 0) {   // exponent form: go through double
        char buf[64];
        if (n >= sizeof buf) return false;
        std::memcpy(buf, text, n);
        buf[n] = 0;
        char* end = nullptr;
        double value = std::strtod(buf, &end);
        if (end != buf + n || !(value * 1000 < 4.6e18 && value * 1000 > -4.6e18)) return false;
        out = static_cast<int64_t>(value * 1000.0);
        return out <= hi && out >= lo;
    }
    while (fd < 3) { frac *= 10; ++fd; }
    out = ip * 1000 + frac;
    if (neg) out = -out;
    return out <= hi && out >= lo;
}

// An integer as written (a JSON number; an integral float such as 1e3 is taken too). False for
// NaN, Inf, fractions beyond int64 and anything else: the caller reports the field.
bool parse_int(const char* text, size_t n, int64_t& out) {
    // Fast path: an optional '-' and up to 18 digits (every id, size and address seen).
    if (n > 0 && n <= 19) {
        size_t pos = text[0] == '-' ? 1 : 0;
        if (pos < n && n - pos <= 18) {
            int64_t value = 0;
            for (; pos < n && text[pos] >= '0' && text[pos] <= '9'; ++pos) value = value * 10 + (text[pos] - '0');
            if (pos == n) {
                out = text[0] == '-' ? -value : value;
                return true;
            }
        }
    }
    if (auto whole = parse_integer<int64_t>(std::string_view(text, n))) {
        out = *whole;
        return true;
    }
    char buf[64];
    if (n == 0 || n >= sizeof buf) return false;
    std::memcpy(buf, text, n);
    buf[n] = 0;
    char* end = nullptr;
    double number = std::strtod(buf, &end);
    if (end != buf + n || !(number >= -9.2e18 && number <= 9.2e18)) return false;   // NaN fails too
    out = static_cast<int64_t>(number);
    return true;
}

// Addresses are unsigned 64-bit in some traces: kept as their two's-complement bits.
bool parse_addr(const char* text, size_t n, int64_t& out) {
    if (parse_int(text, n, out)) return true;
    const auto bits = parse_integer<uint64_t>(std::string_view(text, n));
    if (!bits) return false;
    out = static_cast<int64_t>(*bits);
    return true;
}

}  // namespace mhc::trace::import
