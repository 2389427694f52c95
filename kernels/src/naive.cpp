// The straightforward baseline: what a chain of array operations does. Every normalisation
// is its own multi-threaded pass over all T matrices in memory (sum and divide per token),
// so 20 iterations stream the whole tensor 41 times.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu/threads.hpp"
#include "mhc/kernels/sinkhorn.hpp"

namespace mhc::kernels {

void sinkhorn_forward_naive(const SinkhornOptions& o, int64_t T, const float* H, float* P) {
    validate(o);
    const int n = o.n;
    const int64_t nn = static_cast<int64_t>(n) * n;
    const int workers = cpu::workers_for(T, o.threads, 4096);
    auto pass = [&](auto&& per_token) {
        cpu::parallel_for(T, workers, 1, [&](int, int64_t b, int64_t e) {
            for (int64_t t = b; t < e; ++t) per_token(P + t * nn);
        });
    };
    cpu::parallel_for(T, workers, 1, [&](int, int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
            const float* h = H + t * nn;
            float* p = P + t * nn;
            for (int i = 0; i < n; ++i) {
                float m = *std::max_element(h + i * n, h + i * n + n);
                for (int j = 0; j < n; ++j) p[i * n + j] = std::exp(h[i * n + j] - m);
            }
        }
    });
    auto rows = [&](float* p) {
        for (int i = 0; i < n; ++i) {
            float s = 0;
            for (int j = 0; j < n; ++j) s += p[i * n + j];
            for (int j = 0; j < n; ++j) p[i * n + j] /= s + o.eps;
        }
    };
    auto cols = [&](float* p) {
        for (int j = 0; j < n; ++j) {
            float s = 0;
            for (int i = 0; i < n; ++i) s += p[i * n + j];
            for (int i = 0; i < n; ++i) p[i * n + j] /= s + o.eps;
        }
    };
    for (int it = 0; it < o.iters; ++it) {
        if (o.column_first) {
            pass(cols);
            pass(rows);
        } else {
            pass(rows);
            pass(cols);
        }
    }
}

}  // namespace mhc::kernels
