#pragma once
// One GPU's share of a decoder-only transformer in training: its parameter tensors, and
// the forward and backward pass of each layer as kernels with exact accesses.
#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "emitter.hpp"
#include "names.hpp"

namespace mhc::datasets::detail {

// The categories of the model's buffers, short.
inline constexpr Category kAct = Category::Activation;
inline constexpr Category kWs = Category::Workspace;

// Parameters of a layer, by role; -1 where the architecture has none.
enum class ParamRole : int { Ln1W, Ln1B, QkvW, QkvB, OW, OB, Ln2W, Ln2B, Fc1W, Fc1B, Fc2W, Fc2B,
                             HcFnA, HcBaseA, HcScaleA, HcFnM, HcBaseM, HcScaleM };
inline constexpr int kParamRoleCount = static_cast<int>(ParamRole::HcScaleM) + 1;

// What the forward pass keeps for the backward pass of one layer and micro-batch.
enum class Slot : int { XsA, CoeffA, HresA, FoutA, XsM, CoeffM, HresM, FoutM,
                        LnIn1, LnOut1, Qkv, Probs, ProbsDrop, AttnDropMask, Lse, Ctx, MaskA,
                        LnIn2, LnOut2, H1, G, MaskM };
inline constexpr int kSlotCount = static_cast<int>(Slot::MaskM) + 1;

// Buffer ids (or parameter indexes) by an enumeration's members, -1 where there is none.
template <class Enum, int N>
class ByEnum {
public:
    ByEnum() { ids_.fill(-1); }
    int64_t& operator[](Enum e) { return ids_[static_cast<size_t>(e)]; }
    int64_t operator[](Enum e) const { return ids_[static_cast<size_t>(e)]; }
    auto begin() const { return ids_.begin(); }   // in the enumeration's order
    auto end() const { return ids_.end(); }

private:
    std::array<int64_t, N> ids_;
};

struct Param {
    int64_t numel = 0;
    int64_t buf = -1, grad = -1, master = -1, m = -1, v = -1;
    int64_t shard = 0;           // elements of the optimizer shard on this GPU
    std::string name;
};

// The sends of a multi-rank pipeline in the current step: when stage s's send of
// micro-batch i's activation (act) or of its input gradient (grad) ended; -1 until sent.
struct PipeLinks {
    std::vector<std::vector<int64_t>> act_end, grad_end;   // [stage][micro-batch]
    void reset(int stages, int micro_batches) {
        act_end.assign(size_t(stages), std::vector<int64_t>(size_t(micro_batches), -1));
        grad_end = act_end;
    }
};

// CUDA stream numbers of the communicators of a multi-rank trace (docs/trace-format.md).
inline constexpr int64_t kStreamDp = 13, kStreamTp = 21, kStreamPpNext = 23, kStreamPpPrev = 24;

class Model {
public:
    Model(Emitter& e, const KernelNames& k);

    // One training step: every micro-batch (1F1B when pp > 1), gradient collectives,
    // optimizer. Layer markers and a step marker are written.
    void step(int index);

    // The same step in pieces, for the multi-rank pipeline driver (generate.cpp): begin,
    // then the stage's 1F1B operations in order (each one runnable once ready() says its
    // input was sent by the neighbouring stage), then end.
    void set_pipe(PipeLinks* p) { pipe_ = p; }
    struct Op { bool forward; int mb; };
    const std::vector<Op>& begin_step(int index);
    bool ready(const Op& op) const;
    void run(const Op& op);
    void end_step(int index);

private:
    using Saved = ByEnum<Slot, kSlotCount>;
    struct MicroBatch {
        std::vector<Saved> layers;
        int64_t input_ids = -1, labels = -1;
        int64_t head_in = -1, final_in = -1, logits = -1, lse = -1, loss = -1;
        int64_t out = -1;            // stage output (pp > 1) until sent
        int64_t fwd_end = 0;
    };

    int64_t param(const std::string& name, int64_t numel);
    int64_t label(int layer, const char* what);
    int64_t layer_marker_name(int layer, bool backward);
    Acc grad(int p);                              // write on first touch, then read-write
    Acc R(int64_t b) const { return {b, AccessMode::Read}; }
    Acc W(int64_t b) const { return {b, AccessMode::Write}; }
    Acc RW(int64_t b) const { return {b, AccessMode::ReadWrite}; }
    int64_t pid(int layer, ParamRole p) const { return layer_params_[layer][p]; }
    int64_t pbuf(int layer, ParamRole p) const { return params_[pid(layer, p)].buf; }
    void add_params(std::vector<Acc>& acc, int layer, std::initializer_list<ParamRole> ps) const;
    void add_grads(std::vector<Acc>& acc, int layer, std::initializer_list<ParamRole> ps);

    void forward(MicroBatch& mb, int index);
    void backward(MicroBatch& mb, int index);
    double p2p_seconds(int64_t bytes) const;
    int64_t comm_done() const;
    int64_t forward_layer(MicroBatch& mb, int l, int64_t x_in, bool keep_all);
    int64_t backward_layer(MicroBatch& mb, int l, int64_t dy);
    // forward_layer's stages
    double gemm_flops(int64_t in, int64_t out) const;
    void linear_forward(int l, int64_t x, int64_t y, ParamRole w, ParamRole b, int64_t in, int64_t out);
    void norm_forward(int l, Saved& s, Slot in, Slot out, ParamRole w, ParamRole b, const char* what);
    int64_t sublayer_out_buffer(int l, int sub);
    void keep_sublayer_out(int l, int sub, Saved& s, int64_t o);
    void attention_forward(int l, Saved& s);
    int64_t attention_sublayer(int l, Saved& s);
    int64_t mlp_sublayer(int l, Saved& s);
    void release_after_forward(int l, Saved& s);
    // backward_layer's stages
    int64_t linear_backward(int l, int64_t dy, int64_t x, ParamRole w, ParamRole b, int64_t in, int64_t out,
                            const char* what);
    int64_t norm_backward(int l, Saved& s, int64_t dout, Slot in, ParamRole w, ParamRole b);
    int64_t sublayer_in_grad(int l, int sub, Saved& s, int64_t din, int64_t dres, int64_t dxs, int64_t dcoeff);
    int64_t sublayer_head_backward(int l, int sub, Saved& s, int64_t dy, int64_t out, int64_t dres, int64_t dxs,
                                   int64_t dcoeff);
    int64_t attention_backward(Saved& s, int64_t dctx);
    int64_t mlp_backward(int l, Saved& s, int64_t dy, int64_t& dxs, int64_t& dcoeff);
    int64_t attention_sublayer_backward(int l, Saved& s, int64_t dy, int64_t& dxs, int64_t& dcoeff);
    int64_t hc_pre(int l, int sub, int64_t xs, int64_t& coeff, int64_t& hres);
    int64_t hc_post(int l, int sub, int64_t xs, int64_t fo, int64_t coeff, int64_t hres, int64_t lbl);
    int64_t hc_backward(int l, int sub, Saved& s, int64_t dy, int64_t& dfo);
    int64_t hc_backward_pre(int l, int sub, Saved& s, int64_t dhin, int64_t dxs, int64_t dcoeff);
    void residual_add(Saved& s, Slot mask, int l, const char* mask_name, int64_t o, int64_t x, int64_t out);
    int64_t sublayer_out_grad(int l, int sub, Saved& s, int64_t dy, Slot mask, Slot fout,
                              int64_t& dres, int64_t& dxs, int64_t& dcoeff);
    void hc_recompute_block(MicroBatch& mb, int last);
    void tp_allreduce(int64_t buf);
    void layer_grads_ready(std::initializer_list<int> params);
    void flush_bucket(bool force);
    void optimizer(int index);
    void free_slot(Saved& s, Slot k);

    Emitter& emitter_;
    const KernelNames& kernel_names_;
    const GeneratorConfig& config_;
    Dims dims_;
    bool hopper_;
    std::vector<Param> params_;
    std::vector<ByEnum<ParamRole, kParamRoleCount>> layer_params_;
    int wte_ = -1, wpe_ = -1, lnf_w_ = -1, lnf_b_ = -1, head_ = -1;
    std::vector<std::vector<int>> groups_;       // optimizer groups: params per layer etc.
    int64_t nccl_dp_ = -1, nccl_tp_ = -1, nccl_pp_ = -1, nccl_pp_prev_ = -1, cublas_ws_ = -1;
    PipeLinks* pipe_ = nullptr;
    std::vector<MicroBatch> mbs_;
    std::vector<Op> ops_;
    int64_t step_marker_ = 0, step_ts_ = 0;
    // Gradient buckets of the current backward (data parallel, last micro-batch only).
    std::vector<int> bucket_;
    int64_t bucket_bytes_ = 0;
    bool reduce_grads_ = false;
    double fwd_time_ = 0, bwd_time_ = 0;          // per micro-batch, measured
    std::unordered_map<const char*, std::vector<int64_t>> labels_;   // by layer + 1
    std::vector<int64_t> marker_names_;
    int64_t step_name_, opt_name_;
    // Steps x micro-batches x layers x 2 may pass 2^31 (1,000,000 steps of 4,096 layers).
    int64_t progress_done_ = 0, progress_total_ = 1;
};

}  // namespace mhc::datasets::detail
