// The training step around the layers: inputs, embedding, head and loss, pipeline
// send/receive, the 1F1B micro-batch order, gradient buckets and the optimizer.
#include <algorithm>

#include "model.hpp"

namespace mhc::datasets::detail {

using enum ParamRole;
using enum Slot;
using trace::CopyKind;
using trace::MarkerKind;

// Bandwidth of the data-parallel group: NVLink while it fits in one 8-GPU node with its
// tensor-parallel peers, the network beyond.
static double dp_bandwidth(const GeneratorConfig& c) {
    return (c.tp * c.dp <= 8 ? c.gpu.nvlink_bw : c.gpu.net_bw) * c.gpu.comm_eff;
}

void Model::layer_grads_ready(std::initializer_list<int> groups) {
    if (!reduce_grads_) return;
    for (int g : groups)
        for (int p : groups_[static_cast<size_t>(g)]) {
            bucket_.push_back(p);
            bucket_bytes_ += params_[p].numel * dims_.d;
        }
    if (bucket_bytes_ >= config_.bucket_bytes) flush_bucket(false);
}

void Model::flush_bucket(bool) {
    if (bucket_.empty()) return;
    const GpuSpec& g = config_.gpu;
    double dp = double(config_.dp);
    double factor = config_.zero1 ? (dp - 1) / dp : 2 * (dp - 1) / dp;
    double secs = g.comm_latency_s + factor * double(bucket_bytes_) / dp_bandwidth(config_);
    std::vector<Acc> acc{RW(nccl_dp_)};
    for (int p : bucket_) acc.push_back(RW(params_[p].grad));
    emitter_.kernel(Stream::Comm, config_.zero1 ? kernel_names_.reduce_scatter : kernel_names_.allreduce, KClass::Comm, 0, acc, launch_nccl(16),
              emitter_.now(Stream::Compute), secs);
    bucket_.clear();
    bucket_bytes_ = 0;
}

void Model::forward(MicroBatch& mb, int index) {
    const bool gpt2 = config_.arch == Arch::Gpt2, hc = dims_.n > 1;
    const int64_t T = dims_.tokens, h = config_.hidden, B = dims_.d;
    const double pcie = hopper_ ? 50e9 : 24e9;
    int64_t t0 = emitter_.now(Stream::Compute);
    mb.layers.assign(static_cast<size_t>(dims_.layers), Saved{});
    if (dims_.has_embed) {
        mb.input_ids = emitter_.alloc(T * 8, Category::Other, label(-1, "batch.input_ids"));
        emitter_.copy(Stream::Compute, CopyKind::H2D, T * 8, pcie);
    }
    if (dims_.has_head) {
        mb.labels = emitter_.alloc(T * 8, Category::Other, label(-1, "batch.labels"));
        emitter_.copy(Stream::Compute, CopyKind::H2D, T * 8, pcie);
    }
    int64_t x;
    std::vector<Acc> acc;
    if (dims_.has_embed) {
        int64_t emb = emitter_.alloc(B * T * h, hc ? kWs : kAct, hc ? label(-1, "embed.out") : label(0, "attn.residual"));
        acc = {R(mb.input_ids), R(params_[wte_].buf), W(emb)};
        if (gpt2) acc.push_back(R(params_[wpe_].buf));
        emitter_.kernel(Stream::Compute, kernel_names_.embed_fwd, KClass::Memory, 0, acc, launch_elementwise(T * h));
        tp_allreduce(emb);
        x = emb;
        if (hc) {
            x = emitter_.alloc(dims_.n * B * T * h, kAct, label(0, "attn.residual"));
            emitter_.kernel(Stream::Compute, kernel_names_.hc_expand, KClass::Memory, 0, {R(emb), W(x)}, launch_elementwise(dims_.n * T * h));
            emitter_.free(emb);
        }
    } else {
        // Multi-rank pipeline: the stage input (the previous stage's output, n streams with
        // mHC) arrives by a receive that ends no earlier than its send.
        x = emitter_.alloc(dims_.n * B * T * h, kAct, label(0, "attn.residual"));
        int64_t sent = pipe_->act_end[size_t(config_.pp_stage - 1)][size_t(index)];
        int64_t end = emitter_.comm_kernel(Stream::PpPrev, kernel_names_.sendrecv, {W(x), RW(nccl_pp_prev_)}, launch_nccl(4), emitter_.now(Stream::Compute),
                                     p2p_seconds(emitter_.bytes(x)), sent, kStreamPpPrev);
        emitter_.wait_until(Stream::Compute, end);
        t0 = emitter_.now(Stream::Compute);
    }
    for (int l = 0; l < dims_.layers; ++l) {
        int64_t marker = emitter_.marker_begin(), ts = emitter_.now(Stream::Compute);
        x = forward_layer(mb, l, x, false);
        emitter_.marker_end(marker, marker_names_[2 * l], ts, MarkerKind::Layer, l, emitter_.now(Stream::Compute));
        emitter_.progress(static_cast<double>(++progress_done_) / static_cast<double>(progress_total_));
    }
    if (dims_.has_head) {
        int64_t xf = x;
        if (hc) {
            xf = emitter_.alloc(B * T * h, kAct, label(-1, "final_norm.input"));
            emitter_.kernel(Stream::Compute, kernel_names_.hc_merge, KClass::Memory, 0, {R(x), W(xf)}, launch_elementwise(dims_.n * T * h));
            emitter_.free(x);
        }
        mb.final_in = xf;
        mb.head_in = emitter_.alloc(B * T * h, kAct, label(-1, "head.input"));
        acc = {R(xf), R(params_[lnf_w_].buf), W(mb.head_in)};
        if (gpt2) acc.push_back(R(params_[lnf_b_].buf));
        emitter_.kernel(Stream::Compute, kernel_names_.norm_fwd, KClass::Memory, 0, acc, launch_rows(T, 256));
        int head = gpt2 ? wte_ : head_;
        mb.logits = emitter_.alloc(B * T * dims_.vocab, kAct, label(-1, "logits"));
        emitter_.kernel(Stream::Compute, kernel_names_.gemm_fwd, KClass::Gemm, 2.0 * T * h * dims_.vocab,
                  {R(mb.head_in), R(params_[head].buf), W(mb.logits)}, launch_gemm(T, dims_.vocab, hopper_));
        mb.lse = emitter_.alloc(4 * T, kAct, label(-1, "loss.lse"));
        mb.loss = emitter_.alloc(4, Category::Other, label(-1, "loss"));
        emitter_.kernel(Stream::Compute, kernel_names_.xent_fwd, KClass::Memory, 0, {R(mb.logits), R(mb.labels), W(mb.lse), W(mb.loss)},
                  launch_rows(T, 256));
        tp_allreduce(mb.lse);   // vocabulary-parallel softmax statistics
    } else {
        // Send the stage output to the next stage; Megatron frees it once sent.
        double secs = p2p_seconds(emitter_.bytes(x));
        if (config_.multi_rank) {
            pipe_->act_end[size_t(config_.pp_stage)][size_t(index)] =
                emitter_.comm_kernel(Stream::PpNext, kernel_names_.sendrecv, {R(x), RW(nccl_pp_)}, launch_nccl(4), emitter_.now(Stream::Compute), secs, 0,
                               kStreamPpNext);
        } else {
            emitter_.kernel(Stream::Comm, kernel_names_.sendrecv, KClass::Comm, 0, {R(x), RW(nccl_pp_)}, launch_nccl(4), emitter_.now(Stream::Compute), secs);
        }
        emitter_.free(x);
    }
    mb.fwd_end = emitter_.now(Stream::Compute);
    if (fwd_time_ == 0) fwd_time_ = double(mb.fwd_end - t0);
}

double Model::p2p_seconds(int64_t bytes) const {
    const GpuSpec& g = config_.gpu;
    double bw = (config_.tp * config_.pp <= 8 ? g.nvlink_bw : g.net_bw) * g.comm_eff;
    return g.comm_latency_s + double(bytes) / bw;
}

int64_t Model::comm_done() const {
    return std::max({emitter_.now(Stream::Comm), emitter_.now(Stream::PpNext), emitter_.now(Stream::PpPrev)});
}

void Model::backward(MicroBatch& mb, int index) {
    const bool gpt2 = config_.arch == Arch::Gpt2, hc = dims_.n > 1;
    const int64_t T = dims_.tokens, h = config_.hidden, B = dims_.d;
    int64_t t0 = emitter_.now(Stream::Compute);
    int64_t dy;
    std::vector<Acc> acc;
    if (dims_.has_head) {
        int head = gpt2 ? wte_ : head_;
        int64_t dlogits = emitter_.alloc(B * T * dims_.vocab, kWs, label(-1, "grad.logits"));
        emitter_.kernel(Stream::Compute, kernel_names_.xent_bwd, KClass::Memory, 0, {R(mb.logits), R(mb.lse), R(mb.labels), W(dlogits)},
                  launch_rows(T, 256));
        for (int64_t* b : {&mb.logits, &mb.lse, &mb.labels, &mb.loss}) {
            emitter_.free(*b);
            *b = -1;
        }
        int64_t dnf = emitter_.alloc(B * T * h, kWs, label(-1, "grad.head.input"));
        emitter_.kernel(Stream::Compute, kernel_names_.gemm_dgrad, KClass::Gemm, 2.0 * T * h * dims_.vocab,
                  {R(dlogits), R(params_[head].buf), W(dnf)}, launch_gemm(T, h, hopper_));
        emitter_.kernel(Stream::Compute, kernel_names_.gemm_wgrad, KClass::Gemm, 2.0 * T * h * dims_.vocab,
                  {R(dlogits), R(mb.head_in), grad(head)}, launch_gemm(dims_.vocab, h, hopper_));
        emitter_.free(dlogits);
        emitter_.free(mb.head_in);
        tp_allreduce(dnf);
        int64_t dxf = emitter_.alloc(B * T * h, kWs, label(-1, hc ? "grad.final" : "grad.residual"));
        emitter_.kernel(Stream::Compute, kernel_names_.norm_bwd_input, KClass::Memory, 0,
                  {R(dnf), R(mb.final_in), R(params_[lnf_w_].buf), W(dxf)}, launch_rows(T, 256));
        acc = {R(dnf), R(mb.final_in), grad(lnf_w_)};
        if (gpt2) acc.push_back(grad(lnf_b_));
        emitter_.kernel(Stream::Compute, kernel_names_.norm_bwd_weight, KClass::Memory, 0, acc, launch_rows(h / 32 + 1, 1024));
        emitter_.free(dnf);
        emitter_.free(mb.final_in);
        dy = dxf;
        if (hc) {
            dy = emitter_.alloc(dims_.n * B * T * h, kWs, label(-1, "grad.residual"));
            emitter_.kernel(Stream::Compute, kernel_names_.hc_merge_bwd, KClass::Memory, 0, {R(dxf), W(dy)}, launch_elementwise(dims_.n * T * h));
            emitter_.free(dxf);
        }
        layer_grads_ready({static_cast<int>(groups_.size() - 1)});
    } else {
        // The gradient of the stage output comes back from the next stage after the rest of
        // the pipeline ran this micro-batch forward and backward.
        dy = emitter_.alloc(dims_.n * B * T * h, kWs, label(-1, "pp.recv_grad"));
        double secs = p2p_seconds(emitter_.bytes(dy));
        int64_t end;
        if (config_.multi_rank) {
            // Multi-rank: the next stage's send of this gradient, generated before.
            int64_t sent = pipe_->grad_end[size_t(config_.pp_stage + 1)][size_t(index)];
            end = emitter_.comm_kernel(Stream::PpNext, kernel_names_.sendrecv, {W(dy), RW(nccl_pp_)}, launch_nccl(4), emitter_.now(Stream::Compute), secs,
                                 sent, kStreamPpNext);
        } else {
            // Single rank: the rest of the pipeline is estimated from this stage's times.
            double bwd = bwd_time_ > 0 ? bwd_time_ : 2 * fwd_time_;
            int64_t ready = mb.fwd_end + static_cast<int64_t>((config_.pp - 1) * (fwd_time_ + bwd));
            end = emitter_.kernel(Stream::Comm, kernel_names_.sendrecv, KClass::Comm, 0, {W(dy), RW(nccl_pp_)}, launch_nccl(4),
                            std::max(ready, emitter_.now(Stream::Compute)), secs);
        }
        emitter_.wait_until(Stream::Compute, end);
        t0 = emitter_.now(Stream::Compute);
    }
    for (int l = static_cast<int>(dims_.layers) - 1; l >= 0; --l) {
        int64_t marker = emitter_.marker_begin(), ts = emitter_.now(Stream::Compute);
        dy = backward_layer(mb, l, dy);
        emitter_.marker_end(marker, marker_names_[2 * l + 1], ts, MarkerKind::Layer, l, emitter_.now(Stream::Compute));
        layer_grads_ready({l + 1});
        emitter_.progress(static_cast<double>(++progress_done_) / static_cast<double>(progress_total_));
    }
    int64_t demb = dy;
    if (hc && dims_.has_embed) {
        demb = emitter_.alloc(B * T * h, kWs, label(-1, "grad.embed.out"));
        emitter_.kernel(Stream::Compute, kernel_names_.hc_expand_bwd, KClass::Memory, 0, {R(dy), W(demb)}, launch_elementwise(dims_.n * T * h));
        emitter_.free(dy);
    }
    if (dims_.has_embed) {
        emitter_.kernel(Stream::Compute, kernel_names_.embed_bwd, KClass::Memory, 0, {R(demb), R(mb.input_ids), grad(wte_)},
                  launch_elementwise(T * h));
        if (gpt2)
            emitter_.kernel(Stream::Compute, kernel_names_.pos_bwd, KClass::Memory, 0, {R(demb), grad(wpe_)}, launch_elementwise(T * h));
        emitter_.free(demb);
        emitter_.free(mb.input_ids);
        mb.input_ids = -1;
    } else {
        // Multi-rank: the gradient of the stage input goes back to the previous stage.
        pipe_->grad_end[size_t(config_.pp_stage)][size_t(index)] =
            emitter_.comm_kernel(Stream::PpPrev, kernel_names_.sendrecv, {R(demb), RW(nccl_pp_prev_)}, launch_nccl(4), emitter_.now(Stream::Compute),
                           p2p_seconds(emitter_.bytes(demb)), 0, kStreamPpPrev);
        emitter_.free(demb);
    }
    layer_grads_ready({0});
    if (bwd_time_ == 0) bwd_time_ = static_cast<double>(emitter_.now(Stream::Compute) - t0);
}

void Model::optimizer(int index) {
    (void)index;
    const GpuSpec& g = config_.gpu;
    emitter_.wait_until(Stream::Compute, comm_done());
    int64_t marker = emitter_.marker_begin(), ts = emitter_.now(Stream::Compute);
    int64_t norm = emitter_.alloc(4096, kWs, label(-1, "optimizer.grad_norm"));
    // clip_grad_norm_: one multi-tensor L2 norm per group.
    for (const auto& grp : groups_) {
        if (grp.empty()) continue;   // a middle pipeline stage has no embedding group
        std::vector<Acc> acc{RW(norm)};
        for (int p : grp) acc.push_back(R(params_[p].grad));
        emitter_.kernel(Stream::Compute, kernel_names_.l2norm, KClass::Memory, 0, acc, launch_elementwise(1 << 20));
    }
    for (const auto& grp : groups_) {
        if (grp.empty()) continue;
        std::vector<Acc> acc;
        double bytes = 0;
        for (int p : grp) {
            Param& q = params_[p];
            if (q.m < 0) {   // Adam's moments appear at the first step
                q.m = emitter_.alloc(q.shard * 4, Category::Optimizer, emitter_.intern(q.name + ".exp_avg"), Stream::Compute, true);
                q.v = emitter_.alloc(q.shard * 4, Category::Optimizer, emitter_.intern(q.name + ".exp_avg_sq"), Stream::Compute, true);
            }
            acc.push_back(R(q.grad));
            acc.push_back(RW(q.master));
            acc.push_back(RW(q.m));
            acc.push_back(RW(q.v));
            acc.push_back(config_.zero1 ? RW(q.buf) : W(q.buf));
            bytes += double(q.shard) * (2.0 * dims_.d + 24);   // grad + param, 3 fp32 read-written
        }
        double secs = std::max(g.launch_floor_s, bytes / (g.mem_bw * g.mem_eff));
        int64_t end = emitter_.kernel(Stream::Compute, kernel_names_.adam, KClass::Memory, 0, acc, launch_elementwise(1 << 20), 0, secs);
        if (config_.zero1 && config_.dp > 1) {
            // Distributed optimizer: every rank gathers the updated parameter shards.
            std::vector<Acc> ag{RW(nccl_dp_)};
            double pbytes = 0;
            for (int p : grp) {
                ag.push_back(RW(params_[p].buf));
                pbytes += double(params_[p].numel * dims_.d);
            }
            double dp = double(config_.dp);
            double s = g.comm_latency_s + (dp - 1) / dp * pbytes / dp_bandwidth(config_);
            emitter_.kernel(Stream::Comm, kernel_names_.allgather, KClass::Comm, 0, ag, launch_nccl(16), end, s);
        }
    }
    emitter_.free(norm);
    for (auto& p : params_) {   // zero_grad(set_to_none=True)
        if (p.grad >= 0) emitter_.free(p.grad);
        p.grad = -1;
    }
    emitter_.wait_until(Stream::Compute, comm_done());
    emitter_.marker_end(marker, opt_name_, ts, MarkerKind::Range, -1, emitter_.now(Stream::Compute));
}

void Model::step(int index) {
    for (const Op& op : begin_step(index)) run(op);
    end_step(index);
}

// 1F1B (Narayanan et al. 2021): stage s runs min(pp - 1 - s, M) warm-up forwards, then one
// forward and one backward in turn, then the remaining backwards.
const std::vector<Model::Op>& Model::begin_step(int index) {
    emitter_.set_step(index);
    emitter_.idle(Stream::Compute, 120e-6);   // data loader and Python between steps
    emitter_.wait_until(Stream::Comm, emitter_.now(Stream::Compute));
    step_marker_ = emitter_.marker_begin();
    step_ts_ = emitter_.now(Stream::Compute);
    const int nmb = config_.micro_batches;
    mbs_.assign(static_cast<size_t>(nmb), MicroBatch{});
    ops_.clear();
    const int warm = std::min(config_.pp - 1 - config_.pp_stage, nmb);
    for (int i = 0; i < warm; ++i) ops_.push_back({true, i});
    for (int i = 0; i < nmb; ++i) {
        if (i + warm < nmb) ops_.push_back({true, i + warm});
        ops_.push_back({false, i});
    }
    return ops_;
}

bool Model::ready(const Op& op) const {
    if (!config_.multi_rank) return true;
    if (op.forward) return dims_.has_embed || pipe_->act_end[size_t(config_.pp_stage - 1)][size_t(op.mb)] >= 0;
    return dims_.has_head || pipe_->grad_end[size_t(config_.pp_stage + 1)][size_t(op.mb)] >= 0;
}

void Model::run(const Op& op) {
    MicroBatch& mb = mbs_[static_cast<size_t>(op.mb)];
    if (op.forward) {
        forward(mb, op.mb);
    } else {
        reduce_grads_ = config_.dp > 1 && op.mb == config_.micro_batches - 1;
        backward(mb, op.mb);
    }
}

void Model::end_step(int index) {
    flush_bucket(true);
    reduce_grads_ = false;
    optimizer(index);
    emitter_.marker_end(step_marker_, step_name_, step_ts_, MarkerKind::Step, index, std::max(emitter_.now(Stream::Compute), comm_done()));
}

}  // namespace mhc::datasets::detail
