// Closed forms of docs/datasets.md. Kept apart from the generator on purpose: the tests
// compare the two.
#include "mhc/datasets/formulas.hpp"

#include <algorithm>

namespace mhc::datasets {

namespace {

// Per-layer parameters of the whole model (not split).
int64_t layer_params(const GeneratorConfig& c) {
    int64_t h = c.hidden, hd = c.hidden / c.heads, kvd = c.kv_heads * hd, f = c.ffn;
    int64_t p;
    if (c.arch == Arch::Gpt2)
        p = (h * (h + 2 * kvd) + h + 2 * kvd) + (h * h + h) + (2 * h * f + f + h) + 4 * h;
    else
        p = h * (h + 2 * kvd) + h * h + 3 * h * f + 2 * h;
    if (c.hc > 1) {
        int64_t n = c.hc;
        p += 2 * (n * h * n * (n + 2) + n * (n + 2) + 3);
    }
    return p;
}

// Per-layer parameters on tensor-parallel rank 0.
int64_t layer_params_local(const GeneratorConfig& c) {
    Dims d = dims(c);
    int64_t h = c.hidden, t = c.tp;
    int64_t p;
    if (c.arch == Arch::Gpt2)
        p = (h * (d.q + 2 * d.kv) + d.q + 2 * d.kv) + (d.q * h + h) + (2 * h * d.ffn + d.ffn + h) + 4 * h;
    else
        p = h * (d.q + 2 * d.kv) + d.q * h + 3 * h * d.ffn + 2 * h;
    (void)t;
    if (c.hc > 1) {
        int64_t n = c.hc;
        p += 2 * (n * h * n * (n + 2) + n * (n + 2) + 3);   // replicated over tp
    }
    return p;
}

struct LayerFlops {
    double gemm = 0, attn = 0, hc_fwd = 0, hc_bwd = 0, hc_recomp = 0;
};

// Forward FLOPs of one local layer for one micro-batch, by class.
LayerFlops layer_flops(const GeneratorConfig& c) {
    Dims d = dims(c);
    double T = double(d.tokens), h = double(c.hidden), s = double(c.seq);
    LayerFlops f;
    double mlp = c.arch == Arch::Gpt2 ? 4 * T * h * d.ffn : 6 * T * h * d.ffn;
    f.gemm = 2 * T * h * (d.q + 2 * d.kv) + 2 * T * d.q * h + mlp;
    f.attn = 4 * T * s * d.q;
    if (d.n > 1) {
        double n = double(d.n);
        double coeff = 2 * T * n * h * n * (n + 2);
        double sk = T * n * n * (4.0 * c.sinkhorn_iters + 2);
        double mix = 2 * T * n * h + 2 * T * n * n * h + 2 * T * n * h;   // pre, res, post
        f.hc_fwd = 2 * (coeff + sk + mix);
        f.hc_bwd = 2 * (2 * coeff + 3 * sk + 2 * mix);
    }
    return f;
}

// FLOPs of recomputing the mHC residual of every block (hc_recompute), one micro-batch.
double hc_block_recompute_flops(const GeneratorConfig& c) {
    Dims d = dims(c);
    double T = double(d.tokens), h = double(c.hidden), n = double(d.n);
    double coeff = 2 * T * n * h * n * (n + 2);
    double sk = T * n * n * (4.0 * c.sinkhorn_iters + 2);
    double res_post = 2 * T * n * n * h + 2 * T * n * h;
    double total = 0;
    for (int64_t start = 0; start < d.layers; start += d.hc_block) {
        int64_t k = std::min(d.hc_block, d.layers - start);
        total += 2 * k * (coeff + sk) + (2 * k - 1) * res_post;
    }
    return total;
}

double head_flops(const GeneratorConfig& c) {
    Dims d = dims(c);
    return d.has_head ? 2.0 * d.tokens * c.hidden * d.vocab : 0;
}

}  // namespace

int64_t parameter_count(const GeneratorConfig& c) {
    int64_t h = c.hidden;
    int64_t p = c.layers * layer_params(c) + c.vocab * h;
    if (c.arch == Arch::Gpt2) p += (c.max_positions ? c.max_positions : c.seq) * h + 2 * h;  // tied head
    else p += c.vocab * h + h;
    return p;
}

int64_t local_parameter_count(const GeneratorConfig& c) {
    Dims d = dims(c);
    int64_t h = c.hidden;
    int64_t p = d.layers * layer_params_local(c);
    // The first stage holds the embeddings; a GPT-2 last stage of a pipeline holds its own
    // copy of the token embedding for the tied head (Megatron's word-embedding copy).
    if (d.has_embed || (d.has_head && c.arch == Arch::Gpt2)) p += d.vocab * h;
    if (d.has_embed && c.arch == Arch::Gpt2) p += (c.max_positions ? c.max_positions : c.seq) * h;
    if (d.has_head) p += c.arch == Arch::Gpt2 ? 2 * h : d.vocab * h + h;
    return p;
}

int64_t residual_bytes_per_layer(const GeneratorConfig& c, int layer) {
    Dims d = dims(c);
    int64_t x = d.d * d.tokens * c.hidden;
    if (c.recompute) return d.n * x;                 // only the layer input is kept
    if (d.n == 1) return 2 * x;                      // the two LayerNorm inputs
    if (c.hc_recompute) return layer % d.hc_block == 0 ? d.n * x : 0;
    return 2 * d.n * x;                              // the n-stream input of both sublayers
}

int64_t activation_bytes_per_layer(const GeneratorConfig& c, int layer) {
    Dims d = dims(c);
    int64_t T = d.tokens, h = c.hidden, B = d.d;
    int64_t x = B * T * h;
    if (c.recompute) return d.n * x;
    int64_t bytes = 4 * x;                           // two norm inputs, two norm outputs
    if (c.dropout) bytes += 2 * T * h;               // 1-byte masks after attention and MLP
    bytes += B * T * (d.q + 2 * d.kv) + B * T * d.q;  // q, k, v; attention output
    bytes += (c.arch == Arch::Gpt2 ? 2 : 3) * B * T * d.ffn;
    int64_t scores = d.heads * c.seq * c.seq * c.micro_batch;
    if (c.flash) bytes += 4 * T * d.heads;           // fp32 log-sum-exp per row
    else bytes += B * scores + (c.dropout ? (B + 1) * scores : 0);
    if (d.n > 1) {
        int64_t n = d.n;
        if (c.hc_recompute)
            bytes += 2 * x + (layer % d.hc_block == 0 ? n * x : 0);   // F outputs; block input
        else
            bytes += 2 * (n * x + x + 4 * T * (2 * n * n + 2 * n));   // stream, F out, coeffs
    }
    return bytes;
}

double korthikanti_bytes_per_layer(double s, double b, double h, double a, double t) {
    return s * b * h * (10 + 24 / t + 5 * a * s / (h * t));
}

// cuBLAS GEMMs only: the mHC coefficient projection (n(n+2) outputs) is memory-bound and
// counted with the mHC kernels.
double gemm_flops_per_step(const GeneratorConfig& c) {
    Dims d = dims(c);
    LayerFlops f = layer_flops(c);
    double per_mb = d.layers * f.gemm * (c.recompute ? 4 : 3) + 3 * head_flops(c);
    if (!c.flash) per_mb += d.layers * f.attn * (c.recompute ? 4 : 3);   // cuBLAS batched GEMMs
    return per_mb * c.micro_batches;
}

double model_flops_per_step(const GeneratorConfig& c) {
    Dims d = dims(c);
    LayerFlops f = layer_flops(c);
    double per_mb = d.layers * (3 * (f.gemm + f.attn) + f.hc_fwd + f.hc_bwd) + 3 * head_flops(c);
    return per_mb * c.micro_batches;
}

double flops_per_step(const GeneratorConfig& c) {
    Dims d = dims(c);
    LayerFlops f = layer_flops(c);
    double extra = 0;
    if (c.recompute) extra = d.layers * (f.gemm + f.attn + f.hc_fwd);
    else if (c.hc_recompute && d.n > 1) extra = hc_block_recompute_flops(c);
    return model_flops_per_step(c) + extra * c.micro_batches;
}

}  // namespace mhc::datasets
