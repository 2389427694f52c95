#pragma once
// The case that matters (n = 4, a fixed number of iterations) kept in registers. The
// generic units work on Lanes arrays in memory, which costs a load and a store around every
// operation and a scalar transpose per token; here a group of 16 tokens is one 4x4 matrix of
// 16-lane vectors (GCC vector extensions, so every ISA unit compiles it: one zmm register per
// entry on AVX-512, two ymm on AVX2), transposed in and out with shuffles, and two groups are
// iterated together so that one group's division latency hides behind the other's work.
//
// The arithmetic is the plain steps' (sums in the same order, a true division, then the
// multiply), so on the generic unit the results are bit-identical to plain_steps.hpp and to
// the backward's recomputed forward; elsewhere the compiler may fuse the exponential's
// multiply-adds differently (≤ 1e-6, tested). Per group and iteration that is 32 adds, 32
// multiplies and 8 divisions; docs/kernels.md counts what bounds it.
#include "isa_common.hpp"

// GCC's vector extensions (__builtin_shuffle with a mask vector); other compilers use the
// general steps for n = 4 too.
#if defined(__GNUC__) && !defined(__clang__)
#define MHC_HAVE_FIXED_N4 1

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace mhc::kernels::cpu::MHC_ISA {

typedef float V16 __attribute__((vector_size(64)));
typedef int32_t I16 __attribute__((vector_size(64)));
typedef uint32_t U16 __attribute__((vector_size(64)));
typedef uint16_t H16 __attribute__((vector_size(32)));

inline constexpr int kGroup = 16;  // tokens per vector
inline constexpr int kGroups = 2;  // groups iterated together (W = 32 tokens)
static_assert(kGroup * kGroups == W, "the n = 4 path works on the blocks of W tokens the dispatcher hands out");

// Transposes 16 vectors of 16 floats in place (r[k][l] <-> r[l][k]): four butterfly stages,
// each swapping the off-diagonal d x d blocks of every 2d x 2d block.
template <int D>
static constexpr int lo_lane(int k) { return (k & D) ? 16 + k - D : k; }
template <int D>
static constexpr int hi_lane(int k) { return (k & D) ? 16 + k : k + D; }
#define MHC_LANES16(f) \
    { f(0), f(1), f(2), f(3), f(4), f(5), f(6), f(7), f(8), f(9), f(10), f(11), f(12), f(13), f(14), f(15) }
template <int D>
static inline void transpose_stage(V16* r) {
    constexpr I16 lo = MHC_LANES16(lo_lane<D>);
    constexpr I16 hi = MHC_LANES16(hi_lane<D>);
    for (int i = 0; i < 16; ++i)
        if (!(i & D)) {
            const V16 a = r[i], b = r[i + D];
            r[i] = __builtin_shuffle(a, b, lo);
            r[i + D] = __builtin_shuffle(a, b, hi);
        }
}
#undef MHC_LANES16
static inline void transpose16(V16* r) {
    transpose_stage<1>(r);
    transpose_stage<2>(r);
    transpose_stage<4>(r);
    transpose_stage<8>(r);
}

// 16 tokens from t (token-major, 16 values each) into m[k] = value k of the 16 tokens.
static inline void load_group(ConstTensor t, int64_t t0, V16* m) {
    if (t.dtype == DType::F32) {
        const float* src = static_cast<const float*>(t.data) + t0 * 16;
        for (int l = 0; l < 16; ++l) __builtin_memcpy(&m[l], src + 16 * l, sizeof(V16));
    } else {
        const uint16_t* src = static_cast<const uint16_t*>(t.data) + t0 * 16;
        for (int l = 0; l < 16; ++l) {
            H16 h;
            __builtin_memcpy(&h, src + 16 * l, sizeof(H16));
            m[l] = reinterpret_cast<V16>(__builtin_convertvector(h, U16) << 16);
        }
    }
    transpose16(m);
}

// The inverse of load_group; bf16 rounds to nearest even and keeps NaN a (quiet) NaN, as to_bf16.
static inline void store_group(Tensor t, int64_t t0, V16* m) {
    transpose16(m);
    if (t.dtype == DType::F32) {
        float* dst = static_cast<float*>(t.data) + t0 * 16;
        for (int l = 0; l < 16; ++l) __builtin_memcpy(dst + 16 * l, &m[l], sizeof(V16));
    } else {
        uint16_t* dst = static_cast<uint16_t*>(t.data) + t0 * 16;
        for (int l = 0; l < 16; ++l) {
            const U16 u = reinterpret_cast<U16>(m[l]);
            const U16 rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
            const U16 nan = (u >> 16) | 0x40u;
            const U16 bits = (u & 0x7fffffffu) > 0x7f800000u ? nan : rounded;
            const H16 h = __builtin_convertvector(bits, H16);
            __builtin_memcpy(dst + 16 * l, &h, sizeof(H16));
        }
    }
}

static inline V16 vmax16(V16 a, V16 b) { return a > b ? a : b; }

// vexp (simd_math.hpp) on 16 lanes, written with vector operations so that it compiles to
// one instruction per step. AVX-512 scales by 2^n in one scalef (one rounding, exactly as
// the two-factor product, which is exact up to its last multiply).
static inline V16 vexp16(V16 x) {
    x = x < -150.0f ? V16{} - 150.0f : x;
    x = x > 88.72f ? V16{} + 88.72f : x;
    const float magic = 12582912.0f;
    const V16 n = (x * 1.44269504088896341f + magic) - magic;
    V16 r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    V16 p = V16{} + 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
#if defined(__AVX512F__)
    // (_mm512_scalef_ps starts from _mm512_undefined_ps, which GCC 12 flags as uninitialised)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
    return reinterpret_cast<V16>(_mm512_scalef_ps(reinterpret_cast<__m512>(p), reinterpret_cast<__m512>(n)));
#pragma GCC diagnostic pop
#else
    const I16 ni = __builtin_convertvector(n == n ? n : V16{}, I16);   // a NaN's lane as 0: vexp's note
    const I16 a = ni / 2, b = ni - a;
    return p * reinterpret_cast<V16>((a + 127) << 23) * reinterpret_cast<V16>((b + 127) << 23);
#endif
}

// M0 = exp(H - rowmax(H)).
static inline void exp_shift_rows16(V16* m) {
    for (int i = 0; i < 4; ++i) {
        const V16 mx = vmax16(vmax16(vmax16(m[4 * i], m[4 * i + 1]), m[4 * i + 2]), m[4 * i + 3]);
        for (int j = 0; j < 4; ++j) m[4 * i + j] = vexp16(m[4 * i + j] - mx);
    }
}

// One normalisation of the four rows (stride 4 between groups of entries: S = 1, G = 4) or
// the four columns (S = 4, G = 1): s = ((a0 + a1) + a2) + a3, f = 1 / (s + eps), a *= f.
template <int S, int G>
static inline void norm4(V16* m, V16 eps) {
    for (int a = 0; a < 4; ++a) {
        V16* e = m + a * G;
        const V16 s = (((e[0] + e[S]) + e[2 * S]) + e[3 * S]) + eps;
        const V16 f = 1.0f / s;
        e[0] *= f;
        e[S] *= f;
        e[2 * S] *= f;
        e[3 * S] *= f;
    }
}

// Marginal errors of the first `count` tokens of a group, folded into the range's statistics
// (a NaN anywhere reports as inf, see marginal_errors). Per group, not per token: only a
// group that beats the range's worst so far is searched for its worst token.
static inline void add_group_stats(const V16* m, int64_t t0, int count, int iters, RangeStats& st) {
    V16 re{}, ce{}, all{};
    for (int i = 0; i < 4; ++i) {
        const V16 r = ((m[4 * i] + m[4 * i + 1]) + m[4 * i + 2]) + m[4 * i + 3];
        const V16 c = ((m[i] + m[4 + i]) + m[8 + i]) + m[12 + i];
        const V16 dr = r - 1.0f, dc = c - 1.0f;
        re = vmax16(re, dr < 0 ? -dr : dr);
        ce = vmax16(ce, dc < 0 ? -dc : dc);
        all += r;
    }
    const V16 inf = V16{} + __builtin_inff();
    re = all != all ? inf : re;
    ce = all != all ? inf : ce;
    float max_r = 0, max_c = 0, worst = -1;
    int worst_lane = 0;
    for (int l = 0; l < count; ++l) {
        max_r = maxf(max_r, re[l]);
        max_c = maxf(max_c, ce[l]);
        const float e = maxf(re[l], ce[l]);
        if (e > worst) { worst = e; worst_lane = l; }
    }
    if (max_r > st.max_row) st.max_row = max_r;
    if (max_c > st.max_col) st.max_col = max_c;
    if (worst > st.worst_err) { st.worst_err = worst; st.worst_token = t0 + worst_lane; }
    st.iter_sum += static_cast<int64_t>(iters) * count;
    if (iters > st.iter_max) st.iter_max = iters;
}

// Fixed iterations, n = 4, over [t0, t1): whole blocks of W tokens straight from the
// tensors, a short tail through a zero-padded copy.
static void forward_fixed_n4(const Job& job, int64_t t0, int64_t t1, RangeStats& st) {
    const SinkhornOptions& o = job.opt;
    const V16 eps = V16{} + o.eps;
    // (no dtype_size(): an inline function from another header must not be shared between ISA units)
    const int esize = job.H.dtype == DType::F32 ? 4 : 2, osize = job.P.dtype == DType::F32 ? 4 : 2;
    alignas(64) unsigned char tail_in[W * 16 * 4], tail_out[W * 16 * 4];
    for (int64_t b = t0; b < t1; b += W) {
        const int count = t1 - b < W ? static_cast<int>(t1 - b) : W;
        ConstTensor in = job.H;
        Tensor out = job.P;
        int64_t base = b;
        if (count < W) {  // the tail: pad with zeros (any finite value would do)
            __builtin_memset(tail_in, 0, sizeof tail_in);
            __builtin_memcpy(tail_in, static_cast<const unsigned char*>(job.H.data) + b * 16 * esize,
                             static_cast<size_t>(count) * 16 * esize);
            in = {tail_in, job.H.dtype};
            out = {tail_out, job.P.dtype};
            base = 0;
        }
        V16 m[kGroups][16];
        for (int g = 0; g < kGroups; ++g) {
            load_group(in, base + g * kGroup, m[g]);
            exp_shift_rows16(m[g]);
        }
        for (int it = 0; it < o.iters; ++it) {
            if (o.column_first) {
                for (int g = 0; g < kGroups; ++g) norm4<4, 1>(m[g], eps);
                for (int g = 0; g < kGroups; ++g) norm4<1, 4>(m[g], eps);
            } else {
                for (int g = 0; g < kGroups; ++g) norm4<1, 4>(m[g], eps);
                for (int g = 0; g < kGroups; ++g) norm4<4, 1>(m[g], eps);
            }
        }
        for (int g = 0; g < kGroups; ++g) {
            const int in_group = count - g * kGroup;
            if (in_group > 0) add_group_stats(m[g], b + g * kGroup, in_group < kGroup ? in_group : kGroup, o.iters, st);
            store_group(out, base + g * kGroup, m[g]);
        }
        if (count < W)
            __builtin_memcpy(static_cast<unsigned char*>(job.P.data) + b * 16 * osize, tail_out,
                             static_cast<size_t>(count) * 16 * osize);
    }
}

}  // namespace mhc::kernels::cpu::MHC_ISA

#endif  // MHC_HAVE_FIXED_N4
