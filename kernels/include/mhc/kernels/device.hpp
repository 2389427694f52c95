#pragma once
// What the build and the machine offer, and device memory for callers that do not include
// CUDA headers (the CLI, the tests). Without CUDA every device call throws mhc::Error.
#include <cstddef>
#include <string>

#include "mhc/kernels/types.hpp"

namespace mhc::kernels {

bool built_with_cuda();
// Number of usable CUDA devices; 0 without CUDA or without a GPU (never throws).
int cuda_device_count();
// One line naming the device (e.g. "NVIDIA H200, 132 SMs, 141 GiB"); throws when absent.
std::string cuda_device_name();
// Copy engines of device 0 (cudaDeviceProp::asyncEngineCount); throws when absent.
int cuda_copy_engines();
// Throws mhc::Error naming what is missing (no CUDA build, no driver, a driver older than
// the CUDA runtime this was built with, no device) unless usable.
void require_device(Device d);
// One line for `mhc --version`: the CUDA runtime this build carries, the driver's CUDA
// version and the devices, or what is missing (e.g. "driver supports CUDA 12.4, older than
// this build's CUDA 13.0 runtime: needs an NVIDIA driver >= 580"). Never throws.
std::string cuda_summary();
// Why a driver of CUDA version `driver` (cudaDriverGetVersion: 1000 * major + 10 * minor; 0:
// no driver) cannot run a CUDA `runtime` build, in one phrase; empty when it can. Only the
// major versions are compared (minor version compatibility).
std::string driver_problem(int driver, int runtime);

// Device memory that frees itself. Copies are synchronous and checked.
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(size_t bytes);
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; o.bytes_ = 0; }
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    void* data() const { return ptr_; }
    size_t size() const { return bytes_; }
    void upload(const void* host, size_t bytes, size_t offset = 0);
    void download(void* host, size_t bytes, size_t offset = 0) const;
    void fill_bytes(int value);  // cudaMemset, e.g. 0xff to poison outputs with NaN

private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
};

void device_synchronize();

}  // namespace mhc::kernels
