#include "mhc/datasets/generate.hpp"

#include <chrono>
#include <cstdio>

#include "emitter.hpp"
#include "mhc/datasets/formulas.hpp"
#include "model.hpp"
#include "names.hpp"

namespace mhc::datasets {

namespace {

std::string num(double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%.17g", v);
    return b;
}

void write_meta(const GeneratorConfig& c, const GenerateStats& s, trace::Writer& w) {
    auto b = [](bool v) { return std::string(v ? "true" : "false"); };
    w.set_meta("source", "generate");
    w.set_meta("generator", "mhc-datasets 1");
    w.set_meta("preset", c.preset);
    w.set_meta("device_name", c.gpu.device_name);
    w.set_meta("device_memory", std::to_string(c.gpu.memory_bytes));
    w.set_meta("seed", std::to_string(c.seed));
    w.set_meta("gen.arch", std::string(to_string(c.arch)));
    w.set_meta("gen.layers", std::to_string(c.layers));
    w.set_meta("gen.hidden", std::to_string(c.hidden));
    w.set_meta("gen.heads", std::to_string(c.heads));
    w.set_meta("gen.kv_heads", std::to_string(c.kv_heads));
    w.set_meta("gen.ffn", std::to_string(c.ffn));
    w.set_meta("gen.seq", std::to_string(c.seq));
    w.set_meta("gen.micro_batch", std::to_string(c.micro_batch));
    w.set_meta("gen.vocab", std::to_string(c.vocab));
    w.set_meta("gen.max_positions", std::to_string(c.max_positions));
    w.set_meta("gen.dtype", std::string(to_string(c.dtype)));
    w.set_meta("gen.steps", std::to_string(c.steps));
    w.set_meta("gen.micro_batches", std::to_string(c.micro_batches));
    w.set_meta("gen.dp", std::to_string(c.dp));
    w.set_meta("gen.zero1", b(c.zero1));
    w.set_meta("gen.tp", std::to_string(c.tp));
    w.set_meta("gen.pp", std::to_string(c.pp));
    w.set_meta("gen.bucket_bytes", std::to_string(c.bucket_bytes));
    w.set_meta("gen.recompute", b(c.recompute));
    w.set_meta("gen.flash", b(c.flash));
    w.set_meta("gen.dropout", b(c.dropout));
    w.set_meta("gen.hc", std::to_string(c.hc));
    w.set_meta("gen.sinkhorn_iters", std::to_string(c.sinkhorn_iters));
    w.set_meta("gen.hc_recompute", b(c.hc_recompute));
    w.set_meta("gen.hc_block", std::to_string(dims(c).hc_block));
    w.set_meta("gen.gpu", c.gpu.name);
    w.set_meta("gen.gpu.matmul_flops", num(c.gpu.matmul_flops));
    w.set_meta("gen.gpu.mem_bw", num(c.gpu.mem_bw));
    w.set_meta("gen.jitter", num(c.jitter));
    w.set_meta("gen.optimizer", "adamw (fp32 master + exp_avg + exp_avg_sq)");
    w.set_meta("gen.parameters", std::to_string(s.parameters));
    w.set_meta("gen.local_parameters", std::to_string(s.local_parameters));
    w.set_meta("gen.flops_per_step", num(s.flops_per_step));
    w.set_meta("gen.activation_bytes_per_layer", std::to_string(s.activation_bytes_per_layer));
}

}  // namespace

GenerateStats generate(const GeneratorConfig& cfg, trace::Writer& w, const GenerateHooks& hooks) {
    validate(cfg);
    auto t0 = std::chrono::steady_clock::now();
    detail::Emitter e(w, cfg, hooks);
    detail::KernelNames names(w, cfg);
    detail::Model model(e, names);
    for (int s = 0; s < cfg.steps; ++s) model.step(s);
    e.finish();
    GenerateStats st = e.stats();
    st.rows = w.rows_written();
    st.parameters = parameter_count(cfg);
    st.local_parameters = local_parameter_count(cfg);
    st.activation_bytes_per_layer = activation_bytes_per_layer(cfg, 0);
    st.flops_per_step /= cfg.steps;
    st.gemm_flops_per_step /= cfg.steps;
    st.end_time_ns = std::max(e.now(detail::kCompute), e.now(detail::kComm));
    write_meta(cfg, st, w);
    st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return st;
}

GenerateStats generate_file(const GeneratorConfig& cfg, const std::string& path, const GenerateHooks& hooks) {
    validate(cfg);   // before a temporary file exists
    trace::Writer w(path, hooks.if_exists);
    GenerateStats st = generate(cfg, w, hooks);
    w.finish();
    st.rows = w.rows_written();
    return st;
}

}  // namespace mhc::datasets
