// The closed forms against published figures and against each other.
#include <catch2/catch.hpp>

#include "mhc/common/error.hpp"
#include "mhc/datasets/config.hpp"
#include "mhc/datasets/formulas.hpp"

using namespace mhc::datasets;

TEST_CASE("parameter counts match the published model sizes") {
    // Hugging Face model cards / safetensors metadata of the released checkpoints.
    CHECK(parameter_count(preset("gpt2-small")) == 124439808);
    CHECK(parameter_count(preset("llama2-7b")) == 6738415616);
    CHECK(parameter_count(preset("llama2-70b-slice")) == 68976648192);
    // Without parallelism the traced GPU holds the whole model.
    CHECK(local_parameter_count(preset("gpt2-small")) == parameter_count(preset("gpt2-small")));
    CHECK(local_parameter_count(preset("llama2-7b")) == parameter_count(preset("llama2-7b")));
}

TEST_CASE("the 70B slice holds one tensor-parallel shard of a quarter of the layers") {
    GeneratorConfig c = preset("llama2-70b-slice");
    // Per layer on TP rank 0: (2h^2 + 2h*kv + 3h*ffn)/8 + 2h, 20 layers, embedding / 8.
    double h = 8192, kv = 1024, f = 28672;
    double layer = (h * h + h * h + 2 * h * kv + 3 * h * f) / 8 + 2 * h;
    double expect = 20 * layer + 32000.0 / 8 * h;
    CHECK(double(local_parameter_count(c)) == expect);
}

TEST_CASE("GPT activations follow Korthikanti et al. sbh(34 + 5as/h)") {
    GeneratorConfig c = preset("gpt2-small");   // dropout on, no flash, bf16, ffn = 4h
    REQUIRE(c.dropout);
    REQUIRE(!c.flash);
    double s = double(c.seq), b = double(c.micro_batch), h = double(c.hidden), a = c.heads;
    CHECK(double(activation_bytes_per_layer(c)) == Approx(s * b * h * (34 + 5 * a * s / h)).epsilon(1e-12));
    CHECK(double(activation_bytes_per_layer(c)) == korthikanti_bytes_per_layer(s, b, h, a, 1));
    c.tp = 4;   // sbh(10 + 24/t + 5as/(ht))
    CHECK(double(activation_bytes_per_layer(c)) == korthikanti_bytes_per_layer(s, b, h, a, 4));
    // Flash attention drops the 5as^2b term and keeps 4 bytes of log-sum-exp per row and head.
    c.tp = 1;
    c.flash = true;
    CHECK(double(activation_bytes_per_layer(c)) == s * b * h * 34 + 4 * s * b * a);
    // Full recomputation keeps the 2sbh layer input only.
    c.recompute = true;
    CHECK(double(activation_bytes_per_layer(c)) == 2 * s * b * h);
}

TEST_CASE("llama activations: SwiGLU and GQA terms, no dropout") {
    GeneratorConfig c = preset("llama2-7b");
    double s = double(c.seq), b = double(c.micro_batch), h = double(c.hidden), f = double(c.ffn);
    // 4 norm in/out + q,k,v + context + gate, up, act (bf16) + fp32 lse.
    double expect = 2 * s * b * (4 * h + 3 * h + h + 3 * f) + 4 * s * b * c.heads;
    CHECK(double(activation_bytes_per_layer(c)) == expect);
}

TEST_CASE("mHC residual is n times larger and adds the mapping terms") {
    GeneratorConfig c = preset("llama2-7b");
    c.layers = 4;
    GeneratorConfig m = c;
    m.hc = 4;
    CHECK(residual_bytes_per_layer(m) == 4 * residual_bytes_per_layer(c));
    double T = double(c.seq * c.micro_batch), h = double(c.hidden), n = 4;
    double extra = 2 * (n * 2 * T * h + 2 * T * h + 4 * T * (2 * n * n + 2 * n));
    CHECK(double(activation_bytes_per_layer(m) - activation_bytes_per_layer(c)) == extra);
    // Block recomputation keeps the stream only at block starts.
    m.hc_recompute = true;
    m.hc_block = 2;
    CHECK(residual_bytes_per_layer(m, 0) == 4 * 2 * int64_t(T * h));
    CHECK(residual_bytes_per_layer(m, 1) == 0);
    // Default block: round(sqrt(n L / (n + 2))) = round(sqrt(16/6)) = 2 layers.
    m.hc_block = 0;
    CHECK(dims(m).hc_block == 2);
}

TEST_CASE("FLOPs per step: 6 N tokens plus the attention term") {
    GeneratorConfig c = preset("llama2-7b");
    c.micro_batches = 1;
    double N = double(parameter_count(c)), T = double(c.seq * c.micro_batch);
    double emb = double(c.vocab) * c.hidden;   // the lookup table does no matmul
    double attn = 3 * 4.0 * T * double(c.seq) * c.hidden * c.layers;
    double norms = double(c.layers) * 2 * c.hidden + c.hidden;
    CHECK(model_flops_per_step(c) == Approx(6 * (N - emb - norms) * T + attn).epsilon(1e-12));
    CHECK(flops_per_step(c) == model_flops_per_step(c));
    c.recompute = true;   // one more forward pass of every layer
    double fwd_layers = (6 * (N - emb - norms) * T - 6 * emb * T) / 3 + attn / 3;
    CHECK(flops_per_step(c) - model_flops_per_step(c) == Approx(fwd_layers).epsilon(1e-9));
}

TEST_CASE("presets and validation") {
    CHECK(preset_names().size() == 4);
    for (const auto& n : preset_names()) CHECK_NOTHROW(validate(preset(n)));
    try {
        preset("gpt5");
        FAIL("no error");
    } catch (const mhc::Error& e) {
        std::string m = e.what();
        CHECK(m.find("gpt5") != std::string::npos);
        CHECK(m.find("llama2-70b-slice") != std::string::npos);
    }
    CHECK_THROWS_AS(gpu_spec("v100"), mhc::Error);
    GeneratorConfig c = preset("gpt2-small");
    c.heads = 7;   // 768 is not a multiple of 7
    c.kv_heads = 7;
    CHECK_THROWS_WITH(validate(c), Catch::Contains("hidden"));
    c = preset("gpt2-small");
    c.tp = 5;
    CHECK_THROWS_WITH(validate(c), Catch::Contains("tp"));
    c = preset("gpt2-small");
    c.hc = 0;
    CHECK_THROWS_WITH(validate(c), Catch::Contains("hc"));
    c = preset("llama2-70b-slice");
    c.layers = 78;   // not a multiple of pp = 4
    CHECK_THROWS_WITH(validate(c), Catch::Contains("pp"));
    CHECK(preset("mhc-27b").hc == 4);
    CHECK(preset("mhc-27b").sinkhorn_iters == 20);
}
