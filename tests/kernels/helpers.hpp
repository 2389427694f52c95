#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "mhc/kernels/sinkhorn.hpp"
#include "reference.hpp"

namespace kt {

namespace k = mhc::kernels;

inline ref::Opts to_ref(const k::SinkhornOptions& o) {
    ref::Opts r;
    r.n = o.n;
    r.iters = o.iters;
    r.eps = o.eps;
    r.column_first = o.column_first;
    r.log_domain = o.log_domain;
    return r;
}

inline std::vector<float> fwd(const k::SinkhornOptions& o, const std::vector<float>& h,
                              k::SinkhornReport* rep = nullptr) {
    const int64_t T = static_cast<int64_t>(h.size()) / (o.n * o.n);
    std::vector<float> p(h.size(), NAN);
    auto r = k::sinkhorn_forward(o, T, k::view(h.data()), k::view(p.data()));
    if (rep) *rep = r;
    return p;
}

inline std::vector<float> bwd(const k::SinkhornOptions& o, const std::vector<float>& h, const std::vector<float>& g,
                              std::vector<float>* p = nullptr) {
    const int64_t T = static_cast<int64_t>(h.size()) / (o.n * o.n);
    std::vector<float> dh(h.size(), NAN);
    if (p) p->assign(h.size(), NAN);
    k::sinkhorn_backward(o, T, k::view(h.data()), k::view(g.data()), k::view(dh.data()),
                         p ? k::view(p->data()) : k::Tensor{});
    return dh;
}

// Largest |a - b| over token t's matrix.
inline double max_abs_diff(const float* a, const std::vector<double>& b) {
    double m = 0;
    for (size_t i = 0; i < b.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
    return m;
}

inline double max_abs(const std::vector<double>& b) {
    double m = 0;
    for (double x : b) m = std::max(m, std::abs(x));
    return m;
}

// Largest marginal errors recomputed from an output tensor.
inline std::pair<double, double> marginals(int n, const std::vector<float>& p) {
    double re = 0, ce = 0;
    for (size_t t = 0; t < p.size() / (n * n); ++t)
        for (int i = 0; i < n; ++i) {
            double r = 0, c = 0;
            for (int j = 0; j < n; ++j) {
                r += p[t * n * n + i * n + j];
                c += p[t * n * n + j * n + i];
            }
            re = std::max(re, std::abs(r - 1));
            ce = std::max(ce, std::abs(c - 1));
        }
    return {re, ce};
}

}  // namespace kt
