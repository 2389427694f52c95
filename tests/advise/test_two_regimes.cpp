// A tensor that two saved-tensor regimes hold at once lives as long as its longest holder: an
// output a selective checkpoint's policy keeps (save_matmuls keeps a convolution's) that the
// module after it, under an offload hook, saves too. Worked out by hand.
#include <catch2/catch.hpp>

#include "fixture.hpp"
#include "mhc/advise/evaluate.hpp"
#include "mhc/trace/check.hpp"
#include "step.hpp"

using namespace mhc::advise;
using advisetest::Fixture;
using advisetest::Step;

namespace {

int64_t free_of(const mhc::trace::TraceData& out, const std::string& label, int32_t device = 0) {
    for (size_t a = 0; a < out.allocations.size(); ++a)
        if (out.str(out.allocations.label[a]) == label && out.allocations.device[a] == device)
            return out.allocations.t_free[a];
    return -1;
}

int count_of(const mhc::trace::TraceData& out, const std::string& label, int32_t device) {
    int n = 0;
    for (size_t a = 0; a < out.allocations.size(); ++a)
        n += out.str(out.allocations.label[a]) == label && out.allocations.device[a] == device;
    return n;
}

}  // namespace

TEST_CASE("selective checkpoint + offload: a kept output the offloaded module saves stays on the device until "
          "its replay",
          "[advise][transform]") {
    // The DCGAN's discriminator, one conv and its BatchNorm:
    //   k0 conv convolution  x, w -> c (1000), saves x, w   k2 M   sum b -> loss
    //   k1 bn   batch_norm   c -> b (1000), saves c         k3 bn  batch_norm_backward c, loss -> g
    //                                                       k4 conv convolution_backward x, w, g -> gw
    // {"checkpoint": conv, save_matmuls} keeps c in the checkpoint's cache until the recomputation
    // replays k0 (k0', no kernel, before k4, the first backward read of what conv saved); the
    // offload hook around bn packs c at k1 (a D2H of 1000 B after it, 1 B/ns: [20, 1020]) and
    // unpacks it at k3, before the replay, where it is still on the device: the hook uses it as it
    // is and drops its host copy. So: no copy back, c on the device from k0 to k0' (the end of k3,
    // 1050), the host copy from the D2H to k3's start (1040).
    //   k0 [0,10] k1 [10,20] D2H [20,1020] k2 [1020,1030] k3 [1030,1040] k0' k4 [1040,1050]
    // Before: c was copied back before k3 and died at k1 on the device (the offload's rule alone),
    // 1000 B less from k1 to k3 than the captured step held (DCGAN at 3.2 GiB: reserved +1.87%).
    Step tiny({{"M.conv", "Conv2d"}, {"M.bn", "BatchNorm2d"}});
    const int weight = tiny.param(100, "w"), batch = tiny.input(100, "x");
    const int conv_out = tiny.act(1000, "c"), bn_out = tiny.act(1000, "b");
    const int loss = tiny.work(10, "loss"), grad = tiny.work(100, "g"), grad_w = tiny.result(100, "gw");
    tiny.fwd("aten::convolution", "M.conv", {{batch, 'r'}, {weight, 'r'}, {conv_out, 'w'}}, {batch, weight});
    tiny.fwd("aten::native_batch_norm", "M.bn", {{conv_out, 'r'}, {bn_out, 'w'}}, {conv_out});
    tiny.fwd("aten::sum", "M", {{bn_out, 'r'}, {loss, 'w'}});
    tiny.bwd("aten::native_batch_norm_backward", "M.bn", {{conv_out, 'r'}, {loss, 'r'}, {grad, 'w'}});
    tiny.bwd("aten::convolution_backward", "M.conv", {{batch, 'r'}, {weight, 'r'}, {grad, 'r'}, {grad_w, 'w'}});
    Fixture fix(tiny.done());
    const std::string both = R"({"checkpoint": {"modules": ["M.conv"], "policy": "save_matmuls"},
                                 "offload": {"mode": "sync", "modules": ["M.bn"], "min_bytes": 500}})";
    const Prediction pred = fix.ev().predict(parse_setting(both));
    CHECK(pred.d2h_bytes == 1000);
    CHECK(pred.h2d_bytes == 0);
    CHECK(pred.host_peak == 1000);
    CHECK(pred.step_time == 1050);
    // live at k2: w, x, c, b, loss = 100 + 100 + 1000 + 1000 + 10
    CHECK(pred.memory.peak == 2210);
    const mhc::trace::TraceData out = fix.ev().trace(parse_setting(both));
    REQUIRE(mhc::trace::check_trace(out).ok());
    CHECK(count_of(out, "c", 0) == 1);   // no second device copy
    CHECK(free_of(out, "c", 0) >= 1040);
    CHECK(free_of(out, "c", -1) == 1030);
    // Offload alone (no cache holds c) still moves it: c dies at k1 and comes back before k3.
    const Prediction alone = fix.ev().predict(
        parse_setting(R"({"offload": {"mode": "sync", "modules": ["M.bn"], "min_bytes": 500}})"));
    CHECK(alone.h2d_bytes == 1000);
}

TEST_CASE("checkpoint: calls are transformed in forward order, whatever order the setting names them in",
          "[advise][transform]") {
    // b0's output h (made by its tanh, which saves its output) is b1's input, which b1's add reads
    // (saving nothing) in the forward and again in its recomputation:
    //   k0 b0 mm x -> m, saves m      k3 b1 relu o -> p, saves p   k6 b0 tanh_backward h
    //   k1 b0 tanh m -> h, saves h    k4 M sum p -> loss           k7 b0 mm_backward m
    //   k2 b1 add h -> o              k5 b1 relu_backward p
    // A selective checkpoint of b0 lets h, which only b0 saved, die at its last forward use (k2):
    // b0's backward reads its recomputed copy. A full checkpoint of b1 keeps h, its input, until
    // b1's backward ends (k5), for its recomputation (add) reads it. Named with b1's group first,
    // b0's rule came last and undid b1's: b1's recomputation read h after it had died (an
    // invalid step, access-outside-lifetime).
    Step tiny({{"M.b0", "Block"}, {"M.b1", "Block"}});
    const int batch = tiny.input(100, "x");
    const int mm_out = tiny.act(1000, "m"), hidden = tiny.act(1000, "h"), sum_out = tiny.act(1000, "o");
    const int relu_out = tiny.act(1000, "p"), loss = tiny.work(10, "loss");
    tiny.fwd("aten::mm", "M.b0", {{batch, 'r'}, {mm_out, 'w'}}, {mm_out});
    tiny.fwd("aten::tanh", "M.b0", {{mm_out, 'r'}, {hidden, 'w'}}, {hidden});
    tiny.fwd("aten::add", "M.b1", {{hidden, 'r'}, {sum_out, 'w'}});
    tiny.fwd("aten::relu", "M.b1", {{sum_out, 'r'}, {relu_out, 'w'}}, {relu_out});
    tiny.fwd("aten::sum", "M", {{relu_out, 'r'}, {loss, 'w'}});
    tiny.bwd("aten::threshold_backward", "M.b1", {{relu_out, 'r'}, {loss, 'r'}});
    tiny.bwd("aten::tanh_backward", "M.b0", {{hidden, 'r'}});
    tiny.bwd("aten::mm_backward", "M.b0", {{mm_out, 'r'}});
    Fixture fix(tiny.done());
    const std::string in_order = R"({"checkpoint": [{"modules": ["M.b0"], "policy": "save_matmuls"},
                                                    {"modules": ["M.b1"], "policy": "full"}]})";
    const std::string reversed = R"({"checkpoint": [{"modules": ["M.b1"], "policy": "full"},
                                                    {"modules": ["M.b0"], "policy": "save_matmuls"}]})";
    const mhc::trace::TraceData a = fix.ev().trace(parse_setting(in_order));
    const mhc::trace::TraceData b = fix.ev().trace(parse_setting(reversed));
    CHECK(mhc::trace::check_trace(a).ok());
    CHECK(mhc::trace::check_trace(b).ok());
    CHECK(b.allocations.t_free == a.allocations.t_free);
    CHECK(fix.ev().predict(parse_setting(reversed)).memory.peak == fix.ev().predict(parse_setting(in_order)).memory.peak);
}
