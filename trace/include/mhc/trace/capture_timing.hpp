#pragma once
// The device figures a capture's meta gives the times of the kernels mhc advise adds (a fused
// optimizer step, an offloaded one): capture.gpu.hbm_bw (B/s, python/mhc_torch writes repr() of a
// float) and capture.launch_overhead_ns (whole ns). mhc advise reads them, mhc check refuses them
// out of bounds first. Before 2026-12-06 they were read with std::stod unchecked: "nan", "-1",
// "1e-300" or "1e300" were cast to int64 (undefined behaviour) and "0x10" read as 16.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

#include "mhc/common/error.hpp"
#include "mhc/common/numbers.hpp"

namespace mhc::trace {

inline constexpr double kCaptureMinBandwidth = 1e3, kCaptureMaxBandwidth = 1e15;   // 1 kB/s .. 1000 TB/s, as the link's
inline constexpr int64_t kCaptureMaxLaunchNs = 1'000'000'000;                      // one second

struct CaptureTiming {
    double hbm_bw = 3.35e12;             // bytes/s; H100 SXM's when the meta does not say
    int64_t launch_overhead_ns = 2000;   // when the meta does not say
    std::string error;                   // "capture.gpu.hbm_bw: 'nan' is not ..." for the first out of bounds
};

inline CaptureTiming capture_timing(const std::map<std::string, std::string>& meta) {
    CaptureTiming out;
    if (auto it = meta.find("capture.gpu.hbm_bw"); it != meta.end()) {
        const double bw = decimal_refusal(it->second).empty() ? std::strtod(it->second.c_str(), nullptr) : NAN;
        if (bw >= kCaptureMinBandwidth && bw <= kCaptureMaxBandwidth) out.hbm_bw = bw;
        else out.error = "capture.gpu.hbm_bw: '" + printable(it->second) + "' is not a bandwidth in B/s in [1e3, 1e15]";
    }
    if (auto it = meta.find("capture.launch_overhead_ns"); it != meta.end()) {
        const auto ns = parse_integer<int64_t>(it->second);
        if (ns && *ns >= 0 && *ns <= kCaptureMaxLaunchNs) out.launch_overhead_ns = *ns;
        else if (out.error.empty())
            out.error = "capture.launch_overhead_ns: '" + printable(it->second) +
                        "' is not a whole number of ns in [0, 1000000000]";
    }
    return out;
}

}   // namespace mhc::trace
