#pragma once
// Parsing and printing of the units users type and read: bytes ("40GiB", "512MB"),
// durations (ns internally, printed as ns/us/ms/s), and bandwidths.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mhc {

// Bytes from "123", "40GiB", "1.5GB", "512 MiB", "64k". Binary (KiB, MiB, GiB, TiB) and
// decimal (kB, MB, GB, TB) suffixes; a bare K/M/G/T means binary. Throws mhc::Error.
int64_t parse_bytes(std::string_view text);
// Seconds from "5us", "2.5ms", "1s", "300ns". Throws mhc::Error.
double parse_seconds(std::string_view text);
// Bandwidth in bytes/s from "25GB/s", "25GB", "12.5e9". Throws mhc::Error.
double parse_bandwidth(std::string_view text);

std::string format_bytes(int64_t bytes);        // "1.50 GiB"
std::string format_ns(int64_t ns);              // "12.3 ms"
std::string format_rate(double bytes_per_s);    // "25.0 GB/s"

}  // namespace mhc
