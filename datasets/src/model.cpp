// The transformer: parameters, per-layer forward and backward kernels, the step schedule.
// Tensor shapes and what is saved for backward follow docs/datasets.md exactly; the
// closed forms in formulas.cpp are checked against this code by the tests.
#include "model.hpp"

#include <algorithm>
#include <cmath>

namespace mhc::datasets::detail {

using enum ParamRole;
using enum Slot;

namespace {
// a + number + b, built by appending (GCC 12 warns falsely on chained operator+ at -O3).
std::string cat(const char* a, int64_t number, const char* b) {
    std::string s(a);
    s += std::to_string(number);
    s += b;
    return s;
}
}  // namespace

Model::Model(Emitter& e, const KernelNames& k)
    : emitter_(e), kernel_names_(k), config_(e.cfg()), dims_(dims(e.cfg())), hopper_(e.cfg().gpu.name != "a100") {
    const int64_t h = config_.hidden;
    const bool gpt2 = config_.arch == Arch::Gpt2;
    // Parameters in model order, as a framework creates them at start-up.
    // The first stage holds the embeddings; a GPT-2 last stage of a pipeline keeps its own
    // copy of the token embedding for the tied head (as Megatron does).
    if (dims_.has_embed || (gpt2 && dims_.has_head))
        wte_ = static_cast<int>(param(dims_.has_embed ? "embed.tokens.weight" : "embed.tokens.weight.head_copy", dims_.vocab * h));
    if (gpt2 && dims_.has_embed)
        wpe_ = static_cast<int>(param("embed.positions.weight", (config_.max_positions ? config_.max_positions : config_.seq) * h));
    groups_.emplace_back();
    for (int p : {wte_, wpe_})
        if (p >= 0) groups_.back().push_back(p);
    layer_params_.resize(static_cast<size_t>(dims_.layers));
    for (int l = 0; l < dims_.layers; ++l) {
        auto& lp = layer_params_[l];
        std::string pre = cat("L", l, ".");
        auto add = [&](ParamRole role, const std::string& name, int64_t numel) {
            lp[role] = param(pre + name, numel);
        };
        const int64_t n = dims_.n;
        // The mHC coefficients of a sublayer ("attn" or "mlp"): projection, bias and scales.
        auto add_hc = [&](ParamRole fn, ParamRole base, ParamRole scale, const std::string& sublayer) {
            if (n <= 1) return;
            add(fn, sublayer + ".hc.fn", n * h * n * (n + 2));
            add(base, sublayer + ".hc.base", n * (n + 2));
            add(scale, sublayer + ".hc.scale", 3);
        };
        add_hc(HcFnA, HcBaseA, HcScaleA, "attn");
        add(Ln1W, "attn.norm.weight", h);
        if (gpt2) add(Ln1B, "attn.norm.bias", h);
        add(QkvW, "attn.qkv.weight", h * (dims_.q + 2 * dims_.kv));
        if (gpt2) add(QkvB, "attn.qkv.bias", dims_.q + 2 * dims_.kv);
        add(OW, "attn.out.weight", dims_.q * h);
        if (gpt2) add(OB, "attn.out.bias", h);
        add_hc(HcFnM, HcBaseM, HcScaleM, "mlp");
        add(Ln2W, "mlp.norm.weight", h);
        if (gpt2) add(Ln2B, "mlp.norm.bias", h);
        add(Fc1W, gpt2 ? "mlp.fc1.weight" : "mlp.gate_up.weight", h * dims_.ffn * (gpt2 ? 1 : 2));
        if (gpt2) add(Fc1B, "mlp.fc1.bias", dims_.ffn);
        add(Fc2W, gpt2 ? "mlp.fc2.weight" : "mlp.down.weight", dims_.ffn * h);
        if (gpt2) add(Fc2B, "mlp.fc2.bias", h);
        std::vector<int> g;
        for (int64_t id : lp)
            if (id >= 0) g.push_back(static_cast<int>(id));
        groups_.push_back(g);
    }
    if (dims_.has_head) {
        lnf_w_ = static_cast<int>(param("final_norm.weight", h));
        if (gpt2) lnf_b_ = static_cast<int>(param("final_norm.bias", h));
        std::vector<int> g{lnf_w_};
        if (gpt2) g.push_back(lnf_b_);
        if (!gpt2) {   // GPT-2 ties the head to the token embedding
            head_ = static_cast<int>(param("head.weight", dims_.vocab * h));
            g.push_back(head_);
        }
        groups_.push_back(g);
    }
    // fp32 master weights are made with the model (mixed-precision wrapper); Adam's two
    // moments are created lazily by the first optimizer step.
    for (auto& p : params_) {
        p.shard = config_.zero1 ? (p.numel + config_.dp - 1) / config_.dp : p.numel;
        p.master = emitter_.alloc(p.shard * 4, Category::Optimizer, emitter_.intern(p.name + ".master"), Stream::Compute, true);
    }
    cublas_ws_ = emitter_.alloc(32ll << 20, kWs, emitter_.intern("cublas_workspace"), Stream::Compute, true);
    // NCCL communicator buffers: 16 channels x (4 MiB simple + 4.5 MiB LL128 + 256 KiB LL).
    const int64_t nccl = 16 * ((4ll << 20) + (9ll << 19) + (1ll << 18));
    if (config_.dp > 1) nccl_dp_ = emitter_.alloc(nccl, Category::Comm, emitter_.intern("nccl.dp.buffers"), Stream::Comm, true);
    if (config_.tp > 1) nccl_tp_ = emitter_.alloc(nccl, Category::Comm, emitter_.intern("nccl.tp.buffers"), Stream::Comm, true);
    if (!config_.multi_rank && config_.pp > 1) nccl_pp_ = emitter_.alloc(nccl, Category::Comm, emitter_.intern("nccl.pp.buffers"), Stream::Comm, true);
    if (config_.multi_rank && config_.pp_stage + 1 < config_.pp)
        nccl_pp_ = emitter_.alloc(nccl, Category::Comm, emitter_.intern("nccl.pp_next.buffers"), Stream::PpNext, true);
    if (config_.multi_rank && config_.pp_stage > 0)
        nccl_pp_prev_ = emitter_.alloc(nccl, Category::Comm, emitter_.intern("nccl.pp_prev.buffers"), Stream::PpPrev, true);
    marker_names_.resize(static_cast<size_t>(2 * dims_.layers));
    for (int l = 0; l < dims_.layers; ++l) {
        marker_names_[2 * l] = emitter_.intern(cat("layer ", l, " forward"));
        marker_names_[2 * l + 1] = emitter_.intern(cat("layer ", l, " backward"));
    }
    step_name_ = emitter_.intern("step");
    opt_name_ = emitter_.intern("optimizer.step");
    progress_total_ = int64_t{config_.steps} * config_.micro_batches * dims_.layers * 2;
}

int64_t Model::param(const std::string& name, int64_t numel) {
    Param p;
    p.numel = numel;
    p.name = name;
    p.buf = emitter_.alloc(numel * dims_.d, Category::Param, emitter_.intern(name), Stream::Compute, true);
    params_.push_back(p);
    return static_cast<int64_t>(params_.size() - 1);
}

int64_t Model::label(int layer, const char* what) {
    auto& v = labels_[what];
    size_t i = static_cast<size_t>(layer + 1);
    if (v.size() <= i) v.resize(i + 1, -1);
    if (v[i] < 0)
        v[i] = emitter_.intern(layer >= 0 ? cat("L", layer, ".") + what : std::string(what));
    return v[i];
}

Acc Model::grad(int p) {
    Param& q = params_[p];
    if (q.grad < 0) {
        q.grad = emitter_.alloc(q.numel * dims_.d, Category::Grad, emitter_.intern(q.name + ".grad"));
        return W(q.grad);
    }
    return RW(q.grad);
}

void Model::add_params(std::vector<Acc>& acc, int layer, std::initializer_list<ParamRole> ps) const {
    for (ParamRole p : ps)
        if (pid(layer, p) >= 0) acc.push_back(R(pbuf(layer, p)));
}

void Model::add_grads(std::vector<Acc>& acc, int layer, std::initializer_list<ParamRole> ps) {
    for (ParamRole p : ps)
        if (pid(layer, p) >= 0) acc.push_back(grad(static_cast<int>(pid(layer, p))));
}

void Model::free_slot(Saved& s, Slot k) {
    if (s[k] >= 0) emitter_.free(s[k]);
    s[k] = -1;
}

// Tensor-parallel all-reduce of an activation (Megatron f/g operators), on the compute
// stream: the next kernel needs its result.
void Model::tp_allreduce(int64_t buf) {
    if (config_.tp <= 1) return;
    const GpuSpec& g = config_.gpu;
    double t = double(config_.tp);
    double bw = (config_.tp <= 8 ? g.nvlink_bw : g.net_bw) * g.comm_eff;
    double secs = g.comm_latency_s + 2 * (t - 1) / t * double(emitter_.bytes(buf)) / bw;
    if (config_.multi_rank)
        emitter_.comm_kernel(Stream::Compute, kernel_names_.allreduce, {RW(buf), RW(nccl_tp_)}, launch_nccl(16), 0, secs, 0, kStreamTp);
    else
        emitter_.kernel(Stream::Compute, kernel_names_.allreduce, KClass::Comm, 0, {RW(buf), RW(nccl_tp_)}, launch_nccl(16), 0, secs);
}

// ---- mHC -----------------------------------------------------------------------------

int64_t Model::hc_pre(int l, int sub, int64_t xs, int64_t& coeff, int64_t& hres) {
    const double T = double(dims_.tokens), h = double(config_.hidden), n = double(dims_.n);
    const int64_t nn2 = dims_.n * (dims_.n + 2);
    ParamRole fn = sub ? HcFnM : HcFnA, base = sub ? HcBaseM : HcBaseA, scale = sub ? HcScaleM : HcScaleA;
    coeff = emitter_.alloc(4 * dims_.tokens * nn2, kAct, label(l, sub ? "mlp.hc.coeff" : "attn.hc.coeff"));
    emitter_.kernel(Stream::Compute, kernel_names_.hc_coeff, KClass::HcGemm, 2 * T * n * h * static_cast<double>(nn2),
              {R(xs), R(pbuf(l, fn)), R(pbuf(l, base)), R(pbuf(l, scale)), W(coeff)},
              launch_rows(dims_.tokens / 64 + 1, 256));
    hres = emitter_.alloc(4 * dims_.tokens * dims_.n * dims_.n, kAct, label(l, sub ? "mlp.hc.res_matrix" : "attn.hc.res_matrix"));
    emitter_.kernel(Stream::Compute, kernel_names_.hc_sinkhorn, KClass::Vector, T * n * n * (4.0 * config_.sinkhorn_iters + 2),
              {R(coeff), W(hres)}, launch_rows(dims_.tokens / 128 + 1, 128));
    int64_t hin = emitter_.alloc(dims_.d * dims_.tokens * config_.hidden, kAct, label(l, sub ? "mlp.norm_in" : "attn.norm_in"));
    emitter_.kernel(Stream::Compute, kernel_names_.hc_pre, KClass::Memory, 2 * T * n * h, {R(xs), R(coeff), W(hin)},
              launch_elementwise(dims_.tokens * config_.hidden));
    return hin;
}

int64_t Model::hc_post(int l, int sub, int64_t xs, int64_t fo, int64_t coeff, int64_t hres, int64_t lbl) {
    (void)l;
    (void)sub;
    const double T = double(dims_.tokens), h = double(config_.hidden), n = double(dims_.n);
    int64_t x = emitter_.alloc(dims_.n * dims_.d * dims_.tokens * config_.hidden, kAct, lbl);
    emitter_.kernel(Stream::Compute, kernel_names_.hc_res, KClass::Memory, 2 * T * n * n * h, {R(xs), R(hres), W(x)},
              launch_elementwise(dims_.n * dims_.tokens * config_.hidden));
    emitter_.kernel(Stream::Compute, kernel_names_.hc_post, KClass::Memory, 2 * T * n * h, {R(fo), R(coeff), RW(x)},
              launch_elementwise(dims_.n * dims_.tokens * config_.hidden));
    return x;
}

// Backward of the post and res mappings and of Sinkhorn-Knopp: returns d(xs) so far and
// sets dfo (gradient of the sublayer output). Leaves d(coeff) in s-independent temp.
int64_t Model::hc_backward(int l, int sub, Saved& s, int64_t dy, int64_t& dcoeff) {
    const double T = double(dims_.tokens), h = double(config_.hidden), n = double(dims_.n);
    Slot xs = sub ? XsM : XsA, co = sub ? CoeffM : CoeffA, hr = sub ? HresM : HresA, fo = sub ? FoutM : FoutA;
    (void)l;
    int64_t dfo = emitter_.alloc(dims_.d * dims_.tokens * config_.hidden, kWs, label(-1, "grad.sublayer_out"));
    dcoeff = emitter_.alloc(4 * dims_.tokens * dims_.n * (dims_.n + 2), kWs, label(-1, "grad.hc.coeff"));
    emitter_.kernel(Stream::Compute, kernel_names_.hc_post_bwd, KClass::Memory, 2 * (2 * T * n * h),
              {R(dy), R(s[fo]), R(s[co]), W(dfo), W(dcoeff)}, launch_elementwise(dims_.n * dims_.tokens * config_.hidden));
    int64_t dxs = emitter_.alloc(dims_.n * dims_.d * dims_.tokens * config_.hidden, kWs, label(-1, "grad.residual"));
    int64_t dhres = emitter_.alloc(4 * dims_.tokens * dims_.n * dims_.n, kWs, label(-1, "grad.hc.res_matrix"));
    emitter_.kernel(Stream::Compute, kernel_names_.hc_res_bwd, KClass::Memory, 2 * (2 * T * n * n * h),
              {R(dy), R(s[xs]), R(s[hr]), W(dxs), W(dhres)}, launch_elementwise(dims_.n * dims_.tokens * config_.hidden));
    emitter_.free(dy);
    free_slot(s, hr);
    emitter_.kernel(Stream::Compute, kernel_names_.hc_sinkhorn_bwd, KClass::Vector, 3 * T * n * n * (4.0 * config_.sinkhorn_iters + 2),
              {R(dhres), R(s[co]), RW(dcoeff)}, launch_rows(dims_.tokens / 128 + 1, 128));
    emitter_.free(dhres);
    free_slot(s, fo);
    s[fo] = dfo;   // hand the gradient back through the slot: the caller frees it
    return dxs;
}

// Backward of the pre mapping and of the coefficient projection.
int64_t Model::hc_backward_pre(int l, int sub, Saved& s, int64_t dhin, int64_t dxs, int64_t dcoeff) {
    const double T = double(dims_.tokens), h = double(config_.hidden), n = double(dims_.n);
    const double nn2 = n * (n + 2);
    Slot xs = sub ? XsM : XsA, co = sub ? CoeffM : CoeffA;
    ParamRole fn = sub ? HcFnM : HcFnA, base = sub ? HcBaseM : HcBaseA, scale = sub ? HcScaleM : HcScaleA;
    emitter_.kernel(Stream::Compute, kernel_names_.hc_pre_bwd, KClass::Memory, 2 * (2 * T * n * h),
              {R(dhin), R(s[xs]), R(s[co]), RW(dxs), RW(dcoeff)}, launch_elementwise(dims_.n * dims_.tokens * config_.hidden));
    emitter_.free(dhin);
    emitter_.kernel(Stream::Compute, kernel_names_.hc_coeff_dgrad, KClass::HcGemm, 2 * T * n * h * nn2,
              {R(dcoeff), R(pbuf(l, fn)), R(s[xs]), RW(dxs)}, launch_rows(dims_.tokens / 64 + 1, 256));
    std::vector<Acc> acc{R(dcoeff), R(s[xs])};
    add_grads(acc, l, {fn, base, scale});
    emitter_.kernel(Stream::Compute, kernel_names_.hc_coeff_wgrad, KClass::HcGemm, 2 * T * n * h * nn2, acc,
              launch_rows(dims_.tokens / 64 + 1, 256));
    emitter_.free(dcoeff);
    free_slot(s, co);
    free_slot(s, xs);
    return dxs;
}

// Block recomputation of the n-stream residual (hc_recompute): from the saved input of
// the block's first layer and the saved sublayer outputs, rerun the mHC kernels (not the
// layers) to rebuild every stream, coefficient and Sinkhorn matrix of the block.
void Model::hc_recompute_block(MicroBatch& mb, int last) {
    int first = static_cast<int>(last / dims_.hc_block * dims_.hc_block);
    for (int j = first; j <= last; ++j) {
        Saved& s = mb.layers[j];
        for (int sub = 0; sub < 2; ++sub) {
            Slot xs = sub ? XsM : XsA, co = sub ? CoeffM : CoeffA, hr = sub ? HresM : HresA, fo = sub ? FoutM : FoutA;
            const double T = double(dims_.tokens), h = double(config_.hidden), n = double(dims_.n);
            const int64_t nn2 = dims_.n * (dims_.n + 2);
            ParamRole fn = sub ? HcFnM : HcFnA, base = sub ? HcBaseM : HcBaseA, scale = sub ? HcScaleM : HcScaleA;
            s[co] = emitter_.alloc(4 * dims_.tokens * nn2, kAct, label(j, sub ? "mlp.hc.coeff" : "attn.hc.coeff"));
            emitter_.kernel(Stream::Compute, kernel_names_.hc_coeff, KClass::HcGemm, 2 * T * n * h * static_cast<double>(nn2),
                      {R(s[xs]), R(pbuf(j, fn)), R(pbuf(j, base)), R(pbuf(j, scale)), W(s[co])},
                      launch_rows(dims_.tokens / 64 + 1, 256));
            s[hr] = emitter_.alloc(4 * dims_.tokens * dims_.n * dims_.n, kAct, label(j, sub ? "mlp.hc.res_matrix" : "attn.hc.res_matrix"));
            emitter_.kernel(Stream::Compute, kernel_names_.hc_sinkhorn, KClass::Vector, T * n * n * (4.0 * config_.sinkhorn_iters + 2),
                      {R(s[co]), W(s[hr])}, launch_rows(dims_.tokens / 128 + 1, 128));
            bool last_sub = j == last && sub == 1;
            if (last_sub) break;
            int64_t lbl = sub ? label(j + 1, "attn.residual") : label(j, "mlp.residual");
            int64_t next = hc_post(j, sub, s[xs], s[fo], s[co], s[hr], lbl);
            if (sub) mb.layers[j + 1][XsA] = next;
            else s[XsM] = next;
        }
    }
}

// ---- one layer -------------------------------------------------------------------------

// out = x + dropout(o), or x + o without dropout: the residual add that closes a plain
// (n = 1) sublayer. The dropout mask is saved in `mask` for the backward; `o` is freed.
void Model::residual_add(Saved& s, Slot mask, int l, const char* mask_name, int64_t o, int64_t x, int64_t out) {
    const int64_t T = dims_.tokens, h = config_.hidden;
    if (config_.dropout) {
        s[mask] = emitter_.alloc(T * h, kAct, label(l, mask_name));   // interned only when used
        emitter_.kernel(Stream::Compute, kernel_names_.dropout_add, KClass::Memory, 0, {R(o), R(x), W(out), W(s[mask])},
                  launch_elementwise(T * h));
    } else {
        emitter_.kernel(Stream::Compute, kernel_names_.add, KClass::Memory, 0, {R(o), R(x), W(out)}, launch_elementwise(T * h));
    }
    emitter_.free(o);
}

// y = x W (+ b) with layer l's parameters `w`, `b`: one GEMM per token of `in` to `out` features.
void Model::linear_forward(int l, int64_t x, int64_t y, ParamRole w, ParamRole b, int64_t in, int64_t out) {
    std::vector<Acc> acc = {R(x), W(y)};
    add_params(acc, l, {w, b});
    emitter_.kernel(Stream::Compute, kernel_names_.gemm_fwd, KClass::Gemm, gemm_flops(in, out), acc,
                    launch_gemm(dims_.tokens, out, hopper_));
}

double Model::gemm_flops(int64_t in, int64_t out) const {
    return 2 * double(dims_.tokens) * double(in) * double(out);
}

// The layer norm at the start of a sublayer: `in` normalised into `out` (both saved).
void Model::norm_forward(int l, Saved& s, Slot in, Slot out, ParamRole w, ParamRole b, const char* what) {
    s[out] = emitter_.alloc(dims_.d * dims_.tokens * config_.hidden, kAct, label(l, what));
    std::vector<Acc> acc = {R(s[in]), W(s[out])};
    add_params(acc, l, {w, b});
    emitter_.kernel(Stream::Compute, kernel_names_.norm_fwd, KClass::Memory, 0, acc, launch_rows(dims_.tokens, 256));
}

// The output projection's buffer of sublayer `sub` (0 attention, 1 MLP): kept for the backward
// when hyper-connections mix it without dropout, a workspace otherwise.
int64_t Model::sublayer_out_buffer(int l, int sub) {
    const bool kept = dims_.n > 1 && !config_.dropout;
    const char* what = sub ? (kept ? "mlp.out" : "mlp.out_proj") : (kept ? "attn.out" : "attn.out_proj");
    return emitter_.alloc(dims_.d * dims_.tokens * config_.hidden, kept ? kAct : kWs, label(l, what));
}

// With hyper-connections: the sublayer output `o` that the post-mix reads, saved for the
// backward (after dropout, whose mask is saved too, when dropout is on).
void Model::keep_sublayer_out(int l, int sub, Saved& s, int64_t o) {
    const Slot fout = sub ? FoutM : FoutA, mask = sub ? MaskM : MaskA;
    if (!config_.dropout) {
        s[fout] = o;
        return;
    }
    const int64_t T = dims_.tokens, h = config_.hidden;
    s[fout] = emitter_.alloc(dims_.d * T * h, kAct, label(l, sub ? "mlp.out" : "attn.out"));
    s[mask] = emitter_.alloc(T * h, kAct, label(l, sub ? "mlp.dropout_mask" : "attn.dropout_mask"));
    emitter_.kernel(Stream::Compute, kernel_names_.dropout, KClass::Memory, 0, {R(o), W(s[fout]), W(s[mask])},
                    launch_elementwise(T * h));
    emitter_.free(o);
}

// softmax(q k^T) v into the saved context: one flash kernel (saving its log-sum-exp), or scores,
// softmax, dropout and two batched GEMMs (saving the probabilities and the dropout mask).
void Model::attention_forward(int l, Saved& s) {
    const int64_t T = dims_.tokens, B = dims_.d;
    const double attn = 2 * double(T) * double(config_.seq) * double(dims_.q);   // one of QK^T or PV
    s[Ctx] = emitter_.alloc(B * T * dims_.q, kAct, label(l, "attn.context"));
    if (config_.flash) {
        s[Lse] = emitter_.alloc(4 * T * dims_.heads, kAct, label(l, "attn.softmax_lse"));
        Launch fl = launch_rows((config_.seq + 127) / 128, 128);
        fl.grid[1] = static_cast<int32_t>(config_.micro_batch);
        fl.grid[2] = static_cast<int32_t>(dims_.heads);
        fl.smem = 49152;
        fl.regs = 255;
        emitter_.kernel(Stream::Compute, kernel_names_.flash_fwd, KClass::Attention, 2 * attn, {R(s[Qkv]), W(s[Ctx]), W(s[Lse])},
                        fl);
        return;
    }
    const int64_t sc = dims_.heads * config_.seq * config_.seq * config_.micro_batch;
    Launch bl = launch_gemm(config_.seq, config_.seq, hopper_);
    bl.grid[2] = static_cast<int32_t>(dims_.heads * config_.micro_batch);
    int64_t scores = emitter_.alloc(B * sc, kWs, label(l, "attn.scores"));
    emitter_.kernel(Stream::Compute, kernel_names_.bmm, KClass::Gemm, attn, {R(s[Qkv]), W(scores)}, bl);
    s[Probs] = emitter_.alloc(B * sc, kAct, label(l, "attn.probs"));
    emitter_.kernel(Stream::Compute, kernel_names_.softmax_fwd, KClass::Memory, 0, {R(scores), W(s[Probs])},
                    launch_rows(dims_.heads * config_.seq * config_.micro_batch, 1024));
    emitter_.free(scores);
    int64_t p = s[Probs];
    if (config_.dropout) {
        s[ProbsDrop] = emitter_.alloc(B * sc, kAct, label(l, "attn.probs_dropout"));
        s[AttnDropMask] = emitter_.alloc(sc, kAct, label(l, "attn.probs_dropout_mask"));
        emitter_.kernel(Stream::Compute, kernel_names_.dropout, KClass::Memory, 0, {R(p), W(s[ProbsDrop]), W(s[AttnDropMask])},
                        launch_elementwise(sc));
        p = s[ProbsDrop];
    }
    emitter_.kernel(Stream::Compute, kernel_names_.bmm, KClass::Gemm, attn, {R(p), R(s[Qkv]), W(s[Ctx])}, bl);
}

// The attention sublayer from its saved input (LnIn1) to its output projection, all-reduced
// over tensor parallelism; returns the projection's buffer.
int64_t Model::attention_sublayer(int l, Saved& s) {
    const int64_t T = dims_.tokens, h = config_.hidden, qkv = dims_.q + 2 * dims_.kv;
    norm_forward(l, s, LnIn1, LnOut1, Ln1W, Ln1B, "attn.norm_out");
    s[Qkv] = emitter_.alloc(dims_.d * T * qkv, kAct, label(l, "attn.qkv"));
    linear_forward(l, s[LnOut1], s[Qkv], QkvW, QkvB, h, qkv);
    if (config_.arch != Arch::Gpt2)
        emitter_.kernel(Stream::Compute, kernel_names_.rope_fwd, KClass::Memory, 0, {RW(s[Qkv])},
                        launch_elementwise(T * (dims_.q + dims_.kv)));
    attention_forward(l, s);
    const int64_t o = sublayer_out_buffer(l, 0);
    linear_forward(l, s[Ctx], o, OW, OB, dims_.q, h);
    tp_allreduce(o);
    return o;
}

// The MLP sublayer from its saved input (LnIn2) to its down projection, all-reduced over tensor
// parallelism; returns the projection's buffer.
int64_t Model::mlp_sublayer(int l, Saved& s) {
    const bool gpt2 = config_.arch == Arch::Gpt2;
    const int64_t T = dims_.tokens, h = config_.hidden, B = dims_.d;
    norm_forward(l, s, LnIn2, LnOut2, Ln2W, Ln2B, "mlp.norm_out");
    const int64_t up = gpt2 ? dims_.ffn : 2 * dims_.ffn;
    s[H1] = emitter_.alloc(B * T * up, kAct, label(l, gpt2 ? "mlp.fc1_out" : "mlp.gate_up"));
    linear_forward(l, s[LnOut2], s[H1], Fc1W, Fc1B, h, up);
    s[G] = emitter_.alloc(B * T * dims_.ffn, kAct, label(l, gpt2 ? "mlp.gelu_out" : "mlp.act"));
    emitter_.kernel(Stream::Compute, kernel_names_.act_fwd, KClass::Memory, 0, {R(s[H1]), W(s[G])},
                    launch_elementwise(T * dims_.ffn));
    const int64_t mo = sublayer_out_buffer(l, 1);
    linear_forward(l, s[G], mo, Fc2W, Fc2B, dims_.ffn, h);
    tp_allreduce(mo);
    return mo;
}

// What the backward does not need once the forward of layer l is done: with checkpointing all
// but the layer input; with mHC block recomputation the mixing intermediates.
void Model::release_after_forward(int l, Saved& s) {
    const bool hc = dims_.n > 1;
    if (config_.recompute) {
        for (int k = 0; k < kSlotCount; ++k)
            if (static_cast<Slot>(k) != (hc ? XsA : LnIn1)) free_slot(s, static_cast<Slot>(k));
    } else if (hc && config_.hc_recompute) {
        // The mHC intermediates are rebuilt per block in backward; the sublayer outputs and
        // the block's input stream stay.
        for (Slot k : {CoeffA, HresA, CoeffM, HresM, XsM}) free_slot(s, k);
        if (l % dims_.hc_block != 0) free_slot(s, XsA);
    }
}

int64_t Model::forward_layer(MicroBatch& mb, int l, int64_t x_in, bool keep_all) {
    Saved& s = mb.layers[l];
    const bool hc = dims_.n > 1;
    const int64_t bth = dims_.d * dims_.tokens * config_.hidden;
    if (hc) {
        s[XsA] = x_in;
        s[LnIn1] = hc_pre(l, 0, x_in, s[CoeffA], s[HresA]);
    } else {
        s[LnIn1] = x_in;
    }
    const int64_t o = attention_sublayer(l, s);
    int64_t x_mid = -1;
    if (!hc) {
        x_mid = emitter_.alloc(bth, kAct, label(l, "mlp.residual"));
        residual_add(s, MaskA, l, "attn.dropout_mask", o, x_in, x_mid);
        s[LnIn2] = x_mid;
    } else {
        keep_sublayer_out(l, 0, s, o);
        s[XsM] = hc_post(l, 0, s[XsA], s[FoutA], s[CoeffA], s[HresA], label(l, "mlp.residual"));
        s[LnIn2] = hc_pre(l, 1, s[XsM], s[CoeffM], s[HresM]);
    }
    const int64_t mo = mlp_sublayer(l, s);
    // The output is the next layer's saved input.
    const int64_t next_label = l + 1 < dims_.layers ? label(l + 1, "attn.residual")
                               : label(-1, dims_.has_head ? (hc ? "final.streams" : "final_norm.input") : "stage.output");
    int64_t x_out;
    if (!hc) {
        x_out = emitter_.alloc(bth, kAct, next_label);
        residual_add(s, MaskM, l, "mlp.dropout_mask", mo, x_mid, x_out);
    } else {
        keep_sublayer_out(l, 1, s, mo);
        x_out = hc_post(l, 1, s[XsM], s[FoutM], s[CoeffM], s[HresM], next_label);
    }
    if (!keep_all) release_after_forward(l, s);
    return x_out;
}

// The gradient entering a sublayer's output: with hyper-connections first through the post-mix
// of sub-stream `sub` (its output gradient was saved in `fout`), without them it also flows on
// along the residual (`dres`); then back through the dropout mask, if any.
int64_t Model::sublayer_out_grad(int l, int sub, Saved& s, int64_t dy, Slot mask, Slot fout,
                                 int64_t& dres, int64_t& dxs, int64_t& dcoeff) {
    const int64_t T = dims_.tokens, h = config_.hidden, B = dims_.d;
    int64_t g = dy;
    const bool hc = dims_.n > 1;
    if (hc) {
        dxs = hc_backward(l, sub, s, dy, dcoeff);
        g = s[fout];
        s[fout] = -1;
    } else {
        dres = dy;
    }
    if (!config_.dropout) return g;
    int64_t d = emitter_.alloc(B * T * h, kWs, label(-1, "grad.sublayer_out"));
    emitter_.kernel(Stream::Compute, kernel_names_.dropout_bwd, KClass::Memory, 0, {R(g), R(s[mask]), W(d)}, launch_elementwise(T * h));
    if (hc) emitter_.free(g);
    free_slot(s, mask);
    return d;
}

// The backward of y = x W (+ b) (linear_forward): dx (a new workspace of `in` features,
// returned) from dy and W, and W's (and b's) gradient from dy and the saved input `x`.
int64_t Model::linear_backward(int l, int64_t dy, int64_t x, ParamRole w, ParamRole b, int64_t in, int64_t out,
                               const char* what) {
    const int64_t dx = emitter_.alloc(dims_.d * dims_.tokens * in, kWs, label(-1, what));
    emitter_.kernel(Stream::Compute, kernel_names_.gemm_dgrad, KClass::Gemm, gemm_flops(in, out), {R(dy), R(pbuf(l, w)), W(dx)},
                    launch_gemm(dims_.tokens, in, hopper_));
    std::vector<Acc> acc = {R(dy), R(x)};
    add_grads(acc, l, {w, b});
    emitter_.kernel(Stream::Compute, kernel_names_.gemm_wgrad, KClass::Gemm, gemm_flops(in, out), acc,
                    launch_gemm(in, out, hopper_));
    return dx;
}

// The backward of a sublayer's layer norm (norm_forward): the gradient of its saved input `in`
// (returned) and of its weight and bias; `dout` and the saved input are freed.
int64_t Model::norm_backward(int l, Saved& s, int64_t dout, Slot in, ParamRole w, ParamRole b) {
    const int64_t h = config_.hidden;
    const int64_t din = emitter_.alloc(dims_.d * dims_.tokens * h, kWs,
                                       label(-1, dims_.n > 1 ? "grad.norm_in" : "grad.residual"));
    std::vector<Acc> acc = {R(dout), R(s[in]), W(din)};
    add_params(acc, l, {w});
    emitter_.kernel(Stream::Compute, kernel_names_.norm_bwd_input, KClass::Memory, 0, acc, launch_rows(dims_.tokens, 256));
    acc = {R(dout), R(s[in])};
    add_grads(acc, l, {w, b});
    emitter_.kernel(Stream::Compute, kernel_names_.norm_bwd_weight, KClass::Memory, 0, acc, launch_rows(h / 32 + 1, 1024));
    emitter_.free(dout);
    free_slot(s, in);
    return din;
}

// The gradient leaving sublayer `sub` at its input stream: `din` plus the residual's `dres`
// (n = 1), or through the pre-mix with hyper-connections.
int64_t Model::sublayer_in_grad(int l, int sub, Saved& s, int64_t din, int64_t dres, int64_t dxs, int64_t dcoeff) {
    if (dims_.n > 1) return hc_backward_pre(l, sub, s, din, dxs, dcoeff);
    emitter_.kernel(Stream::Compute, kernel_names_.add_inplace, KClass::Memory, 0, {RW(din), R(dres)},
                    launch_elementwise(dims_.tokens * config_.hidden));
    emitter_.free(dres);
    return din;
}

// The backward of a sublayer's first projection (QKV or the MLP's up projection, `out` features
// from the normalised input), all-reduced, then of its layer norm, then of the residual or
// pre-mix (sublayer_in_grad): the gradient of the sublayer's input stream. `dy` is freed.
int64_t Model::sublayer_head_backward(int l, int sub, Saved& s, int64_t dy, int64_t out, int64_t dres, int64_t dxs,
                                      int64_t dcoeff) {
    const Slot norm_out = sub ? LnOut2 : LnOut1;
    int64_t dln = linear_backward(l, dy, s[norm_out], sub ? Fc1W : QkvW, sub ? Fc1B : QkvB, config_.hidden, out,
                                  "grad.norm_out");
    emitter_.free(dy);
    free_slot(s, norm_out);
    tp_allreduce(dln);
    const int64_t din = sub ? norm_backward(l, s, dln, LnIn2, Ln2W, Ln2B) : norm_backward(l, s, dln, LnIn1, Ln1W, Ln1B);
    return sublayer_in_grad(l, sub, s, din, dres, dxs, dcoeff);
}

// The backward of attention_forward: dq, dk, dv (returned) from the context's gradient `dctx`.
int64_t Model::attention_backward(Saved& s, int64_t dctx) {
    const int64_t T = dims_.tokens, B = dims_.d;
    const double attn = 2 * double(T) * double(config_.seq) * double(dims_.q);
    int64_t dqkv = emitter_.alloc(B * T * (dims_.q + 2 * dims_.kv), kWs, label(-1, "grad.attn.qkv"));
    if (config_.flash) {
        int64_t dsum = emitter_.alloc(4 * T * dims_.heads, kWs, label(-1, "flash.softmax_d"));
        int64_t dqacc = emitter_.alloc(4 * T * dims_.q, kWs, label(-1, "flash.dq_accum"));
        emitter_.kernel(Stream::Compute, kernel_names_.flash_bwd_dot, KClass::Memory, 0, {R(dctx), R(s[Ctx]), W(dsum)},
                        launch_rows(T, 128));
        Launch fl = launch_rows((config_.seq + 127) / 128, 256);
        fl.grid[1] = static_cast<int32_t>(config_.micro_batch);
        fl.grid[2] = static_cast<int32_t>(dims_.heads);
        fl.smem = 98304;
        fl.regs = 255;
        emitter_.kernel(Stream::Compute, kernel_names_.flash_bwd, KClass::Attention, 4 * attn,
                        {R(s[Qkv]), R(s[Ctx]), R(dctx), R(s[Lse]), R(dsum), W(dqkv), RW(dqacc)}, fl);
        emitter_.kernel(Stream::Compute, kernel_names_.flash_bwd_convert, KClass::Memory, 0, {R(dqacc), RW(dqkv)},
                        launch_elementwise(T * dims_.q));
        emitter_.free(dsum);
        emitter_.free(dqacc);
        free_slot(s, Lse);
        return dqkv;
    }
    const int64_t sc = dims_.heads * config_.seq * config_.seq * config_.micro_batch;
    Launch bl = launch_gemm(config_.seq, config_.seq, hopper_);
    bl.grid[2] = static_cast<int32_t>(dims_.heads * config_.micro_batch);
    int64_t p = config_.dropout ? s[ProbsDrop] : s[Probs];
    int64_t dp = emitter_.alloc(B * sc, kWs, label(-1, "grad.attn.probs"));
    emitter_.kernel(Stream::Compute, kernel_names_.bmm, KClass::Gemm, attn, {R(dctx), R(s[Qkv]), W(dp)}, bl);
    emitter_.kernel(Stream::Compute, kernel_names_.bmm, KClass::Gemm, attn, {R(dctx), R(p), W(dqkv)}, bl);
    free_slot(s, ProbsDrop);
    if (config_.dropout) {
        emitter_.kernel(Stream::Compute, kernel_names_.dropout_bwd, KClass::Memory, 0, {RW(dp), R(s[AttnDropMask])},
                        launch_elementwise(sc));
        free_slot(s, AttnDropMask);
    }
    int64_t ds = emitter_.alloc(B * sc, kWs, label(-1, "grad.attn.scores"));
    emitter_.kernel(Stream::Compute, kernel_names_.softmax_bwd, KClass::Memory, 0, {R(dp), R(s[Probs]), W(ds)},
                    launch_rows(dims_.heads * config_.seq * config_.micro_batch, 1024));
    emitter_.free(dp);
    free_slot(s, Probs);
    emitter_.kernel(Stream::Compute, kernel_names_.bmm, KClass::Gemm, attn, {R(ds), R(s[Qkv]), RW(dqkv)}, bl);
    emitter_.kernel(Stream::Compute, kernel_names_.bmm, KClass::Gemm, attn, {R(ds), R(s[Qkv]), RW(dqkv)}, bl);
    emitter_.free(ds);
    return dqkv;
}

// The MLP sublayer's backward from the gradient `dy` of its output stream to that of its input
// stream (`dres`, `dxs`, `dcoeff`: the residual's and the pre-mix's parts, sublayer_out_grad).
int64_t Model::mlp_backward(int l, Saved& s, int64_t dy, int64_t& dxs, int64_t& dcoeff) {
    const bool gpt2 = config_.arch == Arch::Gpt2;
    const int64_t T = dims_.tokens, h = config_.hidden;
    int64_t dres = -1;
    int64_t dmo = sublayer_out_grad(l, 1, s, dy, MaskM, FoutM, dres, dxs, dcoeff);
    const int64_t up = gpt2 ? dims_.ffn : 2 * dims_.ffn;
    int64_t dg = linear_backward(l, dmo, s[G], Fc2W, Fc2B, dims_.ffn, h, "grad.mlp.act");
    free_slot(s, G);
    if (dmo != dres) emitter_.free(dmo);
    int64_t dh1 = emitter_.alloc(dims_.d * T * up, kWs, label(-1, "grad.mlp.up"));
    emitter_.kernel(Stream::Compute, kernel_names_.act_bwd, KClass::Memory, 0, {R(dg), R(s[H1]), W(dh1)},
                    launch_elementwise(T * up));
    emitter_.free(dg);
    free_slot(s, H1);
    return sublayer_head_backward(l, 1, s, dh1, up, dres, dxs, dcoeff);
}

// The attention sublayer's backward, as mlp_backward.
int64_t Model::attention_sublayer_backward(int l, Saved& s, int64_t dy, int64_t& dxs, int64_t& dcoeff) {
    const int64_t h = config_.hidden, qkv = dims_.q + 2 * dims_.kv;
    int64_t dres = -1;
    int64_t dout = sublayer_out_grad(l, 0, s, dy, MaskA, FoutA, dres, dxs, dcoeff);
    int64_t dctx = linear_backward(l, dout, s[Ctx], OW, OB, dims_.q, h, "grad.attn.context");
    if (dout != dres) emitter_.free(dout);
    int64_t dqkv = attention_backward(s, dctx);
    emitter_.free(dctx);
    free_slot(s, Ctx);
    free_slot(s, Qkv);   // last read by the attention backward above
    if (config_.arch != Arch::Gpt2)
        emitter_.kernel(Stream::Compute, kernel_names_.rope_bwd, KClass::Memory, 0, {RW(dqkv)},
                        launch_elementwise(dims_.tokens * (dims_.q + dims_.kv)));
    return sublayer_head_backward(l, 0, s, dqkv, qkv, dres, dxs, dcoeff);
}

int64_t Model::backward_layer(MicroBatch& mb, int l, int64_t dy) {
    Saved& s = mb.layers[l];
    const bool hc = dims_.n > 1;
    if (config_.recompute) {
        // Rematerialise the layer from its saved input, then run the backward pass.
        int64_t in = hc ? s[XsA] : s[LnIn1];
        int64_t out = forward_layer(mb, l, in, true);
        emitter_.free(out);
    } else if (hc && config_.hc_recompute && (l == dims_.layers - 1 || (l + 1) % dims_.hc_block == 0)) {
        hc_recompute_block(mb, l);
    }
    // `dxs` and `dcoeff` carry the post-mix's gradients to the pre-mix of the same sublayer.
    int64_t dxs = -1, dcoeff = -1;
    const int64_t d2 = mlp_backward(l, s, dy, dxs, dcoeff);   // of the attention sublayer's output stream
    return attention_sublayer_backward(l, s, d2, dxs, dcoeff);
}

}  // namespace mhc::datasets::detail
