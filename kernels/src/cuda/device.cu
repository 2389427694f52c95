// Device queries and DeviceBuffer for builds with CUDA.
#include <string>
#include <utility>

#include "check.hpp"
#include "mhc/kernels/device.hpp"

namespace mhc::kernels {

bool built_with_cuda() { return true; }

namespace {

std::string cuda_version_string(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// What stands between this build and a GPU, in one phrase; empty when the driver is usable.
std::string this_machines_driver_problem() {
    int driver = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess) {
        cudaGetLastError();
        driver = 0;
    }
    return driver_problem(driver, CUDART_VERSION);
}

}  // namespace

int cuda_device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky "no device" error
        return 0;
    }
    return n;
}

void require_device(Device d) {
    if (d != Device::Cuda) return;
    if (std::string why = this_machines_driver_problem(); !why.empty())
        throw Error("device cuda requested, but " + why);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        cudaGetLastError();
        throw Error(std::string("device cuda requested, but no CUDA device is available (") +
                    (e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount returned 0") + ")");
    }
}

std::string cuda_summary() {
    std::string s = "CUDA: runtime " + cuda_version_string(CUDART_VERSION);
    if (std::string why = this_machines_driver_problem(); !why.empty()) return s + "; " + why;
    int driver = 0;
    cudaDriverGetVersion(&driver);
    s += ", driver " + cuda_version_string(driver);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        cudaGetLastError();
        return s + "; no CUDA device (" + (e != cudaSuccess ? cudaGetErrorString(e) : "none visible") + ")";
    }
    s += "; " + std::to_string(n) + (n == 1 ? " device: " : " devices, the first: ");
    try {
        s += cuda_device_name();
    } catch (const std::exception& ex) {
        s += ex.what();
    }
    return s;
}

std::string cuda_device_name() {
    require_device(Device::Cuda);
    cudaDeviceProp p{};
    MHC_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
    return std::string(p.name) + ", " + std::to_string(p.multiProcessorCount) + " SMs, " +
           std::to_string(p.totalGlobalMem >> 30) + " GiB, sm_" + std::to_string(p.major) + std::to_string(p.minor);
}

int cuda_copy_engines() {
    require_device(Device::Cuda);
    cudaDeviceProp p{};
    MHC_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
    return p.asyncEngineCount;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
    require_device(Device::Cuda);
    if (bytes) MHC_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);  // no throwing from a destructor; errors surface on the next call
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
}

void DeviceBuffer::upload(const void* host, size_t bytes, size_t offset) {
    if (offset + bytes > bytes_) throw Error("DeviceBuffer::upload past the end", Error::Kind::Internal);
    if (bytes) MHC_CUDA_CHECK(cudaMemcpy(static_cast<char*>(ptr_) + offset, host, bytes, cudaMemcpyHostToDevice));
}

void DeviceBuffer::download(void* host, size_t bytes, size_t offset) const {
    if (offset + bytes > bytes_) throw Error("DeviceBuffer::download past the end", Error::Kind::Internal);
    if (bytes) MHC_CUDA_CHECK(cudaMemcpy(host, static_cast<const char*>(ptr_) + offset, bytes, cudaMemcpyDeviceToHost));
}

void DeviceBuffer::fill_bytes(int value) {
    if (bytes_) {
        MHC_CUDA_CHECK(cudaMemset(ptr_, value, bytes_));
        MHC_CUDA_CHECK(cudaDeviceSynchronize());
    }
}

void device_synchronize() { MHC_CUDA_CHECK(cudaDeviceSynchronize()); }

}  // namespace mhc::kernels
