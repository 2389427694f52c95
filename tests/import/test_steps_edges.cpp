// Step boundaries at the edges of what a trace records (steps.hpp): an Nsight Systems export whose
// last ProfilerStep#N or optimizer-step NVTX range was never ended, and a memory snapshot's one
// optimizer stepping unevenly told from two optimizers by what each range allocates.
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <catch2/catch.hpp>

#include "mhc/trace/check.hpp"
#include "public_variants.hpp"
#include "util.hpp"

namespace imp = mhc::trace::import;
using mhc::trace::TraceData;

namespace {

std::map<int32_t, int64_t> kernels_per_step(const TraceData& trace) {
    std::map<int32_t, int64_t> out;
    for (int32_t step : trace.kernels.step) ++out[step];
    return out;
}

using Step = std::tuple<std::string, int64_t, int64_t, int32_t>;

std::vector<Step> step_markers(const TraceData& trace) {
    std::vector<Step> got;
    for (size_t i = 0; i < trace.markers.size(); ++i)
        if (trace.markers.kind[i] == mhc::trace::MarkerKind::Step)
            got.emplace_back(trace.str(trace.markers.name[i]), trace.markers.t_start[i], trace.markers.t_end[i],
                             trace.markers.index[i]);
    return got;
}

}   // namespace

TEST_CASE("nsys: a step's NVTX range left open when recording stopped ends at the end of recording",
          "[import][nsys][public][steps]") {
    // The 2024.6 export (its clock's earliest start, the base, 635,655,591 ns, and its latest end,
    // 1,280,318,183 ns, are NVTX ranges': sqlite3, 2026-12-05) with three
    // Optimizer.step#AdamW.step ranges as emit_nvtx writes them: 1.0 to 1.1 s, 1.2 to 1.25 s, and one
    // pushed at 1.25 s and never popped (end NULL, as nsys exports a range open when it stopped).
    // Kernels by their launch: 2 up to 1.1 s, 6 up to 1.25 s, 11 after (test_public_nsys.cpp). The
    // open range is the last step, to the end of recording: those 11 are in step 2. Before
    // 2026-12-05 (fifth) it was passed over: 2 steps, the 11 in no step.
    test::TempDir dir;
    imp::Result result;
    const std::string in = dir.file("open_optimizer.sqlite");
    test::public_variant("nsys/fuser-h200-nsys-2024.6.sqlite", in,
                         "INSERT INTO NVTX_EVENTS (start, end, eventType, text) VALUES "
                         "(1000000000, 1100000000, 59, 'Optimizer.step#AdamW.step, op_id = 12'), "
                         "(1200000000, 1250000000, 59, 'Optimizer.step#AdamW.step, op_id = 40'), "
                         "(1250000000, NULL, 59, 'Optimizer.step#AdamW.step, op_id = 68');");
    const TraceData trace = test::import_public_path(dir, in, result);
    CHECK(kernels_per_step(trace) == std::map<int32_t, int64_t>{{0, 2}, {1, 6}, {2, 11}});
    CHECK(mhc::trace::summarize(trace).steps == 3);
    const int64_t end = 1280318183 - 635655591;
    const std::vector<Step> steps = step_markers(trace);
    REQUIRE(steps.size() == 3);
    CHECK(steps[2] == Step{"step#2", 1250000000 - 635655591, end, 2});
    CHECK(trace.meta.at("nsys.nvtx_unended_ranges") ==
          "1 NVTX ranges have no end (pushed or started and never ended while nsys recorded; the first: "
          "'Optimizer.step#AdamW.step, op_id = 68'): each is a marker of no length at its start, but 1 "
          "ProfilerStep#N or optimizer-step ranges, which end at the end of recording (" +
              std::to_string(end) + " ns): the step open there");

    SECTION("a ProfilerStep#N left open is that step, to the end of recording") {
        // ProfilerStep#3 from 1.0 to 1.25 s, ProfilerStep#4 from 1.25 s never ended: the 6 kernels
        // launched in #3, the 11 after in #4; the 2 launched before 1.0 s in none. Before: #4 was
        // no step, its 11 kernels in none.
        const std::string profiled = dir.file("open_profiler_step.sqlite");
        test::public_variant("nsys/fuser-h200-nsys-2024.6.sqlite", profiled,
                             "INSERT INTO NVTX_EVENTS (start, end, eventType, text) VALUES "
                             "(1000000000, 1250000000, 59, 'ProfilerStep#3'), "
                             "(1250000000, NULL, 59, 'ProfilerStep#4');");
        const TraceData marked = test::import_public_path(dir, profiled, result);
        CHECK(kernels_per_step(marked) == std::map<int32_t, int64_t>{{-1, 2}, {3, 6}, {4, 11}});
        CHECK(step_markers(marked) == std::vector<Step>{{"ProfilerStep#3", 1000000000 - 635655591,
                                                         1250000000 - 635655591, 3},
                                                        {"ProfilerStep#4", 1250000000 - 635655591, end, 4}});
        CHECK(marked.meta.at("steps_from") == "ProfilerStep#N ranges (the profiler's step markers)");
    }
    SECTION("an open range of another name stays a marker of no length, no step") {
        const std::string other = dir.file("open_other.sqlite");
        test::public_variant("nsys/fuser-h200-nsys-2024.6.sqlite", other,
                             "INSERT INTO NVTX_EVENTS (start, end, eventType, text) VALUES "
                             "(1000000000, 1100000000, 59, 'Optimizer.step#AdamW.step'), "
                             "(1200000000, 1250000000, 59, 'Optimizer.step#AdamW.step'), "
                             "(1250000000, NULL, 59, 'forward');");
        const TraceData plain = test::import_public_path(dir, other, result);
        CHECK(kernels_per_step(plain) == std::map<int32_t, int64_t>{{-1, 11}, {0, 2}, {1, 6}});
        CHECK(plain.meta.at("nsys.nvtx_unended_ranges") ==
              "1 NVTX ranges have no end (pushed or started and never ended while nsys recorded; the first: "
              "'forward'): each is a marker of no length at its start");
    }
}

namespace {

// A snapshot (JSON) of eight iterations at T = 1000 + 100 i us: a forward alloc at T+10 (freed at
// T+40), then Optimizer.step#Adam.step from T+50 to T+55 (even i) or T+`odd_end` (odd i), inside which one
// temporary of `even_bytes` or `odd_bytes` (none where 0) is allocated at T+51 and freed at T+53.
std::string adam_snapshot(int64_t even_bytes, int64_t odd_bytes, int64_t odd_end = 80) {
    std::string events = R"({"action": "alloc", "addr": 4096, "size": 512, "stream": 0, "time_us": 100})";
    std::string notes;
    auto entry = [](const char* action, int64_t addr, int64_t size, int64_t us) {
        return std::string(R"(, {"action": ")") + action + R"(", "addr": )" + std::to_string(addr) +
               R"(, "size": )" + std::to_string(size) + R"(, "stream": 0, "time_us": )" + std::to_string(us) + "}";
    };
    auto note = [](const char* stage, int64_t us) {
        return std::string(R"({"name": "Optimizer.step#Adam.step", "stage": ")") + stage +
               R"(", "device": 0, "time_us": )" + std::to_string(us) + "}";
    };
    for (int i = 0; i < 8; ++i) {
        const int64_t at = 1000 + 100 * i, bytes = i % 2 ? odd_bytes : even_bytes;
        events += entry("alloc", 1 << 20, 1 << 20, at + 10) + entry("free_completed", 1 << 20, 1 << 20, at + 40);
        if (bytes > 0) events += entry("alloc", 1 << 24, bytes, at + 51) + entry("free_completed", 1 << 24, bytes, at + 53);
        notes += std::string(i ? ", " : "") + note("START", at + 50) + ", " + note("END", at + (i % 2 ? odd_end : 55));
    }
    return R"({"device_traces": [[)" + events + R"(]], "external_annotations": [)" + notes + "]}";
}

}   // namespace

TEST_CASE("snapshot: one optimizer stepping unevenly is told from two by what its ranges allocate",
          "[import][snapshot][steps]") {
    // Durations of 6,000 and 31,000 ns in turns (over the 1.5 that makes them take turns). Each range
    // allocates 4,096 B: the same in both classes, one optimizer slow every other step (a sync, a
    // checkpoint): a step per range, 8. Before 2026-12-05 (fifth) a snapshot had durations alone:
    // 5 steps, read as a GAN's two Adam.
    test::TempDir dir;
    imp::Result result;
    const std::string in = dir.file("uneven.json");
    test::write_file(in, adam_snapshot(4096, 4096));
    const TraceData one = test::import_public_path(dir, in, result, "uneven.db");
    CHECK(mhc::trace::summarize(one).steps == 8);
    CHECK(one.meta.at("steps_from") ==
          "Optimizer.step#Adam.step ranges (no ProfilerStep#N in the trace): a step per Optimizer.step#Adam.step "
          "range (their durations take turns with a period of 2 but each runs the same 4096 bytes allocated: one "
          "optimizer stepping unevenly)");
    CHECK(test::warned(result, "every one of them runs the same 4096 bytes allocated"));
    const std::vector<Step> steps = step_markers(one);
    REQUIRE(steps.size() == 8);
    CHECK(steps[1] == Step{"step#1", (1055 + 1 - 100) * 1000, (1180 + 1 - 100) * 1000, 1});

    SECTION("two optimizers allocating differently still make a step per two ranges") {
        const std::string gan = dir.file("gan.json");
        test::write_file(gan, adam_snapshot(4096, 12288));
        const TraceData two = test::import_public_path(dir, gan, result, "gan.db");
        CHECK(mhc::trace::summarize(two).steps == 5);
        CHECK(two.meta.at("steps_from") ==
              "Optimizer.step#Adam.step ranges (no ProfilerStep#N in the trace): a step per 2 "
              "Optimizer.step#Adam.step ranges (their durations take turns)");
    }
    SECTION("ranges that allocate nothing (fused optimizers) say nothing: durations decide, as before") {
        const std::string fused = dir.file("fused.json");
        test::write_file(fused, adam_snapshot(0, 0));
        const TraceData two = test::import_public_path(dir, fused, result, "fused.db");
        CHECK(mhc::trace::summarize(two).steps == 5);
    }
}

namespace {

// An execution trace (schema 1.0.1) of eight iterations: a forward aten::mm on its activation
// (storage 10 + i), then an Optimizer.step#Adam.step node with one aten::_foreach_add_ below it on
// two parameters: storages 100 and 101 where `one_model`, else 100/101 (even i) and 200/201 (odd
// i): two identical models, each with its own Adam stepping the same work.
std::string adam_et(bool one_model) {
    std::string nodes;
    int id = 1;
    auto node = [&](const std::string& name, int parent, const std::string& inputs, int count) {
        std::string types;
        for (int k = 0; k < count; ++k) types += std::string(k ? "," : "") + "\"Tensor(float)\"";
        nodes += std::string(nodes.empty() ? "" : ",") + "{\"id\":" + std::to_string(id) + ",\"name\":\"" + name +
                 "\",\"parent\":" + std::to_string(parent) + ",\"rf_id\":" + std::to_string(id) +
                 ",\"tid\":1,\"seq_id\":-1,\"inputs\":[" + inputs + "],\"input_types\":[" + types +
                 "],\"outputs\":[],\"output_types\":[]}";
        return id++;
    };
    auto tensor = [](int tensor_id, int storage) {
        return "[" + std::to_string(tensor_id) + "," + std::to_string(storage) + ",0,16,4,\"cuda:0\"]";
    };
    for (int i = 0; i < 8; ++i) {
        node("aten::mm", 0, tensor(1000 + i, 10 + i), 1);
        const int model = one_model || i % 2 == 0 ? 100 : 200;
        const int step = node("Optimizer.step#Adam.step", 0, "", 0);
        node("aten::_foreach_add_", step, tensor(model, model) + "," + tensor(model + 1, model + 1), 2);
    }
    return "{\"schema\":\"1.0.1\",\"pid\":1,\"nodes\":[" + nodes + "]}";
}

}   // namespace

TEST_CASE("execution trace: two optimizers of one class stepping the same work are told apart by their tensors",
          "[import][et][steps]") {
    // Every optimizer range runs 2 nodes in 2 ids, 3 ids apart: durations, gaps and work alike.
    // Their tensors take turns (100/101, 200/201): two optimizers, a step per two ranges, 4 steps.
    // Before 2026-12-05 (fifth): 8 steps of half an iteration each.
    test::TempDir dir;
    imp::Result result;
    const std::string in = dir.file("two_models_et.json");
    test::write_file(in, adam_et(false));
    const TraceData two = test::import_public_path(dir, in, result, "two.db");
    CHECK(mhc::trace::summarize(two).steps == 4);
    CHECK(two.meta.at("steps_from") ==
          "Optimizer.step#Adam.step ranges (no ProfilerStep#N in the trace): a step per 2 Optimizer.step#Adam.step "
          "ranges (their tensors take turns)");
    CHECK(two.meta.at("steps_optimizers") ==
          "2 optimizers of Optimizer.step#Adam.step: its ranges take turns stepping 2 sets of tensors");

    SECTION("one model: every range steps the same tensors, a step each") {
        const std::string single = dir.file("one_model_et.json");
        test::write_file(single, adam_et(true));
        const TraceData one = test::import_public_path(dir, single, result, "one.db");
        CHECK(mhc::trace::summarize(one).steps == 8);
        CHECK(one.meta.at("steps_optimizers") ==
              "one optimizer of Optimizer.step#Adam.step: every range steps the same tensors");
    }
}

TEST_CASE("steps: where the trace records no tensors, one optimizer is assumed and said", "[import][snapshot][steps]") {
    // The snapshot above with every range 6,000 ns and 4,096 B: nothing tells one Adam from two
    // alike taking turns; the meta says one was assumed.
    test::TempDir dir;
    imp::Result result;
    const std::string in = dir.file("even.json");
    test::write_file(in, adam_snapshot(4096, 4096, 55));
    const TraceData trace = test::import_public_path(dir, in, result, "even.db");
    CHECK(mhc::trace::summarize(trace).steps == 8);
    CHECK(trace.meta.at("steps_optimizers") ==
          "one optimizer of Optimizer.step#Adam.step assumed: the trace records no tensors of its ranges, and two "
          "optimizers of one class stepping the same work in the same time (two identical models, a GAN whose two "
          "networks are alike) would look the same; each step would then be half an iteration");
}

TEST_CASE("execution trace: one optimizer assumed where its ranges' tensors are known but show no period is said so",
          "[import][et][steps]") {
    // param's linear-model execution trace: its Optimizer.step#SGD.step nodes read their parameters
    // (the trace records tensors), too few to show a period (2 a class at least). Before 2026-12-05
    // (later) meta steps_optimizers said 'the trace records no tensors of its ranges', which an
    // execution trace does (public_traces.py's check_steps_optimizers reads the same start).
    test::TempDir dir;
    imp::Result result;
    const TraceData trace = test::import_public(dir, "chakra/param-linear-et-1.0.1.json.gz", result);
    CHECK(trace.meta.at("steps_optimizers").rfind(
              "one optimizer of Optimizer.step#SGD.step assumed: its ranges' tensors show no period of 1 to 4 ranges", 0) ==
          0);
}
