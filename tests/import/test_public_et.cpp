// Real public PyTorch execution traces of several schemas (1.0.3, a torch.compile trace in 1.1.1)
// imported alone: their ProfilerStep#N steps, ops written in finish order, the autograd thread's
// steps. The figures were read from the files with Python's json/gzip
// (tests/data/public/SOURCES.md).
#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "mhc/common/error.hpp"
#include "mhc/trace/check.hpp"
#include "public_variants.hpp"
#include "util.hpp"

namespace imp = mhc::trace::import;
using mhc::trace::TraceData;

TEST_CASE("et: an execution trace alone marks its ProfilerStep#N steps, as info counts them", "[import][et][public]") {
    test::TempDir dir;
    imp::Result result;
    // ResNet (schema 1.0.3): ProfilerStep#4-#6 with 2,584 ops each. `mhc info` said "steps none
    // marked": the import wrote the ops' steps but no step marker.
    TraceData resnet = test::import_public(dir, "chakra/param-resnet-1gpu-et-1.0.3.json.gz", result);
    REQUIRE(std::count(resnet.markers.kind.begin(), resnet.markers.kind.end(), mhc::trace::MarkerKind::Step) == 3);
    for (size_t m = 0; m < resnet.markers.size(); ++m) {
        CHECK(resnet.markers.index[m] == static_cast<int32_t>(m) + 4);
        CHECK(resnet.str(resnet.markers.name[m]) == "ProfilerStep#" + std::to_string(m + 4));
        for (size_t k = 0; k < resnet.kernels.size(); ++k)
            if (resnet.kernels.step[k] == resnet.markers.index[m]) {
                CHECK(resnet.kernels.t_start[k] >= resnet.markers.t_start[m]);
                CHECK(resnet.kernels.t_end[k] <= resnet.markers.t_end[m]);
            }
    }
    CHECK(mhc::trace::summarize(resnet).steps == 3);
    // HF GPT-2 (schema 1.1.0-chakra.0.0.4): ProfilerStep#0 holds 16,064 nodes of thread 1 and the
    // autograd thread's 11,091 fall within its ids; ProfilerStep#1 (id 38,919, the last) has
    // nothing under it: recording stopped as it began. One step, all 14,254 leaf ops in it.
    TraceData gpt2 = test::import_public(dir, "chakra/param-hf-gpt2-et-1.1.0.json.gz", result);
    CHECK(gpt2.kernels.size() == 14254);
    CHECK(test::all_are(gpt2.kernels.step, 0));
    REQUIRE(gpt2.markers.size() == 1);
    CHECK(gpt2.str(gpt2.markers.name[0]) == "ProfilerStep#0");
    CHECK(gpt2.meta.at("et.step_markers") == "1");
    // No ProfilerStep#N node: the optimizer's step node ends the one step (docs/import.md "Steps").
    // param's ResNet ET of schema 1.0.1 records one iteration: 681 leaf ops with tensors, 678 up to
    // the last id under its Optimizer.step#SGD.step node, 3 after it (public_traces.py's
    // check_et_steps counts the same). Before 2026-12-05: no step, no marker.
    TraceData plain = test::import_public(dir, "chakra/param-resnet-et-1.0.1.json.gz", result);
    REQUIRE(plain.markers.size() == 1);
    CHECK(plain.str(plain.markers.name[0]) == "step#0");
    CHECK(plain.meta.at("steps_from") == "Optimizer.step#SGD.step ranges (no ProfilerStep#N in the trace)");
    CHECK(test::kernels_per_step(plain) == test::Steps{{-1, 3}, {0, 678}});
    CHECK(gpt2.meta.at("steps_from") == "ProfilerStep#N ranges (the profiler's step markers)");
}

TEST_CASE("et: newer execution-trace schemas (1.0.3, a torch.compile trace in 1.1.1) written in finish order",
          "[import][et][public]") {
    test::TempDir dir;
    imp::Result result;
    // The compiled trace: per step (ProfilerStep#5, #6) an aten::mm and a Triton kernel node are
    // the leaf ops with tensors; its nodes come in the order ops finish (13, 16, 9, 6, 4, 3, ...).
    TraceData pt2 = test::import_public(dir, "chakra/param-pt2-et-1.1.1.json.gz", result);
    REQUIRE(pt2.kernels.size() == 4);
    CHECK(std::count(pt2.kernels.step.begin(), pt2.kernels.step.end(), 5) == 2);
    CHECK(std::count(pt2.kernels.step.begin(), pt2.kernels.step.end(), 6) == 2);
    CHECK(pt2.str(pt2.kernels.name[1]) == "triton_poi_fused_add_cos_neg_sin_0");
    CHECK(pt2.allocations.size() == 9);
    // ResNet, schema 1.0.3: three steps of leaf ops, 1,969 GPU allocations (872 storage ids, given
    // again to new memory) and 350 host ones (tests/import/public_traces.py recomputes their peaks
    // from the nodes).
    TraceData resnet = test::import_public(dir, "chakra/param-resnet-1gpu-et-1.0.3.json.gz", result);
    CHECK(resnet.kernels.size() == 7752);
    CHECK(resnet.allocations.size() == 2319);
    CHECK(std::count(resnet.allocations.device.begin(), resnet.allocations.device.end(), 0) == 1969);
}

TEST_CASE("et: the autograd thread's ops take the step whose ids they fall within, not none", "[import][et][public]") {
    test::TempDir dir;
    imp::Result result;
    // Both ResNet traces: three ProfilerStep#N nodes on thread 1 (1,519 leaf ops with tensors under
    // each), and 3,195 leaf ops on the autograd thread 2, whose root is the profiler's thread node:
    // 1,065 backward ops per step, all with ids between the step node's and the last id under it.
    // They were imported in no step (-1): 3,195 of 7,752 ops, the whole backward.
    for (const auto& [name, first] : {std::tuple{"chakra/param-resnet-1gpu-et-1.0.3.json.gz", 4},
                                      std::tuple{"chakra/param-resnet-et-1.1.0-chakra.0.0.4.json.gz", 6}}) {
        INFO(name);
        TraceData trace = test::import_public(dir, name, result);
        CHECK(trace.kernels.size() == 7752);
        for (int step = first; step < first + 3; ++step)
            CHECK(std::count(trace.kernels.step.begin(), trace.kernels.step.end(), step) == 2584);
        CHECK(trace.meta.at("et.steps_by_id").rfind("3195 ops under no ProfilerStep#N", 0) == 0);
    }
    // A trace without ProfilerStep#N nodes takes its steps from its optimizer step's node instead
    // (the test above), and says nothing of steps by ProfilerStep#N ids.
    TraceData plain = test::import_public(dir, "chakra/param-resnet-et-1.0.1.json.gz", result);
    CHECK(plain.meta.count("et.steps_by_id") == 0);
}
