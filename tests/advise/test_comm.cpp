// The collectives' time (advise/include/mhc/advise/comm.hpp) and FSDP2's reshard_after_forward
// (advise/src/transforms/reshard.cpp) on hand-written FSDP2 and DDP steps, every figure worked
// out by hand below. Every kernel takes 10 ns (tiny.hpp).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>

#include "mhc/advise/code.hpp"
#include "mhc/advise/evaluate.hpp"
#include "mhc/common/error.hpp"
#include "mhc/test/paths.hpp"
#include "mhc/test/temp.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/data_parallel.hpp"
#include "tiny.hpp"

using advisetest::TinyTrace;
using mhc::advise::apply_comm_model;
using mhc::advise::Base;
using mhc::advise::code_for;
using mhc::advise::Collective;
using mhc::advise::comm_model;
using mhc::advise::CommModel;
using mhc::advise::describe;
using mhc::advise::Evaluator;
using mhc::advise::make_base;
using mhc::advise::parse_setting;
using mhc::advise::Prediction;
using mhc::advise::to_json;
using mhc::trace::Category;
using mhc::trace::Phase;

namespace {

// FSDP2 over 4 ranks, two blocks of one 4000 B weight (1000 B shards), resharded after the
// forward, as python/mhc_torch/data_parallel.py records it (kernel: name, phase):
//   0 copy-in(0) 1 all-gather(0) 2 copy-out(0) 3 mm blocks.0          (forward)
//   4 copy-in(1) 5 all-gather(1) 6 copy-out(1) 7 mm blocks.1 8 sum
//   9 ones_like 10 copy-in(1) 11 all-gather(1) 12 copy-out(1)          (backward: blocks.1 gathered again)
//  13 copy-in(0) 14 all-gather(0) (blocks.0 prefetched) 15 mm blocks.1 16 chunk_cat 17 reduce-scatter(1)
//  18 copy-out(0) 19 mm blocks.0 20 chunk_cat 21 reduce-scatter(0)
//  22 foreach_add (optimizer)
TinyTrace fsdp2_step() {
    TinyTrace tiny;
    tiny.modules = {{"Net", "FSDPNet"}, {"Net.blocks.0", "FSDPLinear"}, {"Net.blocks.1", "FSDPLinear"}};
    tiny.meta = {{"capture.data_parallel", "fsdp2"},
                 {"capture.fsdp2", "world 4, modules 3, reshard_after_forward true, cpu_offload false"},
                 {"capture.collectives", R"({"c10d::_allgather_base_": {"count": 4, "wire_bytes": 12000}})"}};
    const int s0 = tiny.alloc(1000, Category::Param, "blocks.0.w", -1, -1);
    const int s1 = tiny.alloc(1000, Category::Param, "blocks.1.w", -1, -1);
    const int o0f = tiny.alloc(4000, Category::Comm, "FSDP2 all-gather output (blocks.0)", 0, 6);
    const int u0f = tiny.alloc(4000, Category::Param, "blocks.0.w (unsharded)", 2, 3);
    const int a0 = tiny.alloc(100, Category::Activation, "a0", 3, 19);
    const int o1f = tiny.alloc(4000, Category::Comm, "FSDP2 all-gather output (blocks.1)", 4, 8);
    const int u1f = tiny.alloc(4000, Category::Param, "blocks.1.w (unsharded)", 6, 8);
    const int a1 = tiny.alloc(100, Category::Activation, "a1", 7, 15);
    const int loss = tiny.alloc(4, Category::Activation, "loss", 8, 9);
    const int dl = tiny.alloc(4, Category::Activation, "dloss", 9, 15);
    const int o1b = tiny.alloc(4000, Category::Comm, "FSDP2 all-gather output (blocks.1)", 10, 12);
    const int u1b = tiny.alloc(4000, Category::Param, "blocks.1.w (unsharded)", 12, 15);
    const int o0b = tiny.alloc(4000, Category::Comm, "FSDP2 all-gather output (blocks.0)", 13, 18);
    const int d1 = tiny.alloc(4000, Category::Grad, "d1", 15, 16);
    const int r1 = tiny.alloc(4000, Category::Comm, "FSDP2 reduce-scatter input (blocks.1)", 16, 17);
    const int g1 = tiny.alloc(1000, Category::Grad, "FSDP2 reduce-scatter output: sharded gradients (blocks.1)", 17,
                              -1);
    const int u0b = tiny.alloc(4000, Category::Param, "blocks.0.w (unsharded)", 18, 20);
    const int d0 = tiny.alloc(4000, Category::Grad, "d0", 19, 20);
    const int r0 = tiny.alloc(4000, Category::Comm, "FSDP2 reduce-scatter input (blocks.0)", 20, 21);
    const int g0 = tiny.alloc(1000, Category::Grad, "FSDP2 reduce-scatter output: sharded gradients (blocks.0)", 21,
                              -1);
    const Phase fwd = Phase::Forward, bwd = Phase::Backward;
    auto gather = [&](int shard, int out, int unsharded, Phase ph, bool copy_out) {
        tiny.kernel({"fsdp::all_gather_copy_in", "", ph, {{shard, 'r'}, {out, 'x'}}, {}});
        tiny.kernel({"c10d::_allgather_base_", "", ph, {{out, 'x'}}, {}});
        if (copy_out) tiny.kernel({"fsdp::split_with_sizes_copy", "", ph, {{out, 'r'}, {unsharded, 'x'}}, {}});
    };
    gather(s0, o0f, u0f, fwd, true);
    tiny.kernel({"aten::mm", "Net.blocks.0", fwd, {{u0f, 'r'}, {a0, 'w'}}, {a0}});
    gather(s1, o1f, u1f, fwd, true);
    tiny.kernel({"aten::mm", "Net.blocks.1", fwd, {{u1f, 'r'}, {a0, 'r'}, {a1, 'w'}}, {a1}});
    tiny.kernel({"aten::sum", "Net", fwd, {{a1, 'r'}, {loss, 'w'}}, {}});
    tiny.kernel({"aten::ones_like", "", bwd, {{dl, 'w'}}, {}});
    gather(s1, o1b, u1b, bwd, true);
    gather(s0, o0b, u0b, bwd, false);
    tiny.kernel({"aten::mm", "Net.blocks.1", bwd, {{u1b, 'r'}, {a1, 'r'}, {dl, 'r'}, {d1, 'w'}}, {}});
    tiny.kernel({"fsdp::chunk_cat", "", bwd, {{d1, 'r'}, {r1, 'w'}}, {}});
    tiny.kernel({"c10d::_reduce_scatter_base_", "", bwd, {{r1, 'r'}, {g1, 'w'}}, {}});
    tiny.kernel({"fsdp::split_with_sizes_copy", "", bwd, {{o0b, 'r'}, {u0b, 'x'}}, {}});
    tiny.kernel({"aten::mm", "Net.blocks.0", bwd, {{u0b, 'r'}, {a0, 'r'}, {d0, 'w'}}, {}});
    tiny.kernel({"fsdp::chunk_cat", "", bwd, {{d0, 'r'}, {r0, 'w'}}, {}});
    tiny.kernel({"c10d::_reduce_scatter_base_", "", bwd, {{r0, 'r'}, {g0, 'w'}}, {}});
    tiny.kernel({"aten::_foreach_add_", "", Phase::Optimizer, {{g0, 'r'}, {g1, 'r'}, {s0, 'x'}, {s1, 'x'}}, {}});
    (void)loss;
    return tiny;
}

// DDP over 4 ranks: two gradients (1 MiB, then 2 MiB) copied into one 3 MiB bucket in the backward,
// the capture's hook divides it and records its all-reduce, the gradients are copied back:
//   0 mm 1 mm (forward) 2 mm -> g1 3 copy g1 -> bucket 4 mm -> g0 5 copy g0 -> bucket 6 div_
//   7 allreduce 8 copy bucket -> g0 (backward) 9 foreach_add (optimizer)
TinyTrace ddp_step() {
    constexpr int64_t MiB = 1 << 20;
    TinyTrace tiny;
    tiny.modules = {{"Net", "Net"}, {"Net.blocks.0", "Linear"}, {"Net.blocks.1", "Linear"}};
    tiny.meta = {{"capture.data_parallel", "ddp"},
                 {"capture.ddp", "world 4, bucket_cap_mb 25, gradient_as_bucket_view false, modules 1"}};
    const int weights = tiny.alloc(3 * MiB, Category::Param, "w", -1, -1);
    const int bucket = tiny.alloc(3 * MiB, Category::Grad, "DDP gradient bucket 0", -1, -1);
    const int a0 = tiny.alloc(100, Category::Activation, "a0", 0, 4);
    const int a1 = tiny.alloc(100, Category::Activation, "a1", 1, 2);
    const int g1 = tiny.alloc(MiB, Category::Grad, "blocks.1.w.grad", 2, -1);
    const int g0 = tiny.alloc(2 * MiB, Category::Grad, "blocks.0.w.grad", 4, -1);
    const Phase fwd = Phase::Forward, bwd = Phase::Backward;
    tiny.kernel({"aten::mm", "Net.blocks.0", fwd, {{weights, 'r'}, {a0, 'w'}}, {a0}});
    tiny.kernel({"aten::mm", "Net.blocks.1", fwd, {{weights, 'r'}, {a0, 'r'}, {a1, 'w'}}, {a1}});
    tiny.kernel({"aten::mm", "Net.blocks.1", bwd, {{a1, 'r'}, {g1, 'w'}}, {}});
    tiny.kernel({"aten::copy_", "", bwd, {{g1, 'r'}, {bucket, 'x'}}, {}});
    tiny.kernel({"aten::mm", "Net.blocks.0", bwd, {{a0, 'r'}, {g0, 'w'}}, {}});
    tiny.kernel({"aten::copy_", "", bwd, {{g0, 'r'}, {bucket, 'x'}}, {}});
    tiny.kernel({"aten::div_", "", bwd, {{bucket, 'x'}}, {}});
    tiny.kernel({"c10d::allreduce_", "", bwd, {{bucket, 'x'}}, {}});
    tiny.kernel({"aten::copy_", "", bwd, {{bucket, 'r'}, {g0, 'x'}}, {}});
    tiny.kernel({"aten::_foreach_add_", "", Phase::Optimizer, {{g0, 'r'}, {g1, 'r'}, {weights, 'x'}}, {}});
    return tiny;
}

struct Step {
    mhc::test::TempPath path{"comm.db"};
    mhc::trace::TraceData data;
    Base base;
    explicit Step(const TinyTrace& tiny) {
        tiny.write(path.path);
        data = mhc::trace::load_checked_trace(path.path);
        base = make_base(data);
    }
    // No latency, `bus` bytes per second: a 4000 B all-gather over 4 ranks moves 3000 B a rank.
    void comm(double bus) {
        CommModel model = base.comm;
        model.bus_Bps = bus;
        model.base_latency_s = model.step_latency_s = 0;
        apply_comm_model(base, model);
    }
    Prediction predict(const std::string& json) const {
        return Evaluator(base, mhc::sim::link_from_spec("pcie5")).predict(parse_setting(json));
    }
};

}   // namespace

TEST_CASE("ring collectives: NCCL's ring model", "[advise][comm]") {
    CommModel model;
    model.world = model.replicate = 8;
    model.bus_Bps = 100e9;
    // all-gather of 800 MB over 8 ranks: 7 steps; 800e6 x 7/8 / 100e9 = 7 ms, + 8.4 us + 7 x 3.4 us
    CHECK(model.ns(Collective::AllGather, 800'000'000) == 7'000'000 + 8'400 + 7 * 3'400);
    CHECK(model.ns(Collective::ReduceScatter, 800'000'000) == 7'000'000 + 8'400 + 7 * 3'400);
    // all-reduce: 2 x 7 steps, twice the bytes a rank sends
    CHECK(model.ns(Collective::AllReduce, 800'000'000) == 14'000'000 + 8'400 + 14 * 3'400);
    model.world = 1;
    CHECK(model.ns(Collective::AllGather, 800'000'000) == 0);   // one rank: nothing to gather
}

TEST_CASE("the link of a capture: its GPU, its world, and what was assumed", "[advise][comm]") {
    Step step(fsdp2_step());
    // no capture.gpu in the meta: an H100 SXM's NVLink, said; 4 ranks: one node
    CHECK(step.base.comm.world == 4);
    CHECK(step.base.comm.bus_Bps == 450e9);
    CHECK(step.base.comm.assumed == "one node (NVLink); an H100 SXM's NVLink (the capture names no GPU)");
    const CommModel ib = comm_model(step.data, step.base.info, "ib-ndr");
    CHECK(ib.bus_Bps == 50e9);
    CHECK(ib.step_latency_s == 9.6e-6);
    CHECK(comm_model(step.data, step.base.info, "200GB/s").bus_Bps == 200e9);
    CHECK_THAT(describe(step.base.comm), Catch::StartsWith("ring, world 4, 450.0 GB/s"));
    // HSDP: both groups on the line, also when they are of one size (before 2026-12-06 a 2 x 2
    // mesh read "world 2", as if the job had two ranks)
    TinyTrace hsdp = fsdp2_step();
    for (auto& [key, value] : hsdp.meta)
        if (key == "capture.fsdp2") value = "world 4 (shard 2 x replicate 2), modules 3, reshard_after_forward true";
    Step hsdp_step(hsdp);
    CHECK_THAT(describe(hsdp_step.base.comm), Catch::StartsWith("ring, world 2 x 2, 450.0 GB/s"));
    CHECK_THROWS_WITH(comm_model(step.data, step.base.info, "fast"),
                      Catch::Contains("--comm-link: 'fast': not nvlink, ib-ndr, ib-hdr or a bandwidth"));
}

TEST_CASE("FSDP2: all-gathers prefetched, reduce-scatters overlapped, worked by hand", "[advise][comm]") {
    Step step(fsdp2_step());
    step.comm(100e9);   // an all-gather or reduce-scatter of 4000 B: 3000 B at 100 GB/s = 30 ns
    // On their own streams (copy-in and all-gather on one, reduce-scatters on another); a copy-in
    // is issued when the previous gather's copy-out ends (the first of the step at once):
    //   k0 copy-in 0-10, k1 all-gather 10-40, k2 copy-out waits: 40-50, k3 50-60,
    //   k4 copy-in (after k2) 50-60, k5 all-gather 60-90, k6 copy-out waits: 90-100, k7-k9 100-130,
    //   k10 copy-in (after k6) 100-110, k11 110-140, k12 copy-out waits: 140-150,
    //   k13 copy-in (after k12) 150-160, k14 160-190, k15 mm 150-160, k16 chunk_cat 160-170,
    //   k17 reduce-scatter 170-200, k18 copy-out waits for k14: 190-200, k19 200-210, k20 210-220,
    //   k21 reduce-scatter 220-250, k22 the optimizer waits for it: 250-260.
    // Streams busy 4 x 10 + 6 x 30 = 220 ns; compute waited 40 + 30 + 10 + 20 + 30 = 130 ns.
    const Prediction pred = step.predict("{}");
    CHECK(pred.step_time == 260);
    CHECK(pred.comm == 220);
    CHECK(pred.comm_waits == 130);
    // Live bytes (shards 2000 throughout), at each kernel's start: 6000, 6000, 10000, 10100, 10100,
    // 10100, 14100, 10200, 10204, 2208, 6204, 6204, 10204, 10204, 10204, 14204, 14100, 11100, 11100,
    // 11100, 15000 (k20: d0, r0, the unsharded parameter and the gradients), 8000, 4000.
    CHECK(pred.memory.peak == 15000);
}

TEST_CASE("FSDP2 reshard_after_forward false: kept unsharded, no backward all-gather", "[advise][comm][reshard]") {
    Step step(fsdp2_step());
    step.comm(100e9);
    // blocks.1 kept: k10-k12 are not run; its forward copy (4000 B) lives to its post-backward
    // reshard (after k15). k13's copy-in waits for the copy-out of the step's previous all-gather
    // that still runs, k5's (k6 ends at 100): 100-110, k14 110-140, k15 130-140, k16 140-150,
    // k17 150-180, k18 waits for k14: 150-160, k19 160-170, k20 170-180, k21 180-210, k22 210-220.
    // Before 2026-12-06 k13 waited for the place of the removed copy-out k12 (130): 240 ns, where
    // FSDP2 runs a step captured with blocks.1 kept as 220 (its copy-in waits for k6 there too).
    // Live bytes: the gather of 4000 B in k10-k12 is not made; the kept copy replaces k12's: peak as before.
    const Prediction last = step.predict(R"({"reshard_after_forward": {"Net.blocks.1": false}})");
    CHECK(last.step_time == 220);
    CHECK(last.memory.peak == 15000);
    // Both kept: no all-gather in the backward; k15 130-140, k16 140-150, k17 150-180, k19 150-160,
    // k20 160-170, k21 180-210, k22 210-220. blocks.0's copy stays from k2 to k20: at k6 the shards,
    // both unsharded copies, both gathers' outputs and a0: 2000 + 4 x 4000 + 100 = 18100.
    const Prediction both = step.predict(R"({"reshard_after_forward": {"Net.blocks.0": false, "blocks.1": false}})");
    CHECK(both.step_time == 220);
    CHECK(both.memory.peak == 18100);
    // The step written out: two all-gathers (the forward's), no unsharded parameter made in the backward.
    const mhc::trace::TraceData out =
        Evaluator(step.base, mhc::sim::link_from_spec("pcie5"))
            .trace(parse_setting(R"({"reshard_after_forward": {"Net.blocks.0": false, "Net.blocks.1": false}})"));
    int gathers = 0;
    for (size_t k = 0; k < out.kernels.size(); ++k) gathers += out.str(out.kernels.name[k]) == "c10d::_allgather_base_";
    CHECK(gathers == 2);
    int unsharded = 0;
    for (size_t a = 0; a < out.allocations.size(); ++a)
        unsharded += out.str(out.allocations.label[a]).find("(unsharded)") != std::string::npos;
    CHECK(unsharded == 2);
    // The code: FSDP2's public switch, per module.
    CHECK_THAT(code_for(parse_setting(R"({"reshard_after_forward": {"Net.blocks.1": false}})"), step.base.info),
               Catch::Contains("model.get_submodule(\"blocks.1\").set_reshard_after_forward(False, recurse=False)"));
    CHECK(describe(parse_setting(R"({"reshard_after_forward": {"Net.blocks.1": false}})"), step.base.info) ==
          "keep unsharded after forward: blocks.1");
}

TEST_CASE("FSDP2 reshard_after_forward false: the gather it keeps gates the next one as a captured keep does",
          "[advise][comm][reshard]") {
    // The step with blocks.1 kept, as FSDP2 runs it (no backward gather of blocks.1): its prediction
    // as captured equals the prediction of the setting on the resharding capture.
    TinyTrace kept = fsdp2_step();
    kept.kernels.erase(kept.kernels.begin() + 10, kept.kernels.begin() + 13);   // k10-k12
    for (auto& kernel : kept.kernels)
        for (auto& [alloc, mode] : kernel.acc)
            if (alloc == 11) alloc = 6;   // blocks.1's backward unsharded copy (u1b): the forward's (u1f)
    for (auto& alloc : kept.allocs) {
        if (alloc.made_at > 12) alloc.made_at -= 3;
        if (alloc.freed_after > 12) alloc.freed_after -= 3;
    }
    kept.allocs[6].freed_after = 12;   // u1f: freed after k15, now the 13th kernel
    kept.allocs[10] = kept.allocs[11] = {4, Category::Other, "unused", 0, 0};   // o1b, u1b not made
    Step as_captured(kept);
    as_captured.comm(100e9);
    Step resharding(fsdp2_step());
    resharding.comm(100e9);
    CHECK(as_captured.predict("{}").step_time == 220);
    CHECK(resharding.predict(R"({"reshard_after_forward": {"Net.blocks.1": false}})").step_time == 220);
}

TEST_CASE("FSDP2: a copy-in has no recorded gap of its own", "[advise][comm]") {
    // k0 mul, then 5 ns of host time, k1 copy-in, k2 all-gather (30 ns), k3 copy-out, k4 mm: the
    // copy-in is issued when the compute stream reaches it (10), without the gap: 10-20, 20-50, the
    // copy-out waits: 50-60, k4 60-70. Before 2026-12-06 the step's first copy-in kept its gap: 75.
    TinyTrace tiny;
    tiny.modules = {{"Net", "FSDPNet"}, {"Net.blocks.0", "FSDPLinear"}};
    tiny.meta = {{"capture.data_parallel", "fsdp2"},
                 {"capture.fsdp2", "world 4, modules 2, reshard_after_forward true, cpu_offload false"},
                 {"capture.collectives", R"({"c10d::_allgather_base_": {"count": 1, "wire_bytes": 3000}})"}};
    const int input = tiny.alloc(100, Category::Activation, "x", 0, -1);
    const int s0 = tiny.alloc(1000, Category::Param, "blocks.0.w", -1, -1);
    const int out = tiny.alloc(4000, Category::Comm, "FSDP2 all-gather output (blocks.0)", 1, 3);
    const int u0 = tiny.alloc(4000, Category::Param, "blocks.0.w (unsharded)", 3, 4);
    const int output = tiny.alloc(100, Category::Activation, "y", 4, -1);
    const Phase fwd = Phase::Forward;
    tiny.kernel({"aten::mul", "Net", fwd, {{input, 'w'}}, {}});
    tiny.kernel({"fsdp::all_gather_copy_in", "", fwd, {{s0, 'r'}, {out, 'x'}}, {}, 0, 5});
    tiny.kernel({"c10d::_allgather_base_", "", fwd, {{out, 'x'}}, {}});
    tiny.kernel({"fsdp::split_with_sizes_copy", "", fwd, {{out, 'r'}, {u0, 'x'}}, {}});
    tiny.kernel({"aten::mm", "Net.blocks.0", fwd, {{u0, 'r'}, {input, 'r'}, {output, 'w'}}, {input}});
    Step step(tiny);
    step.comm(100e9);
    CHECK(step.predict("{}").step_time == 70);
}

TEST_CASE("FSDP2 reshard_after_forward: what is refused", "[advise][comm][reshard]") {
    Step step(fsdp2_step());
    CHECK_THROWS_WITH(step.predict(R"({"reshard_after_forward": {"Net.blocks.7": false}})"),
                      Catch::Contains("no fully_shard module of that name all-gathers") &&
                          Catch::Contains("Net.blocks.0, Net.blocks.1"));
    CHECK_THROWS_WITH(step.predict(R"({"reshard_after_forward": {"Net.blocks.0": 2}})"),
                      Catch::Contains("resharding to a group of 2 ranks is not modelled"));
    CHECK_THROWS_WITH(parse_setting(R"({"reshard_after_forward": {"Net.blocks.0": 1}})"),
                      Catch::Contains("outside [2, "));
    CHECK(to_json(parse_setting(R"({"reshard_after_forward": {"Net.blocks.1": false, "Net.blocks.0": 4}})")) ==
          R"({"reshard_after_forward":{"Net.blocks.0":4,"Net.blocks.1":false}})");
    Step ddp(ddp_step());
    CHECK_THROWS_WITH(ddp.predict(R"({"reshard_after_forward": {"Net.blocks.0": false}})"),
                      Catch::Contains("the step runs no FSDP2"));
}

TEST_CASE("DDP: the all-reduce in buckets, overlapped with the backward, worked by hand", "[advise][comm]") {
    Step step(ddp_step());
    // bucket_cap_mb 25 (the default): a first bucket of 1 MiB. The backward writes 1 MiB (g1, k3),
    // then 2 MiB (g0, k5): a 1 MiB all-reduce is issued after k3, the recorded one carries 2 MiB.
    // All-reduce over 4 ranks: 2 x 3 steps, 6/4 of the bytes; at 1.5 x 2^20 B per 15 ns, 1 MiB takes
    // 15 ns, 2 MiB 30 ns. k0-k3 0-40, bucket 1 40-55 (beside k4 40-50, k5 50-60), k6 div_ 60-70,
    // k7 all-reduce 70-100, k8 copies the bucket back: waits, 100-110, k9 110-120.
    step.comm(1.5 * (1 << 20) / 15e-9);
    const Prediction pred = step.predict("{}");
    CHECK(pred.step_time == 120);
    CHECK(pred.comm == 45);
    CHECK(pred.comm_waits == 30);
    // bucket_cap_mb 0: DDP makes a bucket per gradient; g1's after k3, g0's carried by the recorded
    // all-reduce (it holds the rest), and k6's div_ (no gradient bytes) closes none: the same 120 ns.
    // Before 2026-12-06 a cap of 0 split nothing: one all-reduce of 3 MiB (45 ns), 135 ns.
    TinyTrace zero = ddp_step();
    for (auto& [key, value] : zero.meta)
        if (key == "capture.ddp") value = "world 4, bucket_cap_mb 0, gradient_as_bucket_view false, modules 1";
    Step unbucketed(zero);
    unbucketed.comm(1.5 * (1 << 20) / 15e-9);
    const Prediction each = unbucketed.predict("{}");
    CHECK(each.step_time == 120);
    CHECK(each.comm == 45);
}

TEST_CASE("the data-parallel meta's sizes: bounded before they are counted with", "[advise][comm][meta]") {
    using mhc::trace::data_parallel_sizes;
    // As python/mhc_torch/data_parallel.py writes them; world 0 is a group that could not say.
    auto ddp = data_parallel_sizes("world 4, bucket_cap_mb 25, gradient_as_bucket_view false, modules 1");
    CHECK((ddp.world == 4 && ddp.replicate == 0 && ddp.bucket_cap_mb == 25 && ddp.error.empty()));
    auto hsdp = data_parallel_sizes("world 4 (shard 2 x replicate 2), modules 3, reshard_after_forward true");
    CHECK((hsdp.world == 2 && hsdp.replicate == 2 && hsdp.bucket_cap_mb == -1 && hsdp.error.empty()));
    CHECK(data_parallel_sizes("world 0, modules 3").error.empty());
    // The bounds, exactly: 2^20 ranks, 2^36 MiB (2^56 bytes) of bucket.
    CHECK(data_parallel_sizes("world 1048576, bucket_cap_mb 68719476736").error.empty());
    CHECK(data_parallel_sizes("world 1048577").error == "world 1048577 is not a number of ranks in [0, 2^20]");
    CHECK(data_parallel_sizes("world 4 (shard 1024 x replicate 1025)").error ==
          "shard 1024 x replicate 1025 is more than 2^20 ranks");
    CHECK(data_parallel_sizes("world 4, bucket_cap_mb 68719476737").error ==
          "bucket_cap_mb 68719476737 is not a number of MiB in [0, 2^36]");
    CHECK(data_parallel_sizes("world 4, bucket_cap_mb nan, modules 1").error ==
          "bucket_cap_mb nan is not a number of MiB in [0, 2^36]");
    CHECK(data_parallel_sizes("world 4, bucket_cap_mb many, modules 1").error ==
          "bucket_cap_mb many is not a number of MiB in [0, 2^36]");
    // A trace that says so is refused by check (load_checked_trace), and so by advise. Before:
    // "world 2000000000" became 2 x (2e9 - 1) ring steps in an int (signed overflow), and
    // "bucket_cap_mb 1e300" a cast of 1e300 x 2^20 to int64 (undefined; on x86 a negative cap: no
    // buckets); both were taken without a word.
    for (const auto& [detail, want] : {std::pair<std::string, std::string>{
                                           "world 2000000000, bucket_cap_mb 25, modules 1",
                                           "meta capture.ddp: world 2000000000 is not a number of ranks in [0, 2^20]"},
                                       {"world 4, bucket_cap_mb 1e300, modules 1",
                                        "meta capture.ddp: bucket_cap_mb 1e300 is not a number of MiB"}}) {
        TinyTrace tiny = ddp_step();
        for (auto& [key, value] : tiny.meta)
            if (key == "capture.ddp") value = detail;
        CHECK_THROWS_WITH(Step(tiny), Catch::Contains(want));
    }
}

// `mhc advise --comm-link` on a step with collectives: taken without a word (on a step on one
// GPU it has no effect and says so: test_cli.cpp).
TEST_CASE("mhc advise --comm-link on an FSDP2 or DDP step: taken without a warning", "[advise][comm][cli]") {
    for (const TinyTrace& tiny : {fsdp2_step(), ddp_step()}) {
        Step step(tiny);
        mhc::test::TempPath err{"stderr.txt"};
        const std::string cmd = std::string(mhc::test::mhc_exe()) + " advise " + step.path.path +
                                " --setting '{}' --json --comm-link 200GB/s 2>" + err.path + " >/dev/null";
        CHECK(std::system(cmd.c_str()) == 0);
        std::ifstream said(err.path);
        std::string text;
        std::getline(said, text, '\0');
        CHECK(text.empty());
    }
}
