// More blocks never make the search's answer worse, and a stack whose first member alone differs
// in type (a front-end's layers: Wav2Vec2's feature extractor) is a block stack.
#include <catch2/catch.hpp>

#include <random>

#include "fixture.hpp"
#include "mhc/advise/dp.hpp"
#include "mhc/advise/planner.hpp"
#include "step.hpp"
#include "tiny.hpp"

using namespace mhc::advise;
using advisetest::Category;
using advisetest::Fixture;
using advisetest::Phase;
using advisetest::Step;
using advisetest::TinyTrace;

namespace {

constexpr int64_t MiB = 1 << 20;

SeparableModel random_model(std::mt19937_64& rng, size_t blocks, size_t choices) {
    // in MiB-sized bytes, as captured steps are, searched with the planner's quantum of 1 MiB
    std::uniform_int_distribution<int64_t> win(500 * MiB, 1500 * MiB), held(-400 * MiB, 50 * MiB), time(0, 100),
        jitter(0, MiB - 1);
    SeparableModel m;
    m.blocks.assign(blocks, std::vector<BlockOption>(choices));
    for (auto& b : m.blocks)
        for (size_t c = 0; c < choices; ++c) {
            BlockOption& o = b[c];
            o.wf = win(rng);
            o.wb = win(rng);
            o.df = c == 0 ? 0 : held(rng) + jitter(rng);
            o.db = c == 0 ? 0 : held(rng) + jitter(rng);
            o.time = c == 0 ? 0 : time(rng);
        }
    m.gap_f.assign(blocks + 1, INT64_MIN);
    m.gap_b.assign(blocks + 1, INT64_MIN);
    m.gap_f[0] = win(rng);
    m.gap_b[blocks] = win(rng) + 600 * MiB;
    m.gap_b[0] = win(rng);
    return m;
}

// `m` with one block more at `at`, whose own windows were the gap's there before: left unchanged
// (choice 0) it changes nothing, so every combination of `m` is one of the larger model with the
// same peak and time; its other choices are random.
SeparableModel with_block(std::mt19937_64& rng, const SeparableModel& m, size_t at, size_t choices) {
    SeparableModel bigger = m;
    SeparableModel one = random_model(rng, 1, choices);
    std::vector<BlockOption> added = one.blocks[0];
    added[0] = {m.gap_f[at], m.gap_b[at], 0, 0, 0};
    bigger.blocks.insert(bigger.blocks.begin() + static_cast<std::ptrdiff_t>(at), added);
    bigger.gap_f.insert(bigger.gap_f.begin() + static_cast<std::ptrdiff_t>(at), m.gap_f[at]);
    bigger.gap_b.insert(bigger.gap_b.begin() + static_cast<std::ptrdiff_t>(at), m.gap_b[at]);
    return bigger;
}

// M.fe.0 .. (a front-end of `fe_types`), then M.enc.0..2 (two kernels a layer, the most work):
// each forward kernel makes and saves its output (`mib[k]` MiB, 100 B when empty), read back by
// its backward kernel.
TinyTrace front_end_step(const std::vector<std::string>& fe_types, const std::vector<int>& mib = {}) {
    Step tiny({});
    std::vector<std::string> mods;
    for (size_t i = 0; i < fe_types.size(); ++i) {
        const std::string name = "M.fe." + std::to_string(i);
        tiny.module(name, fe_types[i]);
        tiny.module(name + ".conv", "Conv1d");
        mods.push_back(name + ".conv");
    }
    for (int i = 0; i < 3; ++i) {
        const std::string name = "M.enc." + std::to_string(i);
        tiny.module(name, "Layer");
        tiny.module(name + ".ff", "Linear");
        mods.push_back(name + ".ff");
        mods.push_back(name + ".ff");
    }
    const size_t n = mods.size();
    int prev = tiny.input(100, "batch");
    std::vector<int> out;
    for (size_t k = 0; k < n; ++k) {
        out.push_back(tiny.act(mib.empty() ? 100 : int64_t{mib[k]} << 20, "a" + std::to_string(k)));
        tiny.fwd(k % 2 ? "aten::mm" : "aten::mul", mods[k], {{prev, 'r'}, {out.back(), 'w'}}, {out.back()});
        prev = out.back();
    }
    for (size_t k = n; k-- > 0;) tiny.bwd("aten::mm_backward", mods[k], {{out[k], 'r'}});
    return tiny.done();
}

}  // namespace

TEST_CASE("the DP's answer is no slower with a block more (random separable models, the planner's quantum)",
          "[advise][dp]") {
    std::mt19937_64 rng(11);
    int compared = 0;
    for (int trial = 0; trial < 400; ++trial) {
        const size_t blocks = 1 + trial % 7, choices = 2 + trial % 4;
        const SeparableModel m = random_model(rng, blocks, choices);
        const size_t at = static_cast<size_t>(trial) % (blocks + 1);
        const SeparableModel bigger = with_block(rng, m, at, choices);
        const int64_t cap = std::uniform_int_distribution<int64_t>(900 * MiB, 2200 * MiB)(rng);
        const DpResult small = solve(m, cap), large = solve(bigger, cap);
        INFO("trial " << trial << ", block added at " << at);
        if (!small.feasible) continue;
        ++compared;
        REQUIRE(large.feasible);
        CHECK(large.time <= small.time);
        CHECK(model_peak(bigger, large.choice) <= cap);
    }
    CHECK(compared > 100);
}

TEST_CASE("blocks: a numbered stack whose first member alone differs in type is a block stack", "[advise][blocks]") {
    // M.fe.0 (a conv layer with a norm), M.fe.1, M.fe.2 (conv layers without), then M.enc.0..2:
    // each member one forward kernel and its backward. The encoder does the most work (two
    // kernels a layer); the front-end joins it as Wav2Vec2's conv layers should.
    {
        Fixture fix(front_end_step({"GroupNormConvLayer", "NoLayerNormConvLayer", "NoLayerNormConvLayer"}));
        CHECK(fix.base.info.block_name == std::vector<std::string>{"M.fe.0", "M.fe.1", "M.fe.2", "M.enc.0",
                                                                  "M.enc.1", "M.enc.2"});
    }
    {   // a later member differing: no stack of blocks
        Fixture fix(front_end_step({"NoLayerNormConvLayer", "NoLayerNormConvLayer", "GroupNormConvLayer"}));
        CHECK(fix.base.info.block_name == std::vector<std::string>{"M.enc.0", "M.enc.1", "M.enc.2"});
    }
    {   // two members of two types: no stack either
        Fixture fix(front_end_step({"GroupNormConvLayer", "NoLayerNormConvLayer"}));
        CHECK(fix.base.info.block_name == std::vector<std::string>{"M.enc.0", "M.enc.1", "M.enc.2"});
    }
}

TEST_CASE("the planner's answer is no slower when a front-end's layers become blocks (random steps)", "[advise][dp]") {
    // One step, its blocks found two ways: a front-end of three layers of types A, B, C (no
    // stack: 3 blocks) and of A, B, B (a stack: 6 blocks). Every combination of the first is
    // one of the second, so the second's fastest fitting answer is no slower.
    std::mt19937_64 rng(5);
    std::uniform_int_distribution<int> size(1, 64);
    int compared = 0;
    for (int trial = 0; trial < 12; ++trial) {
        std::vector<int> mib(9);
        for (int& m : mib) m = size(rng);
        // one fixture at a time (their trace files share a name)
        auto answers = [&](const std::vector<std::string>& types, size_t blocks, int64_t& baseline) {
            Fixture fix(front_end_step(types, mib));
            REQUIRE(fix.base.info.block_name.size() == blocks);
            const Evaluator ev = fix.ev();
            if (baseline == 0) baseline = ev.predict(Setting{}).memory.reserved;
            std::vector<int64_t> times;   // per capacity: the first answer's step time, -1: none
            for (double part : {0.6, 0.8}) {
                PlannerOptions o;
                o.capacity = static_cast<int64_t>(static_cast<double>(baseline) * part);
                o.top = 1;
                const Advice a = advise(ev, o);
                times.push_back(a.ranked.empty() ? -1 : a.ranked[0].prediction.step_time);
            }
            return times;
        };
        int64_t baseline = 0;
        const std::vector<int64_t> fewer = answers({"A", "B", "C"}, 3, baseline);
        const std::vector<int64_t> more = answers({"A", "B", "B"}, 6, baseline);
        for (size_t c = 0; c < fewer.size(); ++c) {
            INFO("trial " << trial << ", capacity " << (c ? 0.8 : 0.6) << " of " << baseline);
            if (fewer[c] < 0) continue;
            ++compared;
            REQUIRE(more[c] >= 0);
            CHECK(more[c] <= fewer[c]);
        }
    }
    CHECK(compared > 4);
}
