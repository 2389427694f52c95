#pragma once
// The step test_retry_cost.cpp and test_steady_cost.cpp work by hand: `steps` steps of an
// activation (300 MiB) written and saved in the forward, read by the backward's first kernel and
// freed after it, then a workspace of `work` bytes made and freed by one backward kernel; the
// gradient G (40 MiB) made by the first backward kernel and kept.
#include <cstdint>

#include "tiny.hpp"

namespace advisetest {

inline TinyTrace retry_steps(int steps, int64_t work, const char* act_label = "R", const char* work_label = "S") {
    using mhc::trace::Category;
    using mhc::trace::Phase;
    constexpr int64_t kMiB = int64_t{1} << 20;
    TinyTrace tiny;
    tiny.modules = {{"M", "Net"}};
    const int grad = tiny.alloc(40 * kMiB, Category::Grad, "w.grad", 1, -1);
    for (int step = 0; step < steps; ++step) {
        const int first = static_cast<int>(tiny.kernels.size());
        const int act = tiny.alloc(300 * kMiB, Category::Activation, act_label, first, first + 1);
        const int ws = tiny.alloc(work, Category::Workspace, work_label, first + 2, first + 2);
        tiny.kernel({"aten::mm", "M", Phase::Forward, {{act, 'w'}}, {act}, step});
        tiny.kernel({"aten::mm_backward", "M", Phase::Backward, {{act, 'r'}, {grad, step ? 'x' : 'w'}}, {}, step});
        tiny.kernel({"aten::mul", "M", Phase::Backward, {{ws, 'w'}, {grad, 'x'}}, {}, step});
    }
    return tiny;
}

}  // namespace advisetest
