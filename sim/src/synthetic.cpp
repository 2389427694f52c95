#include "mhc/sim/synthetic.hpp"

#include <algorithm>
#include <random>

namespace mhc::sim::synthetic {

void finalize(trace::TraceData& t, const std::vector<int32_t>& kernel_of_access) {
    t.allocation_index.build(t.allocations.id);
    t.kernel_index.build(t.kernels.id);
    auto& begin = t.kernels.access_begin;
    begin.assign(t.kernels.size() + 1, 0);
    for (int32_t k : kernel_of_access) ++begin[static_cast<size_t>(k) + 1];
    for (size_t i = 1; i < begin.size(); ++i) begin[i] += begin[i - 1];
    std::vector<int32_t> alloc(kernel_of_access.size());
    std::vector<trace::AccessMode> mode(kernel_of_access.size());
    std::vector<int64_t> cursor(begin.begin(), begin.end() - 1);
    for (size_t i = 0; i < kernel_of_access.size(); ++i) {
        int64_t pos = cursor[static_cast<size_t>(kernel_of_access[i])]++;
        alloc[static_cast<size_t>(pos)] = t.accesses.allocation[i];
        mode[static_cast<size_t>(pos)] = t.accesses.mode[i];
    }
    t.accesses.allocation = std::move(alloc);
    t.accesses.mode = std::move(mode);
    if (t.strings.empty()) t.strings.push_back("");
}

namespace {

struct Builder {
    trace::TraceData t;
    std::vector<int32_t> kernel_of;
    int32_t alloc(int64_t bytes, int64_t at, trace::Category c, int64_t label = 0) {
        auto& a = t.allocations;
        a.id.push_back(static_cast<int64_t>(a.size()) + 1);
        a.device.push_back(0);
        a.address.push_back(0);
        a.bytes.push_back(bytes);
        a.t_alloc.push_back(at);
        a.t_free.push_back(trace::kNoTime);
        a.stream.push_back(0);
        a.category.push_back(c);
        a.label.push_back(label);
        return static_cast<int32_t>(a.size() - 1);
    }
    int32_t kernel(int64_t start, int64_t end, int64_t stream, int32_t step, int64_t name = 0) {
        auto& k = t.kernels;
        k.id.push_back(static_cast<int64_t>(k.size()) + 1);
        k.device.push_back(0);
        k.stream.push_back(stream);
        k.name.push_back(name);
        k.t_start.push_back(start);
        k.t_end.push_back(end);
        k.step.push_back(step);
        k.correlation.push_back(0);
        return static_cast<int32_t>(k.size() - 1);
    }
    void access(int32_t k, int32_t a, trace::AccessMode m) {
        kernel_of.push_back(k);
        t.accesses.allocation.push_back(a);
        t.accesses.mode.push_back(m);
    }
    trace::TraceData done() {
        finalize(t, kernel_of);
        return std::move(t);
    }
};

}  // namespace

trace::TraceData random_reads(uint64_t seed, int tensors, int kernels, int per_kernel, int64_t bytes) {
    std::mt19937_64 rng(seed);
    Builder b;
    for (int i = 0; i < tensors; ++i) b.alloc(bytes, 0, trace::Category::Param);
    std::vector<int32_t> pool(static_cast<size_t>(tensors));
    for (int i = 0; i < tensors; ++i) pool[static_cast<size_t>(i)] = i;
    for (int k = 0; k < kernels; ++k) {
        int32_t kid = b.kernel(1000 + 1000LL * k, 2000 + 1000LL * k, 0, -1);
        // a partial Fisher-Yates shuffle draws per_kernel distinct tensors
        for (int j = 0; j < per_kernel && j < tensors; ++j) {
            std::uniform_int_distribution<int> d(j, tensors - 1);
            std::swap(pool[static_cast<size_t>(j)], pool[static_cast<size_t>(d(rng))]);
            b.access(kid, pool[static_cast<size_t>(j)], trace::AccessMode::Read);
        }
    }
    return b.done();
}

trace::TraceData training(uint64_t seed, int64_t rows_target, int layers, int streams) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> dur(20'000, 200'000), gap(1'000, 5'000);
    std::uniform_int_distribution<int64_t> wsize(4, 64), asize(8, 128);
    Builder b;
    b.t.strings = {"", "fwd", "bwd", "opt", "weight", "grad", "act", "ncclAllReduce"};
    std::vector<int32_t> w(static_cast<size_t>(layers)), g(static_cast<size_t>(layers));
    std::vector<int64_t> act_bytes(static_cast<size_t>(layers));
    for (int l = 0; l < layers; ++l) {
        w[static_cast<size_t>(l)] = b.alloc(wsize(rng) << 20, 0, trace::Category::Param, 4);
        g[static_cast<size_t>(l)] = b.alloc(wsize(rng) << 20, 0, trace::Category::Grad, 5);
        act_bytes[static_cast<size_t>(l)] = asize(rng) << 20;
    }
    int64_t per_step = 3LL * layers + 8LL * layers + 1;
    int64_t steps = std::max<int64_t>(1, (rows_target - 2LL * layers) / per_step);
    int64_t t = 1000;
    std::vector<int32_t> act(static_cast<size_t>(layers));
    for (int64_t s = 0; s < steps; ++s) {
        int32_t step = static_cast<int32_t>(s);
        int64_t kcount = 0;
        auto next_stream = [&] { return static_cast<int64_t>(kcount++ % streams); };
        for (int l = 0; l < layers; ++l) {   // forward: allocate and write the activation
            act[static_cast<size_t>(l)] = b.alloc(act_bytes[static_cast<size_t>(l)], t, trace::Category::Activation, 6);
            t += gap(rng);
            int64_t d = dur(rng);
            int32_t k = b.kernel(t, t + d, next_stream(), step, 1);
            b.access(k, w[static_cast<size_t>(l)], trace::AccessMode::Read);
            if (l > 0) b.access(k, act[static_cast<size_t>(l - 1)], trace::AccessMode::Read);
            b.access(k, act[static_cast<size_t>(l)], trace::AccessMode::Write);
            t += d + gap(rng);
        }
        for (int l = layers - 1; l >= 0; --l) {   // backward: read it, write grads, free it
            int64_t d = dur(rng) * 2;
            int32_t k = b.kernel(t, t + d, next_stream(), step, 2);
            b.access(k, w[static_cast<size_t>(l)], trace::AccessMode::Read);
            b.access(k, act[static_cast<size_t>(l)], trace::AccessMode::Read);
            b.access(k, g[static_cast<size_t>(l)], trace::AccessMode::ReadWrite);
            t += d;
            b.t.allocations.t_free[static_cast<size_t>(act[static_cast<size_t>(l)])] = t;
            t += gap(rng);
        }
        int32_t k = b.kernel(t, t + 50'000, next_stream(), step, 7);   // gradient all-reduce
        for (int l = 0; l < layers; ++l) b.access(k, g[static_cast<size_t>(l)], trace::AccessMode::ReadWrite);
        t += 50'000 + gap(rng);
        for (int l = 0; l < layers; ++l) {   // optimizer
            int64_t d = dur(rng) / 4;
            int32_t ko = b.kernel(t, t + d, next_stream(), step, 3);
            b.access(ko, g[static_cast<size_t>(l)], trace::AccessMode::Read);
            b.access(ko, w[static_cast<size_t>(l)], trace::AccessMode::ReadWrite);
            t += d + gap(rng);
        }
    }
    return b.done();
}

}  // namespace mhc::sim::synthetic
