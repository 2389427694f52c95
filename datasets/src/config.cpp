// Presets, the GPUs by name (datasets/gpus.tsv) and validation of generator parameters.
#include "mhc/datasets/config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "gpu_table.hpp"
#include "mhc/common/error.hpp"

namespace mhc::datasets {

std::string_view to_string(Arch a) { return a == Arch::Gpt2 ? "gpt2" : "llama"; }
std::string_view to_string(DType d) {
    switch (d) {
        case DType::BF16: return "bf16";
        case DType::FP16: return "fp16";
        case DType::FP32: return "fp32";
    }
    return "?";
}
int dtype_bytes(DType d) { return d == DType::FP32 ? 4 : 2; }

namespace {
std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
    return s;
}
}  // namespace

std::vector<std::string> gpu_names() {
    std::vector<std::string> names;
    for (const GpuSpec& gpu : generator_gpus()) names.push_back(gpu.name);
    return names;
}

GpuSpec gpu_spec(std::string_view name) {
    for (const GpuSpec& gpu : generator_gpus())
        if (gpu.name == name) return gpu;
    throw Error("unknown GPU '" + std::string(name) + "'; valid: " + join(gpu_names()));
}

std::vector<std::string> preset_names() {
    return {"gpt2-small", "llama2-7b", "llama2-70b-slice", "mhc-27b"};
}

GeneratorConfig preset(std::string_view name) {
    GeneratorConfig c;
    c.preset = std::string(name);
    if (name == "gpt2-small") {
        // GPT-2 124M (Radford et al. 2019) as trained by nanoGPT-like scripts, one A100.
        c.arch = Arch::Gpt2;
        c.layers = 12; c.hidden = 768; c.heads = 12; c.kv_heads = 12; c.ffn = 3072;
        c.seq = 1024; c.max_positions = 1024; c.micro_batch = 8; c.vocab = 50257;
        c.flash = false; c.dropout = true;
        c.gpu = gpu_spec("a100");
    } else if (name == "llama2-7b") {
        // Llama 2 7B (Touvron et al. 2023), full fine-tune: 8 H100s, data parallel with
        // ZeRO-1 so that the optimizer states fit; micro-batch 2 x 4096 tokens.
        c.arch = Arch::Llama;
        c.layers = 32; c.hidden = 4096; c.heads = 32; c.kv_heads = 32; c.ffn = 11008;
        c.seq = 4096; c.micro_batch = 3; c.vocab = 32000;
        c.dp = 8; c.zero1 = true;
        c.gpu = gpu_spec("h100");
    } else if (name == "llama2-70b-slice") {
        // Llama 2 70B on 256 H100s: TP 8 (within a node) x PP 4 x DP 8 with the
        // distributed optimizer; the trace is stage 0 (20 layers + embedding), 1F1B
        // schedule over 8 micro-batches of 2 x 4096 tokens.
        c.arch = Arch::Llama;
        c.layers = 80; c.hidden = 8192; c.heads = 64; c.kv_heads = 8; c.ffn = 28672;
        c.seq = 4096; c.micro_batch = 2; c.vocab = 32000;
        c.tp = 8; c.pp = 4; c.dp = 8; c.zero1 = true; c.micro_batches = 8;
        c.gpu = gpu_spec("h100");
    } else if (name == "mhc-27b") {
        // A dense ~27B stand-in for the mHC paper's 27B model (that one is a
        // DeepSeek-V3-style MoE); n = 4 streams, Sinkhorn-Knopp 20 iterations. One GPU's
        // share: TP 4 x PP 4 x DP 8 (ZeRO-1), stage 0 = 16 layers, 8 micro-batches of
        // 2 x 4096 tokens, H200.
        c.arch = Arch::Llama;
        c.layers = 64; c.hidden = 6144; c.heads = 48; c.kv_heads = 8; c.ffn = 16384;
        c.seq = 4096; c.micro_batch = 2; c.vocab = 129280;
        c.tp = 4; c.pp = 4; c.dp = 8; c.zero1 = true; c.micro_batches = 8;
        c.hc = 4; c.sinkhorn_iters = 20;
        c.gpu = gpu_spec("h200");
    } else {
        throw Error("unknown preset '" + std::string(name) + "'; valid: " + join(preset_names()));
    }
    return c;
}

namespace {
std::string num_text(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", v);
    return b;
}
}  // namespace

void validate(const GeneratorConfig& c) {
    // "field 'kv-heads': '500': not in 1..12": the value quoted first, as the command line's
    // refusals say it (mhc generate names the option instead of the field).
    auto bad = [](const char* field, const std::string& why) {
        throw Error(std::string("field '") + field + "': " + why);
    };
    auto range = [&](const char* field, int64_t v, int64_t lo, int64_t hi) {
        if (v < lo || v > hi)
            bad(field, "'" + std::to_string(v) + "': not in " + std::to_string(lo) + ".." + std::to_string(hi));
    };
    range("layers", c.layers, 1, 4096);
    range("hidden", c.hidden, 1, 1 << 20);
    range("heads", c.heads, 1, 1 << 14);
    range("kv-heads", c.kv_heads, 1, c.heads);
    range("ffn", c.ffn, 1, 1 << 22);
    range("seq", c.seq, 1, 1 << 22);
    range("micro-batch", c.micro_batch, 1, 1 << 16);
    range("vocab", c.vocab, 1, 1 << 26);
    range("max-positions", c.max_positions, 0, 1 << 22);
    range("steps", c.steps, 1, 1000000);
    range("micro-batches", c.micro_batches, 1, 4096);
    range("dp", c.dp, 1, 1 << 16);
    range("tp", c.tp, 1, 1024);
    range("pp", c.pp, 1, 1024);
    range("pp-stage", c.pp_stage, 0, c.pp - 1);
    range("dp-rank", c.dp_rank, 0, c.dp - 1);
    range("tp-rank", c.tp_rank, 0, c.tp - 1);
    range("bucket-bytes", c.bucket_bytes, 1, int64_t(1) << 40);
    range("hc", c.hc, 1, 16);
    range("sinkhorn-iters", c.sinkhorn_iters, 1, 1000);
    range("hc-block", c.hc_block, 0, c.layers);
    const auto quoted = [](auto value) { return "'" + std::to_string(value) + "': "; };
    if (c.hidden % c.heads) bad("hidden", quoted(c.hidden) + "must be a multiple of heads (" + std::to_string(c.heads) + ")");
    if (c.heads % c.kv_heads) bad("kv-heads", quoted(c.kv_heads) + "must divide heads (" + std::to_string(c.heads) + ")");
    if (c.heads % c.tp) bad("tp", quoted(c.tp) + "must divide heads (" + std::to_string(c.heads) + ")");
    if (c.kv_heads % c.tp) bad("tp", quoted(c.tp) + "must divide kv-heads (" + std::to_string(c.kv_heads) + ")");
    if (c.ffn % c.tp) bad("tp", quoted(c.tp) + "must divide ffn (" + std::to_string(c.ffn) + ")");
    if (c.layers % c.pp) bad("pp", quoted(c.pp) + "must divide layers (" + std::to_string(c.layers) + ")");
    if (c.arch == Arch::Gpt2 && c.max_positions && c.max_positions < c.seq)
        bad("max-positions", quoted(c.max_positions) + "is smaller than seq (" + std::to_string(c.seq) + ")");
    if (!(c.jitter >= 0 && c.jitter <= 0.5)) bad("jitter", "'" + num_text(c.jitter) + "': not in [0, 0.5]");
    const GpuSpec& g = c.gpu;
    // Rates a GPU can have, within many orders of magnitude either way: a trace's times come
    // from them (a rate of 1e-3 FLOP/s made kernels of 10^18 ns).
    auto rate = [&](const char* field, double v, double lo, double hi, const char* unit) {
        if (!(v >= lo && v <= hi))
            bad(field, "'" + num_text(v) + "': not in [" + num_text(lo) + ", " + num_text(hi) + "] " + unit);
    };
    rate("gpu-flops", g.matmul_flops, 1e6, 1e20, "FLOP/s");
    rate("gpu", g.tf32_flops, 1e6, 1e20, "FLOP/s (tf32)");
    rate("gpu", g.fp32_flops, 1e6, 1e20, "FLOP/s (fp32)");
    rate("gpu-bw", g.mem_bw, 1e3, 1e16, "B/s");
    rate("gpu", g.nvlink_bw, 1e3, 1e16, "B/s (NVLink)");
    rate("gpu", g.net_bw, 1e3, 1e16, "B/s (network)");
    if (!(g.memory_bytes > 0 && g.memory_bytes <= (int64_t{1} << 56)))
        bad("gpu-memory", "'" + std::to_string(g.memory_bytes) + "': not in [1, 2^56] bytes");
    for (double e : {g.gemm_eff, g.attn_eff, g.mem_eff, g.comm_eff})
        if (!(e > 0 && e <= 1)) bad("gpu", "efficiency factors must be in (0, 1]");
    // The largest tensor (s x s scores, logits) must fit int64 bytes comfortably.
    double scores = double(c.micro_batch) * c.heads * double(c.seq) * c.seq * 4;
    double logits = double(c.micro_batch) * c.seq * double(c.vocab) * 4;
    double stream = double(c.micro_batch) * c.seq * double(c.hidden) * c.hc * 4;
    if (scores > 1e17 || logits > 1e17 || stream > 1e17)
        bad("seq", "tensors of this shape exceed 1e17 bytes");
}

Dims dims(const GeneratorConfig& c) {
    Dims d;
    d.d = dtype_bytes(c.dtype);
    d.tokens = c.seq * c.micro_batch;
    d.head_dim = c.hidden / c.heads;
    d.heads = c.heads / c.tp;
    d.kv_heads = c.kv_heads / c.tp;
    d.q = d.heads * d.head_dim;
    d.kv = d.kv_heads * d.head_dim;
    d.ffn = c.ffn / c.tp;
    d.vocab = (c.vocab + c.tp - 1) / c.tp;
    d.layers = c.layers / c.pp;
    d.n = c.hc;
    d.has_head = c.pp_stage == c.pp - 1;
    d.has_embed = c.pp_stage == 0;
    if (c.hc_block > 0) {
        d.hc_block = c.hc_block;
    } else {
        double b = std::sqrt(double(c.hc) * d.layers / (c.hc + 2.0));
        d.hc_block = std::max<int64_t>(1, std::min<int64_t>(d.layers, std::llround(b)));
    }
    return d;
}

}  // namespace mhc::datasets
