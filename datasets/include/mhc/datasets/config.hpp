#pragma once
// Parameters of a synthetic training trace (docs/datasets.md): the model, the parallel
// layout of the GPU whose trace is generated, the GPU's roofline, and the seed.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mhc::datasets {

// gpt2: LayerNorm, GELU MLP, learned positions, biases, tied head.
// llama: RMSNorm, SwiGLU MLP, rotary positions, no biases, untied head.
enum class Arch { Gpt2, Llama };
enum class DType { BF16, FP16, FP32 };

std::string_view to_string(Arch a);
std::string_view to_string(DType d);
int dtype_bytes(DType d);

// A GPU as the roofline sees it. Peak figures are the vendor's dense numbers (datasets/gpus.tsv,
// with their sources); the efficiencies say how much of them a kernel class reaches.
struct GpuSpec {
    std::string name;            // "h100"
    std::string device_name;     // "NVIDIA H100 80GB HBM3"
    int64_t memory_bytes = 0;
    double matmul_flops = 0;     // bf16/fp16 dense tensor-core FLOP/s
    double tf32_flops = 0;       // fp32 matmuls run as TF32
    double fp32_flops = 0;       // non-tensor-core fp32 (Sinkhorn-Knopp, mixing)
    double mem_bw = 0;           // HBM bytes/s
    double nvlink_bw = 0;        // per GPU, one direction, bytes/s (intra-node collectives)
    double net_bw = 0;           // per GPU network bytes/s (inter-node collectives)
    // Efficiency factors of the roofline (fraction of peak reached).
    double gemm_eff = 0.70, attn_eff = 0.50, mem_eff = 0.80, comm_eff = 0.75;
    double launch_floor_s = 3e-6;   // shortest kernel
    double launch_gap_s = 1.5e-6;   // host gap between dependent kernels on one stream
    double comm_latency_s = 10e-6;  // per collective
};

// The rows of datasets/gpus.tsv with a generator name: "a100", "h100", "h200"; throws mhc::Error
// listing the valid names.
GpuSpec gpu_spec(std::string_view name);
std::vector<std::string> gpu_names();

struct GeneratorConfig {
    std::string preset = "custom";
    Arch arch = Arch::Llama;
    // Whole-model shape (not divided by tensor/pipeline parallelism).
    int layers = 12;
    int64_t hidden = 768;
    int heads = 12;
    int kv_heads = 12;           // grouped-query attention when < heads
    int64_t ffn = 3072;
    int64_t seq = 1024;
    int64_t micro_batch = 1;
    int64_t vocab = 50257;
    int64_t max_positions = 0;   // gpt2 learned positions; 0: seq
    DType dtype = DType::BF16;
    int steps = 3;
    int micro_batches = 1;       // per step: gradient accumulation / pipeline micro-batches
    // Parallel layout; the trace is one GPU's: tensor-parallel rank 0 of pipeline stage 0.
    int dp = 1;
    bool zero1 = false;          // optimizer states and fp32 master weights sharded over dp
    int tp = 1;
    int pp = 1;
    // Multi-rank layout (docs/datasets.md, "Multi-rank traces"): when set, the traced GPU is
    // pipeline stage pp_stage, data-parallel rank dp_rank and tensor-parallel rank tp_rank;
    // every stage is generated (generate_ranks) and the stages exchange activations and
    // gradients as NCCL SendRecv kernels on their own streams, one stream per communicator.
    bool multi_rank = false;
    int pp_stage = 0, dp_rank = 0, tp_rank = 0;
    int64_t bucket_bytes = 25ll << 20;   // gradient all-reduce bucket (PyTorch DDP default)
    bool recompute = false;      // full activation recomputation (checkpoint every layer)
    bool flash = true;           // flash attention (no s x s score matrices saved)
    bool dropout = false;        // dropout masks saved (GPT-2 trains with dropout 0.1)
    // Hyper-connections: n = 1 plain residual; n > 1 mHC with an n-stream residual.
    int hc = 1;
    int sinkhorn_iters = 20;
    bool hc_recompute = false;   // keep the n-stream residual only at block starts
    int hc_block = 0;            // layers per recompute block; 0: round(sqrt(n L / (n + 2)))
    GpuSpec gpu = gpu_spec("h100");
    uint64_t seed = 1;
    double jitter = 0.03;        // relative jitter of durations and host gaps (0: none)
};

// Presets: "gpt2-small", "llama2-7b", "llama2-70b-slice", "mhc-27b". Throws mhc::Error
// listing the valid names for an unknown one.
GeneratorConfig preset(std::string_view name);
std::vector<std::string> preset_names();

// Throws mhc::Error naming the first invalid field ("field 'heads': ...").
void validate(const GeneratorConfig& cfg);

// Derived per-GPU dimensions, shared by the formulas and the generator.
struct Dims {
    int64_t d = 2;          // bytes per element of the model dtype
    int64_t tokens = 0;     // seq * micro_batch
    int64_t head_dim = 0;
    int64_t heads = 0;      // local (heads / tp)
    int64_t kv_heads = 0;   // local
    int64_t q = 0, kv = 0;  // local query / key-value widths
    int64_t ffn = 0;        // local
    int64_t vocab = 0;      // local (ceil(vocab / tp): the vocabulary is padded)
    int64_t layers = 0;     // local (layers / pp)
    int64_t n = 1;          // residual streams
    int64_t hc_block = 1;   // layers per mHC recompute block
    bool has_head = true;   // last pipeline stage (pp == 1: this GPU)
    bool has_embed = true;  // first pipeline stage
};
Dims dims(const GeneratorConfig& cfg);

// Global rank of a multi-rank layout (Megatron order: tp fastest, then dp, then pp).
inline int global_rank(const GeneratorConfig& c, int pp_stage, int dp_rank, int tp_rank) {
    return (pp_stage * c.dp + dp_rank) * c.tp + tp_rank;
}

}  // namespace mhc::datasets
