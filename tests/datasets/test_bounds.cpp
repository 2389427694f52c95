// The generator's options are bounded so that every trace it writes passes `mhc check`: over
// random values of every option, drawn across the whole range the command accepts, each trace
// is either written and clean, or refused with one line (and nothing left behind).
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <random>

#include "mhc/common/error.hpp"
#include "mhc/datasets/generate.hpp"
#include "mhc/test/temp.hpp"
#include "mhc/trace/check.hpp"

using namespace mhc::datasets;

namespace {

struct Draw {
    std::mt19937_64 rng;
    double log_uniform(double lo, double hi) {
        std::uniform_real_distribution<double> u(std::log(lo), std::log(hi));
        return std::exp(u(rng));
    }
    int64_t log_int(int64_t lo, int64_t hi) {
        return std::clamp<int64_t>(std::llround(log_uniform(double(lo), double(hi))), lo, hi);
    }
    int64_t pick(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }
    bool coin() { return pick(0, 1) == 1; }
};

// One configuration drawn over the ranges `mhc generate` accepts (cli/cmd_generate.cpp): rates
// and shapes log-uniformly from their least to their largest value. The number of rows grows
// with layers, steps and micro-batches only, which are kept small so that each draw is quick.
GeneratorConfig draw(Draw& d) {
    const auto& names = preset_names();
    GeneratorConfig c = preset(names[size_t(d.pick(0, int64_t(names.size()) - 1))]);
    c.tp = int(d.pick(1, 2));
    c.pp = int(d.pick(1, 2));
    c.dp = int(d.pick(1, 2));
    c.layers = c.pp * int(d.pick(1, 2));
    c.heads = c.tp * int(d.pick(1, 4));
    c.kv_heads = d.coin() ? c.heads : c.tp;
    c.hidden = c.heads * d.log_int(1, (int64_t{1} << 20) / c.heads);
    c.ffn = c.tp * d.log_int(1, (int64_t{1} << 22) / c.tp);
    c.seq = d.log_int(1, int64_t{1} << 22);
    c.max_positions = 0;
    c.micro_batch = d.log_int(1, 65536);
    c.vocab = d.log_int(1, int64_t{1} << 26);
    c.steps = int(d.pick(1, 2));
    c.micro_batches = int(d.pick(1, 3));
    c.hc = int(d.pick(1, 4));
    c.sinkhorn_iters = int(d.log_int(1, 1000));
    c.hc_block = 0;
    c.zero1 = d.coin();
    c.recompute = d.coin();
    c.flash = d.coin();
    c.dropout = d.coin();
    c.hc_recompute = d.coin();
    c.dtype = std::array{DType::BF16, DType::FP16, DType::FP32}[size_t(d.pick(0, 2))];
    c.jitter = std::uniform_real_distribution<double>(0, 0.5)(d.rng);
    c.seed = d.rng();
    c.bucket_bytes = d.log_int(1, int64_t{1} << 40);
    c.gpu.matmul_flops = d.log_uniform(1e6, 1e20);   // --gpu-flops
    c.gpu.mem_bw = d.log_uniform(1e3, 1e16);         // --gpu-bw
    c.gpu.memory_bytes = d.log_int(1, int64_t{1} << 56);
    return c;
}

std::string describe(const GeneratorConfig& c) {
    char b[512];
    std::snprintf(b, sizeof b,
                  "preset %s layers %d hidden %lld heads %d kv %d ffn %lld seq %lld mb %lld vocab %lld steps %d mbs %d "
                  "hc %d dp %d tp %d pp %d flops %g bw %g jitter %g seed %llu",
                  c.preset.c_str(), c.layers, (long long)c.hidden, c.heads, c.kv_heads, (long long)c.ffn,
                  (long long)c.seq, (long long)c.micro_batch, (long long)c.vocab, c.steps, c.micro_batches, c.hc,
                  c.dp, c.tp, c.pp, c.gpu.matmul_flops, c.gpu.mem_bw, c.jitter, (unsigned long long)c.seed);
    return b;
}

}  // namespace

TEST_CASE("generate: every trace written from random option values passes check, the others are refused in one line",
          "[datasets][bounds]") {
    mhc::test::TempDir dir("mhc-bounds");
    Draw d{std::mt19937_64(0x5eed2024)};
    int written = 0, refused = 0;
    for (int i = 0; i < 80; ++i) {
        GeneratorConfig c = draw(d);
        const bool ranks = i % 4 == 3;   // a quarter as one rank of a multi-rank job
        const std::string path = dir.file("t" + std::to_string(i) + ".db");
        INFO(describe(c) << (ranks ? " (one rank)" : ""));
        try {
            if (ranks) {
                c.multi_rank = true;
                generate_ranks(c, {{c.pp - 1, c.dp - 1, 0, path}});
            } else {
                generate_file(c, path);
            }
        } catch (const mhc::Error& e) {
            ++refused;
            const std::string m = e.what();
            CHECK(!m.empty());
            CHECK(m.find('\n') == std::string::npos);
            CHECK(e.kind() == mhc::Error::Kind::BadInput);
            CHECK(!std::filesystem::exists(path));
            continue;
        }
        ++written;
        auto report = mhc::trace::check_file(path);
        INFO((report.ok() ? std::string() : report.problems.front().message + " [" + report.problems.front().rule + "]"));
        CHECK(report.ok());
        std::filesystem::remove(path);
    }
    // Both outcomes occur: the draws reach past what a trace can hold, and within it.
    CHECK(written >= 20);
    CHECK(refused >= 10);
    CHECK(dir.entries() == 0);   // no temporary file of a refused or written trace is left
}

TEST_CASE("generate: rates outside their bounds are refused naming the option", "[datasets][bounds]") {
    GeneratorConfig c = preset("gpt2-small");
    c.steps = 1;
    c.layers = 1;
    for (double flops : {1e-3, 1e-300, 0.0, -1.0, std::nan(""), double(INFINITY), 1e21}) {
        GeneratorConfig x = c;
        x.gpu.matmul_flops = flops;
        INFO(flops);
        CHECK_THROWS_WITH(validate(x), Catch::Contains("gpu-flops"));
    }
    for (double bw : {1e-3, 1e17, std::nan("")}) {
        GeneratorConfig x = c;
        x.gpu.mem_bw = bw;
        CHECK_THROWS_WITH(validate(x), Catch::Contains("gpu-bw"));
    }
    GeneratorConfig slow = c;
    slow.gpu.matmul_flops = 1e6;
    slow.seq = int64_t{1} << 22;
    slow.max_positions = 0;
    mhc::test::TempDir dir("mhc-bounds");
    CHECK_THROWS_WITH(generate_file(slow, dir.file("slow.db")), Catch::Contains("2^62 ns"));
    CHECK(dir.entries() == 0);
}
