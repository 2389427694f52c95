#include "tiny.hpp"

#include "mhc/trace/store.hpp"

namespace advisetest {

using mhc::trace::Category;
using mhc::trace::Phase;

void TinyTrace::write(const std::string& path) const {
    mhc::trace::Writer w(path);
    for (auto& [k, v] : meta) w.set_meta(k, v);
    w.set_meta("source", "captured");
    for (size_t i = 0; i < modules.size(); ++i) {
        const std::string& n = modules[i].first;
        int64_t parent = 0;
        for (size_t j = 0; j < i; ++j) {
            const std::string& p = modules[j].first;
            if (n.size() > p.size() && n.compare(0, p.size(), p) == 0 && n[p.size()] == '.') parent = static_cast<int64_t>(j) + 1;
        }
        w.add(mhc::trace::Module{static_cast<int64_t>(i) + 1, w.intern(n), parent, w.intern(modules[i].second)});
    }
    // kernel k starts at k x kDur plus the gaps before it and every earlier kernel
    std::vector<int64_t> start(kernels.size());
    int64_t moved = 0;
    for (size_t k = 0; k < kernels.size(); ++k) {
        moved += kernels[k].gap_before;
        start[k] = static_cast<int64_t>(k) * kDur + moved;
    }
    for (size_t i = 0; i < allocs.size(); ++i) {
        const TinyAlloc& a = allocs[i];
        mhc::trace::Allocation r;
        r.id = static_cast<int64_t>(i) + 1;
        r.device = a.device;
        r.bytes = a.bytes;
        r.t_alloc = a.made_at < 0 ? 0 : start[static_cast<size_t>(a.made_at)];
        r.t_free = a.freed_after < 0 ? mhc::trace::kNoTime : start[static_cast<size_t>(a.freed_after)] + kDur;
        r.category = a.category;
        r.label = w.intern(a.label);
        w.add(r);
    }
    for (size_t k = 0; k < kernels.size(); ++k) {
        const TinyKernel& x = kernels[k];
        mhc::trace::Kernel r;
        r.id = static_cast<int64_t>(k) + 1;
        r.name = w.intern(x.name);
        r.t_start = start[k];
        r.t_end = r.t_start + kDur;
        r.step = x.step;
        w.add(r);
        for (auto [a, m] : x.acc)
            w.add(mhc::trace::Access{r.id, a + 1, m == 'r' ? mhc::trace::AccessMode::Read
                                                   : m == 'w' ? mhc::trace::AccessMode::Write
                                                              : mhc::trace::AccessMode::ReadWrite});
        int64_t module = 0;
        for (size_t i = 0; i < modules.size(); ++i)
            if (modules[i].first == x.module) module = static_cast<int64_t>(i) + 1;
        w.add(mhc::trace::KernelInfo{r.id, module, x.phase, 0, 0});
        for (int a : x.saves) w.add(mhc::trace::SavedTensor{a + 1, r.id});
    }
    w.finish();
}

TinyTrace two_blocks() {
    TinyTrace t;
    t.modules = {{"M", "Tiny"}, {"M.blocks.0", "Block"}, {"M.blocks.1", "Block"}};
    const int x = t.alloc(100, Category::Other, "batch", -1, -1);
    const int a0 = t.alloc(1000, Category::Activation, "a0", 0, 6);
    const int o0 = t.alloc(100, Category::Activation, "o0", 1, 2);
    const int a1 = t.alloc(2000, Category::Activation, "a1", 2, 5);
    const int o1 = t.alloc(100, Category::Activation, "o1", 3, 4);
    const int l = t.alloc(10, Category::Workspace, "loss", 4, 4);
    const int g1 = t.alloc(100, Category::Workspace, "g1", 5, 6);
    const int g0 = t.alloc(100, Category::Workspace, "g0", 6, -1);
    t.kernel({"aten::mm", "M.blocks.0", Phase::Forward, {{x, 'r'}, {a0, 'w'}}, {}});
    t.kernel({"aten::gelu", "M.blocks.0", Phase::Forward, {{a0, 'r'}, {o0, 'w'}}, {a0}});
    t.kernel({"aten::mm", "M.blocks.1", Phase::Forward, {{o0, 'r'}, {a1, 'w'}}, {}});
    t.kernel({"aten::gelu", "M.blocks.1", Phase::Forward, {{a1, 'r'}, {o1, 'w'}}, {a1}});
    t.kernel({"aten::sum", "M", Phase::Forward, {{o1, 'r'}, {l, 'w'}}, {}});
    t.kernel({"aten::gelu_backward", "M.blocks.1", Phase::Backward, {{a1, 'r'}, {g1, 'w'}}, {}});
    t.kernel({"aten::gelu_backward", "M.blocks.0", Phase::Backward, {{a0, 'r'}, {g1, 'r'}, {g0, 'w'}}, {}});
    return t;
}

TinyTrace chain(const std::vector<int>& saved_mib, bool with_optimizer) {
    constexpr int64_t MiB = 1 << 20;
    TinyTrace t;
    const int n = static_cast<int>(saved_mib.size());
    t.modules.push_back({"M", "Tiny"});
    for (int b = 0; b < n; ++b) t.modules.push_back({"M.blocks." + std::to_string(b), "Block"});
    const int steps = with_optimizer ? 2 : 1;
    int p = -1, m = -1, v = -1;
    if (with_optimizer) p = t.alloc(64 * MiB, Category::Param, "w", -1, -1);
    for (int s = 0; s < steps; ++s) {
        // forward: block b reads h_b, makes a_b (saved by its second op) and h_{b+1}
        const int base = static_cast<int>(t.kernels.size());
        int h = t.alloc(16 * MiB, Category::Other, "batch", base, -1);
        std::vector<int> act(static_cast<size_t>(n));
        const int fwd_end = base + 2 * n;   // the loss kernel
        const int bwd0 = fwd_end + 1;
        for (int b = 0; b < n; ++b) {
            const int k = base + 2 * b;
            const int bwd = bwd0 + (n - 1 - b);
            act[static_cast<size_t>(b)] = t.alloc(saved_mib[static_cast<size_t>(b)] * MiB, Category::Activation, "a", k, bwd);
            const int next = t.alloc(16 * MiB, Category::Activation, "h", k + 1, b + 1 < n ? k + 2 : fwd_end);
            std::vector<std::pair<int, char>> first{{h, 'r'}, {act[static_cast<size_t>(b)], 'w'}};
            if (p >= 0) first.push_back({p, 'r'});
            t.kernel({"aten::mm", "M.blocks." + std::to_string(b), mhc::trace::Phase::Forward, first, {}, s});
            t.kernel({"aten::gelu", "M.blocks." + std::to_string(b), mhc::trace::Phase::Forward,
                      {{act[static_cast<size_t>(b)], 'r'}, {next, 'w'}}, {act[static_cast<size_t>(b)]}, s});
            h = next;
        }
        const int loss = t.alloc(MiB, Category::Workspace, "loss", fwd_end, fwd_end);
        t.kernel({"aten::sum", "M", mhc::trace::Phase::Forward, {{h, 'r'}, {loss, 'w'}}, {}, s});
        int g = -1;
        for (int b = n - 1; b >= 0; --b) {
            const int k = static_cast<int>(t.kernels.size());
            const int gb = t.alloc(16 * MiB, Category::Workspace, "g", k, b > 0 || with_optimizer ? k + 1 : k);
            std::vector<std::pair<int, char>> acc{{act[static_cast<size_t>(b)], 'r'}, {gb, 'w'}};
            if (g >= 0) acc.push_back({g, 'r'});
            t.kernel({"aten::gelu_backward", "M.blocks." + std::to_string(b), mhc::trace::Phase::Backward, acc, {}, s});
            g = gb;
        }
        if (with_optimizer) {
            const int k = static_cast<int>(t.kernels.size());
            const int grad = t.alloc(64 * MiB, Category::Grad, "w.grad", k, k + (s == 0 ? 4 : 2));
            t.kernel({"aten::mm", "M", mhc::trace::Phase::Backward, {{g, 'r'}, {grad, 'w'}}, {}, s});
            if (s == 0) {
                m = t.alloc(64 * MiB, Category::Optimizer, "w.exp_avg", k + 1, -1);
                v = t.alloc(64 * MiB, Category::Optimizer, "w.exp_avg_sq", k + 2, -1);
                t.kernel({"aten::zeros_like", "", mhc::trace::Phase::Optimizer, {{m, 'w'}}, {}, s});
                t.kernel({"aten::zeros_like", "", mhc::trace::Phase::Optimizer, {{v, 'w'}}, {}, s});
            }
            const int kk = static_cast<int>(t.kernels.size());
            const int tmp = t.alloc(64 * MiB, Category::Workspace, "tmp", kk, kk + 1);
            t.kernel({"aten::_foreach_sqrt", "", mhc::trace::Phase::Optimizer, {{v, 'r'}, {tmp, 'w'}}, {}, s});
            t.kernel({"aten::_foreach_addcdiv_", "", mhc::trace::Phase::Optimizer,
                      {{p, 'x'}, {m, 'x'}, {v, 'x'}, {tmp, 'r'}, {grad, 'r'}}, {}, s});
        }
    }
    return t;
}

TinyTrace shared_module_chain(const std::vector<std::string>& blocks) {
    constexpr int64_t MiB = 1 << 20;
    TinyTrace trace;
    trace.modules = {{"M", "Tiny"}, {"Act", "SiLU"}};
    for (const std::string& name : blocks) trace.modules.emplace_back(name, "Block");
    const int count = static_cast<int>(blocks.size());
    // Block b runs add (reads hidden, makes a 1 MiB temporary), silu (module Act, outside every
    // block), mm (makes a_b, 64 MiB) and gelu (saves a_b, makes h_{b+1}); then the loss and the
    // backward, one op per block in reverse.
    const int fwd_end = 4 * count;   // the loss kernel
    const int bwd0 = fwd_end + 1;
    int hidden = trace.alloc(16 * MiB, Category::Other, "batch", 0, -1);
    std::vector<int> act(static_cast<size_t>(count));
    for (int b = 0; b < count; ++b) {
        const int at = 4 * b;
        const std::string& mod = blocks[static_cast<size_t>(b)];
        const int tmp = trace.alloc(MiB, Category::Workspace, "t", at, at + 1);
        trace.kernel({"aten::add", mod, mhc::trace::Phase::Forward, {{hidden, 'r'}, {tmp, 'w'}}, {}, 0});
        trace.kernel({"aten::silu_", "Act", mhc::trace::Phase::Forward, {{tmp, 'x'}}, {}, 0});
        act[static_cast<size_t>(b)] = trace.alloc(64 * MiB, Category::Activation, "a", at + 2, bwd0 + (count - 1 - b));
        const int next = trace.alloc(16 * MiB, Category::Activation, "hidden", at + 3,
                                     b + 1 < count ? at + 6 : fwd_end);
        trace.kernel(
            {"aten::mm", mod, mhc::trace::Phase::Forward, {{hidden, 'r'}, {act[static_cast<size_t>(b)], 'w'}}, {}, 0});
        trace.kernel({"aten::gelu",
                      mod,
                      mhc::trace::Phase::Forward,
                      {{act[static_cast<size_t>(b)], 'r'}, {next, 'w'}},
                      {act[static_cast<size_t>(b)]},
                      0});
        hidden = next;
    }
    const int loss = trace.alloc(MiB, Category::Workspace, "loss", fwd_end, fwd_end);
    trace.kernel({"aten::sum", "M", mhc::trace::Phase::Forward, {{hidden, 'r'}, {loss, 'w'}}, {}, 0});
    int grad = -1;
    for (int b = count - 1; b >= 0; --b) {
        const int at = static_cast<int>(trace.kernels.size());
        const int gb = trace.alloc(16 * MiB, Category::Workspace, "grad", at, b > 0 ? at + 1 : at);
        std::vector<std::pair<int, char>> acc{{act[static_cast<size_t>(b)], 'r'}, {gb, 'w'}};
        if (grad >= 0) acc.emplace_back(grad, 'r');
        trace.kernel({"aten::gelu_backward", blocks[static_cast<size_t>(b)], mhc::trace::Phase::Backward, acc, {}, 0});
        grad = gb;
    }
    return trace;
}

}  // namespace advisetest
