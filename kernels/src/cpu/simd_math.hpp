#pragma once
// Only for the per-ISA translation units: everything is static so that copies compiled
// with different instruction sets never merge at link time (ODR).
// exp and log written so that GCC vectorises loops calling them (no branches, no libm calls):
// std::exp in a loop stays scalar without -ffast-math. Cephes polynomials, about 1 ulp on
// the ranges used here; exp keeps gradual underflow down to the smallest denormal.
#include <cstdint>

namespace mhc::kernels::cpu {

static inline float vexp(float x) {
    // Clamps compile to min/max (no blends). Below -150 the result underflows to exactly 0
    // through the two scale factors; above 88.72 it overflows to inf.
    x = x < -150.0f ? -150.0f : x;
    x = x > 88.72f ? 88.72f : x;
    const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
    float n = (x * 1.44269504088896341f + magic) - magic;
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    // 2^n in two factors so that n down to -217 underflows gradually instead of wrapping. A NaN
    // (-inf - -inf in a row of -inf, or a replayed buffer's bytes) passes the clamps: its n is
    // taken as 0 for the cast (a NaN cast to int is undefined; UBSan in the replay tests) and p
    // keeps the result NaN.
    int32_t ni = static_cast<int32_t>(n == n ? n : 0.0f);
    int32_t a = ni / 2;
    int32_t b = ni - a;
    float sa = __builtin_bit_cast(float, (a + 127) << 23);
    float sb = __builtin_bit_cast(float, (b + 127) << 23);
    return p * sa * sb;
}

// Natural log of a positive normal float. Float-only selects so that loops vectorise.
static inline float vlog(float v) {
    uint32_t u = __builtin_bit_cast(uint32_t, v);
    float ef = static_cast<float>(static_cast<int32_t>(u >> 23)) - 126.0f;
    float m = __builtin_bit_cast(float, (u & 0x7fffffu) | 0x3f000000u);  // [0.5, 1)
    const bool low = m < 0.707106781186547524f;
    ef = low ? ef - 1.0f : ef;
    float x = low ? m + m - 1.0f : m - 1.0f;
    float z = x * x;
    float y = 7.0376836292e-2f;
    y = y * x - 1.1514610310e-1f;
    y = y * x + 1.1676998740e-1f;
    y = y * x - 1.2420140846e-1f;
    y = y * x + 1.4249322787e-1f;
    y = y * x - 1.6668057665e-1f;
    y = y * x + 2.0000714765e-1f;
    y = y * x - 2.4999993993e-1f;
    y = y * x + 3.3333331174e-1f;
    y = y * x * z;
    y += ef * -2.12194440e-4f;
    y += -0.5f * z;
    return x + y + ef * 0.693359375f;
}

}  // namespace mhc::kernels::cpu
