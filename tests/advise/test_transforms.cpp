// Each setting's transformation on tiny captured steps, with the numbers worked out by hand.
//
// two_blocks(): x (100 B, the batch) lives throughout; every kernel takes 10 ns.
//   k0 blocks.0 mm    x -> a0 (1000)         k4 M    sum    o1 -> loss (10)
//   k1 blocks.0 gelu  a0 -> o0 (100), saves a0  k5 blocks.1 gelu_bwd a1 -> g1 (100)
//   k2 blocks.1 mm    o0 -> a1 (2000)        k6 blocks.0 gelu_bwd a0, g1 -> g0 (100)
//   k3 blocks.1 gelu  a1 -> o1 (100), saves a1
// Live bytes at each kernel (frees after the kernel that last needs a storage):
//   1100, 1200, 3200, 3200, 3210, 3200, 1300: peak 3210 (k4), 70 ns.
#include <catch2/catch.hpp>

#include "fixture.hpp"
#include "mhc/advise/evaluate.hpp"
#include "mhc/common/error.hpp"
#include "mhc/test/temp.hpp"
#include "mhc/trace/check.hpp"
#include "step.hpp"
#include "tiny.hpp"

using namespace mhc::advise;
using advisetest::Category;
using advisetest::Fixture;
using advisetest::id_pairs;
using advisetest::Phase;
using advisetest::Step;
using advisetest::TinyTrace;

namespace {

constexpr int64_t MiB = 1 << 20;

Prediction predict(const Fixture& f, const std::string& json, HostModel h = {}) {
    return f.ev(h).predict(parse_setting(json));
}

// Streamed offload of saves of 500 B and more under `modules` (a JSON list; null: the whole
// forward), a forward stash of `stash` packs, `prefetch` saves brought back ahead.
std::string streamed(int stash, int prefetch, const std::string& modules = "null") {
    return R"({"offload": {"mode": "streamed", "modules": )" + modules + R"(, "min_bytes": 500, "max_fwd_stash": )" +
           std::to_string(stash) + R"(, "prefetch": )" + std::to_string(prefetch) + "}}";
}

// Whether the step `setting` makes of the fixture's capture is one `mhc check` accepts.
bool sound(const Fixture& fixture, const std::string& setting) {
    return mhc::trace::check_trace(fixture.ev().trace(parse_setting(setting))).ok();
}

}  // namespace

TEST_CASE("the capture as it is: peak, reserved, time", "[advise][transform]") {
    Fixture f(advisetest::two_blocks());
    Prediction p = predict(f, "{}");
    CHECK(p.memory.peak == 3210);
    CHECK(p.step_time == 70);
    CHECK(p.host_peak == 0);
    CHECK(f.base.info.block_name == std::vector<std::string>{"M.blocks.0", "M.blocks.1"});
}

TEST_CASE("checkpoint full: dropped in the forward, recomputed before the backward", "[advise][transform]") {
    Fixture f(advisetest::two_blocks());
    // a1 dies after k3; the checkpoint holds its input o0 until its backward (k5); before k5 the
    // recomputation reruns k2 (a1' 2000) and stops there: the run's last pack is k3's (gelu saves
    // its input a1, packed before its kernel runs), so PyTorch's early stop never reruns k3:
    //   1100, 1200, 3200, 3300, 1310, [r2 3200], 3300, 1300: peak 3300, 80 ns.
    Prediction p = predict(f, R"({"checkpoint": {"modules": ["M.blocks.1"]}})");
    CHECK(p.memory.peak == 3300);
    CHECK(p.step_time == 80);
    Evaluator ev = f.ev();
    mhc::trace::TraceData t = ev.trace(parse_setting(R"({"checkpoint": {"modules": ["M.blocks.1"]}})"));
    CHECK(t.kernels.size() == 8);
    CHECK(mhc::trace::check_trace(t).ok());
    // the recomputation sits right before the block's backward: mm, then gelu_backward
    CHECK(t.str(t.kernels.name[5]) == "aten::mm");
    CHECK(t.str(t.kernels.name[6]) == "aten::gelu_backward");
    // the model's spelling without the root class is accepted
    CHECK(predict(f, R"({"checkpoint": {"modules": ["blocks.1"]}})").memory.peak == 3300);
}

TEST_CASE("checkpoint: its inputs live until its own backward is done, not another module's read of a storage it saved",
          "[advise][transform]") {
    // t (1000 B, a time embedding) is saved by blocks.0 and by blocks.1, which is checkpointed:
    //   k0 emb      mm   batch -> t                 k4 M        sum      o1 -> loss (10)
    //   k1 blocks.0 mul  t, batch -> o0 (500), saves t   k5 blocks.1 gelu_bwd a1 -> g1 (100)
    //   k2 blocks.1 mul  o0, t -> a1 (2000), saves o0, t k6 blocks.1 mul_bwd  o0, t, g1 -> g2 (100)
    //   k3 blocks.1 gelu a1 -> o1 (100), saves a1        k7 blocks.0 mul_bwd  t, g2 -> g0 (100), w (5000)
    // The checkpoint holds its input o0 until its backward ends, k6 (blocks.1's last node). At
    // k7: batch 100 + t 1000 + g2 100 + g0 100 + w 5000 = 6300, as captured. Before, the
    // backward's end was t's last read, blocks.0's k7: o0 held through it, 6800 (the diffusion
    // UNet's checkpointed up.2 held its 32 MiB input until down.0's backward, and the reserved
    // bytes with expandable segments were predicted 6.05% under the capture).
    Step tiny({{"M.emb", "Linear"}, {"M.blocks.0", "Block"}, {"M.blocks.1", "Block"}});
    const int batch = tiny.input(100, "batch");
    const int temb = tiny.act(1000, "t"), o0 = tiny.act(500, "o0"), a1 = tiny.act(2000, "a1"), o1 = tiny.act(100, "o1");
    const int loss = tiny.work(10, "loss"), g1 = tiny.work(100, "g1"), g2 = tiny.work(100, "g2"), ws = tiny.work(5000, "w");
    const int g0 = tiny.result(100, "g0");
    tiny.fwd("aten::mm", "M.emb", {{batch, 'r'}, {temb, 'w'}});
    tiny.fwd("aten::mul", "M.blocks.0", {{temb, 'r'}, {batch, 'r'}, {o0, 'w'}}, {temb});
    tiny.fwd("aten::mul", "M.blocks.1", {{o0, 'r'}, {temb, 'r'}, {a1, 'w'}}, {o0, temb});
    tiny.fwd("aten::gelu", "M.blocks.1", {{a1, 'r'}, {o1, 'w'}}, {a1});
    tiny.fwd("aten::sum", "M", {{o1, 'r'}, {loss, 'w'}});
    tiny.bwd("aten::gelu_backward", "M.blocks.1", {{a1, 'r'}, {g1, 'w'}});
    tiny.bwd("aten::mul_backward", "M.blocks.1", {{o0, 'r'}, {temb, 'r'}, {g1, 'r'}, {g2, 'w'}});
    tiny.bwd("aten::mul_backward", "M.blocks.0", {{temb, 'r'}, {g2, 'r'}, {g0, 'w'}, {ws, 'w'}});
    Fixture fix(tiny.done());
    CHECK(predict(fix, "{}").memory.peak == 6300);
    const std::string ck = R"({"checkpoint": {"modules": ["M.blocks.1"]}})";
    CHECK(predict(fix, ck).memory.peak == 6300);
    CHECK(sound(fix, ck));
}

TEST_CASE("checkpoint: its frame lives until its last node returns, not until that node's last read of a save",
          "[advise][transform]") {
    // An RMSNorm-like block: the pow node reads its saved fp32 copy, then multiplies the gradient
    // twice; the engine releases the node's saved variables (the checkpoint's holders, which keep
    // its frame and the inputs the frame holds) only when the node returns, after k6:
    //   k0 blocks.0 mm      batch -> o0 (500)          k4 blocks.1 pow_bwd x32 -> g1 (100)
    //   k1 blocks.1 to_copy o0 -> x32 (1000)           k5 blocks.1 mul     g1 -> g2 (5000)
    //   k2 blocks.1 pow     x32 -> a1 (100), saves x32  k6 blocks.1 mul     g2 -> g3 (100)
    //   k3 M        sum     a1 -> loss (10)            (x32 freed after k6, the node's return)
    // Captured: 600, 1600, 1200, 1210, 1200, 6200, 6200: peak 6200. Checkpointing blocks.1 holds
    // its input o0 (500) to k6: at k5 batch 100 + o0 500 + x32' 1000 + g1 100 + g2 5000 = 6700.
    // Before, the frame ended at x32's last read (k4) and o0 was freed there: 6200 (mHC's
    // layers.1 held layer 0's 192 MiB output two kernels longer in the capture than predicted).
    Step tiny({{"M.blocks.0", "Block"}, {"M.blocks.1", "Block"}});
    const int batch = tiny.input(100, "batch");
    const int o0 = tiny.act(500, "o0"), x32 = tiny.act(1000, "x32", 6), a1 = tiny.act(100, "a1");
    const int loss = tiny.work(10, "loss"), g1 = tiny.work(100, "g1"), g2 = tiny.work(5000, "g2");
    const int g3 = tiny.result(100, "g3");
    tiny.fwd("aten::mm", "M.blocks.0", {{batch, 'r'}, {o0, 'w'}});
    tiny.fwd("aten::_to_copy", "M.blocks.1", {{o0, 'r'}, {x32, 'w'}});
    tiny.fwd("aten::pow", "M.blocks.1", {{x32, 'r'}, {a1, 'w'}}, {x32});
    tiny.fwd("aten::sum", "M", {{a1, 'r'}, {loss, 'w'}});
    tiny.bwd("aten::pow", "M.blocks.1", {{x32, 'r'}, {g1, 'w'}});
    tiny.bwd("aten::mul", "M.blocks.1", {{g1, 'r'}, {g2, 'w'}});
    tiny.bwd("aten::mul", "M.blocks.1", {{g2, 'r'}, {g3, 'w'}});
    Fixture fix(tiny.done());
    CHECK(predict(fix, "{}").memory.peak == 6200);
    const std::string ck = R"({"checkpoint": {"modules": ["M.blocks.1"]}})";
    CHECK(predict(fix, ck).memory.peak == 6700);
    CHECK(sound(fix, ck));
}

TEST_CASE("checkpoint: a recomputed value the call returned dies when the recomputation stops, not at its last use",
          "[advise][transform]") {
    // blocks.0 returns p, which the head reads after the call; nothing saves p:
    //   k0 blocks.0 mul  batch -> p (1000)              k4 M        sum     y -> loss (10)
    //   k1 blocks.0 mm   batch -> h (5000)              k5 M.head   add_bwd loss -> gy (2000)
    //   k2 blocks.0 gelu h -> o (100), saves h          k6 blocks.0 gelu_bwd h, gy -> g (100)
    //   k3 M.head   add  p, o -> y (100)
    // Captured: 1100, 6100, 6200, 6300, 5210, 7110, 7200: peak 7200. Checkpointing blocks.0
    // reruns k0 and k1 before k6 and stops at gelu's pack of h; p' is still its frame's local
    // there (p outlived the call in the forward) and dies when the stop unwinds the frame: at the
    // rerun of k1, batch 100 + gy 2000 + p' 1000 + h' 5000 = 8100. Before, p' died after its last
    // use, its own rerun (7100 there, peak 7200); in mHC's maps recomputation `post` (64 KiB, the
    // 2 * sigmoid the maps return) died 176 us before the capture's (after Sinkhorn's iterations).
    Step tiny({{"M.blocks.0", "Block"}, {"M.head", "Head"}});
    const int batch = tiny.input(100, "batch");
    const int pv = tiny.act(1000, "p"), hv = tiny.act(5000, "h"), ov = tiny.act(100, "o"), yv = tiny.act(100, "y");
    const int loss = tiny.work(10, "loss"), gy = tiny.work(2000, "gy"), gv = tiny.result(100, "g");
    tiny.fwd("aten::mul", "M.blocks.0", {{batch, 'r'}, {pv, 'w'}});
    tiny.fwd("aten::mm", "M.blocks.0", {{batch, 'r'}, {hv, 'w'}});
    tiny.fwd("aten::gelu", "M.blocks.0", {{hv, 'r'}, {ov, 'w'}}, {hv});
    tiny.fwd("aten::add", "M.head", {{pv, 'r'}, {ov, 'r'}, {yv, 'w'}});
    tiny.fwd("aten::sum", "M", {{yv, 'r'}, {loss, 'w'}});
    tiny.bwd("aten::add_backward", "M.head", {{loss, 'r'}, {gy, 'w'}});
    tiny.bwd("aten::gelu_backward", "M.blocks.0", {{hv, 'r'}, {gy, 'r'}, {gv, 'w'}});
    Fixture fix(tiny.done());
    CHECK(predict(fix, "{}").memory.peak == 7200);
    const std::string ck = R"({"checkpoint": {"modules": ["M.blocks.0"]}})";
    CHECK(predict(fix, ck).memory.peak == 8100);
    CHECK(sound(fix, ck));
}

TEST_CASE("checkpoint: recomputed before the first backward read, whichever module the capture credits it to",
          "[advise][transform]") {
    // two_blocks with block 1's backward split in two, the first op credited to the root (as a
    // capture credits the last BERT layer's output LayerNorm backward to the head after it):
    //   k5 M gelu_bwd a1 -> g1 (100), k6 blocks.1 mul a1, g1 -> g1b (100), k7 blocks.0 gelu_bwd.
    // The recomputation (k2; k3's gelu packs its input, the early stop) must come before k5,
    // which reads a1's recomputed copy.
    TinyTrace tiny = advisetest::two_blocks();
    tiny.kernels[5].module = "M";
    const int g1b = tiny.alloc(100, Category::Workspace, "g1b", 6, 7);
    tiny.allocs[3].freed_after = 6;   // a1, read by k6 too
    tiny.allocs[6].freed_after = 6;   // g1
    tiny.allocs[7].made_at = 7;       // g0
    tiny.kernels.insert(
        tiny.kernels.begin() + 6,
        advisetest::TinyKernel{
            "aten::mul", "M.blocks.1", Phase::Backward, {{3, 'r'}, {6, 'r'}, {g1b, 'w'}}, {}});
    tiny.kernels[7].acc = {{1, 'r'}, {g1b, 'r'}, {7, 'w'}};
    tiny.allocs[1].freed_after = 7;   // a0
    Fixture fix(tiny);
    const Setting setting = parse_setting(R"({"checkpoint": {"modules": ["M.blocks.1"]}})");
    mhc::trace::TraceData out = fix.ev().trace(setting);
    CHECK(mhc::trace::check_trace(out).ok());
    REQUIRE(out.kernels.size() == 9);
    CHECK(out.str(out.kernels.name[5]) == "aten::mm");   // the recomputation
    CHECK(out.str(out.kernels.name[6]) == "aten::gelu_backward");
    CHECK(fix.ev().predict(setting).memory.peak < fix.ev().predict(Setting{}).memory.peak + 200);
}

TEST_CASE("selective checkpoint keeps matmul outputs and recomputes the rest", "[advise][transform]") {
    Fixture f(advisetest::two_blocks());
    // a1 (made by mm) is cached: it stays; o0 is held to k5; the recomputation gives a1 back and
    // stops at gelu's pack of its input (gelu does not rerun):
    //   1100, 1200, 3200, 3300, 3310, [r2 cached], 3300, 1300: peak 3310, 70 ns.
    Prediction p = predict(f, R"({"checkpoint": {"modules": ["M.blocks.1"], "policy": "save_matmuls"}})");
    CHECK(p.memory.peak == 3310);
    CHECK(p.step_time == 70);
}

namespace {

// Block 1 calls a module not registered under it between its own ops (transformers' Mamba
// reference causal_conv1d_fn calls ACT2FN["silu"], a new SiLUActivation each call):
//   k0 blocks.0 mm batch -> a0 (1000)         k5 M sum o1 -> loss (10)
//   k1 blocks.0 gelu a0 -> o0 (100), saves a0  k6 blocks.1 gelu_bwd s1 -> gs (500)
//   k2 blocks.1 mm o0 -> a1 (2000)             k7 Act silu_bwd a1, gs -> g1 (100)
//   k3 Act silu a1 -> s1 (500), saves a1       k8 blocks.0 gelu_bwd a0, g1 -> g0 (100)
//   k4 blocks.1 gelu s1 -> o1 (100), saves s1
// torch.utils.checkpoint around blocks.1 runs k2..k4 as one call: a1 (a matmul's) is kept,
// s1 dies in the forward and the recomputation gives a1 back and reruns silu before k6.
// Split at k3 into two calls, silu was not recomputed and s1 read back from nothing.
TinyTrace unregistered_call() {
    Step tiny({{"Act", "SiLUActivation"}, {"M.blocks.0", "Block"}, {"M.blocks.1", "Block"}});
    const int batch = tiny.input(100, "batch");
    const int a0 = tiny.act(1000, "a0"), o0 = tiny.act(100, "o0"), a1 = tiny.act(2000, "a1"), s1 = tiny.act(500, "s1");
    const int o1 = tiny.act(100, "o1");
    const int loss = tiny.work(10, "loss"), gs = tiny.work(500, "gs"), g1 = tiny.work(100, "g1"), g0 = tiny.work(100, "g0");
    tiny.fwd("aten::mm", "M.blocks.0", {{batch, 'r'}, {a0, 'w'}});
    tiny.fwd("aten::gelu", "M.blocks.0", {{a0, 'r'}, {o0, 'w'}}, {a0});
    tiny.fwd("aten::mm", "M.blocks.1", {{o0, 'r'}, {a1, 'w'}});
    tiny.fwd("aten::silu", "Act", {{a1, 'r'}, {s1, 'w'}}, {a1});
    tiny.fwd("aten::gelu", "M.blocks.1", {{s1, 'r'}, {o1, 'w'}}, {s1});
    tiny.fwd("aten::sum", "M", {{o1, 'r'}, {loss, 'w'}});
    tiny.bwd("aten::gelu_backward", "M.blocks.1", {{s1, 'r'}, {gs, 'w'}});
    tiny.bwd("aten::silu_backward", "Act", {{a1, 'r'}, {gs, 'r'}, {g1, 'w'}});
    tiny.bwd("aten::gelu_backward", "M.blocks.0", {{a0, 'r'}, {g1, 'r'}, {g0, 'w'}});
    return tiny.done();
}

}  // namespace

TEST_CASE("selective checkpoint: an unregistered module's op inside the block's call is recomputed with it",
          "[advise][transform]") {
    Fixture fix(unregistered_call());
    const Setting setting = parse_setting(R"({"checkpoint": {"modules": ["M.blocks.1"], "policy": "save_matmuls"}})");
    mhc::trace::TraceData out = fix.ev().trace(setting);
    CHECK(mhc::trace::check_trace(out).ok());
    std::vector<std::string> names;
    for (size_t k = 0; k < out.kernels.size(); ++k) names.push_back(out.str(out.kernels.name[k]));
    // the forward, then silu rerun (mm's output given back without a kernel), then the backward
    CHECK(names == std::vector<std::string>{"aten::mm", "aten::gelu", "aten::mm", "aten::silu", "aten::gelu",
                                            "aten::sum", "aten::silu", "aten::gelu_backward",
                                            "aten::silu_backward", "aten::gelu_backward"});
    // s1 is not held from k3 to k6: at k5 batch, a0, o0 (the checkpoint's input), a1 (kept), o1 and
    // loss are live (3310, not 3810); the peak is k6's, batch, a0, o0 (held until silu_backward, the
    // last backward node reading what the call saved), a1, s1' and gs (4200)
    Prediction pred = fix.ev().predict(setting);
    CHECK(pred.memory.peak == 4200);
}

TEST_CASE("offload: an unregistered module's op inside the block's call is under the block's hook",
          "[advise][transform]") {
    Fixture fix(unregistered_call());
    // offloading blocks.1: the hook entered around its forward sees silu's pack of a1 (2000) as
    // well as gelu's of s1 (500); by the kernels' own modules silu's was outside (500 moved)
    Prediction pred = predict(fix, R"({"offload": {"mode": "sync", "modules": ["M.blocks.1"], "min_bytes": 1}})");
    CHECK(pred.d2h_bytes == 2500);
    CHECK(pred.h2d_bytes == 2500);
    // with blocks.1 checkpointed, its packs (silu's too) are the checkpoint's; the hook sees a0
    // (k1's pack in blocks.0) and what the checkpoint hands to it: its input o0 (100) and the
    // output of mm that selective checkpointing keeps, a1 (2000; respect_saved_tensors_hooks)
    Prediction both = predict(fix, R"({"offload": {"mode": "sync", "modules": null, "min_bytes": 1},
                                    "checkpoint": {"modules": ["M.blocks.1"], "policy": "save_matmuls"}})");
    CHECK(both.d2h_bytes == 3100);
}

TEST_CASE("mhc recomputes the hyper-connections inside the named modules", "[advise][transform]") {
    TinyTrace t = advisetest::two_blocks();
    t.modules[2].second = "HcMaps";
    Fixture f(t);
    CHECK(predict(f, R"({"checkpoint": {"modules": ["M"], "policy": "mhc"}})").memory.peak == 3300);
    CHECK_THROWS_WITH(predict(f, R"({"checkpoint": {"modules": ["M.blocks.0"], "policy": "mhc"}})"),
                      Catch::Contains("holds no mHC hyper-connection maps"));
}

TEST_CASE("sync offload: host copy in the forward, copied back before the backward needs it", "[advise][transform]") {
    Fixture f(advisetest::two_blocks());
    // a0 (1000 B) goes to the host after k1 (a D2H of 1000 ns on the compute stream) and dies;
    // it comes back (H2D, 1000 ns) right before k6:
    //   1100, 1200, [D2H 200], 2200, 2200, 2210, 2200, [H2D 1200], 1300: peak 2210, 2070 ns.
    Prediction p = predict(f, R"({"offload": {"mode": "sync", "modules": ["M.blocks.0"], "min_bytes": 500}})");
    CHECK(p.memory.peak == 2210);
    CHECK(p.host_peak == 1000);
    CHECK(p.step_time == 2070);
    CHECK(p.d2h_bytes == 1000);
    CHECK(p.h2d_bytes == 1000);
    // below min_bytes nothing moves
    CHECK(predict(f, R"({"offload": {"mode": "sync", "modules": ["M.blocks.0"], "min_bytes": 1001}})").memory.peak == 3210);
}

TEST_CASE("streamed offload: side-stream copies, the stash, the wait for a copy", "[advise][transform]") {
    Fixture f(advisetest::two_blocks());
    // One pack in the hook's scope, so the stash keeps a0 until the hook's first unpack (k6),
    // and the peak stays 3210. The D2H runs beside k2..k5 ([20, 1020]); the H2D is issued when
    // the stream reaches k6 (60) on the other copy engine ([60, 1060]); k6 waits for both:
    // [1060, 1070].
    Prediction pred = predict(f, streamed(1, 0, R"(["M.blocks.0"])"));
    CHECK(pred.memory.peak == 3210);
    CHECK(pred.step_time == 1070);
    CHECK(pred.waits == 1060 - 60);
    // a stash of one pack, two packs in scope: a0 leaves after the next pack (k3 saves a1), a1
    // at the first unpack (k5); the backward's k5 waits for a1's copy, k6 for a0's:
    //   1100, 1200, 3200, 3200, [a0 gone] 2210, [a1 gone, a1' back at k5] 2200, [a0' back] 1300
    Prediction pred_all = predict(f, streamed(1, 0));
    CHECK(pred_all.memory.peak == 3200);
    CHECK(pred_all.host_peak == 3000);
}

TEST_CASE("streamed offload: a stash smaller than one op's packs waits after that op, when its copy is issued",
          "[advise][transform]") {
    // k2 packs two inputs, a and b (1000 B each), with a stash of one pack: a's K-th later pack
    // is b's, an input of k2 itself, i.e. before k2 runs, but a's D2H is issued at k2's end. The
    // compute stream waits at the earliest after the saving op (k2's end), not before it (this
    // was an internal error, "an op waits for a copy issued after it").
    //   k0 [0,10] makes a, k1 [10,20] makes b, k2 [20,30] reads a, b; D2H a [30,1030], b
    //   [1030,2030] (one D2H queue); k3 waits for a's: [1030,1040]; k4 (the first unpack) waits
    //   for b's D2H and for the H2Ds issued when the stream reaches it (1040): a [1040,2040],
    //   b [2040,3040]; k4 [3040,3050].
    Step tiny({{"M.blocks.0", "Block"}});
    const int batch = tiny.input(100, "batch");
    const int sa = tiny.act(1000, "a"), sb = tiny.act(1000, "b"), sc = tiny.act(100, "c");
    const int loss = tiny.work(10, "loss"), grad = tiny.result(100, "g");
    tiny.fwd("aten::mm", "M.blocks.0", {{batch, 'r'}, {sa, 'w'}});
    tiny.fwd("aten::mm", "M.blocks.0", {{sa, 'r'}, {sb, 'w'}});
    tiny.fwd("aten::mul", "M.blocks.0", {{sa, 'r'}, {sb, 'r'}, {sc, 'w'}}, {sa, sb});
    tiny.fwd("aten::sum", "M", {{sc, 'r'}, {loss, 'w'}});
    tiny.bwd("aten::mul_backward", "M.blocks.0", {{sa, 'r'}, {sb, 'r'}, {grad, 'w'}});
    Fixture fix(tiny.done());
    Prediction pred = predict(fix, streamed(1, 0));
    CHECK(pred.step_time == 3050);
    CHECK(pred.waits == (1030 - 30) + (3040 - 1040));
    CHECK(pred.host_peak == 2000);
}

TEST_CASE("streamed offload: one op's saves keep the order its own pass unpacked them in, act parameter's too",
          "[advise][transform]") {
    // Two steps of one pass each (kernels k0..k4, then k5..k9 the same); per step:
    //   k0 blocks.0 mm         batch -> a (1000)
    //   k1 blocks.0 layer_norm a, w -> h (600), saves a, w (w a parameter: packed, not moved)
    //   k2 blocks.0 mm         h -> o (5000), saves h
    //   k3 M        sum        o -> loss (10)
    //   k4 blocks.0 backward   a, w, h -> g (100)
    // The backward unpacks k1's saves as a, w (capture.unpacks lists a, w, h in each step), so
    // a's pack comes first: with a stash of 2 it is dropped when the 3rd pack (h, offloaded too,
    // before k2) happens, and k2's 5000 B never meet a; h stays stashed until the backward's first
    // unpack (k4). Live at k3: batch 100 + w 100 + h 600 + o 5000 + loss 10 = 5810 in both steps
    // (6810 as captured, with a). Before, the order came from the first place a storage had in the
    // capture's unpacks, which for w is in step 0: in step 1, w sorted before a', a' became the
    // 2nd pack, stayed stashed until the backward, and k8 met it: 6810 (the ConvNeXt-Tiny
    // features.4 capture: its 2nd step's LayerNorm input, 19,267,584 B, kept until the backward).
    Step tiny({{"M.blocks.0", "Block"}});
    const int batch = tiny.input(100, "batch");
    const int weight = tiny.param(100, "w");
    std::string unpacks;
    for (int step = 0; step < 2; ++step) {
        const int act = tiny.act(1000, "a"), hid = tiny.act(600, "h"), out = tiny.act(5000, "o");
        const int loss = tiny.work(10, "loss"), grad = tiny.work(100, "g");
        tiny.fwd("aten::mm", "M.blocks.0", {{batch, 'r'}, {act, 'w'}}, {}, step);
        tiny.fwd("aten::native_layer_norm", "M.blocks.0", {{act, 'r'}, {weight, 'r'}, {hid, 'w'}}, {act, weight}, step);
        tiny.fwd("aten::mm", "M.blocks.0", {{hid, 'r'}, {out, 'w'}}, {hid}, step);
        tiny.fwd("aten::sum", "M", {{out, 'r'}, {loss, 'w'}}, {}, step);
        const int backward = tiny.bwd("aten::native_layer_norm_backward", "M.blocks.0", {{act, 'r'}, {weight, 'r'}, {hid, 'r'}, {grad, 'w'}}, step);
        const std::string pairs = id_pairs({{act, backward}, {weight, backward}, {hid, backward}});
        unpacks += (unpacks.empty() ? "" : ",") + pairs.substr(1, pairs.size() - 2);
    }
    tiny.meta("capture.unpacks", "[" + unpacks + "]");
    Fixture fix(tiny.done());
    REQUIRE(fix.base.passes == 1);
    REQUIRE(fix.base.pass_step.size() == 2);
    CHECK(predict(fix, "{}").memory.peak == 6810);
    CHECK(predict(fix, streamed(2, 0)).memory.peak == 5810);
    CHECK(sound(fix, streamed(2, 0)));
}

TEST_CASE("streamed offload: the stash lasts until the hook's own first unpack, not another save's of act shared storage",
          "[advise][transform]") {
    // t (1000 B, a timestep embedding) is saved by blocks.0 (under the hook) and blocks.1 (not):
    //   k0 emb      mm        batch -> t              k4 M        sum        o1 -> loss (10)
    //   k1 blocks.0 mul       t, batch -> a (2000), saves t    k5 blocks.1 mul_backward t -> g1 (100),
    //   k2 blocks.0 gelu      a -> o0 (100), saves a                        workspace w (5000)
    //   k3 blocks.1 mul       t, o0 -> o1 (100), saves t       k6 blocks.0 gelu_backward a, t, g1 -> g0 (100)
    // capture.unpacks: t first at k5 (blocks.1's save, outside the hook), a at k6. The hook's
    // stash (10 saves) keeps a until the hook's first unpack, k6 (blocks.0's backward): a is on
    // the device at k5, 100 + 1000 + 2000 + 5000 + 100 = 8200, as captured. Before, the stash
    // was let go at t's first unpack (k5), which the hook never sees: 6200 predicted, a fit the
    // step does not have (the diffusion UNet's up.2, whose blocks all save the time embedding).
    Step tiny({{"M.emb", "Linear"}, {"M.blocks.0", "Block"}, {"M.blocks.1", "Block"}});
    const int batch = tiny.input(100, "batch");
    const int temb = tiny.act(1000, "t"), act = tiny.act(2000, "a"), o0 = tiny.act(100, "o0"), o1 = tiny.act(100, "o1");
    const int loss = tiny.work(10, "loss"), g1 = tiny.work(100, "g1"), ws = tiny.work(5000, "w"), g0 = tiny.result(100, "g0");
    tiny.fwd("aten::mm", "M.emb", {{batch, 'r'}, {temb, 'w'}});
    tiny.fwd("aten::mul", "M.blocks.0", {{temb, 'r'}, {batch, 'r'}, {act, 'w'}}, {temb});
    tiny.fwd("aten::gelu", "M.blocks.0", {{act, 'r'}, {o0, 'w'}}, {act});
    tiny.fwd("aten::mul", "M.blocks.1", {{temb, 'r'}, {o0, 'r'}, {o1, 'w'}}, {temb});
    tiny.fwd("aten::sum", "M", {{o1, 'r'}, {loss, 'w'}});
    const int k5 = tiny.bwd("aten::mul_backward", "M.blocks.1", {{temb, 'r'}, {g1, 'w'}, {ws, 'w'}});
    const int k6 = tiny.bwd("aten::gelu_backward", "M.blocks.0", {{act, 'r'}, {temb, 'r'}, {g1, 'r'}, {g0, 'w'}});
    tiny.meta("capture.unpacks", id_pairs({{temb, k5}, {act, k6}}));
    Fixture fix(tiny.done());
    CHECK(predict(fix, "{}").memory.peak == 8200);
    const std::string off = streamed(10, 0, R"(["M.blocks.0"])");
    CHECK(predict(fix, off).memory.peak == 8200);
    CHECK(sound(fix, off));
}

TEST_CASE("offload of the whole forward: act loss computed after the model's forward is not under the hook",
          "[advise][transform]") {
    // mhc_torch.apply (and the printed code) puts the hook around the model's forward; the loss
    // (kernels outside every module) runs after it, and its saves are not packed:
    //   k0 blocks.0 mm     batch -> a (1000)        k3 -     mse_backward o, n -> g (100)
    //   k1 blocks.0 gelu   a -> o (1000), saves a    k4 blocks.0 gelu_backward a, g -> g0 (100)
    //   k2 -        mse    o, n -> loss, saves o, n (n: the target, 1000 B, made before the step)
    // Only a goes to the host: 1000 B each way. Before, the loss's o and n were packed too
    // (3000 B to the host) and a's stash of 1 ended at o's pack, before k2.
    Step tiny({{"M.blocks.0", "Block"}});
    const int batch = tiny.input(100, "batch"), target = tiny.input(1000, "target");
    const int act = tiny.act(1000, "a"), out = tiny.act(1000, "o");
    const int loss = tiny.work(10, "loss"), grad = tiny.work(100, "g"), g0 = tiny.result(100, "g0");
    tiny.fwd("aten::mm", "M.blocks.0", {{batch, 'r'}, {act, 'w'}});
    tiny.fwd("aten::gelu", "M.blocks.0", {{act, 'r'}, {out, 'w'}}, {act});
    tiny.fwd("aten::mse_loss", "", {{out, 'r'}, {target, 'r'}, {loss, 'w'}}, {out, target});
    tiny.bwd("aten::mse_loss_backward", "", {{out, 'r'}, {target, 'r'}, {grad, 'w'}});
    tiny.bwd("aten::gelu_backward", "M.blocks.0", {{act, 'r'}, {grad, 'r'}, {g0, 'w'}});
    Fixture fix(tiny.done());
    Prediction pred = predict(fix, streamed(1, 0));
    CHECK(pred.d2h_bytes == 1000);
    CHECK(pred.h2d_bytes == 1000);
    CHECK(sound(fix, streamed(1, 0)));
}

TEST_CASE("streamed offload: one op's saves in the order autograd packed them (capture.pack_order)",
          "[advise][transform]") {
    //   k0 blocks.0 mm    batch -> a (1000)         k4 M        sum      p -> loss (10)
    //   k1 blocks.0 ln    a, w -> h (600), saves a, w   k5 blocks.0 mul_bwd w -> g1 (100)
    //   k2 blocks.0 mm    h -> o (5000), saves h    k6 blocks.0 mm_bwd  h, g1 -> g2 (100)
    //   k3 blocks.0 mul   o, w -> p (100), saves w  k7 blocks.0 ln_bwd  a, w, g2 -> g0 (100)
    // k1 packs a, then w (capture.pack_order); w's first unpack is k3's node's (k5), before a's
    // (k7), so the unpacks' order puts w first. With a stash of 2, a (pack 0) is let go at pack 2
    // (h, before k2): live at k3 100 + w 100 + h 600 + o 5000 + p 100 = 5900. In the unpacks'
    // order a was pack 1, the next offloaded pack 2 or more later none (pack 3 is w), so a stayed
    // until the backward: 6900, as captured without offload.
    Step tiny({{"M.blocks.0", "Block"}});
    const int batch = tiny.input(100, "batch"), weight = tiny.param(100, "w");
    const int act = tiny.act(1000, "a"), hid = tiny.act(600, "h"), out = tiny.act(5000, "o"), pr = tiny.act(100, "p");
    const int loss = tiny.work(10, "loss"), g1 = tiny.work(100, "g1"), g2 = tiny.work(100, "g2"), g0 = tiny.result(100, "g0");
    tiny.fwd("aten::mm", "M.blocks.0", {{batch, 'r'}, {act, 'w'}});
    const int k1 = tiny.fwd("aten::native_layer_norm", "M.blocks.0", {{act, 'r'}, {weight, 'r'}, {hid, 'w'}}, {act, weight});
    const int k2 = tiny.fwd("aten::mm", "M.blocks.0", {{hid, 'r'}, {out, 'w'}}, {hid});
    const int k3 = tiny.fwd("aten::mul", "M.blocks.0", {{out, 'r'}, {weight, 'r'}, {pr, 'w'}}, {weight});
    tiny.fwd("aten::sum", "M", {{pr, 'r'}, {loss, 'w'}});
    const int k5 = tiny.bwd("aten::mul_backward", "M.blocks.0", {{weight, 'r'}, {g1, 'w'}});
    const int k6 = tiny.bwd("aten::mm_backward", "M.blocks.0", {{hid, 'r'}, {g1, 'r'}, {g2, 'w'}});
    const int k7 = tiny.bwd("aten::native_layer_norm_backward", "M.blocks.0", {{act, 'r'}, {weight, 'r'}, {g2, 'r'}, {g0, 'w'}});
    tiny.meta("capture.unpacks", id_pairs({{weight, k5}, {hid, k6}, {act, k7}}));
    tiny.meta("capture.pack_order", id_pairs({{act, k1}, {weight, k1}, {hid, k2}, {weight, k3}}));
    Fixture fix(tiny.done());
    CHECK(predict(fix, "{}").memory.peak == 6900);
    CHECK(predict(fix, streamed(2, 0)).memory.peak == 5900);
    CHECK(sound(fix, streamed(2, 0)));
}

namespace {

// F.normalize's shape: k2 norm and k3 div both save a; autograd runs div's node (k5) first, the
// norm's (k7) two nodes later. x (pack 0) comes back with the prefetch of the norm's save of a
// (pack 1). `save_unpacks`: whether the capture recorded each save's own unpack.
advisetest::Step normalize_step(bool save_unpacks) {
    //   k0 M.b mm    batch -> x (3000)          k5 M.b div_bwd   a, n -> g1 (100)
    //   k1 M.b mm    x -> a (2000), saves x     k6 M.b mul       g1 -> t (5000)
    //   k2 M.b norm  a -> n (600), saves a, n   k7 M.b norm_bwd  a, n, g1 -> g0 (100)
    //   k3 M.b div   a, n -> d (100), saves a, n  k8 M.b mm_bwd  x, g0 -> gx (100)
    //   k4 M   sum   d -> loss (10)
    advisetest::Step tiny({{"M.b", "Block"}});
    const int batch = tiny.input(100, "batch");
    const int inp = tiny.act(3000, "x"), act = tiny.act(2000, "a"), norm = tiny.act(600, "n");
    const int quot = tiny.act(100, "d");
    const int loss = tiny.work(10, "loss"), g1 = tiny.work(100, "g1"), temp = tiny.work(5000, "t");
    const int g0 = tiny.work(100, "g0"), gx = tiny.result(100, "gx");
    tiny.fwd("aten::mm", "M.b", {{batch, 'r'}, {inp, 'w'}});
    const int k1 = tiny.fwd("aten::mm", "M.b", {{inp, 'r'}, {act, 'w'}}, {inp});
    const int k2 = tiny.fwd("aten::linalg_vector_norm", "M.b", {{act, 'r'}, {norm, 'w'}}, {act, norm});
    const int k3 = tiny.fwd("aten::div", "M.b", {{act, 'r'}, {norm, 'r'}, {quot, 'w'}}, {act, norm});
    tiny.fwd("aten::sum", "M", {{quot, 'r'}, {loss, 'w'}});
    const int k5 = tiny.bwd("aten::div_backward", "M.b", {{act, 'r'}, {norm, 'r'}, {g1, 'w'}});
    tiny.bwd("aten::mul", "M.b", {{g1, 'r'}, {temp, 'w'}});
    const int k7 = tiny.bwd("aten::norm_backward", "M.b", {{act, 'r'}, {norm, 'r'}, {g1, 'r'}, {g0, 'w'}});
    const int k8 = tiny.bwd("aten::mm_backward", "M.b", {{inp, 'r'}, {g0, 'r'}, {gx, 'w'}});
    tiny.meta("capture.unpacks", advisetest::id_pairs({{act, k5}, {norm, k5}, {inp, k8}}));
    tiny.meta("capture.pack_order", advisetest::id_pairs({{inp, k1}, {act, k2}, {norm, k2}, {act, k3}, {norm, k3}}));
    auto id = [](int kernel) { return std::to_string(kernel + 1); };
    if (save_unpacks)
        tiny.meta("capture.save_unpacks", "[" + id(k8) + "," + id(k7) + "," + id(k7) + "," + id(k5) + "," + id(k5) + "]");
    return tiny;
}

}  // namespace

TEST_CASE("streamed offload: a prefetch waits for its save's own unpack (capture.save_unpacks)",
          "[advise][transform]") {
    // Brought back by the norm's save of a at k7, x is not on the device while t (5000) lives at
    // k6; taken as unpacked at a's first unpack (k5), it was, 3000 higher. Without the meta (an
    // older capture) the prediction is the old one.
    Fixture with(normalize_step(true).done()), without(normalize_step(false).done());
    const int64_t peak = predict(with, streamed(1, 1)).memory.peak;
    CHECK(predict(without, streamed(1, 1)).memory.peak == peak + 3000);
    CHECK(sound(with, streamed(1, 1)));
}

TEST_CASE("capture.save_unpacks that does not match capture.pack_order is refused in one line", "[advise][transform]") {
    for (const char* bad : {"[1,2]", "[0,0,0,0,999]", "{}", "[0,0,0,0,\"k\"]"}) {
        advisetest::Step tiny = normalize_step(false);
        tiny.meta("capture.save_unpacks", bad);
        CHECK_THROWS_WITH(Fixture(tiny.done()), Catch::Contains("meta capture.save_unpacks"));
    }
}

TEST_CASE("streamed offload: saves in the order autograd packed them across ops (capture.pack_order)",
          "[advise][transform]") {
    //   k0 attn      mm    batch -> q (600)
    //   k1 attn      sdpa  q -> O (1000), L (600); saves q, O          k5 M    sum  Z -> loss
    //   k2 attn.proj mm    O -> P (600); the capture credits L's save here (no grad_fn: not
    //                      taken for k1's output)                       k6..k9 backward reads
    //   k3 mlp       gelu  P -> Y (600), workspace W (5000); saves P        Y, P, L, q+O+L
    //   k4 mlp       mm    Y -> Z (100); saves Y
    // Autograd packed q, L, O, P, Y (capture.pack_order: L before O, the sdpa's outputs). With a
    // stash of 2, L is let go at P's pack (before k3) and O at Y's (before k4): live at k3
    // batch 100 + O 1000 + P 600 + Y 600 + W 5000 = 7300. In the kernels' order (q, O, L) O went
    // at k3 and L at k4: 6900.
    Step tiny({{"M.attn", "Attention"}, {"M.attn.proj", "Linear"}, {"M.mlp", "MLP"}});
    const int batch = tiny.input(100, "batch");
    const int q = tiny.act(600, "q"), o = tiny.act(1000, "O"), lse = tiny.act(600, "L"), p = tiny.act(600, "P");
    const int y = tiny.act(600, "Y"), ws = tiny.work(5000, "W"), z = tiny.act(100, "Z");
    const int loss = tiny.work(10, "loss"), g1 = tiny.work(100, "g1"), g2 = tiny.work(100, "g2"), g3 = tiny.work(100, "g3");
    const int g0 = tiny.result(100, "g0");
    tiny.fwd("aten::mm", "M.attn", {{batch, 'r'}, {q, 'w'}});
    const int k1 = tiny.fwd("aten::_scaled_dot_product_flash_attention_for_cpu", "M.attn", {{q, 'r'}, {o, 'w'}, {lse, 'w'}}, {q, o});
    const int k2 = tiny.fwd("aten::mm", "M.attn.proj", {{o, 'r'}, {p, 'w'}}, {lse});
    const int k3 = tiny.fwd("aten::gelu", "M.mlp", {{p, 'r'}, {y, 'w'}, {ws, 'w'}}, {p});
    const int k4 = tiny.fwd("aten::mm", "M.mlp", {{y, 'r'}, {z, 'w'}}, {y});
    tiny.fwd("aten::sum", "M", {{z, 'r'}, {loss, 'w'}});
    const int k6 = tiny.bwd("aten::mm_backward", "M.mlp", {{y, 'r'}, {g1, 'w'}});
    const int k7 = tiny.bwd("aten::gelu_backward", "M.mlp", {{p, 'r'}, {g1, 'r'}, {g2, 'w'}});
    const int k8 = tiny.bwd("aten::mm_backward", "M.attn.proj", {{lse, 'r'}, {g2, 'r'}, {g3, 'w'}});
    tiny.bwd("aten::_scaled_dot_product_flash_attention_for_cpu_backward", "M.attn",
             {{q, 'r'}, {o, 'r'}, {lse, 'r'}, {g3, 'r'}, {g0, 'w'}});
    tiny.meta("capture.unpacks", id_pairs({{y, k6}, {p, k7}, {lse, k8}, {q, k8 + 1}, {o, k8 + 1}}));
    tiny.meta("capture.pack_order", id_pairs({{q, k1}, {lse, k2}, {o, k1}, {p, k3}, {y, k4}}));
    Fixture fix(tiny.done());
    CHECK(predict(fix, "{}").memory.peak == 8500);
    CHECK(predict(fix, streamed(2, 0)).memory.peak == 7300);
    CHECK(sound(fix, streamed(2, 0)));
}

namespace {

// The trace of the two tests below: t (1000 B) saved by blocks.0 (k2) and blocks.1 (k3), x (2000 B)
// by blocks.0 (k1); k6, blocks.0's mul_backward, credited to `k6_module`, with its peak at k5.
void prefetch_case(const char* k6_module) {
    Step tiny({{"M.emb", "Linear"}, {"M.blocks.0", "Block"}, {"M.blocks.1", "Block"}});
    if (std::string(k6_module) != "M.blocks.0") tiny.module(k6_module, "Conv2d");
    const int batch = tiny.input(100, "batch");
    const int temb = tiny.act(1000, "t"), saved_x = tiny.act(2000, "x"), o0 = tiny.act(100, "o0"), o1 = tiny.act(100, "o1");
    const int loss = tiny.work(10, "loss"), g1 = tiny.work(100, "g1"), ws = tiny.work(5000, "w"), g2 = tiny.work(100, "g2");
    const int g0 = tiny.result(100, "g0");
    tiny.fwd("aten::mm", "M.emb", {{batch, 'r'}, {temb, 'w'}});
    tiny.fwd("aten::relu", "M.blocks.0", {{batch, 'r'}, {saved_x, 'w'}}, {saved_x});
    tiny.fwd("aten::mul", "M.blocks.0", {{saved_x, 'r'}, {temb, 'r'}, {o0, 'w'}}, {temb});
    tiny.fwd("aten::mul", "M.blocks.1", {{o0, 'r'}, {temb, 'r'}, {o1, 'w'}}, {temb});
    tiny.fwd("aten::sum", "M", {{o1, 'r'}, {loss, 'w'}});
    const int k5 = tiny.bwd("aten::mul_backward", "M.blocks.1", {{temb, 'r'}, {g1, 'w'}, {ws, 'w'}});
    tiny.bwd("aten::mul_backward", k6_module, {{temb, 'r'}, {g1, 'r'}, {g2, 'w'}});
    const int k7 = tiny.bwd("aten::relu_backward", "M.blocks.0", {{saved_x, 'r'}, {g2, 'r'}, {g0, 'w'}});
    tiny.meta("capture.unpacks", id_pairs({{temb, k5}, {saved_x, k7}}));
    Fixture fix(tiny.done());
    CHECK(predict(fix, "{}").memory.peak == 8200);
    CHECK(predict(fix, streamed(1, 1)).memory.peak == 6200);
    CHECK(sound(fix, streamed(1, 1)));
}

}  // namespace

TEST_CASE("streamed offload: a prefetch waits for the unpack of the save it follows, not another save's of that storage",
          "[advise][transform]") {
    // t (1000 B, a time embedding) is saved by blocks.0 (k2) and blocks.1 (k3); x (2000 B) by
    // blocks.0 (k1, the pack before k2's):
    //   k0 emb      mm    batch -> t                k4 M        sum      o1 -> loss (10)
    //   k1 blocks.0 relu  batch -> x, saves x       k5 blocks.1 mul_bwd  t -> g1 (100), workspace w (5000)
    //   k2 blocks.0 mul   x, t -> o0 (100), saves t k6 blocks.0 mul_bwd  t, g1 -> g2 (100)
    //   k3 blocks.1 mul   o0, t -> o1 (100), saves t k7 blocks.0 relu_bwd x, g2 -> g0 (100)
    // With prefetch 1, unpacking k2's save of t brings x back: that is blocks.0's node (k6), not
    // t's first unpack (blocks.1's, k5). At k5: batch 100 + t's copy 1000 + w 5000 + g1 100 =
    // 6200. Before, x came back at k5 too: 8200, as captured without offload.
    prefetch_case("M.blocks.0");
}

TEST_CASE("streamed offload: a prefetch finds its save's unpack under a module inside the saving op's",
          "[advise][transform]") {
    // The test above with blocks.0's mul_backward (k6) credited to blocks.0.skip, a module inside
    // blocks.0 (a capture credits a backward kernel to the module whose backward ran last: the
    // diffusion UNet's ResBlock silu_backward of the time embedding runs under its skip conv's).
    // Unpacking k2's save of t still brings x back at k6: 6200 at k5. Before, k6 was not found
    // under blocks.0 and x came back at t's first unpack (k5, blocks.1's): 8200.
    prefetch_case("M.blocks.0.skip");
}

TEST_CASE("streamed offload: the copies back at one unpack in the hook's order, the unpacked save first",
          "[advise][transform]") {
    //   k0 blocks.0 relu  batch -> x1 (1000), saves x1     k4 M        sum      y -> loss (10)
    //   k1 blocks.0 relu  x1 -> x2 (2000), saves x2        k5 blocks.0 mul_bwd  y -> g (100)
    //   k2 blocks.0 relu  x2 -> y (3000), saves y          k6 blocks.0 relu_bwd x2, g -> g2 (100)
    //   (k3 blocks.0 relu  y -> z (600), saves nothing)     k7 blocks.0 relu_bwd x1, g2 -> g1 (100)
    // With prefetch 2, unpacking y (k5) copies y back on demand, then x2 and x1, the saves before
    // it nearest first (python/mhc_torch/offload.py, _unpack): three device copies made at k5's
    // start, in the order 3000, 2000, 1000 (and freed at one instant in that order too). Before,
    // they were added in forward order (1000, 2000, 3000), and the expandable segments' model
    // placed them apart from the capture (the UNet's offload of everything: reserved 922 MiB
    // predicted, 1022 MiB captured).
    Step tiny({{"M.blocks.0", "Block"}});
    const int batch = tiny.input(100, "batch");
    const int x1 = tiny.act(1000, "x1"), x2 = tiny.act(2000, "x2"), out_y = tiny.act(3000, "y"), out_z = tiny.act(600, "z");
    const int loss = tiny.work(10, "loss"), grad = tiny.work(100, "g"), g2 = tiny.work(100, "g2"), g1 = tiny.result(100, "g1");
    tiny.fwd("aten::relu", "M.blocks.0", {{batch, 'r'}, {x1, 'w'}}, {x1});
    tiny.fwd("aten::relu", "M.blocks.0", {{x1, 'r'}, {x2, 'w'}}, {x2});
    tiny.fwd("aten::relu", "M.blocks.0", {{x2, 'r'}, {out_y, 'w'}}, {out_y});
    tiny.fwd("aten::relu", "M.blocks.0", {{out_y, 'r'}, {out_z, 'w'}});
    tiny.fwd("aten::sum", "M", {{out_z, 'r'}, {loss, 'w'}});
    const int k5 = tiny.bwd("aten::mul_backward", "M.blocks.0", {{out_y, 'r'}, {grad, 'w'}});
    const int k6 = tiny.bwd("aten::relu_backward", "M.blocks.0", {{x2, 'r'}, {grad, 'r'}, {g2, 'w'}});
    const int k7 = tiny.bwd("aten::relu_backward", "M.blocks.0", {{x1, 'r'}, {g2, 'r'}, {g1, 'w'}});
    tiny.meta("capture.unpacks", id_pairs({{out_y, k5}, {x2, k6}, {x1, k7}}));
    Fixture fix(tiny.done());
    mhc::trace::TraceData tr = fix.ev().trace(parse_setting(streamed(1, 2)));
    REQUIRE(mhc::trace::check_trace(tr).ok());
    // device rows of these sizes in row order: the originals (x1, x2, y), then the copies back
    std::vector<int64_t> rows;
    for (size_t r = 0; r < tr.allocations.size(); ++r) {
        const int64_t bytes = tr.allocations.bytes[r];
        if (tr.allocations.device[r] >= 0 && (bytes == 1000 || bytes == 2000 || bytes == 3000))
            rows.push_back(static_cast<int64_t>(r));
    }
    REQUIRE(rows.size() == 6);
    std::vector<int64_t> back;
    for (size_t i = 3; i < rows.size(); ++i) {
        CHECK(tr.allocations.t_alloc[static_cast<size_t>(rows[i])] == tr.allocations.t_alloc[static_cast<size_t>(rows[3])]);
        back.push_back(tr.allocations.bytes[static_cast<size_t>(rows[i])]);
    }
    CHECK(back == std::vector<int64_t>{3000, 2000, 1000});
}

TEST_CASE("streamed offload: a copy back dies when its node's apply returns, before the engine casts the gradient",
          "[advise][transform]") {
    //   k0 blocks.0 relu          batch -> x (1000), saves x
    //   k1 M        sum           x -> loss (10)
    //   k2 blocks.0 relu_backward x -> g (100)
    //   k3 blocks.0 _to_copy      g -> g16 (5000)   (the engine's cast of the gradient to its input's dtype)
    // The captured x is freed after k3: the engine releases the node's saved variables after
    // validate_outputs, which sums and casts the gradients (aten::sum, aten::_to_copy). The hook's
    // device copy is only the node's temporary and dies when its apply returns, after k2: at k3
    // batch 100 + g 100 + g16 5000 = 5200. Before, only aten::sum kernels were taken off the
    // recorded free: 6200 (ConvNeXt's layer-scale MulBackward, whose gradient is cast: offloading
    // everything with expandable segments predicted 826 MiB reserved against 786 MiB captured).
    Step tiny({{"M.blocks.0", "Block"}});
    const int batch = tiny.input(100, "batch");
    const int act = tiny.act(1000, "x", 3);   // the captured free, after k3
    const int loss = tiny.work(10, "loss"), grad = tiny.work(100, "g"), g16 = tiny.result(5000, "g16");
    tiny.fwd("aten::relu", "M.blocks.0", {{batch, 'r'}, {act, 'w'}}, {act});
    tiny.fwd("aten::sum", "M", {{act, 'r'}, {loss, 'w'}});
    const int k2 = tiny.bwd("aten::relu_backward", "M.blocks.0", {{act, 'r'}, {grad, 'w'}});
    tiny.bwd("aten::_to_copy", "M.blocks.0", {{grad, 'r'}, {g16, 'w'}});
    tiny.meta("capture.unpacks", id_pairs({{act, k2}}));
    Fixture fix(tiny.done());
    CHECK(predict(fix, "{}").memory.peak == 6200);
    CHECK(predict(fix, streamed(1, 0)).memory.peak == 5200);
    CHECK(sound(fix, streamed(1, 0)));
}

TEST_CASE("offload: a saved storage the program reads after its pass stays on the device", "[advise][transform]") {
    // s (1000 B) is made in the forward (k0), saved by k1 and read by the backward (k2), and read
    // again by k3, a forward-phase kernel after the backward (a pass of its own, as GradScaler's
    // unscale reads its scale): the program holds s, so it does not die. Before, it died at its
    // last forward use (k1) and came back as a copy the backward read, while k3 read the freed
    // original: an invalid step ("access-outside-lifetime"). Now: sync D2H after k1, the host
    // copy freed at k2:
    //   k0 [0,10], k1 [10,20], D2H [20,1020], k2 [1020,1030], k3 [1030,1040].
    Step tiny({{"M.blocks.0", "Block"}});
    const int batch = tiny.input(100, "batch");
    const int st = tiny.act(1000, "s"), out = tiny.act(100, "o"), grad = tiny.result(100, "g"), un = tiny.result(10, "u");
    tiny.fwd("aten::full", "M.blocks.0", {{batch, 'r'}, {st, 'w'}});
    tiny.fwd("aten::mul", "M.blocks.0", {{st, 'r'}, {out, 'w'}}, {st});
    tiny.bwd("aten::mul", "M.blocks.0", {{st, 'r'}, {out, 'r'}, {grad, 'w'}});
    tiny.fwd("aten::reciprocal", "", {{st, 'r'}, {un, 'w'}});
    Fixture fix(tiny.done());
    const Prediction before = predict(fix, "{}");
    Prediction pred = predict(fix, R"({"offload": {"mode": "sync", "modules": null, "min_bytes": 500}})");
    CHECK(pred.memory.peak == before.memory.peak);
    CHECK(pred.host_peak == 1000);
    CHECK(pred.step_time == 1040);
    CHECK(pred.h2d_bytes == 0);
}

TEST_CASE("offload: an input of a checkpoint under the hook comes back for its recomputation", "[advise][transform]") {
    // h (1000 B, made by k0) is read by the checkpointed inner module (k1, which saves its own
    // output m) and saved by k2 outside it. The checkpoint packs its input h through the hook
    // around it before k1 runs, so h dies on the device at its last forward use (k2) and comes back
    // when the recomputation k1' starts (checkpoint's get_inputs), before k4, the first backward
    // use of m; k4 reads the same copy. (Until 2026-12-05 h died at k2 and came back before k4,
    // after k1' had read the freed original: an invalid step; then, until 2026-12-06, it stayed on
    // the device, held by the checkpoint's frame, which under the hook holds only the packed copy.)
    //   k0 [0,10], D2H [10,1010], k1 [1010,1020], k2 [1020,1030], k3 [1030,1040],
    //   H2D [1040,2040], k1' [2040,2050], k4 [2050,2060], k5 [2060,2070].
    Step tiny({{"M.blocks.0", "Block"}, {"M.blocks.0.inner", "Norm"}});
    const int batch = tiny.input(100, "batch");
    const int hid = tiny.act(1000, "h"), mid = tiny.act(100, "m"), out = tiny.act(100, "o");
    const int loss = tiny.work(10, "loss"), grad = tiny.work(100, "g"), grad_h = tiny.result(100, "gh");
    tiny.fwd("aten::mm", "M.blocks.0", {{batch, 'r'}, {hid, 'w'}});
    tiny.fwd("aten::rsqrt", "M.blocks.0.inner", {{hid, 'r'}, {mid, 'w'}}, {mid});
    tiny.fwd("aten::mul", "M.blocks.0", {{hid, 'r'}, {mid, 'r'}, {out, 'w'}}, {hid});
    tiny.fwd("aten::sum", "M", {{out, 'r'}, {loss, 'w'}});
    tiny.bwd("aten::mul", "M.blocks.0", {{hid, 'r'}, {mid, 'r'}, {grad, 'w'}});
    tiny.bwd("aten::rsqrt_backward", "M.blocks.0.inner", {{hid, 'r'}, {mid, 'r'}, {grad, 'r'}, {grad_h, 'w'}});
    Fixture fix(tiny.done());
    Prediction pred = predict(fix, R"({"checkpoint": {"modules": ["M.blocks.0.inner"], "policy": "full"},
                                  "offload": {"mode": "sync", "modules": null, "min_bytes": 500}})");
    CHECK(pred.step_time == 2070);
    CHECK(pred.host_peak == 1000);
    CHECK(pred.h2d_bytes == 1000);
    CHECK(pred.d2h_bytes == 1000);
    CHECK(mhc::trace::check_trace(fix.ev().trace(parse_setting(R"({"checkpoint": {"modules": ["M.blocks.0.inner"]},
        "offload": {"mode": "sync", "modules": null, "min_bytes": 500}})"))).ok());
}

TEST_CASE("fused AdamW: the foreach temporaries are gone, one kernel steps everything", "[advise][transform]") {
    TinyTrace t = advisetest::chain({8}, true);
    t.meta = {{"capture.gpu.hbm_bw", "1e9"}, {"capture.launch_overhead_ns", "0"}};
    Fixture f(t);
    // Worked out in MiB: step 1 peaks at its optimizer, p 64 + batches 32 + grad 64 + m, v 128
    // + the sqrt temporary 64 = 352; fused has no temporary: 304 (its backward's 304 too).
    CHECK(predict(f, "{}").memory.peak == 352 * MiB);
    Prediction p = predict(f, R"({"optimizer": {"impl": "fused"}})");
    CHECK(p.memory.peak == 304 * MiB);
    // two kernels a step become one reading grad and reading and writing p, m, v:
    // 64 + 2 x 192 MiB at 1 B/ns
    CHECK(p.step_time == 160 - 40 + 2 * 448 * MiB);
}

TEST_CASE("optimizer on the host: gradients leave at once, state and step on the host", "[advise][transform]") {
    TinyTrace t = advisetest::chain({8}, true);
    Fixture f(t);
    HostModel host;
    host.bandwidth_Bps = 1e9;
    host.per_tensor_s = 1e-6;
    Prediction p = predict(f, R"({"optimizer": {"state": "host"}})", host);
    // step 1's backward: p 64 + batches 32 + a' 8 + g' 16 + grad 64 = 176 MiB, nothing after
    CHECK(p.memory.peak == 176 * MiB);
    // host: master p, grad buffer, m, v, and while the host step runs its temporaries (the
    // recorded step's most at once: the sqrt's 64 MiB), with m and v made by the first host step
    // (they were captured at zeros_like kernels after it): 5 x 64 MiB
    CHECK(p.host_peak == 320 * MiB);
    // per step: 5 kernels, the grad's D2H (64 MiB), the host step (448 MiB at 1 B/ns and 1 us
    // for its one parameter tensor), the parameters' H2D (64 MiB)
    CHECK(p.step_time == 2 * (50 + 64 * MiB + 448 * MiB + 1000 + 64 * MiB));
}

TEST_CASE("optimizer on the host: the step's time depends on the implementation it runs", "[advise][transform]") {
    // The bandwidth is the for-loop's (what the host runs for torch.optim's classes); the fused
    // and foreach steps stream the same bytes in their measured share of its time
    // (mhc::advise::host_impl_factor). Until 2026-12-07 all three took the for-loop's 448 MiB.
    TinyTrace tiny = advisetest::chain({8}, true);
    tiny.meta = {{"capture.optimizer_class", "torch.optim.adamw.AdamW"},
                 {"capture.optimizer_defaults", R"({"lr": 0.001, "foreach": true})"}};
    Fixture fix(tiny);
    HostModel host;
    host.bandwidth_Bps = 1e9;
    host.per_tensor_s = 1e-6;
    const auto bytes_ns = [](HostImpl impl) {
        return static_cast<int64_t>(static_cast<double>(448 * MiB) / 1e9 * 1e9 *
                                    host_impl_factor(impl, "torch.optim.adamw.AdamW"));
    };
    for (const auto& [impl, setting] : std::vector<std::pair<HostImpl, std::string>>{
             {HostImpl::Forloop, R"({"optimizer": {"state": "host"}})"},
             {HostImpl::Foreach, R"({"optimizer": {"state": "host", "impl": "foreach"}})"},
             {HostImpl::Fused, R"({"optimizer": {"state": "host", "impl": "fused"}})"}}) {
        CAPTURE(setting);
        const Prediction pred = predict(fix, setting, host);
        CHECK(pred.step_time == 2 * (50 + 64 * MiB + bytes_ns(impl) + 1000 + 64 * MiB));
    }
    CHECK(host_impl_factor(HostImpl::Foreach, "torch.optim.adamw.AdamW") == 1.0);
    // fused streams AdamW's bytes several times faster (412.9 against 2,325.0 ms of CPU)
    CHECK(host_impl_factor(HostImpl::Fused, "torch.optim.adamw.AdamW") == 0.18);
    CHECK(host_impl_factor(HostImpl::Fused, "torch.optim.sgd.SGD") == 0.53);
}

TEST_CASE("optimizer on the host: 16-bit parameters are stepped as fp32 copies", "[advise][transform]") {
    // mhc_torch.apply's host optimizer steps fp32 master copies, with fp32 gradient buffers,
    // state and temporaries: a bf16 parameter of 64 MiB takes 128 MiB in each (the prediction was
    // 49,176 B of host memory where the capture of a bf16 tiny net held 122,904 B).
    TinyTrace tiny = advisetest::chain({8}, true);
    tiny.meta = {{"capture.optimizer_dtype", "bfloat16"}};
    Fixture fix(tiny);
    HostModel host;
    host.bandwidth_Bps = 1e9;
    host.per_tensor_s = 1e-6;
    Prediction pred = predict(fix, R"({"optimizer": {"state": "host"}})", host);
    CHECK(pred.memory.peak == 176 * MiB);   // the device is as for fp32 (the trace's bytes)
    CHECK(pred.host_peak == 640 * MiB);     // 2 x (master, grad buffer, m, v, temporaries)
    // the host step streams the fp32 copies: 2 x 448 MiB; the copies move the device's bytes
    CHECK(pred.step_time == 2 * (50 + 64 * MiB + 2 * 448 * MiB + 1000 + 64 * MiB));
}

TEST_CASE("optimizer on the host: torch.optim's classes step the copies with their for-loop", "[advise][transform]") {
    // mhc_torch.apply steps the host copies of torch.optim's Adam with its for-loop whatever the
    // user's foreach, and with capturable off (CPU tensors do not take it): one parameter's sqrt and
    // quotient at once (2 x 64 MiB here), where the recorded foreach step's temporaries (one sqrt
    // per parameter, all at once) were taken until 2026-12-07. A class of the user's own keeps its
    // foreach, so its recorded step's temporaries.
    HostModel host;
    host.bandwidth_Bps = 1e9;
    host.per_tensor_s = 1e-6;
    const std::string defaults = R"({"lr": 0.001, "weight_decay": 0, "foreach": true, "capturable": true})";
    for (const auto& [cls, temporaries] : std::vector<std::pair<std::string, int64_t>>{
             {"torch.optim.adam.Adam", 2 * 64 * MiB}, {"mine.MyAdam", 64 * MiB}}) {
        TinyTrace tiny = advisetest::chain({8}, true);
        tiny.meta = {{"capture.optimizer_class", cls}, {"capture.optimizer_defaults", defaults}};
        Fixture fix(tiny);
        CAPTURE(cls);
        // master, grad buffer, m, v and the step's temporaries
        CHECK(predict(fix, R"({"optimizer": {"state": "host"}})", host).host_peak == 4 * 64 * MiB + temporaries);
    }
}

TEST_CASE("settings that cannot apply are bad input naming the field", "[advise][transform]") {
    Fixture f(advisetest::two_blocks());
    CHECK_THROWS_WITH(predict(f, R"({"checkpoint": {"modules": ["M.blocks.7"]}})"),
                      Catch::Contains("field 'checkpoint.modules': the model has no module 'M.blocks.7'"));
    CHECK_THROWS_WITH(predict(f, R"({"offload": {"modules": ["nope"]}})"), Catch::Contains("field 'offload.modules'"));
    CHECK_THROWS_WITH(predict(f, R"({"checkpoint": {"modules": ["M", "M.blocks.0"]}})"), Catch::Contains("overlap"));
    CHECK_THROWS_WITH(predict(f, R"({"optimizer": {"impl": "fused"}})"), Catch::Contains("neither foreach nor fused"));
    CHECK_THROWS_WITH(predict(f, R"({"optimizer": {"state": "host"}})"), Catch::Contains("no optimizer step"));
    CHECK_THROWS_WITH(predict(f, R"({"weights": "bf16"})"), Catch::Contains("field 'weights'"));
}

TEST_CASE("a trace that is not a model capture is refused in one line", "[advise][transform]") {
    mhc::test::TempPath path{"plain.db"};
    TinyTrace t = advisetest::two_blocks();
    t.modules.clear();
    t.write(path.path);
    auto data = mhc::trace::load_checked_trace(path.path);
    CHECK_THROWS_WITH(make_base(data), Catch::Contains("no modules recorded") && Catch::Contains("mhc-torch capture"));
}

TEST_CASE("blocks: every stack of layers of one type, in forward order (an encoder's and a decoder's)",
          "[advise][transform]") {
    // enc.0, enc.1 run first (one kernel each), then dec.0, dec.1 (two each: the decoder has the
    // most forward kernels); the nested "enc.0.parts.0/1" (two types) are not a stack of their own.
    TinyTrace tiny;
    tiny.modules = {{"M", "EncDec"},      {"M.enc.0", "Layer"}, {"M.enc.0.parts.0", "A"}, {"M.enc.0.parts.1", "B"},
                    {"M.enc.1", "Layer"}, {"M.dec.0", "Layer"}, {"M.dec.1", "Layer"}};
    const int batch = tiny.alloc(100, Category::Other, "batch", -1, -1);
    std::vector<int> out;
    const char* mods[] = {"M.enc.0.parts.0", "M.enc.1", "M.dec.0", "M.dec.0", "M.dec.1", "M.dec.1"};
    for (int k = 0; k < 6; ++k) {
        out.push_back(tiny.alloc(100, Category::Activation, "a" + std::to_string(k), k, 6 + (5 - k)));
        tiny.kernel({"aten::mm",
                     mods[k],
                     Phase::Forward,
                     {{k ? out[static_cast<size_t>(k - 1)] : batch, 'r'}, {out.back(), 'w'}},
                     {out.back()}});
    }
    for (int k = 5; k >= 0; --k)
        tiny.kernel(
            {"aten::mm_backward", mods[k], Phase::Backward, {{out[static_cast<size_t>(k)], 'r'}}, {}});
    Fixture fix(tiny);
    CHECK(fix.base.info.block_name == std::vector<std::string>{"M.enc.0", "M.enc.1", "M.dec.0", "M.dec.1"});
    CHECK(fix.base.info.block_prefix == "M.dec, M.enc");
    CHECK(predict(fix, R"({"checkpoint": {"modules": ["M.enc.0", "M.dec.1"]}})").memory.peak > 0);
}

TEST_CASE("gradient accumulation: checkpointing and offloading act in each micro-batch's pass", "[advise][transform]") {
    // two forward and backward passes of two_blocks in one step (micro-batches), k7..k13 the
    // second; the first pass's g0 (a gradient) stays alive through the second, as accumulated
    // gradients do. They were refused ("gradient accumulation ... not modelled").
    TinyTrace tiny = advisetest::two_blocks();
    const size_t nk = tiny.kernels.size(), na = tiny.allocs.size();
    for (size_t idx = 1; idx < na; ++idx) {   // the second pass's storages, 7 kernels later
        advisetest::TinyAlloc copy = tiny.allocs[idx];
        copy.made_at += static_cast<int>(nk);
        copy.freed_after = copy.freed_after < 0 ? -1 : copy.freed_after + static_cast<int>(nk);
        copy.label += "'";
        tiny.allocs.push_back(copy);
    }
    for (size_t k = 0; k < nk; ++k) {
        advisetest::TinyKernel copy = tiny.kernels[k];
        for (auto& [alloc, mode] : copy.acc) alloc = alloc == 0 ? 0 : alloc + static_cast<int>(na) - 1;
        for (int& alloc : copy.saves) alloc += static_cast<int>(na) - 1;
        tiny.kernels.push_back(copy);
    }
    Fixture fix(tiny);
    CHECK(fix.base.passes == 2);
    CHECK(fix.base.pass_step.size() == 2);
    CHECK(fix.base.pass[6] == 0);
    CHECK(fix.base.pass[7] == 1);
    // as captured: the first pass as two_blocks (peak 3210); the second the same plus the first
    // pass's g0 (100): 1200, 1300, 3300, 3300, 3310, 3300, 1400: peak 3310, 140 ns
    Prediction p0 = predict(fix, "{}");
    CHECK(p0.memory.peak == 3310);
    CHECK(p0.step_time == 140);
    // checkpoint blocks.1 in each pass (two_blocks' case: peak 3300, 80 ns): the second pass
    // 100 B higher, 3400; 2 x 80 ns; two recomputations (a kernel more each)
    const std::string ckpt = R"({"checkpoint": {"modules": ["M.blocks.1"]}})";
    Prediction with_ckpt = predict(fix, ckpt);
    CHECK(with_ckpt.memory.peak == 3400);
    CHECK(with_ckpt.step_time == 160);
    mhc::trace::TraceData out = fix.ev().trace(parse_setting(ckpt));
    CHECK(out.kernels.size() == 16);
    CHECK(mhc::trace::check_trace(out).ok());
    CHECK(out.str(out.kernels.name[5]) == "aten::mm");    // pass 1's recomputation before its backward
    CHECK(out.str(out.kernels.name[13]) == "aten::mm");   // pass 2's before its own
    // sync offload of blocks.0 (two_blocks' case: peak 2210, 2070 ns, 1000 B each way): per pass
    const std::string off = R"({"offload": {"mode": "sync", "modules": ["M.blocks.0"], "min_bytes": 500}})";
    Prediction with_off = predict(fix, off);
    CHECK(with_off.memory.peak == 2310);
    CHECK(with_off.step_time == 4140);
    CHECK(with_off.d2h_bytes == 2000);
    CHECK(with_off.h2d_bytes == 2000);
    CHECK(with_off.host_peak == 1000);
    CHECK(sound(fix, off));
    CHECK(Fixture(advisetest::two_blocks()).base.passes == 1);
}

namespace {

// A weight cast in blocks.0 and saved by its LayerNorm (both bytes given):
//   k0 blocks.0 _to_copy  w -> c           k3 M        sum       o -> loss (10)
//   k1 blocks.0 layer_norm x, c -> h (1000), saves c   k4 blocks.1 mm_backward h -> g1 (100)
//   k2 blocks.1 mm  h -> o (500), saves h  k5 blocks.0 ln_backward c, g1 -> g0 (100)
// g0 is w's gradient ("w.grad"), or, for a frozen w, another parameter's ("u.grad").
TinyTrace cast_weight(int64_t weight_bytes, int64_t cast_bytes, bool frozen = false) {
    Step tiny({{"M.blocks.0", "Block"}, {"M.blocks.1", "Block"}});
    const int weight = tiny.param(weight_bytes, "w"), batch = tiny.input(100, "batch");
    const int cast = tiny.act(cast_bytes, "c"), hidden = tiny.act(1000, "h"), out = tiny.act(500, "o");
    const int loss = tiny.work(10, "loss"), g1 = tiny.work(100, "g1");
    const int g0 = tiny.result(100, frozen ? "u.grad" : "w.grad", Category::Grad);
    tiny.fwd("aten::_to_copy", "M.blocks.0", {{weight, 'r'}, {cast, 'w'}});
    tiny.fwd("aten::native_layer_norm", "M.blocks.0", {{batch, 'r'}, {cast, 'r'}, {hidden, 'w'}}, {cast});
    tiny.fwd("aten::mm", "M.blocks.1", {{hidden, 'r'}, {out, 'w'}}, {hidden});
    tiny.fwd("aten::sum", "M", {{out, 'r'}, {loss, 'w'}});
    tiny.bwd("aten::mm_backward", "M.blocks.1", {{hidden, 'r'}, {g1, 'w'}});
    tiny.bwd("aten::native_layer_norm_backward", "M.blocks.0", {{cast, 'r'}, {g1, 'r'}, {g0, 'w'}});
    return tiny.done();
}

}   // namespace

TEST_CASE("checkpoint: a weight's upcast, or a frozen weight's cast, is not autocast's cached copy",
          "[advise][transform]") {
    const std::string ckpt = R"({"checkpoint": {"modules": ["M.blocks.0"]}})";
    // bf16 weight (2048 B) cast up to fp32 (4096 B) for LayerNorm: autocast caches only casts
    // down, so under checkpointing c dies after k1, its last forward use (it was kept to the
    // forward's end, k3, as autocast's cache: 2148 + 4096 + 1000 + 500 + 10 = 7754 there).
    // w, x 2148 throughout: k0 6244, k1 7244, k2 3648, k3 3658, k4 3248 (h dies after it);
    // the recompute before k5 is k0 alone (k1 packs its input c, the early stop): r0 c' 2148 +
    // g1 100 + 4096 = 6344; k5 6444. Peak 7244 at k1.
    Fixture up(cast_weight(2048, 4096));
    CHECK(predict(up, "{}").memory.peak == 7754);
    CHECK(predict(up, ckpt).memory.peak == 7244);
    // an fp32 weight (8192 B) cast down (4096 B) is the cached copy, kept to the forward's end:
    // k3 8292 + 4096 + 1000 + 500 + 10 = 13898
    Fixture down(cast_weight(8192, 4096));
    CHECK(predict(down, ckpt).memory.peak == 13898);
    // a frozen weight (no gradient: LoRA's base weights) is cast anew each time, not cached:
    // c dies after k1: k1 8292 + 4096 + 1000 = 13388 the peak (k3 9802, r0 12488, k5 12588)
    Fixture frozen(cast_weight(8192, 4096, true));
    CHECK(predict(frozen, ckpt).memory.peak == 13388);
}

namespace {

// A cell called twice a pass under autocast (an RNN decoder's nn.LSTMCell): autocast casts its
// weight w in the first call (k0) and serves the second call from its cache.
//   k0 cell _to_copy  w -> c (4096)        k3 M    sum  h2 -> loss (10)
//   k1 cell mm  x, c -> h1 (1000), saves x, c      k4 cell mm_backward (call 2) c, h1 -> g1 (3000)
//   k2 cell mm  h1, c -> h2 (1000), saves h1, c    k5 cell mm_backward (call 1) c, x, g1 -> g0 (100)
// w 8192 and x 100 live throughout (8292).
TinyTrace cached_cast_cell() {
    Step tiny({{"M.cell", "LSTMCell"}});
    tiny.meta("capture.autocast", "bfloat16");
    tiny.meta("capture.module_calls", R"({"M.cell": [1, 3]})");
    const int weight = tiny.param(8192, "w"), batch = tiny.input(100, "batch");
    const int cast = tiny.act(4096, "c"), h1 = tiny.act(1000, "h1"), h2 = tiny.act(1000, "h2");
    const int loss = tiny.work(10, "loss"), g1 = tiny.work(3000, "g1"), g0 = tiny.result(100, "w.grad", Category::Grad);
    tiny.fwd("aten::_to_copy", "M.cell", {{weight, 'r'}, {cast, 'w'}});
    tiny.fwd("aten::mm", "M.cell", {{batch, 'r'}, {cast, 'r'}, {h1, 'w'}}, {batch, cast});
    tiny.fwd("aten::mm", "M.cell", {{h1, 'r'}, {cast, 'r'}, {h2, 'w'}}, {h1, cast});
    tiny.fwd("aten::sum", "M", {{h2, 'r'}, {loss, 'w'}});
    tiny.bwd("aten::mm_backward", "M.cell", {{cast, 'r'}, {h1, 'r'}, {g1, 'w'}});
    tiny.bwd("aten::mm_backward", "M.cell", {{cast, 'r'}, {batch, 'r'}, {g1, 'r'}, {g0, 'w'}});
    return tiny.done();
}

}   // namespace

TEST_CASE("checkpoint: each recomputation of a cell called many times under autocast casts its weights anew",
          "[advise][transform]") {
    // torch.utils.checkpoint recomputes each call inside an autocast region of its own, outside the
    // forward's: the cache is empty there and cleared when the region ends. So the forward's cast c
    // dies with the forward's autocast region (k3: nothing the checkpoints keep holds it), and each
    // recomputation casts w again (c2' before k4, c1' before k5), the copy living until the
    // backward node that unpacked it returns.
    //   k3 8292 + c 4096 + h1 1000 + h2 1000 + loss 10 = 14398; after it 8292 + h1 (call 2's input) = 9292
    //   r(call 2): cast c2' 13388 (the stop k2 packs h1 and c2' before its kernel: not rerun)
    //   k4 + g1 3000 = 16388; after it c2' and h1 die: 11292
    //   r(call 1): cast c1' 15388 (k1 packs its inputs: the stop); k5 + g0 100 = 15488. Peak 16388.
    // (Holding the forward's c through the backward, as if autocast's cache outlived the forward,
    // gave 8292 + 4096 + 3000 + c1' 4096 = 19484 at call 1's recomputation.)
    Fixture fix(cached_cast_cell());
    CHECK(predict(fix, "{}").memory.peak == 16388);
    const std::string ckpt = R"({"checkpoint": {"modules": ["M.cell"]}})";
    CHECK(predict(fix, ckpt).memory.peak == 16388);
    const mhc::trace::TraceData out = fix.ev().trace(parse_setting(ckpt));
    CHECK(mhc::trace::check_trace(out).ok());
    int casts = 0;
    for (size_t k = 0; k < out.kernels.size(); ++k) casts += out.str(out.kernels.name[k]) == "aten::_to_copy";
    CHECK(casts == 3);   // the forward's and one per recomputation
    CHECK(out.kernels.size() == 8);
}

TEST_CASE("checkpoint: a linear called twice under autocast: the node reading the shared weight first "
          "triggers the call's recomputation, and the bias's cached cast is no input of the call",
          "[advise][transform]") {
    // A Linear called twice (M.lin): autocast casts w (c) and the bias (cb) in the first call only.
    //   k0 lin _to_copy w -> c (4096)          k5 lin mm (call 2's node: input's gradient) c -> gh1 (1000)
    //   k1 lin _to_copy bias -> cb (200)       k6 lin mm (call 2's node: w's) h1, gh1 -> w.grad 8192, bias.grad 400
    //   k2 lin addmm x, c, cb -> h1 (1000), saves x, c    k7 lin mm (call 1's node) c, gh1 -> gx (100)
    //   k3 lin addmm h1, c, cb -> h2 (1000), saves h1, c  k8 lin mm (call 1's node) x, gh1 -> w.grad
    //   k4 M sum h2 -> loss (10)
    // capture.unpacks: each node unpacks before its first kernel (h1 before k5, x before k7).
    Step tiny({{"M.lin", "Linear"}});
    const int weight = tiny.param(8192, "w"), bias = tiny.param(400, "bias"), batch = tiny.input(100, "batch");
    const int cast = tiny.act(4096, "c");
    const int bcast = tiny.work(200, "cb", 4);   // autocast's cache holds it to the forward's end (k4)
    const int h1 = tiny.act(1000, "h1"), h2 = tiny.act(1000, "h2");
    const int loss = tiny.work(10, "loss"), gh1 = tiny.work(1000, "gh1");
    const int wgrad = tiny.result(8192, "w.grad", Category::Grad), bgrad = tiny.result(400, "bias.grad", Category::Grad);
    const int gx = tiny.work(100, "gx");
    tiny.meta("capture.autocast", "bfloat16");
    tiny.meta("capture.module_calls", R"({"M.lin": [1, 4]})");
    tiny.fwd("aten::_to_copy", "M.lin", {{weight, 'r'}, {cast, 'w'}});
    tiny.fwd("aten::_to_copy", "M.lin", {{bias, 'r'}, {bcast, 'w'}});
    tiny.fwd("aten::addmm", "M.lin", {{batch, 'r'}, {cast, 'r'}, {bcast, 'r'}, {h1, 'w'}}, {batch, cast});
    tiny.fwd("aten::addmm", "M.lin", {{h1, 'r'}, {cast, 'r'}, {bcast, 'r'}, {h2, 'w'}}, {h1, cast});
    tiny.fwd("aten::sum", "M", {{h2, 'r'}, {loss, 'w'}});
    const int k5 = tiny.bwd("aten::mm", "M.lin", {{cast, 'r'}, {gh1, 'w'}});
    tiny.bwd("aten::mm", "M.lin", {{h1, 'r'}, {gh1, 'r'}, {wgrad, 'w'}, {bgrad, 'w'}});
    const int k7 = tiny.bwd("aten::mm", "M.lin", {{cast, 'r'}, {gh1, 'r'}, {gx, 'w'}});
    tiny.bwd("aten::mm", "M.lin", {{batch, 'r'}, {gh1, 'r'}, {wgrad, 'x'}});
    tiny.meta("capture.unpacks", id_pairs({{h1, k5}, {batch, k7}}));
    Fixture fix(tiny.done());
    // w, bias, x: 8692 throughout. Forward: k3 14988, k4 14998; then loss, h2, c and cb die (the
    // forward's autocast region ends; no checkpoint holds cb): 9692 (h1, call 2's input).
    // Call 2's recomputation before k5 (h1's unpack): c2' then cb2' (one op's casts, in their
    // order; the stop k3 packs its inputs: not rerun): 13988; cb2' dies at its end. k5 reads c2'
    // and writes gh1: 14788; c2' dies after it: 10692. k6 + 8592 = 19284; h1 dies: 18284.
    // Call 1's recomputation before k7 (x's unpack): k0' c1' 22380, k1' cb1' 22580 (the peak);
    // cb1' dies there; k7 reads c1' (+ gx 100: 22480), then c1' dies; k8 18284.
    const std::string ckpt = R"({"checkpoint": {"modules": ["M.lin"]}})";
    CHECK(predict(fix, ckpt).memory.peak == 22580);
    const mhc::trace::TraceData out = fix.ev().trace(parse_setting(ckpt));
    CHECK(mhc::trace::check_trace(out).ok());
    CHECK(out.kernels.size() == 13);
    // the forward's cb dies with the forward (after k4), not with call 2's backward (after k6)
    int64_t forward_end = -1, cb_free = -1, cb_made = INT64_MAX;
    for (size_t k = 0; k < out.kernels.size(); ++k)
        if (out.str(out.kernels.name[k]) == "aten::sum") forward_end = out.kernels.t_end[k];
    for (size_t a = 0; a < out.allocations.size(); ++a)
        if (out.str(out.allocations.label[a]) == "cb" && out.allocations.t_alloc[a] < cb_made) {
            cb_made = out.allocations.t_alloc[a];
            cb_free = out.allocations.t_free[a];
        }
    CHECK(cb_free == forward_end);
}

TEST_CASE("checkpoint save_matmuls: a kept output, once its op is replayed, dies as a recomputed copy",
          "[advise][transform]") {
    const std::string ckpt = R"({"checkpoint": {"modules": ["M.blk"], "policy": "save_matmuls"}})";
    auto free_of = [](const mhc::trace::TraceData& out, const std::string& label) {
        for (size_t a = 0; a < out.allocations.size(); ++a)
            if (out.str(out.allocations.label[a]) == label) return out.allocations.t_free[a];
        return int64_t{-1};
    };
    {
        // Nothing saves m: the forward's code holds it until k2 (a frame), so the recomputation
        // does too: it dies after k2', not after k1', its last recomputed reader.
        //   k0 blk mm x, w -> m (kept)   k1 blk relu m -> r   k2 blk mul r -> q, saves q (the stop, reruns)
        //   k3 M sum q -> loss           k4 blk mul_backward q -> g
        // Plan: k0 k1 k2 k3 | k0' (no kernel) k1' k2' | k4: kernels 0 1 2 3 4 5 6, k2' the 6th (index 5).
        Step tiny({{"M.blk", "Block"}});
        const int weight = tiny.param(1000, "w"), batch = tiny.input(100, "batch");
        const int mm_out = tiny.act(1000, "m", 2), relu_out = tiny.act(500, "r"), mul_out = tiny.act(300, "q");
        const int loss = tiny.work(10, "loss"), grad = tiny.work(100, "g");
        tiny.fwd("aten::mm", "M.blk", {{batch, 'r'}, {weight, 'r'}, {mm_out, 'w'}});
        tiny.fwd("aten::relu", "M.blk", {{mm_out, 'r'}, {relu_out, 'w'}});
        tiny.fwd("aten::mul", "M.blk", {{relu_out, 'r'}, {mul_out, 'w'}}, {mul_out});
        tiny.fwd("aten::sum", "M", {{mul_out, 'r'}, {loss, 'w'}});
        tiny.bwd("aten::mul_backward", "M.blk", {{mul_out, 'r'}, {grad, 'w'}});
        Fixture fix(tiny.done());
        const mhc::trace::TraceData out = fix.ev().trace(parse_setting(ckpt));
        REQUIRE(out.kernels.size() == 7);
        CHECK(out.str(out.kernels.name[5]) == "aten::mul");
        CHECK(free_of(out, "m") == out.kernels.t_end[5]);
    }
    {
        // Only the call saves m (k1 packs its input: the stop, not rerun): the node that unpacks it
        // (k3) returns before the engine's sum of its gradient (k4), and m dies then; the capture
        // without checkpointing freed it after k4.
        //   k0 blk mm x, w -> m (kept)   k1 blk mul m -> h, saves m   k2 M sum h -> loss
        //   k3 blk mul_backward m -> g   k4 blk sum g -> gs
        // Plan: k0 k1 k2 | k0' (no kernel) | k3 k4: kernels 0 1 2 3 4.
        Step tiny({{"M.blk", "Block"}});
        const int weight = tiny.param(1000, "w"), batch = tiny.input(100, "batch");
        const int mm_out = tiny.act(1000, "m", 4), hidden = tiny.act(500, "h");
        const int loss = tiny.work(10, "loss"), grad = tiny.work(100, "g"), gs = tiny.result(10, "gs");
        tiny.fwd("aten::mm", "M.blk", {{batch, 'r'}, {weight, 'r'}, {mm_out, 'w'}});
        tiny.fwd("aten::mul", "M.blk", {{mm_out, 'r'}, {hidden, 'w'}}, {mm_out});
        tiny.fwd("aten::sum", "M", {{hidden, 'r'}, {loss, 'w'}});
        tiny.bwd("aten::mul_backward", "M.blk", {{mm_out, 'r'}, {grad, 'w'}});
        tiny.bwd("aten::sum", "M.blk", {{grad, 'r'}, {gs, 'w'}});
        Fixture fix(tiny.done());
        const mhc::trace::TraceData out = fix.ev().trace(parse_setting(ckpt));
        REQUIRE(out.kernels.size() == 5);
        CHECK(free_of(out, "m") == out.kernels.t_end[3]);
    }
}
