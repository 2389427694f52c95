// Steps of generated Kineto traces without ProfilerStep#N: taken from the optimizer's step ranges
// (steps.hpp), one optimizer stepping unevenly against two of one class taking turns.
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "public_variants.hpp"
#include "util.hpp"

namespace imp = mhc::trace::import;

namespace {

std::string event(const std::string& cat, const std::string& name, int pid, int tid, int64_t ts, int64_t dur,
                  const std::string& args = "{}") {
    return R"({"ph":"X","cat":")" + cat + R"(","name":")" + name + R"(","pid":)" + std::to_string(pid) + R"(,"tid":)" +
           std::to_string(tid) + R"(,"ts":)" + std::to_string(ts) + R"(,"dur":)" + std::to_string(dur) + R"(,"args":)" +
           args + "}";
}

// An op at `ts` on the main thread (pid 1, tid 1) launching one kernel (GPU 0, stream 7) of
// correlation id `corr`: the op, its cudaLaunchKernel and the kernel.
std::string op_with_kernel(const std::string& op, const std::string& kernel, int64_t ts, int corr) {
    const std::string id = R"({"correlation":)" + std::to_string(corr) + "}";
    return event("cpu_op", op, 1, 1, ts, 20) + "," + event("cuda_runtime", "cudaLaunchKernel", 1, 1, ts + 5, 5, id) +
           "," +
           event("kernel", kernel, 0, 7, ts + 30, 10,
                 R"({"device":0,"stream":7,"correlation":)" + std::to_string(corr) + "}");
}

// Eight iterations at T = 1000 + 1000 i us: a forward op with one kernel at T, then
// Optimizer.step#Adam.step from T+400 lasting 100 us (even i) or 400 us (odd i), running
// `even_ops` or `odd_ops` ops of one kernel each.
std::string adam_trace(int even_ops, int odd_ops) {
    std::string events;
    int corr = 1;
    for (int i = 0; i < 8; ++i) {
        const int64_t at = 1000 + 1000 * i, length = i % 2 ? 400 : 100;
        events += (i ? "," : "") + op_with_kernel("aten::mm", "gemm", at, corr++) + "," +
                  event("user_annotation", "Optimizer.step#Adam.step", 1, 1, at + 400, length);
        for (int op = 0; op < (i % 2 ? odd_ops : even_ops); ++op)
            events += "," +
                      op_with_kernel("aten::_foreach_add_", "multi_tensor_apply_kernel", at + 410 + 25 * op, corr++);
    }
    return R"({"schemaVersion":1,"traceEvents":[)" + events + "]}";
}

std::map<int32_t, int64_t> kernels_per_step(const mhc::trace::TraceData& trace) {
    std::map<int32_t, int64_t> out;
    for (int32_t step : trace.kernels.step) ++out[step];
    return out;
}

}   // namespace

TEST_CASE("kineto: one optimizer whose steps alternate in duration makes a step per optimizer step",
          "[import][kineto][steps]") {
    // One Adam stepping 100 and 400 us in turns (4 times: over the 1.5 that makes durations take
    // turns), each step running the same 2 ops (each op, its runtime call; the range itself: 5).
    // The same work in both classes: one optimizer stepping unevenly, a step per range: 8 steps
    // of 3 kernels (the forward's and the optimizer's 2). Before 2026-12-05 (later): 4 steps of 2
    // ranges each plus the rest, as a GAN's two Adam optimizers.
    test::TempDir dir;
    imp::Result result;
    const std::string in = dir.file("uneven.json");
    test::write_file(in, adam_trace(2, 2));
    const mhc::trace::TraceData trace = test::import_public_path(dir, in, result, "uneven.db");
    CHECK(kernels_per_step(trace) ==
          std::map<int32_t, int64_t>{{0, 3}, {1, 3}, {2, 3}, {3, 3}, {4, 3}, {5, 3}, {6, 3}, {7, 3}});
    CHECK(mhc::trace::summarize(trace).steps == 8);
    CHECK(trace.meta.at("steps_from") ==
          "Optimizer.step#Adam.step ranges (no ProfilerStep#N in the trace): a step per Optimizer.step#Adam.step "
          "range (their durations take turns with a period of 2 but each runs the same 5 ops and calls: one "
          "optimizer stepping unevenly)");
    CHECK(test::warned(result,
                       "Optimizer.step#Adam.step's durations take turns with a period of 2, but every one "
                       "of them runs the same 5 ops and calls"));

    SECTION("two optimizers of one class, each its own work, still make a step per two ranges") {
        // A GAN's two Adam optimizers: the short ranges run 2 ops (work 5), the long ones 5 (work
        // 11): the work differs, so the durations' period of 2 stands. The gaps after the long
        // ones (600 us) are shorter than after the short ones (900), so a step ends after a short
        // one and begins with a long one (phase 1): ends at ranges 0, 2, 4, 6 and the last, 7:
        // 5 steps: 1 + 2 = 3 kernels, then 6 + 3 = 9 three times, then 6 (range 7's iteration).
        const std::string gan = dir.file("gan.json");
        test::write_file(gan, adam_trace(2, 5));
        imp::Result gan_result;
        const mhc::trace::TraceData two = test::import_public_path(dir, gan, gan_result, "gan.db");
        CHECK(kernels_per_step(two) == std::map<int32_t, int64_t>{{0, 3}, {1, 9}, {2, 9}, {3, 9}, {4, 6}});
        CHECK(two.meta.at("steps_from") ==
              "Optimizer.step#Adam.step ranges (no ProfilerStep#N in the trace): a step per 2 "
              "Optimizer.step#Adam.step ranges (their durations take turns)");
        CHECK(test::warned(gan_result, "Optimizer.step#Adam.step's take turns with a period of 2 (their durations"));
    }
}

TEST_CASE("kineto: a loop range in the first half of every step places step 0's start where none is in the first tenth",
          "[import][kineto][public][steps]") {
    // param's linear-model trace: no ProfilerStep#N, 40 Optimizer.step#SGD.step ranges, and an
    // Optimizer.zero_grad#SGD.zero_grad in every step 3.3 to 17.2 ms after the step before ended
    // (20 to 29% into each step: the loop moves its batch first), none within the first tenth.
    // The first zero_grad begins 1,000,212 us after the trace's first event, and the median of
    // those offsets puts step 0's start at 993,617,000 ns; step 0 ends with the first optimizer
    // step, at 1,022,364,000 ns (public_traces.py's cpu_steps: the same 40 step lengths). Before
    // 2026-12-05 (later): step 0 from 0, 1.02 s holding the setup, with a warning that it lasts 41
    // times the median step.
    test::TempDir dir;
    imp::Result result;
    const mhc::trace::TraceData trace = test::import_public(dir, "kineto/param-linear-kineto.json.gz", result);
    CHECK(mhc::trace::summarize(trace).steps == 40);
    int64_t first_start = -1, first_end = -1;
    for (size_t i = 0; i < trace.markers.size(); ++i)
        if (trace.markers.kind[i] == mhc::trace::MarkerKind::Step && trace.markers.index[i] == 0)
            first_start = trace.markers.t_start[i], first_end = trace.markers.t_end[i];
    CHECK(first_start == 993617000);
    CHECK(first_end == 1022364000);
    CHECK(trace.meta.at("steps_from") ==
          "Optimizer.step#SGD.step ranges (no ProfilerStep#N in the trace); step 0 from the last "
          "Optimizer.zero_grad#SGD.zero_grad before the first");
    CHECK_FALSE(test::warned(result, "it holds the trace's start"));
    // Its optimizer ranges last 631 to 3,154 us with no pattern, each running 46 ops and calls:
    // no period, a step each (kernels: 136 in step 0, 220 in each later one).
    std::map<int32_t, int64_t> per_step = kernels_per_step(trace);
    CHECK(per_step.size() == 40);
    CHECK(per_step[0] == 136);
    CHECK(per_step[39] == 220);
}

TEST_CASE("et: one optimizer whose step nodes span alternating id ranges with the same nodes makes a step each",
          "[import][et][steps]") {
    // An execution trace of eight iterations on thread 1: a forward aten::mul, then an
    // Optimizer.step#Adam.step node with two aten::add_ under it. In odd iterations the autograd
    // thread (2) runs four aten::mul between the two add_, so those optimizer nodes span 7 ids
    // against 3 (over the 1.5 that makes durations take turns) while each has 3 nodes (its work):
    // one optimizer, a step each: 8 steps of 3 leaf ops (even) and 7 (odd: the other thread's 4
    // in its ids). Before 2026-12-05 (later): a step per two nodes, as a GAN's two Adam.
    auto tensor = [](int id) {
        return "[" + std::to_string(id) + ", " + std::to_string(id) + ", 0, 256, 4, \"cuda:0\"]";
    };
    int next = 3;
    auto node = [&](const std::string& name, int parent, int tid, bool leaf) {
        const int id = next++;
        const std::string io = leaf ? tensor(1000 + id) : std::string();
        return std::pair<int, std::string>{
            id, "{\"name\": \"" + name + "\", \"id\": " + std::to_string(id) + ", \"rf_id\": " + std::to_string(id) +
                    ", \"parent\": " + std::to_string(parent) + ", \"fw_parent\": 0, \"seq_id\": -1, \"scope\": 0, "
                    "\"tid\": " + std::to_string(tid) + ", \"fw_tid\": 0, \"op_schema\": \"\", \"inputs\": [" + io +
                    "], \"input_shapes\": [" + (leaf ? "[256]" : "") + "], \"input_types\": [" +
                    (leaf ? "\"Tensor(float)\"" : "") + "], \"outputs\": [], \"output_shapes\": [], \"output_types\": []}"};
    };
    std::string nodes =
        R"({"name": "[pytorch|profiler|execution_graph|thread]", "id": 2, "rf_id": 0, "parent": 1, "fw_parent": 0, )"
        R"("seq_id": -1, "scope": 7, "tid": 1, "fw_tid": 0, "op_schema": "", "inputs": [], "input_shapes": [], )"
        R"("input_types": [], "outputs": [], "output_shapes": [], "output_types": []})";
    for (int i = 0; i < 8; ++i) {
        nodes += ", " + node("aten::mul", 2, 1, true).second;
        const auto [step, text] = node("Optimizer.step#Adam.step", 2, 1, false);
        nodes += ", " + text + ", " + node("aten::add_", step, 1, true).second;
        if (i % 2)
            for (int other = 0; other < 4; ++other) nodes += ", " + node("aten::mul", 2, 2, true).second;
        nodes += ", " + node("aten::add_", step, 1, true).second;
    }
    test::TempDir dir;
    const std::string in = dir.file("uneven_et.json");
    test::write_file(in, R"({"schema": "1.0.1", "pid": 7, "time": "2026-12-05 12:00:00", "nodes": [)" + nodes + "]}");
    imp::Result result;
    const mhc::trace::TraceData trace = test::import_public_path(dir, in, result, "uneven_et.db");
    CHECK(mhc::trace::summarize(trace).steps == 8);
    CHECK(kernels_per_step(trace) ==
          std::map<int32_t, int64_t>{{0, 3}, {1, 7}, {2, 3}, {3, 7}, {4, 3}, {5, 7}, {6, 3}, {7, 7}});
    CHECK(trace.meta.at("steps_from") ==
          "Optimizer.step#Adam.step ranges (no ProfilerStep#N in the trace): a step per Optimizer.step#Adam.step "
          "range (their durations take turns with a period of 2 but each runs the same 3 ops and calls: one "
          "optimizer stepping unevenly)");
}

TEST_CASE("kineto: the last optimizer range left open when recording stopped ends at its thread's last event",
          "[import][kineto][public][steps]") {
    // HTA's step-based trace: 5 Optimizer.step#SGD.step ranges, no ProfilerStep#N; the fifth lasts 0
    // us (the profiler stopped while it ran) and its four aten::add_ (with their launches and
    // kernels) follow it on its thread, the last ending 135 us after its start. It ends there:
    // 26 kernels in each of the 5 steps (public_traces.py's cpu_steps: the same). Before 2026-12-05
    // (later): step 4 held 22, and the 4 kernels of its update were in no step.
    test::TempDir dir;
    imp::Result result;
    const mhc::trace::TraceData trace =
        test::import_public(dir, "kineto/hta-step-based-sgd-gpu-annotations.json.gz", result);
    CHECK(kernels_per_step(trace) == std::map<int32_t, int64_t>{{0, 26}, {1, 26}, {2, 26}, {3, 26}, {4, 26}});
    CHECK(trace.meta.at("kineto.open_optimizer_ranges") ==
          "1 last optimizer-step range of 0 us (open when recording stopped: Optimizer.step#SGD.step with ops after "
          "it on its thread) taken to end at its thread's last event, 135000 ns after its start");
    CHECK(test::warned(result, "so the step it ends holds that work"));
}

TEST_CASE("kineto: a first iteration slower than the later ones before its zero_grad keeps that work in step 0",
          "[import][kineto][steps]") {
    // Six iterations: each moves its batch (3 aten::copy_ ops with a kernel each), zeroes the
    // gradients, runs a forward op with a kernel and steps SGD (100 us). Iterations 1-5 begin at
    // B = 10,000 + 1,000 (i - 1) us: copies at B+5, B+15, B+25, zero_grad at B+150, forward at B+200,
    // the optimizer from B+800 to B+900: zero_grad 250 us after the step before ended (25% into
    // each step: the first-half rule), 6 ops and calls of the thread before it. Iteration 0 moves
    // its first batch slowly: copies at 7,000, 7,800 and 8,600, zero_grad at 9,150, the rest as the
    // others; the model is built at 1,000 (the trace's first event). By the time lead alone step 0
    // began at 9,150 - 250 = 8,900 us, its 3 copies' kernels in no step; by the 6 ops and calls that
    // lead zero_grad in every later step, at 7,000 us: 6,000,000 ns after the first event, each
    // step 4 kernels. Before 2026-12-05 (fifth): {-1: 3, 0: 1, ...}.
    std::string events = event("cpu_op", "aten::empty", 1, 1, 1000, 50);
    int corr = 1;
    for (int i = 0; i < 6; ++i) {
        const int64_t at = i == 0 ? 9000 : 10000 + 1000 * (i - 1);
        const std::vector<int64_t> copies = i == 0 ? std::vector<int64_t>{7000, 7800, 8600}
                                                   : std::vector<int64_t>{at + 5, at + 15, at + 25};
        for (int64_t copy : copies) events += "," + op_with_kernel("aten::copy_", "copy_kernel", copy, corr++);
        events += "," + event("user_annotation", "Optimizer.zero_grad#SGD.zero_grad", 1, 1, at + 150, 10) + "," +
                  op_with_kernel("aten::mm", "gemm", at + 200, corr++) + "," +
                  event("user_annotation", "Optimizer.step#SGD.step", 1, 1, at + 800, 100);
    }
    test::TempDir dir;
    imp::Result result;
    const std::string in = dir.file("slow_first.json");
    test::write_file(in, R"({"schemaVersion":1,"traceEvents":[)" + events + "]}");
    const mhc::trace::TraceData trace = test::import_public_path(dir, in, result, "slow_first.db");
    CHECK(kernels_per_step(trace) == std::map<int32_t, int64_t>{{0, 4}, {1, 4}, {2, 4}, {3, 4}, {4, 4}, {5, 4}});
    int64_t first_start = -1;
    for (size_t i = 0; i < trace.markers.size(); ++i)
        if (trace.markers.kind[i] == mhc::trace::MarkerKind::Step && trace.markers.index[i] == 0)
            first_start = trace.markers.t_start[i];
    CHECK(first_start == 6000000);
    CHECK(trace.meta.at("steps_from") ==
          "Optimizer.step#SGD.step ranges (no ProfilerStep#N in the trace); step 0 from the last "
          "Optimizer.zero_grad#SGD.zero_grad before the first");
}

namespace {

// Three iterations at T = 1000 + 1000 i us, each an op with one kernel at T+100 and T+300 on the
// main thread, and its ProfilerStep#(i+2) written from T+900 for 20 us (`at_end`: the range at the
// end of its step, as torch 2.5 writes it with with_stack=True), or from T for 990 us (as the
// profiler means it). `between`: ops of no kernel written after each range, at T+995.
std::string profiler_step_trace(bool at_end, int between) {
    std::string events;
    int corr = 1;
    for (int i = 0; i < 3; ++i) {
        const int64_t at = 1000 + 1000 * i;
        const int mm = corr++, add = corr++;
        events += (i ? "," : "") + op_with_kernel("aten::mm", "gemm", at + 100, mm) + "," +
                  op_with_kernel("aten::add", "add", at + 300, add) + "," +
                  event("user_annotation", "ProfilerStep#" + std::to_string(i + 2), 1, 1, at_end ? at + 900 : at,
                        at_end ? 20 : 990);
        for (int op = 0; op < between; ++op) events += "," + event("cpu_op", "aten::empty", 1, 1, at + 995, 1);
    }
    return R"({"schemaVersion":1,"traceEvents":[)" + events + "]}";
}

std::map<int32_t, std::pair<int64_t, int64_t>> step_markers(const mhc::trace::TraceData& trace) {
    std::map<int32_t, std::pair<int64_t, int64_t>> out;
    for (size_t i = 0; i < trace.markers.size(); ++i)
        if (trace.markers.kind[i] == mhc::trace::MarkerKind::Step)
            out[trace.markers.index[i]] = {trace.markers.t_start[i], trace.markers.t_end[i]};
    return out;
}

}   // namespace

TEST_CASE("kineto: ProfilerStep#N ranges written at the end of their step begin where the one before ended",
          "[import][kineto][steps]") {
    // Each ProfilerStep#N lasts 20 us from T+900, after its step's two ops (4 ops and calls of the
    // thread before each range, 12 in all, 0 within them): the ranges were written with their end
    // only right. Each begins where the one before ended (T-80), the first at its thread's first op
    // (1100 us, the trace's start, time 0): steps 2-4 from 0, 820,000 and 1,820,000 ns to 820,000,
    // 1,820,000 and 2,820,000 ns, 2 kernels each. Before 2026-12-05 (writers matrix): every kernel
    // in no step ({-1: 6}), and the steps 20 us long.
    test::TempDir dir;
    imp::Result result;
    const std::string in = dir.file("at_end.json");
    test::write_file(in, profiler_step_trace(true, 0));
    const mhc::trace::TraceData trace = test::import_public_path(dir, in, result, "at_end.db");
    CHECK(kernels_per_step(trace) == std::map<int32_t, int64_t>{{2, 2}, {3, 2}, {4, 2}});
    CHECK(step_markers(trace) == std::map<int32_t, std::pair<int64_t, int64_t>>{
                                     {2, {0, 820000}}, {3, {820000, 1820000}}, {4, {1820000, 2820000}}});
    CHECK(trace.meta.at("kineto.profiler_steps_mended").rfind("3 ProfilerStep#N ranges of 1 thread(s) held fewer", 0) ==
          0);
    CHECK(test::warned(result, "each taken to begin where the one before it ended"));
}

TEST_CASE("kineto: ProfilerStep#N ranges that hold their ops are kept with a few ops between them",
          "[import][kineto][steps]") {
    // The profiler's own ranges, [T, T+990], with 0 or 2 ops in each 10 us between two (at T+995;
    // tb-plugin's PyTorch 1.8 traces have 3 or 4 between ranges of thousands): 4 ops and calls within
    // each range (12), 4 between: kept, steps from the first range's start (time 0).
    for (int between : {0, 2}) {
        test::TempDir dir;
        imp::Result result;
        const std::string in = dir.file("held.json");
        test::write_file(in, profiler_step_trace(false, between));
        const mhc::trace::TraceData trace = test::import_public_path(dir, in, result, "held.db");
        CHECK(kernels_per_step(trace) == std::map<int32_t, int64_t>{{2, 2}, {3, 2}, {4, 2}});
        CHECK(step_markers(trace) == std::map<int32_t, std::pair<int64_t, int64_t>>{
                                         {2, {0, 990000}}, {3, {1000000, 1990000}}, {4, {2000000, 2990000}}});
        CHECK(trace.meta.count("kineto.profiler_steps_mended") == 0);
    }
}

TEST_CASE("kineto: torch 2.5.1's ProfilerStep#N ranges written with with_stack=True hold their steps once mended",
          "[import][kineto][steps][writers]") {
    // tests/import/fixtures/writers/torch-2.5.1-kineto.json.gz (make_writers.py, torch 2.5.1 on the
    // CPU): ProfilerStep#2..5 each about 20 us, from the start of the prof.step() call that ends it;
    // the 237 ops and annotations of each step lie before it (public_traces.py reads the same). Mended:
    // step 2 from the thread's first op (time 0) to 40,127,236 ns, each later step from the end of
    // the range before. Before 2026-12-05: steps of 18.7, 21.4, 18.4 and 15.3 us ('mean 18.44 us').
    test::TempDir dir;
    imp::Result result;
    const mhc::trace::TraceData trace = test::import_public_path(
        dir, test::fixture("writers/torch-2.5.1-kineto.json.gz"), result, "t251.db");
    CHECK(step_markers(trace) ==
          std::map<int32_t, std::pair<int64_t, int64_t>>{
              {2, {0, 40127236}}, {3, {40127236, 50841383}}, {4, {50841383, 52284140}}, {5, {52284140, 53484977}}});
    CHECK(trace.meta.at("kineto.profiler_steps_mended").rfind("4 ProfilerStep#N ranges of 1 thread(s)", 0) == 0);
    // torch 2.9.1's ranges of the same loop hold their steps: kept as written.
    imp::Result other;
    const mhc::trace::TraceData t291 = test::import_public_path(
        dir, test::fixture("writers/torch-2.9.1-kineto.json.gz"), other, "t291.db");
    CHECK(step_markers(t291).size() == 4);
    CHECK(t291.meta.count("kineto.profiler_steps_mended") == 0);
    // torch 2.5.1 with with_stack=False (make_writers.py --no-stack): its ranges hold their steps.
    const mhc::trace::TraceData plain = test::import_public_path(
        dir, test::fixture("writers/torch-2.5.1-no-stack-kineto.json.gz"), other, "t251plain.db");
    CHECK(step_markers(plain).size() == 4);
    CHECK(plain.meta.count("kineto.profiler_steps_mended") == 0);
}

namespace {

// A kernel event of process `pid`'s GPU `device` (the GPU lane's pid is the device number, as
// Kineto writes it) on stream 7, of correlation id `corr`.
std::string gpu_kernel(int device, int64_t ts, int corr) {
    return event("kernel", "k", device, 7, ts, 10,
                 R"({"device":)" + std::to_string(device) + R"(,"stream":7,"correlation":)" + std::to_string(corr) + "}");
}

// A launch at `ts` by process `pid` of a kernel on GPU `device` 25 us later.
std::string launched(int pid, int device, int64_t ts, int corr) {
    return event("cuda_runtime", "cudaLaunchKernel", pid, pid, ts, 5, R"({"correlation":)" + std::to_string(corr) + "}") +
           "," + gpu_kernel(device, ts + 25, corr);
}

std::map<int32_t, std::map<int32_t, int64_t>> kernels_per_device_step(const mhc::trace::TraceData& trace) {
    std::map<int32_t, std::map<int32_t, int64_t>> out;
    for (size_t i = 0; i < trace.kernels.size(); ++i) ++out[trace.kernels.device[i]][trace.kernels.step[i]];
    return out;
}

}   // namespace

TEST_CASE("kineto: kernels whose launch the file lacks are in their own process's steps, none if launched before "
          "recording", "[import][kineto][steps]") {
    // Process 1001 (GPU 0): ProfilerStep#3 [1000, 1990], #4 [2000, 2990]; launches of ids 10 and 11 in
    // them; a kernel of id 5 at 1050 (below its first call's id: launched before recording began,
    // and run in step 3) and one of id 12 at 2500 (its call lost). Process 1002 (GPU 1), 500 us
    // behind: #3 [1500, 2490], #4 [2500, 3490]; launches of ids 20 and 22; a kernel of id 19 at 1520
    // and one of id 21 at 2300, in its own step 3 but in the joined step 4 (begun at 2000).
    // Before 2026-12-07 each such kernel took the joined step its start fell in: GPU 0 {3: 2, 4: 2},
    // GPU 1 {3: 2, 4: 2}.
    const std::string events =
        event("user_annotation", "ProfilerStep#3", 1001, 1001, 1000, 990) + "," +
        event("user_annotation", "ProfilerStep#4", 1001, 1001, 2000, 990) + "," + launched(1001, 0, 1100, 10) + "," +
        launched(1001, 0, 2100, 11) + "," + gpu_kernel(0, 1050, 5) + "," + gpu_kernel(0, 2500, 12) + "," +
        event("user_annotation", "ProfilerStep#3", 1002, 1002, 1500, 990) + "," +
        event("user_annotation", "ProfilerStep#4", 1002, 1002, 2500, 990) + "," + launched(1002, 1, 1600, 20) + "," +
        launched(1002, 1, 2600, 22) + "," + gpu_kernel(1, 1520, 19) + "," + gpu_kernel(1, 2300, 21);
    test::TempDir dir;
    imp::Result result;
    const std::string in = dir.file("unlaunched.json");
    test::write_file(in, R"({"schemaVersion":1,"traceEvents":[)" + events + "]}");
    const mhc::trace::TraceData trace = test::import_public_path(dir, in, result, "unlaunched.db");
    CHECK(kernels_per_device_step(trace) ==
          std::map<int32_t, std::map<int32_t, int64_t>>{{0, {{-1, 1}, {3, 1}, {4, 2}}}, {1, {{-1, 1}, {3, 2}, {4, 1}}}});
    CHECK(trace.meta.at("kineto.kernels_launched_before_recording") ==
          "2 kernels whose launch the file lacks, of correlation ids 5 to 19, below every call the file holds of "
          "their process: launched before recording began, so in no step (their start fell in step 3: 2)");
}

TEST_CASE("kineto: a real trace's kernels launched before recording are not counted in its first step",
          "[import][kineto][steps][public]") {
    // HTA's TorchRec rank: 705 kernels of ids 815,091 to 824,946 whose calls precede the file's first
    // (824,968) ran in ProfilerStep#550. Before 2026-12-07 step 550 held 1,780 kernels, each later
    // step 1,075; now each step holds 1,075.
    test::TempDir dir;
    imp::Result result;
    const mhc::trace::TraceData trace = test::import_public(dir, "kineto/hta-torchrec-rank0-five-streams.json.gz", result);
    CHECK(kernels_per_step(trace) == std::map<int32_t, int64_t>{
                                         {-1, 705}, {550, 1075}, {551, 1075}, {552, 1075}, {553, 1075}, {554, 1075}});
    CHECK_THAT(trace.meta.at("kineto.kernels_launched_before_recording"),
               Catch::StartsWith("705 kernels whose launch the file lacks, of correlation ids 815091 to 824946") &&
                   Catch::EndsWith("(their start fell in step 550: 705)"));
}
