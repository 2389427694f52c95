// The reference CPU Sinkhorn-Knopp written with Eigen: each token's n x n matrix is an
// Eigen::Map over the batched array, and an iteration is the textbook pair of row and column
// normalisations (rowwise()/colwise() sums, broadcast divisions). All iterations of a token
// run while it is in cache. n = 4 (the mHC case) uses Eigen's fixed-size 4 x 4 type; other
// n the dynamic one. bench_sinkhorn prints its time beside the fused kernels'.
#include <Eigen/Core>

#include "cpu/threads.hpp"
#include "mhc/kernels/eigen_reference.hpp"

namespace mhc::kernels {

namespace {

template <int N>
void forward_tokens(const SinkhornOptions& o, int64_t begin, int64_t end, const float* H, float* P) {
    using Mat = Eigen::Matrix<float, N, N, Eigen::RowMajor>;
    const int n = o.n;
    const int64_t nn = static_cast<int64_t>(n) * n;
    for (int64_t t = begin; t < end; ++t) {
        Eigen::Map<const Mat> h(H + t * nn, n, n);
        Eigen::Map<Mat> p(P + t * nn, n, n);
        // M0 = exp(H - rowmax(H)), the shift per row.
        p = (h.array().colwise() - h.array().rowwise().maxCoeff()).exp().matrix();
        auto rows = [&] { p.array().colwise() /= p.array().rowwise().sum() + o.eps; };
        auto cols = [&] { p.array().rowwise() /= p.array().colwise().sum() + o.eps; };
        for (int it = 0; it < o.iters; ++it) {
            if (o.column_first) {
                cols();
                rows();
            } else {
                rows();
                cols();
            }
        }
    }
}

}  // namespace

void sinkhorn_forward_eigen(const SinkhornOptions& o, int64_t T, const float* H, float* P) {
    validate(o);
    const int workers = cpu::workers_for(T, o.threads, 4096);
    cpu::parallel_for(T, workers, 1, [&](int, int64_t b, int64_t e) {
        if (o.n == 4) forward_tokens<4>(o, b, e, H, P);
        else forward_tokens<Eigen::Dynamic>(o, b, e, H, P);
    });
}

}  // namespace mhc::kernels
