#pragma once
// float64 references for the Sinkhorn tests, written the plain way (matrix iterates, every
// intermediate kept) so that they share nothing with the scaling-form kernels they check.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <vector>

namespace ref {

using Mat = std::vector<double>;  // n*n, row-major

struct Opts {
    int n = 4, iters = 20;
    double eps = 1e-6;
    bool column_first = false, log_domain = false;
    // Round M0 = exp(H - rowmax) to fp32 as the kernels store it: where exp underflows in
    // fp32 but not in float64 (logits 104+ below the row maximum), the float64 iteration
    // would otherwise revive entries that fp32 has flushed to zero.
    bool fp32_m0 = false;
};

// One seed per test run, printed so a failure can be repeated (MHC_TEST_SEED=...).
inline uint64_t seed() {
    static const uint64_t s = [] {
        const char* env = std::getenv("MHC_TEST_SEED");
        uint64_t v = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
        std::cout << "kernels tests: random seed " << v << " (set MHC_TEST_SEED to repeat)\n";
        return v;
    }();
    return s;
}

inline std::vector<float> random_logits(std::mt19937_64& rng, int64_t count, double scale) {
    std::normal_distribution<double> nd(0.0, scale);
    std::vector<float> v(count);
    for (auto& x : v) x = static_cast<float>(nd(rng));
    return v;
}

inline void rowmax_shift(const Opts& o, Mat& a, std::vector<int>* amax = nullptr) {
    const int n = o.n;
    if (amax) amax->assign(n, 0);
    for (int i = 0; i < n; ++i) {
        int am = 0;
        for (int j = 1; j < n; ++j)
            if (a[i * n + j] > a[i * n + am]) am = j;
        double m = a[i * n + am];
        for (int j = 0; j < n; ++j) a[i * n + j] -= m;
        if (amax) (*amax)[i] = am;
    }
}

// Step s of 2*iters: true if it normalises rows.
inline bool is_row_step(const Opts& o, int s) { return (s % 2 == 0) != o.column_first; }

inline void normalise(const Opts& o, Mat& a, bool rows) {
    const int n = o.n;
    for (int x = 0; x < n; ++x) {
        auto at = [&](int y) -> double& { return rows ? a[x * n + y] : a[y * n + x]; };
        if (o.log_domain) {
            double m = -INFINITY, s = 0;
            for (int y = 0; y < n; ++y) m = std::max(m, at(y));
            for (int y = 0; y < n; ++y) s += std::exp(at(y) - m);
            double lse = m + std::log(s);
            for (int y = 0; y < n; ++y) at(y) -= lse;
        } else {
            double s = 0;
            for (int y = 0; y < n; ++y) s += at(y);
            for (int y = 0; y < n; ++y) at(y) /= s + o.eps;
        }
    }
}

// All iterates: out[0] = M0 (or L0), out[s] after step s. Final P = out.back() (exp'd if log).
inline std::vector<Mat> iterates(const Opts& o, const float* h, std::vector<int>* amax = nullptr) {
    Mat a(h, h + o.n * o.n);
    rowmax_shift(o, a, amax);
    if (!o.log_domain)
        for (auto& x : a) x = o.fp32_m0 ? static_cast<double>(static_cast<float>(std::exp(x))) : std::exp(x);
    std::vector<Mat> out{a};
    for (int s = 0; s < 2 * o.iters; ++s) {
        normalise(o, a, is_row_step(o, s));
        out.push_back(a);
    }
    return out;
}

inline Mat forward(const Opts& o, const float* h) {
    Mat p = iterates(o, h).back();
    if (o.log_domain)
        for (auto& x : p) x = std::exp(x);
    return p;
}

// Same with double inputs (for finite differences).
inline Mat forward_d(const Opts& o, const Mat& hd) {
    std::vector<float> dummy(hd.size());
    Mat a = hd;
    rowmax_shift(o, a);
    if (!o.log_domain)
        for (auto& x : a) x = std::exp(x);
    for (int s = 0; s < 2 * o.iters; ++s) normalise(o, a, is_row_step(o, s));
    if (o.log_domain)
        for (auto& x : a) x = std::exp(x);
    return a;
}

// Unrolled backward: walks the kept iterates last to first, matrix by matrix.
inline Mat backward(const Opts& o, const float* h, const float* g) {
    const int n = o.n;
    std::vector<int> amax;
    auto it = iterates(o, h, &amax);
    Mat gr(g, g + n * n);
    if (o.log_domain) {
        const Mat& L = it.back();
        for (int k = 0; k < n * n; ++k) gr[k] *= std::exp(L[k]);
    }
    for (int s = 2 * o.iters - 1; s >= 0; --s) {
        const bool rows = is_row_step(o, s);
        const Mat& out = it[s + 1];
        const Mat& in = it[s];
        for (int x = 0; x < n; ++x) {
            auto idx = [&](int y) { return rows ? x * n + y : y * n + x; };
            if (o.log_domain) {  // out = in - lse(in): d_in = d_out - softmax(in) * sum(d_out)
                double sum = 0;
                for (int y = 0; y < n; ++y) sum += gr[idx(y)];
                for (int y = 0; y < n; ++y) gr[idx(y)] -= std::exp(out[idx(y)]) * sum;
            } else {  // out = in / (s + eps): d_in = (d_out - <d_out, out>) / (s + eps)
                double s_in = 0, dot = 0;
                for (int y = 0; y < n; ++y) {
                    s_in += in[idx(y)];
                    dot += gr[idx(y)] * out[idx(y)];
                }
                for (int y = 0; y < n; ++y) gr[idx(y)] = (gr[idx(y)] - dot) / (s_in + o.eps);
            }
        }
    }
    // Through exp (plain) and the rowmax shift.
    for (int i = 0; i < n; ++i) {
        double s = 0;
        for (int j = 0; j < n; ++j) {
            if (!o.log_domain) gr[i * n + j] *= it[0][i * n + j];
            s += gr[i * n + j];
        }
        gr[i * n + amax[i]] -= s;
    }
    return gr;
}

// Central finite differences of L = sum(G * P) in float64.
inline Mat finite_diff(const Opts& o, const float* h, const float* g, double step = 1e-6) {
    const int nn = o.n * o.n;
    Mat hd(h, h + nn), out(nn);
    for (int k = 0; k < nn; ++k) {
        Mat hp = hd, hm = hd;
        hp[k] += step;
        hm[k] -= step;
        Mat pp = forward_d(o, hp), pm = forward_d(o, hm);
        double lp = 0, lm = 0;
        for (int q = 0; q < nn; ++q) {
            lp += g[q] * pp[q];
            lm += g[q] * pm[q];
        }
        out[k] = (lp - lm) / (2 * step);
    }
    return out;
}

}  // namespace ref
