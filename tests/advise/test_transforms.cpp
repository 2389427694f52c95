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

#include "mhc/advise/evaluate.hpp"
#include "mhc/common/error.hpp"
#include "mhc/test/temp.hpp"
#include "mhc/trace/check.hpp"
#include "tiny.hpp"

using namespace mhc::advise;
using advisetest::TinyTrace;

namespace {

constexpr int64_t MiB = 1 << 20;

// A link of 1 B/ns each way, no latency: a copy of n bytes takes n ns.
mhc::sim::LinkModel unit_link() {
    mhc::sim::LinkModel l = mhc::sim::link_from_spec("pcie4");
    l.h2d = {1e9, 0};
    l.d2h = {1e9, 0};
    l.duplex_factor = 1;
    return l;
}

struct Fixture {
    mhc::test::TempPath path{"advise.db"};
    mhc::trace::TraceData data;
    Base base;
    explicit Fixture(const TinyTrace& t) {
        t.write(path.path);
        data = mhc::trace::load_checked_trace(path.path);
        base = make_base(data);
    }
    Evaluator ev(HostModel h = {}) const { return Evaluator(base, unit_link(), h); }
};

Prediction predict(const Fixture& f, const std::string& json, HostModel h = {}) {
    return f.ev(h).predict(parse_setting(json));
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
    // recomputation reruns k2 (a1' 2000) and k3 (o1' 100, dies at once):
    //   1100, 1200, 3200, 3300, 1310, [r2 3200, r3 3300], 3300, 1300: peak 3300, 90 ns.
    Prediction p = predict(f, R"({"checkpoint": {"modules": ["M.blocks.1"]}})");
    CHECK(p.memory.peak == 3300);
    CHECK(p.step_time == 90);
    Evaluator ev = f.ev();
    mhc::trace::TraceData t = ev.trace(parse_setting(R"({"checkpoint": {"modules": ["M.blocks.1"]}})"));
    CHECK(t.kernels.size() == 9);
    CHECK(mhc::trace::check_trace(t).ok());
    // the recomputation sits right before the block's backward: mm, gelu, gelu_backward
    CHECK(t.str(t.kernels.name[5]) == "aten::mm");
    CHECK(t.str(t.kernels.name[6]) == "aten::gelu");
    CHECK(t.str(t.kernels.name[7]) == "aten::gelu_backward");
    // the model's spelling without the root class is accepted
    CHECK(predict(f, R"({"checkpoint": {"modules": ["blocks.1"]}})").memory.peak == 3300);
}

TEST_CASE("checkpoint: recomputed before the first backward read, whichever module the capture credits it to",
          "[advise][transform]") {
    // two_blocks with block 1's backward split in two, the first op credited to the root (as a
    // capture credits the last BERT layer's output LayerNorm backward to the head after it):
    //   k5 M gelu_bwd a1 -> g1 (100), k6 blocks.1 mul a1, g1 -> g1b (100), k7 blocks.0 gelu_bwd.
    // The recomputation (k2, k3) must come before k5, which reads a1's recomputed copy.
    TinyTrace tiny = advisetest::two_blocks();
    tiny.kernels[5].module = "M";
    const int g1b = tiny.alloc(100, mhc::trace::Category::Workspace, "g1b", 6, 7);
    tiny.allocs[3].freed_after = 6;   // a1, read by k6 too
    tiny.allocs[6].freed_after = 6;   // g1
    tiny.allocs[7].made_at = 7;       // g0
    tiny.kernels.insert(
        tiny.kernels.begin() + 6,
        advisetest::TinyKernel{
            "aten::mul", "M.blocks.1", mhc::trace::Phase::Backward, {{3, 'r'}, {6, 'r'}, {g1b, 'w'}}, {}});
    tiny.kernels[7].acc = {{1, 'r'}, {g1b, 'r'}, {7, 'w'}};
    tiny.allocs[1].freed_after = 7;   // a0
    Fixture fix(tiny);
    const Setting setting = parse_setting(R"({"checkpoint": {"modules": ["M.blocks.1"]}})");
    mhc::trace::TraceData out = fix.ev().trace(setting);
    CHECK(mhc::trace::check_trace(out).ok());
    REQUIRE(out.kernels.size() == 10);
    CHECK(out.str(out.kernels.name[5]) == "aten::mm");   // the recomputation
    CHECK(out.str(out.kernels.name[6]) == "aten::gelu");
    CHECK(out.str(out.kernels.name[7]) == "aten::gelu_backward");
    CHECK(fix.ev().predict(setting).memory.peak < fix.ev().predict(Setting{}).memory.peak + 200);
}

TEST_CASE("selective checkpoint keeps matmul outputs and recomputes the rest", "[advise][transform]") {
    Fixture f(advisetest::two_blocks());
    // a1 (made by mm) is cached: it stays; o0 is held to k5; the recomputation is gelu alone:
    //   1100, 1200, 3200, 3300, 3310, [r2 cached, r3 3300], 3300, 1300: peak 3310, 80 ns.
    Prediction p = predict(f, R"({"checkpoint": {"modules": ["M.blocks.1"], "policy": "save_matmuls"}})");
    CHECK(p.memory.peak == 3310);
    CHECK(p.step_time == 80);
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
    Prediction p =
        predict(f, R"({"offload": {"mode": "streamed", "modules": ["M.blocks.0"], "min_bytes": 500, "max_fwd_stash": 1, "prefetch": 0}})");
    CHECK(p.memory.peak == 3210);
    CHECK(p.step_time == 1070);
    CHECK(p.waits == 1060 - 60);
    // a stash of one pack, two packs in scope: a0 leaves after the next pack (k3 saves a1), a1
    // at the first unpack (k5); the backward's k5 waits for a1's copy, k6 for a0's:
    //   1100, 1200, 3200, 3200, [a0 gone] 2210, [a1 gone, a1' back at k5] 2200, [a0' back] 1300
    Prediction q = predict(f, R"({"offload": {"mode": "streamed", "modules": null, "min_bytes": 500, "max_fwd_stash": 1, "prefetch": 0}})");
    CHECK(q.memory.peak == 3200);
    CHECK(q.host_peak == 3000);
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
    // host: master p, grad buffer, m, v
    CHECK(p.host_peak == 256 * MiB);
    // per step: 5 kernels, the grad's D2H (64 MiB), the host step (448 MiB at 1 B/ns and 1 us
    // for its one parameter tensor), the parameters' H2D (64 MiB)
    CHECK(p.step_time == 2 * (50 + 64 * MiB + 448 * MiB + 1000 + 64 * MiB));
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
    const int batch = tiny.alloc(100, mhc::trace::Category::Other, "batch", -1, -1);
    std::vector<int> out;
    const char* mods[] = {"M.enc.0.parts.0", "M.enc.1", "M.dec.0", "M.dec.0", "M.dec.1", "M.dec.1"};
    for (int k = 0; k < 6; ++k) {
        out.push_back(tiny.alloc(100, mhc::trace::Category::Activation, "a" + std::to_string(k), k, 6 + (5 - k)));
        tiny.kernel({"aten::mm",
                     mods[k],
                     mhc::trace::Phase::Forward,
                     {{k ? out[static_cast<size_t>(k - 1)] : batch, 'r'}, {out.back(), 'w'}},
                     {out.back()}});
    }
    for (int k = 5; k >= 0; --k)
        tiny.kernel(
            {"aten::mm_backward", mods[k], mhc::trace::Phase::Backward, {{out[static_cast<size_t>(k)], 'r'}}, {}});
    Fixture fix(tiny);
    CHECK(fix.base.info.block_name == std::vector<std::string>{"M.enc.0", "M.enc.1", "M.dec.0", "M.dec.1"});
    CHECK(fix.base.info.block_prefix == "M.dec, M.enc");
    CHECK(predict(fix, R"({"checkpoint": {"modules": ["M.enc.0", "M.dec.1"]}})").memory.peak > 0);
}

TEST_CASE("gradient accumulation: block settings are refused in one line, not mis-predicted", "[advise][transform]") {
    // two forward and backward passes of two_blocks in one step (micro-batches): the checkpoint
    // and offload transforms assume one; they made steps that failed their checks.
    TinyTrace tiny = advisetest::two_blocks();
    const size_t nk = tiny.kernels.size(), na = tiny.allocs.size();
    for (size_t idx = 1; idx < na; ++idx) {   // the second pass's storages, 7 kernels later
        advisetest::TinyAlloc copy = tiny.allocs[idx];
        copy.made_at += static_cast<int>(nk);
        copy.freed_after = copy.freed_after < 0 ? -1 : copy.freed_after + static_cast<int>(nk);
        copy.label += "'";
        tiny.allocs.push_back(copy);
    }
    tiny.allocs[7].freed_after = static_cast<int>(nk) - 1;   // the first pass's g0
    for (size_t k = 0; k < nk; ++k) {
        advisetest::TinyKernel copy = tiny.kernels[k];
        for (auto& [alloc, mode] : copy.acc) alloc = alloc == 0 ? 0 : alloc + static_cast<int>(na) - 1;
        for (int& alloc : copy.saves) alloc += static_cast<int>(na) - 1;
        tiny.kernels.push_back(copy);
    }
    Fixture fix(tiny);
    CHECK(fix.base.passes == 2);
    CHECK_THROWS_WITH(predict(fix, R"({"checkpoint": {"modules": ["M.blocks.1"]}})"),
                      Catch::Contains("gradient accumulation"));
    CHECK_THROWS_WITH(predict(fix, R"({"offload": {"modules": ["M.blocks.1"]}})"), Catch::Contains("'offload'"));
    CHECK(predict(fix, "{}").memory.peak > 0);
    CHECK(Fixture(advisetest::two_blocks()).base.passes == 1);
}
