#pragma once
// Parsing and printing of the units users type and read: sizes ("40GiB", "512MB"), shares
// ("70%"), durations (ns internally, printed as ns/us/ms/s), and bandwidths.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mhc {

// The size grammar, one rule for every command and for the Python package (docs/cli.md,
// "Sizes"; `mhc help sizes`): a number (digits, an optional fraction; no sign, no exponent),
// optional whitespace, then a unit, in any case: B; K, KiB, M, MiB, G, GiB, T, TiB (powers of
// 1024); kB, MB, GB, TB (powers of 1000). Rounded to the nearest byte. A number without a unit is
// refused: the message suggests only values within [min, max].
int64_t parse_size(std::string_view text, int64_t min = 0, int64_t max = INT64_MAX);
// A share: a number, optional whitespace and '%' ("70%", "70 %"), as a fraction (0.7), within
// [0, max_percent]. A number without '%' is refused.
double parse_share(std::string_view text, double max_percent = 100);
// A bandwidth: a size per second ("25GB/s", "25 GiB/s"; "/s" may be left out), > 0.
double parse_bandwidth(std::string_view text);
// A byte count the toolkit stored itself (a bare integer), or a size as above. Not for what
// users type: that is parse_size.
int64_t parse_bytes(std::string_view text);
// A duration in seconds: a number and a unit, ns, us, ms, s, min or h ("6us", "2.5 ms", "90min",
// "24h"; docs/cli.md, "Numbers"). A bare number is refused (7 could be seconds or microseconds),
// except where `bare_unit` names the unit ("s", "min" or "h") an option's help gave its bare
// numbers before it took durations: then it is read in that unit, so old scripts keep working.
double parse_seconds(std::string_view text, std::string_view bare_unit = {});

std::string format_bytes(int64_t bytes);        // "1.50 GiB"
std::string format_ns(int64_t ns);              // "12.3 ms"
std::string format_rate(double bytes_per_s);    // "25.0 GB/s"

}  // namespace mhc
