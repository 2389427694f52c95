#pragma once
// The CUDA page mapper's driver calls (pages_cuda.cpp): a table of the driver's functions,
// opened with dlopen at run time, or a table a test fills with its own (the mapper's calls
// are then counted without a GPU). Private to replay (and its tests); needs cuda.h.
#ifdef MHC_REPLAY_HAVE_CUDA
#include <cuda.h>

#include <cstdint>
#include <memory>

#include "mhc/replay/pages.hpp"

namespace mhc::replay::detail {

struct CudaDriver {
    decltype(&::cuCtxGetCurrent) cuCtxGetCurrent = nullptr;
    decltype(&::cuCtxGetDevice) cuCtxGetDevice = nullptr;
    decltype(&::cuCtxSetCurrent) cuCtxSetCurrent = nullptr;
    decltype(&::cuCtxSynchronize) cuCtxSynchronize = nullptr;
    decltype(&::cuDeviceGet) cuDeviceGet = nullptr;
    decltype(&::cuDeviceGetAttribute) cuDeviceGetAttribute = nullptr;
    decltype(&::cuDevicePrimaryCtxRelease) cuDevicePrimaryCtxRelease = nullptr;
    decltype(&::cuDevicePrimaryCtxRetain) cuDevicePrimaryCtxRetain = nullptr;
    decltype(&::cuGetErrorName) cuGetErrorName = nullptr;
    decltype(&::cuInit) cuInit = nullptr;
    decltype(&::cuMemAddressFree) cuMemAddressFree = nullptr;
    decltype(&::cuMemAddressReserve) cuMemAddressReserve = nullptr;
    decltype(&::cuMemCreate) cuMemCreate = nullptr;
    decltype(&::cuMemGetAllocationGranularity) cuMemGetAllocationGranularity = nullptr;
    decltype(&::cuMemMap) cuMemMap = nullptr;
    decltype(&::cuMemRelease) cuMemRelease = nullptr;
    decltype(&::cuMemSetAccess) cuMemSetAccess = nullptr;
    decltype(&::cuMemUnmap) cuMemUnmap = nullptr;
};

// libcuda.so.1's functions (throws mhc::Error where the driver is not installed).
const CudaDriver& cuda_driver();

// make_cuda_mapper on the given driver table (which must outlive the mapper).
std::unique_ptr<PageMapper> make_cuda_mapper(const CudaDriver& driver, int64_t pool_pages, int64_t va_bytes,
                                             bool premap);

}   // namespace mhc::replay::detail
#endif
