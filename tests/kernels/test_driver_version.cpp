// The driver/runtime rule behind `mhc --version` and every "device cuda requested, but ..."
// message: a driver of an older CUDA major version is named with what is needed; a newer or
// equal major version (any minor) is fine; no driver is said so.
#include <catch2/catch.hpp>

#include "mhc/kernels/device.hpp"

using mhc::kernels::driver_problem;

TEST_CASE("kernels: a driver of an older CUDA major version is named with the driver it needs", "[kernels]") {
    CHECK(driver_problem(12040, 13000) ==
          "the NVIDIA driver supports CUDA 12.4, older than this build's CUDA 13.0 runtime: it needs a driver "
          "for CUDA 13.x (580 or newer)");
    CHECK(driver_problem(11080, 12060) ==
          "the NVIDIA driver supports CUDA 11.8, older than this build's CUDA 12.6 runtime: it needs a driver "
          "for CUDA 12.x (525 or newer)");
}

TEST_CASE("kernels: a driver of the same or a newer CUDA major version is usable", "[kernels]") {
    CHECK(driver_problem(13000, 13000).empty());
    CHECK(driver_problem(13000, 13020).empty());  // minor version compatibility
    CHECK(driver_problem(13020, 13000).empty());
    CHECK(driver_problem(14000, 13000).empty());
}

TEST_CASE("kernels: no driver is said so", "[kernels]") {
    CHECK(driver_problem(0, 13000) ==
          "no NVIDIA driver found (libcuda.so.1 is not installed or not on the library path)");
}
