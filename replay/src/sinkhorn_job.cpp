#include "sinkhorn_job.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "mhc/kernels/sinkhorn.hpp"

namespace mhc::replay::detail {

namespace {

bool contains_ci(const std::string& s, const char* what) {
    std::string l = s;
    std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
    return l.find(what) != std::string::npos;
}

// "..._kernel<4, 20>": n and iterations from the template arguments, else mHC's 4 and 20.
void sinkhorn_shape(const std::string& name, int& n, int& iters) {
    n = 4;
    iters = 20;
    auto lt = name.find('<');
    if (lt == std::string::npos) return;
    int a = 0, b = 0;
    if (std::sscanf(name.c_str() + lt, "<%d, %d>", &a, &b) == 2 && a >= kernels::kSinkhornMinN &&
        a <= kernels::kSinkhornMaxN && b > 0) {
        n = a;
        iters = b;
    }
}

}  // namespace

void recognise_sinkhorn(const std::string& name, std::vector<KernelOperand> ops, SinkhornJob& s) {
    if (!contains_ci(name, "sinkhorn")) return;
    sinkhorn_shape(name, s.n, s.iters);
    const int64_t mat = 4ll * s.n * s.n;
    s.backward = contains_ci(name, "bwd") || contains_ci(name, "backward");
    std::vector<KernelOperand> reads, writes, rws;
    for (const auto& o : ops) (o.read && o.write ? rws : o.read ? reads : writes).push_back(o);
    std::sort(reads.begin(), reads.end(), [](const KernelOperand& x, const KernelOperand& y) { return x.bytes < y.bytes; });
    if (!s.backward && !writes.empty() && !reads.empty()) {
        s.tokens = writes[0].bytes / mat;
        const KernelOperand& h = reads.back();
        if (s.tokens > 0 && h.bytes >= s.tokens * mat) {
            s.on = true;
            s.H = h.ptr;
            s.P = writes[0].ptr;
        }
    } else if (s.backward && reads.size() >= 2 && !rws.empty()) {
        s.tokens = reads.front().bytes / mat;
        if (s.tokens > 0 && reads.back().bytes >= s.tokens * mat && rws[0].bytes >= s.tokens * mat) {
            s.on = true;
            s.G = reads.front().ptr;
            s.H = reads.back().ptr;
            s.dH = rws[0].ptr;
        }
    }
}

}  // namespace mhc::replay::detail
