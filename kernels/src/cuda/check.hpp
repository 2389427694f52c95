#pragma once
// Every CUDA runtime call goes through MHC_CUDA_CHECK: a failure becomes an mhc::Error
// (internal) naming the call, the file and line, and CUDA's own message.
#include <cuda_runtime.h>

#include <string>

#include "mhc/common/error.hpp"

namespace mhc::kernels::cuda_impl {

[[noreturn]] inline void cuda_fail(cudaError_t e, const char* what, const char* file, int line) {
    throw mhc::Error(std::string("CUDA error in ") + what + " (" + file + ":" + std::to_string(line) +
                         "): " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e),
                     mhc::Error::Kind::Internal);
}

}  // namespace mhc::kernels::cuda_impl

#define MHC_CUDA_CHECK(call)                                                                  \
    do {                                                                                      \
        cudaError_t mhc_cuda_err_ = (call);                                                   \
        if (mhc_cuda_err_ != cudaSuccess)                                                     \
            ::mhc::kernels::cuda_impl::cuda_fail(mhc_cuda_err_, #call, __FILE__, __LINE__);   \
    } while (0)

// After a kernel launch: launch-configuration errors surface here.
#define MHC_CUDA_CHECK_LAUNCH(name) MHC_CUDA_CHECK(cudaGetLastError())
