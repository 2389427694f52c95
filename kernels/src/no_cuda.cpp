// The device side of the API in a build without CUDA: queries say "none", everything that
// would need a GPU throws one clear mhc::Error.
#include <string>

#include "cuda_backend.hpp"
#include "mhc/common/error.hpp"
#include "mhc/kernels/device.hpp"

namespace mhc::kernels {

namespace {
[[noreturn]] void no_cuda() {
    throw Error("device cuda requested, but this build of mhc has no CUDA support "
                "(rebuild with -DMHC_WITH_CUDA=ON where the CUDA toolkit is installed)");
}
}  // namespace

bool built_with_cuda() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_device_name() { no_cuda(); }
int cuda_copy_engines() { no_cuda(); }
std::string cuda_summary() { return "CUDA: not in this build"; }
void require_device(Device d) {
    if (d == Device::Cuda) no_cuda();
}

DeviceBuffer::DeviceBuffer(size_t) { no_cuda(); }
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
}
void DeviceBuffer::upload(const void*, size_t, size_t) { no_cuda(); }
void DeviceBuffer::download(void*, size_t, size_t) const { no_cuda(); }
void DeviceBuffer::fill_bytes(int) { no_cuda(); }
void device_synchronize() { no_cuda(); }

namespace cuda_impl {
SinkhornReport sinkhorn_forward(const SinkhornOptions&, int64_t, ConstTensor, Tensor) { no_cuda(); }
SinkhornReport sinkhorn_backward(const SinkhornOptions&, int64_t, ConstTensor, ConstTensor, Tensor, Tensor) {
    no_cuda();
}
}  // namespace cuda_impl

}  // namespace mhc::kernels

#include "swap_internal.hpp"

namespace mhc::kernels::cuda_impl {
std::unique_ptr<SwapEngine> make_swap_engine(const SwapConfig&) { no_cuda(); }
std::unique_ptr<Standin> make_standin() { no_cuda(); }
std::shared_ptr<unsigned char> pinned_host_memory(size_t) { no_cuda(); }
}  // namespace mhc::kernels::cuda_impl
