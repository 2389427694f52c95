// Generated traces held against the closed forms, the trace checks and each other.
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "mhc/common/error.hpp"
#include "mhc/datasets/formulas.hpp"
#include "mhc/datasets/generate.hpp"
#include "mhc/test/temp.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/trace/summary.hpp"

using namespace mhc::datasets;
using mhc::trace::Category;
using mhc::trace::MarkerKind;
using mhc::trace::TraceData;
namespace fs = std::filesystem;

namespace {

fs::path tmp_dir() {
    static const fs::path d = mhc::test::scratch_dir("mhc_datasets_test");
    return d;
}

struct Generated {
    GenerateStats stats;
    TraceData trace;
    std::string path;
};

Generated make(const GeneratorConfig& c, const std::string& name) {
    Generated g;
    g.path = (tmp_dir() / (name + ".db")).string();
    fs::remove(g.path);
    g.stats = generate_file(c, g.path);
    g.trace = mhc::trace::load_trace(g.path);
    return g;
}

// A preset cut to two local layers (and few steps) so that tests stay fast.
GeneratorConfig small(const std::string& name, int steps = 2) {
    GeneratorConfig c = preset(name);
    c.layers = 2 * c.pp;
    c.steps = steps;
    return c;
}

std::string check_text(const TraceData& t) {
    auto r = mhc::trace::check_trace(t);
    std::string s;
    for (size_t i = 0; i < r.problems.size() && i < 5; ++i)
        s += r.problems[i].table + " " + std::to_string(r.problems[i].row) + ": " + r.problems[i].message + "\n";
    return s;
}

// End of the forward pass of the first micro-batch of step 0: the end of the marker of the
// last local layer's forward pass.
int64_t forward_end(const TraceData& t, int local_layers) {
    const auto& m = t.markers;
    for (size_t i = 0; i < m.size(); ++i)
        if (m.kind[i] == MarkerKind::Layer && t.str(m.name[i]) == "layer " + std::to_string(local_layers - 1) + " forward")
            return m.t_end[i];
    FAIL("no forward marker");
    return 0;
}

// Bytes of activation allocations alive at `time` whose label starts with `prefix` (and
// ends with `suffix` when given).
int64_t live_bytes(const TraceData& t, int64_t time, const std::string& prefix, const std::string& suffix = "") {
    const auto& a = t.allocations;
    int64_t sum = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (a.category[i] != Category::Activation || a.t_alloc[i] > time || a.t_free[i] <= time) continue;
        const std::string& l = t.str(a.label[i]);
        if (l.rfind(prefix, 0) != 0) continue;
        if (!suffix.empty() && (l.size() < suffix.size() || l.compare(l.size() - suffix.size(), suffix.size(), suffix) != 0))
            continue;
        sum += a.bytes[i];
    }
    return sum;
}

std::string file_bytes(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
}

void check_against_formulas(const GeneratorConfig& c, const std::string& name) {
    INFO(name);
    Generated g = make(c, name);
    const TraceData& t = g.trace;
    REQUIRE(check_text(t) == "");
    Dims d = dims(c);
    // Parameter bytes.
    int64_t pbytes = 0;
    for (size_t i = 0; i < t.allocations.size(); ++i)
        if (t.allocations.category[i] == Category::Param) pbytes += t.allocations.bytes[i];
    CHECK(pbytes == local_parameter_count(c) * d.d);
    CHECK(g.stats.param_bytes == pbytes);
    // Saved activations per layer at the forward/backward boundary.
    if (c.micro_batches == 1) {
        int64_t te = forward_end(t, static_cast<int>(d.layers));
        for (int l = 0; l < d.layers; ++l) {
            INFO("layer " << l);
            std::string pre = "L" + std::to_string(l) + ".";
            CHECK(live_bytes(t, te, pre) == activation_bytes_per_layer(c, l));
            CHECK(live_bytes(t, te, pre, ".attn.residual") + live_bytes(t, te, pre, ".mlp.residual") ==
                  residual_bytes_per_layer(c, l));
        }
    }
    // FLOPs summed over the emitted kernels.
    CHECK(g.stats.flops_per_step == Approx(flops_per_step(c)).epsilon(1e-9));
    CHECK(g.stats.gemm_flops_per_step == Approx(gemm_flops_per_step(c)).epsilon(1e-9));
    // Every kernel accesses something and belongs to a step; markers are complete.
    const auto& k = t.kernels;
    for (size_t i = 0; i < k.size(); ++i) {
        REQUIRE(k.access_begin[i + 1] > k.access_begin[i]);
        REQUIRE(k.step[i] >= 0);
        REQUIRE(k.step[i] < c.steps);
    }
    std::set<int> steps;
    int layer_markers = 0;
    for (size_t i = 0; i < t.markers.size(); ++i) {
        if (t.markers.kind[i] == MarkerKind::Step) steps.insert(t.markers.index[i]);
        if (t.markers.kind[i] == MarkerKind::Layer) ++layer_markers;
    }
    CHECK(steps.size() == size_t(c.steps));
    CHECK(*steps.begin() == 0);
    CHECK(layer_markers == 2 * d.layers * c.micro_batches * c.steps);
    CHECK(t.meta.at("source") == "generate");
    CHECK(t.meta.at("preset") == c.preset);
    CHECK(t.meta.at("device_memory") == std::to_string(c.gpu.memory_bytes));
    CHECK(t.meta.at("device_name") == c.gpu.device_name);
    CHECK(t.meta.at("seed") == std::to_string(c.seed));
    CHECK(g.stats.rows == t.rows() - 1);   // strings[0], the empty name, is not a row
}

}  // namespace

TEST_CASE("every preset passes the trace checks and matches the formulas") {
    for (const auto& name : preset_names()) {
        GeneratorConfig c = small(name);
        check_against_formulas(c, name);
        c.micro_batches = 1;   // one micro-batch: the per-layer boundary is well defined
        check_against_formulas(c, name + "-1mb");
    }
}

TEST_CASE("variants: recomputation, mHC block recomputation, no flash, dropout, TP, fp32") {
    GeneratorConfig c = small("gpt2-small");
    c.recompute = true;
    check_against_formulas(c, "gpt2-recompute");
    c = small("llama2-7b");
    c.layers = 5;
    c.hc = 4;
    c.hc_recompute = true;
    c.dp = 1;
    check_against_formulas(c, "llama-hc-block");
    c.hc_block = 2;
    check_against_formulas(c, "llama-hc-block2");
    c.recompute = true;
    check_against_formulas(c, "llama-hc-full-recompute");
    c = small("llama2-7b");
    c.flash = false;
    c.dropout = true;
    c.seq = 1024;
    c.zero1 = false;
    check_against_formulas(c, "llama-noflash-dropout");
    c = small("gpt2-small");
    c.tp = 2;
    c.hc = 4;
    c.dtype = DType::FP32;
    c.micro_batches = 3;
    check_against_formulas(c, "gpt2-tp-hc-fp32");
    c.micro_batches = 1;
    check_against_formulas(c, "gpt2-tp-hc-fp32-1mb");
}

TEST_CASE("mHC n=4 saves an n-stream residual four times the plain one") {
    GeneratorConfig c = small("llama2-7b", 1);
    c.dp = 1;
    GeneratorConfig m = c;
    m.hc = 4;
    Generated g1 = make(c, "n1"), g4 = make(m, "n4");
    int64_t t1 = forward_end(g1.trace, 2), t4 = forward_end(g4.trace, 2);
    for (int l = 0; l < 2; ++l) {
        std::string pre = "L" + std::to_string(l) + ".";
        int64_t r1 = live_bytes(g1.trace, t1, pre, ".residual");
        int64_t r4 = live_bytes(g4.trace, t4, pre, ".residual");
        CHECK(r1 > 0);
        CHECK(r4 == 4 * r1);
    }
    // The Sinkhorn-Knopp kernel runs twice per layer forward and twice backward.
    int sk = 0;
    for (size_t i = 0; i < g4.trace.kernels.size(); ++i)
        if (g4.trace.str(g4.trace.kernels.name[i]).find("sinkhorn") != std::string::npos) ++sk;
    CHECK(sk == 2 * 2 * 2);
    for (size_t i = 0; i < g1.trace.kernels.size(); ++i)
        CHECK(g1.trace.str(g1.trace.kernels.name[i]).find("sinkhorn") == std::string::npos);
}

TEST_CASE("GEMM durations times the roofline rate give the GEMM FLOPs") {
    GeneratorConfig c = small("llama2-7b", 1);
    c.jitter = 0;
    c.dp = 1;
    Generated g = make(c, "roofline");
    const TraceData& t = g.trace;
    double seconds = 0;
    for (size_t i = 0; i < t.kernels.size(); ++i) {
        const std::string& n = t.str(t.kernels.name[i]);
        if (n.find("gemm") != std::string::npos && n.rfind("mhc", 0) != 0)
            seconds += double(t.kernels.t_end[i] - t.kernels.t_start[i]) * 1e-9;
    }
    double flops = seconds * c.gpu.matmul_flops * c.gpu.gemm_eff;
    CHECK(flops == Approx(gemm_flops_per_step(c)).epsilon(0.002));
}

TEST_CASE("same seed, same file, another seed, another file") {
    GeneratorConfig c = small("gpt2-small");
    Generated a = make(c, "seed-a"), b = make(c, "seed-b");
    c.seed = 2;
    Generated d = make(c, "seed-c");
    std::string fa = file_bytes(a.path), fb = file_bytes(b.path), fd = file_bytes(d.path);
    CHECK(!fa.empty());
    CHECK(fa == fb);
    CHECK(fa != fd);
    CHECK(a.trace.kernels.t_end != d.trace.kernels.t_end);
    CHECK(a.trace.kernels.size() == d.trace.kernels.size());
}

TEST_CASE("data-parallel gradient collectives overlap the backward pass on their own stream") {
    GeneratorConfig c = small("llama2-7b", 1);
    c.layers = 4;
    c.bucket_bytes = 64 << 20;
    Generated g = make(c, "dp");
    const auto& k = g.trace.kernels;
    std::vector<size_t> comm, comp;
    for (size_t i = 0; i < k.size(); ++i) {
        if (g.trace.str(k.name[i]).rfind("ncclDevKernel", 0) == 0) comm.push_back(i);
        else comp.push_back(i);
    }
    REQUIRE(comm.size() > 1);
    int overlapping = 0;
    for (size_t i : comm) {
        CHECK(k.stream[i] != k.stream[comp.front()]);
        for (size_t j : comp)
            if (k.t_start[j] < k.t_end[i] && k.t_start[i] < k.t_end[j]) {
                ++overlapping;
                break;
            }
    }
    CHECK(overlapping > 0);
    std::set<Category> cats(g.trace.allocations.category.begin(), g.trace.allocations.category.end());
    for (Category cat : {Category::Param, Category::Grad, Category::Optimizer, Category::Activation,
                         Category::Workspace, Category::Comm, Category::Other})
        CHECK(cats.count(cat) == 1);
}

TEST_CASE("an interrupted generation leaves no file behind") {
    std::atomic<bool> cancel{false};
    GenerateHooks hooks;
    hooks.cancel = &cancel;
    double last = 0;
    int calls = 0;
    hooks.progress = [&](double f) {
        CHECK(f >= last);
        last = f;
        if (++calls == 3) cancel.store(true);
    };
    std::string path = (tmp_dir() / "cancel.db").string();
    CHECK_THROWS_AS(generate_file(small("gpt2-small"), path, hooks), Cancelled);
    CHECK(!fs::exists(path));
    CHECK(!fs::exists(path + ".mhc-tmp-" + std::to_string(getpid())));
    GeneratorConfig bad = small("gpt2-small");
    bad.heads = 5;
    CHECK_THROWS_AS(generate_file(bad, path), mhc::Error);
    CHECK(!fs::exists(path));
}

TEST_CASE("preset peaks are plausible for their GPU") {
    // Whole presets with one step: the peak must fit the device but use most of it for the
    // large ones (they are memory-pressure cases), and gpt2-small must be small.
    for (const auto& name : preset_names()) {
        GeneratorConfig c = preset(name);
        c.steps = 2;
        Generated g = make(c, "peak-" + name);
        auto peak = mhc::trace::live_peak(g.trace, 0);
        double frac = double(peak.bytes) / double(c.gpu.memory_bytes);
        INFO(name << " peak " << peak.bytes << " = " << frac << " of the device");
        CHECK(frac < 1.0);
        if (name == "gpt2-small") CHECK(frac < 0.3);
        else CHECK(frac > 0.75);
    }
}

// Found by the simulator: a saved tensor that the backward never freed made the peak grow by
// one layer-stack of it per step. Every activation and workspace must die within its step,
// and the live peak must not grow with the number of steps.
TEST_CASE("activations and workspaces die within their step, the peak does not grow with steps") {
    for (const char* name : {"gpt2-small", "llama2-7b", "llama2-70b-slice", "mhc-27b"}) {
        INFO(name);
        Generated g = make(small(name, 3), std::string("steady_") + name);
        const auto& a = g.trace.allocations;
        const auto& m = g.trace.markers;
        std::vector<std::pair<int64_t, int64_t>> steps;
        for (size_t i = 0; i < m.size(); ++i)
            if (m.kind[i] == MarkerKind::Step) steps.emplace_back(m.t_start[i], m.t_end[i]);
        REQUIRE(steps.size() == 3);
        int outliving = 0;
        for (size_t i = 0; i < a.size(); ++i) {
            if (a.category[i] != Category::Activation && a.category[i] != Category::Workspace) continue;
            for (auto [s0, s1] : steps)
                if (a.t_alloc[i] >= s0 && a.t_alloc[i] < s1 && a.t_free[i] > s1) ++outliving;
        }
        CHECK(outliving == 0);
        Generated longer = make(small(name, 5), std::string("steady5_") + name);
        int32_t dev = 0;
        CHECK(mhc::trace::live_peak(longer.trace, dev).bytes == mhc::trace::live_peak(g.trace, dev).bytes);
    }
}

// mhc generate refuses a trace past --max-output-size from this estimate, before writing: the
// rows counted over two steps and extrapolated must be the rows written, for every preset and a
// few variants, and the bytes near the file's size (the figures in docs/datasets.md, "Size").
TEST_CASE("the estimate of a generated trace: its rows exactly and its size within 15%") {
    std::vector<GeneratorConfig> configs;
    for (const auto& name : preset_names()) configs.push_back(small(name, 5));
    GeneratorConfig one_step = small("llama2-7b", 1), accumulation = small("gpt2-small", 4);
    accumulation.micro_batches = 3;
    GeneratorConfig mhc = small("mhc-27b", 3);
    mhc.hc_recompute = true;
    configs.insert(configs.end(), {one_step, accumulation, mhc});
    int index = 0;
    for (const GeneratorConfig& config : configs) {
        const OutputEstimate estimate = estimate_output(config);
        const std::string path = (tmp_dir() / ("estimate" + std::to_string(index++) + ".db")).string();
        fs::remove(path);
        const GenerateStats written = generate_file(config, path);
        INFO(config.preset << " " << config.steps << " steps: estimated " << estimate.rows.total() << " rows, "
                           << estimate.bytes << " B; wrote " << written.rows << " rows, " << fs::file_size(path)
                           << " B");
        CHECK(estimate.exact);
        CHECK(estimate.rows.total() == written.rows);
        CHECK(estimate.rows.kernels == written.kernels);
        CHECK(estimate.rows.accesses == written.accesses);
        CHECK(estimate.rows.allocations == written.allocations);
        const double ratio = static_cast<double>(estimate.bytes) / static_cast<double>(fs::file_size(path));
        CHECK(ratio > 0.85);
        CHECK(ratio < 1.15);
        fs::remove(path);
    }
    // Past the counting budget the count is scaled by the share of the layers done: near, not exact.
    GeneratorConfig wide = small("gpt2-small", 3);
    const OutputEstimate whole = estimate_output(wide);
    const OutputEstimate scaled = estimate_output(wide, whole.rows.total() / 4);
    CHECK(!scaled.exact);
    CHECK(std::abs(static_cast<double>(scaled.rows.total()) / static_cast<double>(whole.rows.total()) - 1) < 0.25);
    // A step count the file could never hold is estimated, not generated (1e6 steps of 4,096 layers).
    GeneratorConfig huge = preset("gpt2-small");
    huge.steps = 1000000;
    huge.layers = 4096;
    const OutputEstimate far = estimate_output(huge);
    CHECK(far.bytes > (int64_t{1} << 40));
}
