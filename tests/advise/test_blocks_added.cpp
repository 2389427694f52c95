// More blocks never make the search's answer worse, and a stack whose first member alone differs
// in type (a front-end's layers: Wav2Vec2's feature extractor) is a block stack.
#include <catch2/catch.hpp>

#include <random>

#include "fixture.hpp"
#include "mhc/advise/dp.hpp"
#include "step.hpp"
#include "tiny.hpp"

using namespace mhc::advise;
using advisetest::Category;
using advisetest::Fixture;
using advisetest::Phase;
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
    auto step = [](const std::vector<std::string>& fe_types) {
        TinyTrace tiny;
        tiny.modules = {{"M", "Model"}};
        std::vector<std::string> mods;
        for (size_t i = 0; i < fe_types.size(); ++i) {
            const std::string name = "M.fe." + std::to_string(i);
            tiny.modules.push_back({name, fe_types[i]});
            tiny.modules.push_back({name + ".conv", "Conv1d"});
            mods.push_back(name + ".conv");
        }
        for (int i = 0; i < 3; ++i) {
            const std::string name = "M.enc." + std::to_string(i);
            tiny.modules.push_back({name, "Layer"});
            tiny.modules.push_back({name + ".ff", "Linear"});
            mods.push_back(name + ".ff");
            mods.push_back(name + ".ff");
        }
        const int n = static_cast<int>(mods.size());
        int prev = tiny.alloc(100, Category::Other, "batch", -1, -1);
        std::vector<int> out;
        for (int k = 0; k < n; ++k) {
            out.push_back(tiny.alloc(100, Category::Activation, "a" + std::to_string(k), k, n + (n - 1 - k)));
            tiny.kernel({"aten::mm", mods[static_cast<size_t>(k)], Phase::Forward, {{prev, 'r'}, {out.back(), 'w'}},
                         {out.back()}});
            prev = out.back();
        }
        for (int k = n - 1; k >= 0; --k)
            tiny.kernel({"aten::mm_backward", mods[static_cast<size_t>(k)], Phase::Backward,
                         {{out[static_cast<size_t>(k)], 'r'}}, {}});
        return tiny;
    };
    {
        Fixture fix(step({"GroupNormConvLayer", "NoLayerNormConvLayer", "NoLayerNormConvLayer"}));
        CHECK(fix.base.info.block_name == std::vector<std::string>{"M.fe.0", "M.fe.1", "M.fe.2", "M.enc.0",
                                                                  "M.enc.1", "M.enc.2"});
    }
    {   // a later member differing: no stack of blocks
        Fixture fix(step({"NoLayerNormConvLayer", "NoLayerNormConvLayer", "GroupNormConvLayer"}));
        CHECK(fix.base.info.block_name == std::vector<std::string>{"M.enc.0", "M.enc.1", "M.enc.2"});
    }
    {   // two members of two types: no stack either
        Fixture fix(step({"GroupNormConvLayer", "NoLayerNormConvLayer"}));
        CHECK(fix.base.info.block_name == std::vector<std::string>{"M.enc.0", "M.enc.1", "M.enc.2"});
    }
}
