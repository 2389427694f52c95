// The transformer: parameters, per-layer forward and backward kernels, the step schedule.
// Tensor shapes and what is saved for backward follow docs/datasets.md exactly; the
// closed forms in formulas.cpp are checked against this code by the tests.
#include "model.hpp"

#include <algorithm>
#include <cmath>

namespace mhc::datasets::detail {

using trace::Category;
using trace::CopyKind;
using trace::MarkerKind;

namespace {
constexpr Category kAct = Category::Activation;
constexpr Category kWs = Category::Workspace;

// a + number + b, built by appending (GCC 12 warns falsely on chained operator+ at -O3).
std::string cat(const char* a, int64_t number, const char* b) {
    std::string s(a);
    s += std::to_string(number);
    s += b;
    return s;
}
}  // namespace

Model::Model(Emitter& e, const KernelNames& k)
    : e_(e), k_(k), c_(e.cfg()), d_(dims(e.cfg())), hopper_(e.cfg().gpu.name != "a100") {
    const int64_t h = c_.hidden;
    const bool gpt2 = c_.arch == Arch::Gpt2;
    // Parameters in model order, as a framework creates them at start-up.
    // The first stage holds the embeddings; a GPT-2 last stage of a pipeline keeps its own
    // copy of the token embedding for the tied head (as Megatron does).
    if (d_.has_embed || (gpt2 && d_.has_head))
        wte_ = static_cast<int>(param(d_.has_embed ? "embed.tokens.weight" : "embed.tokens.weight.head_copy", d_.vocab * h));
    if (gpt2 && d_.has_embed)
        wpe_ = static_cast<int>(param("embed.positions.weight", (c_.max_positions ? c_.max_positions : c_.seq) * h));
    groups_.emplace_back();
    for (int p : {wte_, wpe_})
        if (p >= 0) groups_.back().push_back(p);
    layer_params_.resize(static_cast<size_t>(d_.layers));
    for (int l = 0; l < d_.layers; ++l) {
        auto& lp = layer_params_[l];
        lp.fill(-1);
        std::string pre = cat("L", l, ".");
        auto add = [&](P role, const char* name, int64_t numel) {
            lp[role] = param(pre + name, numel);
        };
        const int64_t n = d_.n;
        if (n > 1) {
            add(HcFnA, "attn.hc.fn", n * h * n * (n + 2));
            add(HcBaseA, "attn.hc.base", n * (n + 2));
            add(HcScaleA, "attn.hc.scale", 3);
        }
        add(Ln1W, "attn.norm.weight", h);
        if (gpt2) add(Ln1B, "attn.norm.bias", h);
        add(QkvW, "attn.qkv.weight", h * (d_.q + 2 * d_.kv));
        if (gpt2) add(QkvB, "attn.qkv.bias", d_.q + 2 * d_.kv);
        add(OW, "attn.out.weight", d_.q * h);
        if (gpt2) add(OB, "attn.out.bias", h);
        if (n > 1) {
            add(HcFnM, "mlp.hc.fn", n * h * n * (n + 2));
            add(HcBaseM, "mlp.hc.base", n * (n + 2));
            add(HcScaleM, "mlp.hc.scale", 3);
        }
        add(Ln2W, "mlp.norm.weight", h);
        if (gpt2) add(Ln2B, "mlp.norm.bias", h);
        add(Fc1W, gpt2 ? "mlp.fc1.weight" : "mlp.gate_up.weight", h * d_.ffn * (gpt2 ? 1 : 2));
        if (gpt2) add(Fc1B, "mlp.fc1.bias", d_.ffn);
        add(Fc2W, gpt2 ? "mlp.fc2.weight" : "mlp.down.weight", d_.ffn * h);
        if (gpt2) add(Fc2B, "mlp.fc2.bias", h);
        std::vector<int> g;
        for (int64_t id : lp)
            if (id >= 0) g.push_back(static_cast<int>(id));
        groups_.push_back(g);
    }
    if (d_.has_head) {
        lnf_w_ = static_cast<int>(param("final_norm.weight", h));
        if (gpt2) lnf_b_ = static_cast<int>(param("final_norm.bias", h));
        std::vector<int> g{lnf_w_};
        if (gpt2) g.push_back(lnf_b_);
        if (!gpt2) {   // GPT-2 ties the head to the token embedding
            head_ = static_cast<int>(param("head.weight", d_.vocab * h));
            g.push_back(head_);
        }
        groups_.push_back(g);
    }
    // fp32 master weights are made with the model (mixed-precision wrapper); Adam's two
    // moments are created lazily by the first optimizer step.
    for (auto& p : params_) {
        p.shard = c_.zero1 ? (p.numel + c_.dp - 1) / c_.dp : p.numel;
        p.master = e_.alloc(p.shard * 4, Category::Optimizer, e_.intern(p.name + ".master"), kCompute, true);
    }
    cublas_ws_ = e_.alloc(32ll << 20, kWs, e_.intern("cublas_workspace"), kCompute, true);
    // NCCL communicator buffers: 16 channels x (4 MiB simple + 4.5 MiB LL128 + 256 KiB LL).
    const int64_t nccl = 16 * ((4ll << 20) + (9ll << 19) + (1ll << 18));
    if (c_.dp > 1) nccl_dp_ = e_.alloc(nccl, Category::Comm, e_.intern("nccl.dp.buffers"), kComm, true);
    if (c_.tp > 1) nccl_tp_ = e_.alloc(nccl, Category::Comm, e_.intern("nccl.tp.buffers"), kComm, true);
    if (!c_.multi_rank && c_.pp > 1) nccl_pp_ = e_.alloc(nccl, Category::Comm, e_.intern("nccl.pp.buffers"), kComm, true);
    if (c_.multi_rank && c_.pp_stage + 1 < c_.pp)
        nccl_pp_ = e_.alloc(nccl, Category::Comm, e_.intern("nccl.pp_next.buffers"), kPpNext, true);
    if (c_.multi_rank && c_.pp_stage > 0)
        nccl_pp_prev_ = e_.alloc(nccl, Category::Comm, e_.intern("nccl.pp_prev.buffers"), kPpPrev, true);
    marker_names_.resize(static_cast<size_t>(2 * d_.layers));
    for (int l = 0; l < d_.layers; ++l) {
        marker_names_[2 * l] = e_.intern(cat("layer ", l, " forward"));
        marker_names_[2 * l + 1] = e_.intern(cat("layer ", l, " backward"));
    }
    step_name_ = e_.intern("step");
    opt_name_ = e_.intern("optimizer.step");
    progress_total_ = c_.steps * c_.micro_batches * static_cast<int>(d_.layers) * 2;
}

int64_t Model::param(const std::string& name, int64_t numel) {
    Param p;
    p.numel = numel;
    p.name = name;
    p.buf = e_.alloc(numel * d_.d, Category::Param, e_.intern(name), kCompute, true);
    params_.push_back(p);
    return static_cast<int64_t>(params_.size() - 1);
}

int64_t Model::label(int layer, const char* what) {
    auto& v = labels_[what];
    size_t i = static_cast<size_t>(layer + 1);
    if (v.size() <= i) v.resize(i + 1, -1);
    if (v[i] < 0)
        v[i] = e_.intern(layer >= 0 ? cat("L", layer, ".") + what : std::string(what));
    return v[i];
}

Acc Model::grad(int p) {
    Param& q = params_[p];
    if (q.grad < 0) {
        q.grad = e_.alloc(q.numel * d_.d, Category::Grad, e_.intern(q.name + ".grad"));
        return W(q.grad);
    }
    return RW(q.grad);
}

void Model::add_params(std::vector<Acc>& acc, int layer, std::initializer_list<P> ps) const {
    for (P p : ps)
        if (pid(layer, p) >= 0) acc.push_back(R(pbuf(layer, p)));
}

void Model::add_grads(std::vector<Acc>& acc, int layer, std::initializer_list<P> ps) {
    for (P p : ps)
        if (pid(layer, p) >= 0) acc.push_back(grad(static_cast<int>(pid(layer, p))));
}

void Model::free_slot(Saved& s, Slot k) {
    if (s[k] >= 0) e_.free(s[k]);
    s[k] = -1;
}

// Tensor-parallel all-reduce of an activation (Megatron f/g operators), on the compute
// stream: the next kernel needs its result.
void Model::tp_allreduce(int64_t buf) {
    if (c_.tp <= 1) return;
    const GpuSpec& g = c_.gpu;
    double t = double(c_.tp);
    double bw = (c_.tp <= 8 ? g.nvlink_bw : g.net_bw) * g.comm_eff;
    double secs = g.comm_latency_s + 2 * (t - 1) / t * double(e_.bytes(buf)) / bw;
    if (c_.multi_rank)
        e_.comm_kernel(kCompute, k_.allreduce, {RW(buf), RW(nccl_tp_)}, launch_nccl(16), 0, secs, 0, kStreamTp);
    else
        e_.kernel(kCompute, k_.allreduce, KClass::Comm, 0, {RW(buf), RW(nccl_tp_)}, launch_nccl(16), 0, secs);
}

// ---- mHC -----------------------------------------------------------------------------

int64_t Model::hc_pre(int l, int sub, int64_t xs, int64_t& coeff, int64_t& hres) {
    const double T = double(d_.tokens), h = double(c_.hidden), n = double(d_.n);
    const int64_t nn2 = d_.n * (d_.n + 2);
    P fn = sub ? HcFnM : HcFnA, base = sub ? HcBaseM : HcBaseA, scale = sub ? HcScaleM : HcScaleA;
    coeff = e_.alloc(4 * d_.tokens * nn2, kAct, label(l, sub ? "mlp.hc.coeff" : "attn.hc.coeff"));
    e_.kernel(kCompute, k_.hc_coeff, KClass::HcGemm, 2 * T * n * h * double(nn2),
              {R(xs), R(pbuf(l, fn)), R(pbuf(l, base)), R(pbuf(l, scale)), W(coeff)},
              launch_rows(d_.tokens / 64 + 1, 256));
    hres = e_.alloc(4 * d_.tokens * d_.n * d_.n, kAct, label(l, sub ? "mlp.hc.res_matrix" : "attn.hc.res_matrix"));
    e_.kernel(kCompute, k_.hc_sinkhorn, KClass::Vector, T * n * n * (4.0 * c_.sinkhorn_iters + 2),
              {R(coeff), W(hres)}, launch_rows(d_.tokens / 128 + 1, 128));
    int64_t hin = e_.alloc(d_.d * d_.tokens * c_.hidden, kAct, label(l, sub ? "mlp.norm_in" : "attn.norm_in"));
    e_.kernel(kCompute, k_.hc_pre, KClass::Memory, 2 * T * n * h, {R(xs), R(coeff), W(hin)},
              launch_elementwise(d_.tokens * c_.hidden));
    return hin;
}

int64_t Model::hc_post(int l, int sub, int64_t xs, int64_t fo, int64_t coeff, int64_t hres, int64_t lbl) {
    (void)l;
    (void)sub;
    const double T = double(d_.tokens), h = double(c_.hidden), n = double(d_.n);
    int64_t x = e_.alloc(d_.n * d_.d * d_.tokens * c_.hidden, kAct, lbl);
    e_.kernel(kCompute, k_.hc_res, KClass::Memory, 2 * T * n * n * h, {R(xs), R(hres), W(x)},
              launch_elementwise(d_.n * d_.tokens * c_.hidden));
    e_.kernel(kCompute, k_.hc_post, KClass::Memory, 2 * T * n * h, {R(fo), R(coeff), RW(x)},
              launch_elementwise(d_.n * d_.tokens * c_.hidden));
    return x;
}

// Backward of the post and res mappings and of Sinkhorn-Knopp: returns d(xs) so far and
// sets dfo (gradient of the sublayer output). Leaves d(coeff) in s-independent temp.
int64_t Model::hc_backward(int l, int sub, Saved& s, int64_t dy, int64_t& dcoeff) {
    const double T = double(d_.tokens), h = double(c_.hidden), n = double(d_.n);
    Slot xs = sub ? XsM : XsA, co = sub ? CoeffM : CoeffA, hr = sub ? HresM : HresA, fo = sub ? FoutM : FoutA;
    (void)l;
    int64_t dfo = e_.alloc(d_.d * d_.tokens * c_.hidden, kWs, label(-1, "grad.sublayer_out"));
    dcoeff = e_.alloc(4 * d_.tokens * d_.n * (d_.n + 2), kWs, label(-1, "grad.hc.coeff"));
    e_.kernel(kCompute, k_.hc_post_bwd, KClass::Memory, 2 * (2 * T * n * h),
              {R(dy), R(s[fo]), R(s[co]), W(dfo), W(dcoeff)}, launch_elementwise(d_.n * d_.tokens * c_.hidden));
    int64_t dxs = e_.alloc(d_.n * d_.d * d_.tokens * c_.hidden, kWs, label(-1, "grad.residual"));
    int64_t dhres = e_.alloc(4 * d_.tokens * d_.n * d_.n, kWs, label(-1, "grad.hc.res_matrix"));
    e_.kernel(kCompute, k_.hc_res_bwd, KClass::Memory, 2 * (2 * T * n * n * h),
              {R(dy), R(s[xs]), R(s[hr]), W(dxs), W(dhres)}, launch_elementwise(d_.n * d_.tokens * c_.hidden));
    e_.free(dy);
    free_slot(s, hr);
    e_.kernel(kCompute, k_.hc_sinkhorn_bwd, KClass::Vector, 3 * T * n * n * (4.0 * c_.sinkhorn_iters + 2),
              {R(dhres), R(s[co]), RW(dcoeff)}, launch_rows(d_.tokens / 128 + 1, 128));
    e_.free(dhres);
    free_slot(s, fo);
    s[fo] = dfo;   // hand the gradient back through the slot: the caller frees it
    return dxs;
}

// Backward of the pre mapping and of the coefficient projection.
int64_t Model::hc_backward_pre(int l, int sub, Saved& s, int64_t dhin, int64_t dxs, int64_t dcoeff) {
    const double T = double(d_.tokens), h = double(c_.hidden), n = double(d_.n);
    const double nn2 = n * (n + 2);
    Slot xs = sub ? XsM : XsA, co = sub ? CoeffM : CoeffA;
    P fn = sub ? HcFnM : HcFnA, base = sub ? HcBaseM : HcBaseA, scale = sub ? HcScaleM : HcScaleA;
    e_.kernel(kCompute, k_.hc_pre_bwd, KClass::Memory, 2 * (2 * T * n * h),
              {R(dhin), R(s[xs]), R(s[co]), RW(dxs), RW(dcoeff)}, launch_elementwise(d_.n * d_.tokens * c_.hidden));
    e_.free(dhin);
    e_.kernel(kCompute, k_.hc_coeff_dgrad, KClass::HcGemm, 2 * T * n * h * nn2,
              {R(dcoeff), R(pbuf(l, fn)), R(s[xs]), RW(dxs)}, launch_rows(d_.tokens / 64 + 1, 256));
    std::vector<Acc> acc{R(dcoeff), R(s[xs])};
    add_grads(acc, l, {fn, base, scale});
    e_.kernel(kCompute, k_.hc_coeff_wgrad, KClass::HcGemm, 2 * T * n * h * nn2, acc,
              launch_rows(d_.tokens / 64 + 1, 256));
    e_.free(dcoeff);
    free_slot(s, co);
    free_slot(s, xs);
    return dxs;
}

// Block recomputation of the n-stream residual (hc_recompute): from the saved input of
// the block's first layer and the saved sublayer outputs, rerun the mHC kernels (not the
// layers) to rebuild every stream, coefficient and Sinkhorn matrix of the block.
void Model::hc_recompute_block(MicroBatch& mb, int last) {
    int first = static_cast<int>(last / d_.hc_block * d_.hc_block);
    for (int j = first; j <= last; ++j) {
        Saved& s = mb.layers[j];
        for (int sub = 0; sub < 2; ++sub) {
            Slot xs = sub ? XsM : XsA, co = sub ? CoeffM : CoeffA, hr = sub ? HresM : HresA, fo = sub ? FoutM : FoutA;
            const double T = double(d_.tokens), h = double(c_.hidden), n = double(d_.n);
            const int64_t nn2 = d_.n * (d_.n + 2);
            P fn = sub ? HcFnM : HcFnA, base = sub ? HcBaseM : HcBaseA, scale = sub ? HcScaleM : HcScaleA;
            s[co] = e_.alloc(4 * d_.tokens * nn2, kAct, label(j, sub ? "mlp.hc.coeff" : "attn.hc.coeff"));
            e_.kernel(kCompute, k_.hc_coeff, KClass::HcGemm, 2 * T * n * h * double(nn2),
                      {R(s[xs]), R(pbuf(j, fn)), R(pbuf(j, base)), R(pbuf(j, scale)), W(s[co])},
                      launch_rows(d_.tokens / 64 + 1, 256));
            s[hr] = e_.alloc(4 * d_.tokens * d_.n * d_.n, kAct, label(j, sub ? "mlp.hc.res_matrix" : "attn.hc.res_matrix"));
            e_.kernel(kCompute, k_.hc_sinkhorn, KClass::Vector, T * n * n * (4.0 * c_.sinkhorn_iters + 2),
                      {R(s[co]), W(s[hr])}, launch_rows(d_.tokens / 128 + 1, 128));
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
    const int64_t T = d_.tokens, h = c_.hidden;
    if (c_.dropout) {
        s[mask] = e_.alloc(T * h, kAct, label(l, mask_name));   // interned only when used
        e_.kernel(kCompute, k_.dropout_add, KClass::Memory, 0, {R(o), R(x), W(out), W(s[mask])},
                  launch_elementwise(T * h));
    } else {
        e_.kernel(kCompute, k_.add, KClass::Memory, 0, {R(o), R(x), W(out)}, launch_elementwise(T * h));
    }
    e_.free(o);
}

int64_t Model::forward_layer(MicroBatch& mb, int l, int64_t x_in, bool keep_all) {
    Saved& s = mb.layers[l];
    const bool gpt2 = c_.arch == Arch::Gpt2, hc = d_.n > 1;
    const int64_t T = d_.tokens, h = c_.hidden, B = d_.d;
    const double Td = double(T), hd = double(h), sd = double(c_.seq);
    const Launch row = launch_rows(T, 256);
    std::vector<Acc> acc;

    // Attention sublayer.
    if (hc) {
        s[XsA] = x_in;
        s[LnIn1] = hc_pre(l, 0, x_in, s[CoeffA], s[HresA]);
    } else {
        s[LnIn1] = x_in;
    }
    s[LnOut1] = e_.alloc(B * T * h, kAct, label(l, "attn.norm_out"));
    acc = {R(s[LnIn1]), W(s[LnOut1])};
    add_params(acc, l, {Ln1W, Ln1B});
    e_.kernel(kCompute, k_.norm_fwd, KClass::Memory, 0, acc, row);
    s[Qkv] = e_.alloc(B * T * (d_.q + 2 * d_.kv), kAct, label(l, "attn.qkv"));
    acc = {R(s[LnOut1]), W(s[Qkv])};
    add_params(acc, l, {QkvW, QkvB});
    e_.kernel(kCompute, k_.gemm_fwd, KClass::Gemm, 2 * Td * hd * double(d_.q + 2 * d_.kv), acc,
              launch_gemm(T, d_.q + 2 * d_.kv, hopper_));
    if (!gpt2) e_.kernel(kCompute, k_.rope_fwd, KClass::Memory, 0, {RW(s[Qkv])}, launch_elementwise(T * (d_.q + d_.kv)));
    const double attn = 2 * Td * sd * double(d_.q);   // one of QK^T or PV
    s[Ctx] = e_.alloc(B * T * d_.q, kAct, label(l, "attn.context"));
    if (c_.flash) {
        s[Lse] = e_.alloc(4 * T * d_.heads, kAct, label(l, "attn.softmax_lse"));
        Launch fl = launch_rows((c_.seq + 127) / 128, 128);
        fl.grid[1] = static_cast<int32_t>(c_.micro_batch);
        fl.grid[2] = static_cast<int32_t>(d_.heads);
        fl.smem = 49152;
        fl.regs = 255;
        e_.kernel(kCompute, k_.flash_fwd, KClass::Attention, 2 * attn, {R(s[Qkv]), W(s[Ctx]), W(s[Lse])}, fl);
    } else {
        const int64_t sc = d_.heads * c_.seq * c_.seq * c_.micro_batch;
        Launch bl = launch_gemm(c_.seq, c_.seq, hopper_);
        bl.grid[2] = static_cast<int32_t>(d_.heads * c_.micro_batch);
        int64_t scores = e_.alloc(B * sc, kWs, label(l, "attn.scores"));
        e_.kernel(kCompute, k_.bmm, KClass::Gemm, attn, {R(s[Qkv]), W(scores)}, bl);
        s[Probs] = e_.alloc(B * sc, kAct, label(l, "attn.probs"));
        e_.kernel(kCompute, k_.softmax_fwd, KClass::Memory, 0, {R(scores), W(s[Probs])},
                  launch_rows(d_.heads * c_.seq * c_.micro_batch, 1024));
        e_.free(scores);
        int64_t p = s[Probs];
        if (c_.dropout) {
            s[ProbsDrop] = e_.alloc(B * sc, kAct, label(l, "attn.probs_dropout"));
            s[AttnDropMask] = e_.alloc(sc, kAct, label(l, "attn.probs_dropout_mask"));
            e_.kernel(kCompute, k_.dropout, KClass::Memory, 0, {R(p), W(s[ProbsDrop]), W(s[AttnDropMask])},
                      launch_elementwise(sc));
            p = s[ProbsDrop];
        }
        e_.kernel(kCompute, k_.bmm, KClass::Gemm, attn, {R(p), R(s[Qkv]), W(s[Ctx])}, bl);
    }
    int64_t o = e_.alloc(B * T * h, hc && !c_.dropout ? kAct : kWs,
                         hc && !c_.dropout ? label(l, "attn.out") : label(l, "attn.out_proj"));
    acc = {R(s[Ctx]), W(o)};
    add_params(acc, l, {OW, OB});
    e_.kernel(kCompute, k_.gemm_fwd, KClass::Gemm, 2 * Td * double(d_.q) * hd, acc, launch_gemm(T, h, hopper_));
    tp_allreduce(o);
    int64_t x_mid = -1;
    if (!hc) {
        x_mid = e_.alloc(B * T * h, kAct, label(l, "mlp.residual"));
        residual_add(s, MaskA, l, "attn.dropout_mask", o, x_in, x_mid);
        s[LnIn2] = x_mid;
    } else {
        if (c_.dropout) {
            s[FoutA] = e_.alloc(B * T * h, kAct, label(l, "attn.out"));
            s[MaskA] = e_.alloc(T * h, kAct, label(l, "attn.dropout_mask"));
            e_.kernel(kCompute, k_.dropout, KClass::Memory, 0, {R(o), W(s[FoutA]), W(s[MaskA])}, launch_elementwise(T * h));
            e_.free(o);
        } else {
            s[FoutA] = o;
        }
        s[XsM] = hc_post(l, 0, s[XsA], s[FoutA], s[CoeffA], s[HresA], label(l, "mlp.residual"));
        s[LnIn2] = hc_pre(l, 1, s[XsM], s[CoeffM], s[HresM]);
    }

    // MLP sublayer.
    s[LnOut2] = e_.alloc(B * T * h, kAct, label(l, "mlp.norm_out"));
    acc = {R(s[LnIn2]), W(s[LnOut2])};
    add_params(acc, l, {Ln2W, Ln2B});
    e_.kernel(kCompute, k_.norm_fwd, KClass::Memory, 0, acc, row);
    const int64_t up = gpt2 ? d_.ffn : 2 * d_.ffn;
    s[H1] = e_.alloc(B * T * up, kAct, label(l, gpt2 ? "mlp.fc1_out" : "mlp.gate_up"));
    acc = {R(s[LnOut2]), W(s[H1])};
    add_params(acc, l, {Fc1W, Fc1B});
    e_.kernel(kCompute, k_.gemm_fwd, KClass::Gemm, 2 * Td * hd * double(up), acc, launch_gemm(T, up, hopper_));
    s[G] = e_.alloc(B * T * d_.ffn, kAct, label(l, gpt2 ? "mlp.gelu_out" : "mlp.act"));
    e_.kernel(kCompute, k_.act_fwd, KClass::Memory, 0, {R(s[H1]), W(s[G])}, launch_elementwise(T * d_.ffn));
    int64_t mo = e_.alloc(B * T * h, hc && !c_.dropout ? kAct : kWs,
                          hc && !c_.dropout ? label(l, "mlp.out") : label(l, "mlp.out_proj"));
    acc = {R(s[G]), W(mo)};
    add_params(acc, l, {Fc2W, Fc2B});
    e_.kernel(kCompute, k_.gemm_fwd, KClass::Gemm, 2 * Td * double(d_.ffn) * hd, acc, launch_gemm(T, h, hopper_));
    tp_allreduce(mo);
    // The output is the next layer's saved input.
    int64_t next_label = l + 1 < d_.layers ? label(l + 1, "attn.residual")
                                           : label(-1, d_.has_head ? (hc ? "final.streams" : "final_norm.input") : "stage.output");
    int64_t x_out;
    if (!hc) {
        x_out = e_.alloc(B * T * h, kAct, next_label);
        residual_add(s, MaskM, l, "mlp.dropout_mask", mo, x_mid, x_out);
    } else {
        if (c_.dropout) {
            s[FoutM] = e_.alloc(B * T * h, kAct, label(l, "mlp.out"));
            s[MaskM] = e_.alloc(T * h, kAct, label(l, "mlp.dropout_mask"));
            e_.kernel(kCompute, k_.dropout, KClass::Memory, 0, {R(mo), W(s[FoutM]), W(s[MaskM])}, launch_elementwise(T * h));
            e_.free(mo);
        } else {
            s[FoutM] = mo;
        }
        x_out = hc_post(l, 1, s[XsM], s[FoutM], s[CoeffM], s[HresM], next_label);
    }

    if (keep_all) return x_out;
    if (c_.recompute) {
        // Checkpointing: only the layer input survives the forward pass.
        for (int k = 0; k < kSlotCount; ++k)
            if (k != (hc ? XsA : LnIn1)) free_slot(s, static_cast<Slot>(k));
    } else if (hc && c_.hc_recompute) {
        // The mHC intermediates are rebuilt per block in backward; the sublayer outputs and
        // the block's input stream stay.
        for (Slot k : {CoeffA, HresA, CoeffM, HresM, XsM}) free_slot(s, k);
        if (l % d_.hc_block != 0) free_slot(s, XsA);
    }
    return x_out;
}

// The gradient entering a sublayer's output: with hyper-connections first through the post-mix
// of sub-stream `sub` (its output gradient was saved in `fout`), without them it also flows on
// along the residual (`dres`); then back through the dropout mask, if any.
int64_t Model::sublayer_out_grad(int l, int sub, Saved& s, int64_t dy, Slot mask, Slot fout,
                                 int64_t& dres, int64_t& dxs, int64_t& dcoeff) {
    const int64_t T = d_.tokens, h = c_.hidden, B = d_.d;
    int64_t g = dy;
    const bool hc = d_.n > 1;
    if (hc) {
        dxs = hc_backward(l, sub, s, dy, dcoeff);
        g = s[fout];
        s[fout] = -1;
    } else {
        dres = dy;
    }
    if (!c_.dropout) return g;
    int64_t d = e_.alloc(B * T * h, kWs, label(-1, "grad.sublayer_out"));
    e_.kernel(kCompute, k_.dropout_bwd, KClass::Memory, 0, {R(g), R(s[mask]), W(d)}, launch_elementwise(T * h));
    if (hc) e_.free(g);
    free_slot(s, mask);
    return d;
}

int64_t Model::backward_layer(MicroBatch& mb, int l, int64_t dy) {
    Saved& s = mb.layers[l];
    const bool gpt2 = c_.arch == Arch::Gpt2, hc = d_.n > 1;
    const int64_t T = d_.tokens, h = c_.hidden, B = d_.d;
    const double Td = double(T), hd = double(h), sd = double(c_.seq);
    const Launch row = launch_rows(T, 256);
    std::vector<Acc> acc;

    if (c_.recompute) {
        // Rematerialise the layer from its saved input, then run the backward pass.
        int64_t in = hc ? s[XsA] : s[LnIn1];
        int64_t out = forward_layer(mb, l, in, true);
        e_.free(out);
    } else if (hc && c_.hc_recompute && (l == d_.layers - 1 || (l + 1) % d_.hc_block == 0)) {
        hc_recompute_block(mb, l);
    }

    // MLP sublayer. `dres` is the gradient flowing along the residual path.
    int64_t dres = -1, dxs = -1, dcoeff = -1;
    int64_t dmo = sublayer_out_grad(l, 1, s, dy, MaskM, FoutM, dres, dxs, dcoeff);
    const int64_t up = gpt2 ? d_.ffn : 2 * d_.ffn;
    int64_t dg = e_.alloc(B * T * d_.ffn, kWs, label(-1, "grad.mlp.act"));
    e_.kernel(kCompute, k_.gemm_dgrad, KClass::Gemm, 2 * Td * double(d_.ffn) * hd,
              {R(dmo), R(pbuf(l, Fc2W)), W(dg)}, launch_gemm(T, d_.ffn, hopper_));
    acc = {R(dmo), R(s[G])};
    add_grads(acc, l, {Fc2W, Fc2B});
    e_.kernel(kCompute, k_.gemm_wgrad, KClass::Gemm, 2 * Td * double(d_.ffn) * hd, acc, launch_gemm(d_.ffn, h, hopper_));
    free_slot(s, G);
    if (dmo != dres) e_.free(dmo);
    int64_t dh1 = e_.alloc(B * T * up, kWs, label(-1, "grad.mlp.up"));
    e_.kernel(kCompute, k_.act_bwd, KClass::Memory, 0, {R(dg), R(s[H1]), W(dh1)}, launch_elementwise(T * up));
    e_.free(dg);
    free_slot(s, H1);
    int64_t dln = e_.alloc(B * T * h, kWs, label(-1, "grad.norm_out"));
    e_.kernel(kCompute, k_.gemm_dgrad, KClass::Gemm, 2 * Td * hd * double(up),
              {R(dh1), R(pbuf(l, Fc1W)), W(dln)}, launch_gemm(T, h, hopper_));
    acc = {R(dh1), R(s[LnOut2])};
    add_grads(acc, l, {Fc1W, Fc1B});
    e_.kernel(kCompute, k_.gemm_wgrad, KClass::Gemm, 2 * Td * hd * double(up), acc, launch_gemm(h, up, hopper_));
    e_.free(dh1);
    free_slot(s, LnOut2);
    tp_allreduce(dln);
    int64_t dmid = e_.alloc((hc ? 1 : 1) * B * T * h, kWs, label(-1, hc ? "grad.norm_in" : "grad.residual"));
    acc = {R(dln), R(s[LnIn2]), W(dmid)};
    add_params(acc, l, {Ln2W});
    e_.kernel(kCompute, k_.norm_bwd_input, KClass::Memory, 0, acc, row);
    acc = {R(dln), R(s[LnIn2])};
    add_grads(acc, l, {Ln2W, Ln2B});
    e_.kernel(kCompute, k_.norm_bwd_weight, KClass::Memory, 0, acc, launch_rows(h / 32 + 1, 1024));
    e_.free(dln);
    free_slot(s, LnIn2);
    int64_t d2;   // gradient of the attention sublayer's output stream
    if (!hc) {
        e_.kernel(kCompute, k_.add_inplace, KClass::Memory, 0, {RW(dmid), R(dres)}, launch_elementwise(T * h));
        e_.free(dres);
        d2 = dmid;
    } else {
        d2 = hc_backward_pre(l, 1, s, dmid, dxs, dcoeff);
    }

    // Attention sublayer.
    dres = -1;
    int64_t dout = sublayer_out_grad(l, 0, s, d2, MaskA, FoutA, dres, dxs, dcoeff);
    int64_t dctx = e_.alloc(B * T * d_.q, kWs, label(-1, "grad.attn.context"));
    e_.kernel(kCompute, k_.gemm_dgrad, KClass::Gemm, 2 * Td * double(d_.q) * hd,
              {R(dout), R(pbuf(l, OW)), W(dctx)}, launch_gemm(T, d_.q, hopper_));
    acc = {R(dout), R(s[Ctx])};
    add_grads(acc, l, {OW, OB});
    e_.kernel(kCompute, k_.gemm_wgrad, KClass::Gemm, 2 * Td * double(d_.q) * hd, acc, launch_gemm(d_.q, h, hopper_));
    if (dout != dres) e_.free(dout);
    const double attn = 2 * Td * sd * double(d_.q);
    int64_t dqkv = e_.alloc(B * T * (d_.q + 2 * d_.kv), kWs, label(-1, "grad.attn.qkv"));
    if (c_.flash) {
        int64_t dsum = e_.alloc(4 * T * d_.heads, kWs, label(-1, "flash.softmax_d"));
        int64_t dqacc = e_.alloc(4 * T * d_.q, kWs, label(-1, "flash.dq_accum"));
        e_.kernel(kCompute, k_.flash_bwd_dot, KClass::Memory, 0, {R(dctx), R(s[Ctx]), W(dsum)}, launch_rows(T, 128));
        Launch fl = launch_rows((c_.seq + 127) / 128, 256);
        fl.grid[1] = static_cast<int32_t>(c_.micro_batch);
        fl.grid[2] = static_cast<int32_t>(d_.heads);
        fl.smem = 98304;
        fl.regs = 255;
        e_.kernel(kCompute, k_.flash_bwd, KClass::Attention, 4 * attn,
                  {R(s[Qkv]), R(s[Ctx]), R(dctx), R(s[Lse]), R(dsum), W(dqkv), RW(dqacc)}, fl);
        e_.kernel(kCompute, k_.flash_bwd_convert, KClass::Memory, 0, {R(dqacc), RW(dqkv)}, launch_elementwise(T * d_.q));
        e_.free(dsum);
        e_.free(dqacc);
        free_slot(s, Lse);
    } else {
        const int64_t sc = d_.heads * c_.seq * c_.seq * c_.micro_batch;
        Launch bl = launch_gemm(c_.seq, c_.seq, hopper_);
        bl.grid[2] = static_cast<int32_t>(d_.heads * c_.micro_batch);
        int64_t p = c_.dropout ? s[ProbsDrop] : s[Probs];
        int64_t dp = e_.alloc(B * sc, kWs, label(-1, "grad.attn.probs"));
        e_.kernel(kCompute, k_.bmm, KClass::Gemm, attn, {R(dctx), R(s[Qkv]), W(dp)}, bl);
        e_.kernel(kCompute, k_.bmm, KClass::Gemm, attn, {R(dctx), R(p), W(dqkv)}, bl);
        free_slot(s, ProbsDrop);
        if (c_.dropout) {
            e_.kernel(kCompute, k_.dropout_bwd, KClass::Memory, 0, {RW(dp), R(s[AttnDropMask])}, launch_elementwise(sc));
            free_slot(s, AttnDropMask);
        }
        int64_t ds = e_.alloc(B * sc, kWs, label(-1, "grad.attn.scores"));
        e_.kernel(kCompute, k_.softmax_bwd, KClass::Memory, 0, {R(dp), R(s[Probs]), W(ds)},
                  launch_rows(d_.heads * c_.seq * c_.micro_batch, 1024));
        e_.free(dp);
        free_slot(s, Probs);
        e_.kernel(kCompute, k_.bmm, KClass::Gemm, attn, {R(ds), R(s[Qkv]), RW(dqkv)}, bl);
        e_.kernel(kCompute, k_.bmm, KClass::Gemm, attn, {R(ds), R(s[Qkv]), RW(dqkv)}, bl);
        e_.free(ds);
    }
    e_.free(dctx);
    free_slot(s, Ctx);
    free_slot(s, Qkv);   // last read by the attention backward above
    if (!gpt2) e_.kernel(kCompute, k_.rope_bwd, KClass::Memory, 0, {RW(dqkv)}, launch_elementwise(T * (d_.q + d_.kv)));
    dln = e_.alloc(B * T * h, kWs, label(-1, "grad.norm_out"));
    e_.kernel(kCompute, k_.gemm_dgrad, KClass::Gemm, 2 * Td * hd * double(d_.q + 2 * d_.kv),
              {R(dqkv), R(pbuf(l, QkvW)), W(dln)}, launch_gemm(T, h, hopper_));
    acc = {R(dqkv), R(s[LnOut1])};
    add_grads(acc, l, {QkvW, QkvB});
    e_.kernel(kCompute, k_.gemm_wgrad, KClass::Gemm, 2 * Td * hd * double(d_.q + 2 * d_.kv), acc,
              launch_gemm(h, d_.q + 2 * d_.kv, hopper_));
    e_.free(dqkv);
    free_slot(s, LnOut1);
    tp_allreduce(dln);
    int64_t din = e_.alloc(B * T * h, kWs, label(-1, hc ? "grad.norm_in" : "grad.residual"));
    acc = {R(dln), R(s[LnIn1]), W(din)};
    add_params(acc, l, {Ln1W});
    e_.kernel(kCompute, k_.norm_bwd_input, KClass::Memory, 0, acc, row);
    acc = {R(dln), R(s[LnIn1])};
    add_grads(acc, l, {Ln1W, Ln1B});
    e_.kernel(kCompute, k_.norm_bwd_weight, KClass::Memory, 0, acc, launch_rows(h / 32 + 1, 1024));
    e_.free(dln);
    free_slot(s, LnIn1);
    if (!hc) {
        e_.kernel(kCompute, k_.add_inplace, KClass::Memory, 0, {RW(din), R(dres)}, launch_elementwise(T * h));
        e_.free(dres);
        return din;
    }
    return hc_backward_pre(l, 0, s, din, dxs, dcoeff);
}

}  // namespace mhc::datasets::detail
