#pragma once
// Helpers for the per-ISA translation units only. Everything is static (internal linkage):
// an inline function compiled with -mavx512f in one unit must never be picked by the
// linker for another unit built for a lesser machine. For the same reason no std:: function
// templates are used in these units.
#include <cstdint>
#include <cstring>

#include "cpu_sinkhorn.hpp"
#include "simd_math.hpp"

#ifndef MHC_ISA
#error "MHC_ISA must name the instruction-set namespace"
#endif

namespace mhc::kernels::cpu::MHC_ISA {

using Lanes = float[W];

static inline float minf(float a, float b) { return a < b ? a : b; }
static inline float maxf(float a, float b) { return a > b ? a : b; }
static inline float absf(float a) { return a < 0 ? -a : a; }

static inline float from_bf16(uint16_t b) { return __builtin_bit_cast(float, static_cast<uint32_t>(b) << 16); }
static inline uint16_t to_bf16(float f) {
    uint32_t u = __builtin_bit_cast(uint32_t, f);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t nan = (u >> 16) | 0x40u;
    return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : r);
}

// blk[k][l] = value k of token t0 + l; padding lanes get `pad`.
static inline void load_block(ConstTensor t, int nn, int64_t t0, int count, Lanes* blk, float pad) {
    if (t.dtype == DType::F32) {
        const float* src = static_cast<const float*>(t.data) + t0 * nn;
        for (int l = 0; l < count; ++l)
            for (int k = 0; k < nn; ++k) blk[k][l] = src[l * nn + k];
    } else {
        const uint16_t* src = static_cast<const uint16_t*>(t.data) + t0 * nn;
        for (int l = 0; l < count; ++l)
            for (int k = 0; k < nn; ++k) blk[k][l] = from_bf16(src[l * nn + k]);
    }
    for (int l = count; l < W; ++l)
        for (int k = 0; k < nn; ++k) blk[k][l] = pad;
}

static inline void store_block(Tensor t, int nn, int64_t t0, int count, const Lanes* blk) {
    if (t.dtype == DType::F32) {
        float* dst = static_cast<float*>(t.data) + t0 * nn;
        for (int l = 0; l < count; ++l)
            for (int k = 0; k < nn; ++k) dst[l * nn + k] = blk[k][l];
    } else {
        uint16_t* dst = static_cast<uint16_t*>(t.data) + t0 * nn;
        for (int l = 0; l < count; ++l)
            for (int k = 0; k < nn; ++k) dst[l * nn + k] = to_bf16(blk[k][l]);
    }
}

static inline void add_token(RangeStats& s, int64_t token, float row_err, float col_err, int iters) {
    if (row_err > s.max_row) s.max_row = row_err;
    if (col_err > s.max_col) s.max_col = col_err;
    float e = maxf(row_err, col_err);
    if (e > s.worst_err) { s.worst_err = e; s.worst_token = token; }
    s.iter_sum += iters;
    if (iters > s.iter_max) s.iter_max = iters;
}

// M0 = exp(H - rowmax) in place; amax (if given) receives the first argmax of each row.
static inline void exp_shift_rows(int n, Lanes* m, Lanes* amax) {
    for (int i = 0; i < n; ++i) {
        Lanes mx;
        for (int l = 0; l < W; ++l) mx[l] = m[i * n][l];
        if (amax) {
            Lanes am = {};
            for (int j = 1; j < n; ++j)
                for (int l = 0; l < W; ++l) {
                    bool gt = m[i * n + j][l] > mx[l];
                    am[l] = gt ? static_cast<float>(j) : am[l];
                    mx[l] = gt ? m[i * n + j][l] : mx[l];
                }
            for (int l = 0; l < W; ++l) amax[i][l] = am[l];
        } else {
            for (int j = 1; j < n; ++j)
                for (int l = 0; l < W; ++l) mx[l] = maxf(mx[l], m[i * n + j][l]);
        }
        for (int j = 0; j < n; ++j)
            for (int l = 0; l < W; ++l) m[i * n + j][l] = vexp(m[i * n + j][l] - mx[l]);
    }
}

// Largest |row sum - 1| and |column sum - 1| of the W matrices in p. A NaN anywhere must
// show in the report (as inf) rather than vanish in the comparisons: the sums of all row
// sums carries it to one check per lane.
static inline void marginal_errors(int n, const Lanes* p, Lanes row_err, Lanes col_err) {
    Lanes all = {};
    for (int l = 0; l < W; ++l) { row_err[l] = 0; col_err[l] = 0; }
    for (int i = 0; i < n; ++i) {
        Lanes r, c;
        for (int l = 0; l < W; ++l) { r[l] = 0; c[l] = 0; }
        for (int j = 0; j < n; ++j)
            for (int l = 0; l < W; ++l) { r[l] += p[i * n + j][l]; c[l] += p[j * n + i][l]; }
        for (int l = 0; l < W; ++l) {
            row_err[l] = maxf(row_err[l], absf(r[l] - 1.0f));
            col_err[l] = maxf(col_err[l], absf(c[l] - 1.0f));
            all[l] += r[l];
        }
    }
    for (int l = 0; l < W; ++l) {
        const bool nan = all[l] != all[l];
        row_err[l] = nan ? __builtin_inff() : row_err[l];
        col_err[l] = nan ? __builtin_inff() : col_err[l];
    }
}

}  // namespace mhc::kernels::cpu::MHC_ISA
