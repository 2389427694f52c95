// driver_problem(driver, runtime): the driver/runtime compatibility rule, without CUDA, so
// that it is tested everywhere (tests/kernels/test_driver_version.cpp).
#include <string>

#include "mhc/kernels/device.hpp"

namespace mhc::kernels {

namespace {
std::string version_string(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }
}  // namespace

std::string driver_problem(int driver, int runtime) {
    if (driver <= 0) return "no NVIDIA driver found (libcuda.so.1 is not installed or not on the library path)";
    if (driver / 1000 >= runtime / 1000) return {};
    // The oldest Linux driver branch of each CUDA major version (CUDA release notes).
    const int major = runtime / 1000;
    const char* branch = major == 13 ? "580" : major == 12 ? "525" : major == 11 ? "450" : nullptr;
    return "the NVIDIA driver supports CUDA " + version_string(driver) + ", older than this build's CUDA " +
           version_string(runtime) + " runtime: it needs a driver for CUDA " + std::to_string(major) + ".x" +
           (branch ? std::string(" (") + branch + " or newer)" : "");
}

}  // namespace mhc::kernels
