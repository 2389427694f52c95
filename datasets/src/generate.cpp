#include "mhc/datasets/generate.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "emitter.hpp"
#include "mhc/common/hash.hpp"
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

// The configuration as meta keys: what makes two generated traces of the same job.
std::map<std::string, std::string> config_meta(const GeneratorConfig& c) {
    auto b = [](bool v) { return std::string(v ? "true" : "false"); };
    std::map<std::string, std::string> m;
    m.emplace("source", "generate");
    m.emplace("generator", "mhc-datasets 1");
    m.emplace("preset", c.preset);
    m.emplace("device_name", c.gpu.device_name);
    m.emplace("device_memory", std::to_string(c.gpu.memory_bytes));
    m.emplace("seed", std::to_string(c.seed));
    m.emplace("gen.arch", std::string(to_string(c.arch)));
    m.emplace("gen.layers", std::to_string(c.layers));
    m.emplace("gen.hidden", std::to_string(c.hidden));
    m.emplace("gen.heads", std::to_string(c.heads));
    m.emplace("gen.kv_heads", std::to_string(c.kv_heads));
    m.emplace("gen.ffn", std::to_string(c.ffn));
    m.emplace("gen.seq", std::to_string(c.seq));
    m.emplace("gen.micro_batch", std::to_string(c.micro_batch));
    m.emplace("gen.vocab", std::to_string(c.vocab));
    m.emplace("gen.max_positions", std::to_string(c.max_positions));
    m.emplace("gen.dtype", std::string(to_string(c.dtype)));
    m.emplace("gen.steps", std::to_string(c.steps));
    m.emplace("gen.micro_batches", std::to_string(c.micro_batches));
    m.emplace("gen.dp", std::to_string(c.dp));
    m.emplace("gen.zero1", b(c.zero1));
    m.emplace("gen.tp", std::to_string(c.tp));
    m.emplace("gen.pp", std::to_string(c.pp));
    m.emplace("gen.bucket_bytes", std::to_string(c.bucket_bytes));
    m.emplace("gen.recompute", b(c.recompute));
    m.emplace("gen.flash", b(c.flash));
    m.emplace("gen.dropout", b(c.dropout));
    m.emplace("gen.hc", std::to_string(c.hc));
    m.emplace("gen.sinkhorn_iters", std::to_string(c.sinkhorn_iters));
    m.emplace("gen.hc_recompute", b(c.hc_recompute));
    m.emplace("gen.hc_block", std::to_string(dims(c).hc_block));
    m.emplace("gen.gpu", c.gpu.name);
    m.emplace("gen.gpu.matmul_flops", num(c.gpu.matmul_flops));
    m.emplace("gen.gpu.mem_bw", num(c.gpu.mem_bw));
    m.emplace("gen.jitter", num(c.jitter));
    m.emplace("gen.optimizer", "adamw (fp32 master + exp_avg + exp_avg_sq)");
    return m;
}

void write_meta(const GeneratorConfig& c, const GenerateStats& s, trace::Writer& w) {
    for (const auto& [k, v] : config_meta(c)) w.set_meta(k, v);
    w.set_meta("gen.parameters", std::to_string(s.parameters));
    w.set_meta("gen.local_parameters", std::to_string(s.local_parameters));
    w.set_meta("gen.flops_per_step", num(s.flops_per_step));
    w.set_meta("gen.activation_bytes_per_layer", std::to_string(s.activation_bytes_per_layer));
}

// The job identity (docs/trace-format.md, "Multi-rank traces"): the ranks generated from one
// configuration are one job, on one clock starting at 0. A trace generated alone is a job of one.
void write_job_meta(const GeneratorConfig& c, int rank, int world_size, trace::Writer& w) {
    Fnv1a hash;   // of the configuration
    for (const auto& [key, value] : config_meta(c)) hash.add_field(key).add_field(value);
    w.set_meta("job.id", "generate-" + hash.hex());
    w.set_meta("world_size", std::to_string(world_size));
    w.set_meta("rank", std::to_string(rank));
    w.set_meta("time_origin_ns", "0");
}

// The rank's place and its communicators (docs/trace-format.md, "Multi-rank traces"):
// meta nccl.stream.N = "name:r0,r1,..." for each CUDA stream N that carries NCCL kernels.
void write_rank_meta(const GeneratorConfig& c, trace::Writer& w) {
    const int s = c.pp_stage, d = c.dp_rank, t = c.tp_rank;
    auto list = [&](auto rank_of, int n) {
        std::string v;
        for (int i = 0; i < n; ++i) v += (i ? "," : "") + std::to_string(rank_of(i));
        return v;
    };
    write_job_meta(c, global_rank(c, s, d, t), c.pp * c.dp * c.tp, w);
    w.set_meta("gen.pp_stage", std::to_string(s));
    w.set_meta("gen.dp_rank", std::to_string(d));
    w.set_meta("gen.tp_rank", std::to_string(t));
    const std::string ds = ".d" + std::to_string(d), ts = ".t" + std::to_string(t);
    if (c.dp > 1)
        w.set_meta("nccl.stream." + std::to_string(detail::kStreamDp),
                   "dp.s" + std::to_string(s) + ts + ":" + list([&](int i) { return global_rank(c, s, i, t); }, c.dp));
    if (c.tp > 1)
        w.set_meta("nccl.stream." + std::to_string(detail::kStreamTp),
                   "tp.s" + std::to_string(s) + ds + ":" + list([&](int i) { return global_rank(c, s, d, i); }, c.tp));
    auto pair = [&](int a) {
        return "pp.s" + std::to_string(a) + "-" + std::to_string(a + 1) + ds + ts + ":" +
               std::to_string(global_rank(c, a, d, t)) + "," + std::to_string(global_rank(c, a + 1, d, t));
    };
    if (s + 1 < c.pp) w.set_meta("nccl.stream." + std::to_string(detail::kStreamPpNext), pair(s));
    if (s > 0) w.set_meta("nccl.stream." + std::to_string(detail::kStreamPpPrev), pair(s - 1));
}

GenerateStats stats_of(const GeneratorConfig& cfg, detail::Emitter& e, trace::Writer& w) {
    GenerateStats st = e.stats();
    st.rows = w.rows_written();
    st.parameters = parameter_count(cfg);
    st.local_parameters = local_parameter_count(cfg);
    st.activation_bytes_per_layer = activation_bytes_per_layer(cfg, 0);
    st.flops_per_step /= cfg.steps;
    st.gemm_flops_per_step /= cfg.steps;
    st.end_time_ns = std::max({e.now(detail::Stream::Compute), e.now(detail::Stream::Comm), e.now(detail::Stream::PpNext),
                               e.now(detail::Stream::PpPrev)});
    return st;
}

}  // namespace

std::vector<GenerateStats> generate_ranks(const GeneratorConfig& cfg, const std::vector<RankFile>& files,
                                          const GenerateHooks& hooks) {
    validate(cfg);
    for (const RankFile& f : files) {
        GeneratorConfig c = cfg;
        c.pp_stage = f.pp_stage;
        c.dp_rank = f.dp_rank;
        c.tp_rank = f.tp_rank;
        validate(c);   // the rank is within the layout
    }
    std::vector<GenerateStats> out(files.size());
    std::vector<bool> done(files.size(), false);
    // Every file stays temporary until all are complete, then they appear together.
    std::vector<std::unique_ptr<trace::Writer>> complete;
    for (size_t first = 0; first < files.size(); ++first) {
        if (done[first]) continue;
        // The whole pipeline of this (dp, tp) rank pair is generated together: stage s's
        // receives end no earlier than stage s -/+ 1's sends. Stages not asked for go to a
        // writer that is never finished (its temporary file is removed).
        const int dp = files[first].dp_rank, tp = files[first].tp_rank;
        struct Stage {
            GeneratorConfig c;
            int file = -1;
            std::unique_ptr<trace::Writer> w;
            std::unique_ptr<detail::Emitter> e;
            std::unique_ptr<detail::KernelNames> names;
            std::unique_ptr<detail::Model> model;
        };
        std::vector<Stage> st(static_cast<size_t>(cfg.pp));
        auto t0 = std::chrono::steady_clock::now();
        for (int s = 0; s < cfg.pp; ++s) {
            Stage& g = st[size_t(s)];
            g.c = cfg;
            g.c.multi_rank = true;
            g.c.pp_stage = s;
            g.c.dp_rank = dp;
            g.c.tp_rank = tp;
            for (size_t i = first; i < files.size(); ++i)
                if (!done[i] && files[i].pp_stage == s && files[i].dp_rank == dp && files[i].tp_rank == tp)
                    g.file = static_cast<int>(i);
            std::string path = g.file >= 0 ? files[size_t(g.file)].path
                                           : files[first].path + ".stage" + std::to_string(s) + ".unused";
            g.w = std::make_unique<trace::Writer>(path, g.file >= 0 ? hooks.if_exists : mhc::IfExists::Replace);
            GenerateHooks h = hooks;
            if (g.file != int(first)) h.progress = nullptr;   // one progress line: the first file's
            g.e = std::make_unique<detail::Emitter>(*g.w, g.c, h);
            g.names = std::make_unique<detail::KernelNames>(*g.w, g.c);
            g.model = std::make_unique<detail::Model>(*g.e, *g.names);
        }
        detail::PipeLinks pipe;
        for (Stage& g : st) g.model->set_pipe(&pipe);
        for (int step = 0; step < cfg.steps; ++step) {
            pipe.reset(cfg.pp, cfg.micro_batches);
            std::vector<const std::vector<detail::Model::Op>*> ops;
            std::vector<size_t> next(st.size(), 0);
            for (Stage& g : st) ops.push_back(&g.model->begin_step(step));
            for (bool moved = true; moved;) {
                moved = false;
                for (size_t s = 0; s < st.size(); ++s)
                    while (next[s] < ops[s]->size() && st[s].model->ready((*ops[s])[next[s]])) {
                        st[s].model->run((*ops[s])[next[s]++]);
                        moved = true;
                    }
            }
            for (size_t s = 0; s < st.size(); ++s)
                if (next[s] != ops[s]->size())
                    throw std::logic_error("pipeline schedule stuck at stage " + std::to_string(s));
            for (Stage& g : st) g.model->end_step(step);
        }
        for (Stage& g : st) {
            g.e->finish();
            if (g.file < 0) continue;
            GenerateStats gs = stats_of(g.c, *g.e, *g.w);
            write_meta(g.c, gs, *g.w);
            write_rank_meta(g.c, *g.w);
            g.w->close();
            gs.rows = g.w->rows_written();
            gs.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            out[size_t(g.file)] = gs;
            done[size_t(g.file)] = true;
            complete.push_back(std::move(g.w));
        }
        // Stages generated only for their timing: writers destroyed unfinished.
    }
    if (hooks.cancel && hooks.cancel->load()) throw Cancelled();
    std::vector<trace::Writer*> writers;
    for (auto& w : complete) writers.push_back(w.get());
    trace::finish_together(writers);
    return out;
}

GenerateStats generate(const GeneratorConfig& cfg, trace::Writer& w, const GenerateHooks& hooks) {
    validate(cfg);
    auto t0 = std::chrono::steady_clock::now();
    detail::Emitter e(w, cfg, hooks);
    detail::KernelNames names(w, cfg);
    detail::Model model(e, names);
    for (int s = 0; s < cfg.steps; ++s) model.step(s);
    e.finish();
    GenerateStats st = stats_of(cfg, e, w);
    write_meta(cfg, st, w);
    write_job_meta(cfg, 0, 1, w);
    st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return st;
}

namespace {

// Stops the count once it passes its budget (estimate_output), at `fraction` of the steps counted.
struct CountStopped {
    double fraction;
};

trace::TableCounts counts_of(const GenerateStats& stats, const trace::Writer& writer) {
    trace::TableCounts counts;
    counts.allocations = stats.allocations;   // the emitter's: the writer holds persistent ones until the end
    counts.kernels = stats.kernels;
    counts.accesses = stats.accesses;
    counts.copies = stats.copies;
    counts.markers = stats.markers;
    counts.strings = writer.counts().strings;
    return counts;
}

// first + times (then - first), table by table
trace::TableCounts extrapolate(const trace::TableCounts& first, const trace::TableCounts& then, double times) {
    auto one = [times](int64_t from, int64_t to) {   // at most 10^18: beyond any bound, within int64_t
        const double value = static_cast<double>(from) + times * static_cast<double>(to - from);
        return static_cast<int64_t>(std::llround(std::min(value, 1e18)));
    };
    return {one(first.allocations, then.allocations), one(first.kernels, then.kernels),
            one(first.accesses, then.accesses),       one(first.copies, then.copies),
            one(first.markers, then.markers),         one(first.strings, then.strings)};
}

}   // namespace

OutputEstimate estimate_output(const GeneratorConfig& cfg, int64_t count_budget) {
    validate(cfg);
    GeneratorConfig counted = cfg;
    counted.steps = std::min(cfg.steps, 2);   // the second step is as every later one
    // A rank of a multi-rank job is counted as the single-rank trace of stage 0 (the stages
    // differ by a layer's embedding or head and their sends and receives).
    counted.multi_rank = false;
    counted.pp_stage = counted.dp_rank = counted.tp_rank = 0;
    trace::Writer writer{trace::Writer::CountOnly{}};
    GenerateHooks hooks;
    detail::Emitter* emitting = nullptr;
    hooks.progress = [&](double fraction) {
        if (emitting && counts_of(emitting->stats(), writer).total() > count_budget) throw CountStopped{fraction};
    };
    detail::Emitter emitter(writer, counted, hooks);
    detail::KernelNames names(writer, counted);
    detail::Model model(emitter, names);
    emitting = &emitter;
    OutputEstimate out;
    const trace::TableCounts none;
    try {
        model.step(0);
        const trace::TableCounts first = counts_of(emitter.stats(), writer);
        if (counted.steps > 1) model.step(1);
        const trace::TableCounts second = counts_of(emitter.stats(), writer);
        out.rows = extrapolate(first, second, cfg.steps - 1);
    } catch (const CountStopped& stop) {
        // The share of the counted steps' work done (layers x micro-batches x passes), scaled to all.
        const double scale = static_cast<double>(cfg.steps) / counted.steps / std::max(stop.fraction, 1e-12);
        out.rows = extrapolate(none, counts_of(emitter.stats(), writer), scale);
        out.exact = false;
    }
    if (cfg.multi_rank) out.exact = false;
    out.bytes = trace::estimated_file_bytes(out.rows);
    return out;
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
