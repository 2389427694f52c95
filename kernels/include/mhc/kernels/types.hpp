#pragma once
// Element types and devices shared by every kernel. No CUDA headers here: the public API
// must compile on machines without the toolkit.
#include <cstdint>
#include <cstring>

namespace mhc::kernels {

enum class Device { Cpu, Cuda };
enum class DType { F32, BF16 };

const char* to_string(Device d);
const char* to_string(DType t);
inline int dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }

// bfloat16: the upper half of an IEEE float. Conversion from float rounds to nearest even;
// NaN stays NaN (quiet, sign kept), overflow rounds to infinity as IEEE requires.
struct bf16 {
    uint16_t bits = 0;
};

inline float bf16_to_float(bf16 v) {
    uint32_t u = static_cast<uint32_t>(v.bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

inline bf16 float_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x40u)};
    u += 0x7fffu + ((u >> 16) & 1u);  // ties go to the even mantissa
    return bf16{static_cast<uint16_t>(u >> 16)};
}

// A typed pointer. For Device::Cuda it must be device-accessible memory (see device.hpp).
struct ConstTensor {
    const void* data = nullptr;
    DType dtype = DType::F32;
};
struct Tensor {
    void* data = nullptr;
    DType dtype = DType::F32;
    operator ConstTensor() const { return {data, dtype}; }
};

inline ConstTensor view(const float* p) { return {p, DType::F32}; }
inline ConstTensor view(const bf16* p) { return {p, DType::BF16}; }
inline Tensor view(float* p) { return {p, DType::F32}; }
inline Tensor view(bf16* p) { return {p, DType::BF16}; }

}  // namespace mhc::kernels
