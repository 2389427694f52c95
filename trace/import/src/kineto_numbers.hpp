#pragma once
// Numbers as a Kineto trace writes them (JSON numbers kept as their text by the tokenizer):
// times in microseconds, integers, addresses (kineto_numbers.cpp).
#include <cstddef>
#include <cstdint>

#include "limits.hpp"

namespace mhc::trace::import {

// ts must lie in [0, 2^62] ns and dur in [-2^61, 2^61] (negative durations become 0): then
// ts + dur and differences of times stay inside int64.
constexpr int64_t kMaxTs = kMaxTime;
constexpr int64_t kMaxDur = INT64_C(1) << 61;

// Microseconds as written ("4458676983543.183") -> integer nanoseconds, exactly; false where
// the value is not a number or lies outside [lo, hi].
bool parse_us_to_ns(const char* text, size_t n, int64_t& out, int64_t lo, int64_t hi);

// An integer as written (a JSON number; an integral float such as 1e3 is taken too). False for
// NaN, Inf, fractions beyond int64 and anything else: the caller reports the field.
bool parse_int(const char* text, size_t n, int64_t& out);

// Addresses are unsigned 64-bit in some traces: kept as their two's-complement bits.
bool parse_addr(const char* text, size_t n, int64_t& out);

}  // namespace mhc::trace::import
