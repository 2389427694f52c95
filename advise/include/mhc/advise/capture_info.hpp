#pragma once
// What a model capture (mhc-torch capture) knows beyond the trace tables: the module of each
// kernel, its phase (forward, backward, optimizer, recompute), the storages autograd saved for
// the backward and which forward op saved them, and the model's repeated blocks.
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "mhc/trace/columns.hpp"
#include "mhc/trace/model.hpp"

namespace mhc::advise {

struct CaptureInfo {
    std::string path;
    // Modules (dense, in id order): fully qualified names as ModTracker spells them.
    std::vector<std::string> module_name, module_type;
    std::unordered_map<std::string, int32_t> module_index;
    std::string root;                     // the root module's name ("GPT2LMHeadModel")
    // The model's blocks: the numbered children of the prefix with the most forward kernels
    // ("LlamaForCausalLM.model.layers" -> ".0", ".1", ...), or its named children when they are
    // two or more of one type (an nn.ModuleDict's "blocks.early", "blocks.late"), and, when those
    // are all of one module type, of every other such stack of one type that is neither inside
    // nor around it (T5's "encoder.block" and "decoder.block"), in forward order; block_prefix
    // lists the stacks. Named children that are single layers (no recorded module inside, one
    // kernel a call) are not a stack; a stack whose members differ in structure and hold stacks of
    // blocks (modules with modules inside) doing at least half of each member's forward work gives
    // way to those inner stacks (Swin's stages to its blocks). A CheckpointWrapper member counts as
    // the module it wraps.
    std::string block_prefix;
    std::vector<std::string> block_name;
    std::vector<int32_t> block_module;    // module index of each block
    std::vector<int32_t> module_block;    // per module: its block, -1 outside every block
    // Per module: -1 for a module the model registers, else the registered module whose forward
    // makes it (recorded as "Caller.Class": a loss or an activation built on each call, meta
    // capture.unregistered_modules); model.get_submodule cannot reach such a module, so it is
    // never a block and a setting cannot name it.
    std::vector<int32_t> made_in;

    // Per kernel row of the trace.
    std::vector<int32_t> kernel_module;   // -1: outside every module
    std::vector<trace::Phase> kernel_phase;
    // Saved tensors: the saver kernel rows of allocation row a are
    // saved_by[saved_begin[a] .. saved_begin[a+1]), in kernel order.
    std::vector<int64_t> saved_begin;
    std::vector<int32_t> saved_by;
    std::vector<int32_t> saved_packs;     // parallel to saved_by: packs of the storage by that op
    int64_t saved_rows = 0;
    // Per allocation row: the kernel row until which a frame of the model's code (a module's
    // forward, its locals and arguments) held the storage in the forward, -1 when not recorded
    // (meta capture.frame_holds, python/mhc_torch/frame_holds.py).
    std::vector<int32_t> held_until;
    // (allocation row, kernel row): the kernel that ran next after the backward first unpacked
    // the saved storage (a backward node unpacks all it saved before its first kernel), one per
    // backward, sorted (meta capture.unpacks; empty when not recorded).
    std::vector<std::pair<int32_t, int32_t>> unpacks;
    // The same pairs in the order meta capture.unpacks lists them (the order the backwards
    // unpacked them in): a storage saved in every pass (a parameter) has a place in each.
    std::vector<std::pair<int32_t, int32_t>> unpacks_listed;
    // (allocation row, kernel row) of every save in the order autograd packed them (meta
    // capture.pack_order; empty in captures before it): an offload hook's order.
    std::vector<std::pair<int32_t, int32_t>> pack_order;
    // Beside each row of pack_order, the kernel row that ran next after that save was first
    // unpacked, -1 for none (meta capture.save_unpacks; empty when not recorded): an earlier op's
    // save of a storage a later op saved too is unpacked by its own node, after the later one's.
    std::vector<int32_t> save_unpacks;
    // (module, kernel row) where each forward call of a module called more often than the model
    // starts (meta capture.module_calls: a layer whose weights are shared, called many times a
    // pass), sorted; calls one after another are one run of kernels without them.
    std::vector<std::pair<int32_t, int32_t>> call_starts;
    // Meta capture.call_args: (module, the kernel row its forward call starts at) -> the allocation
    // rows of the tensors the call was passed positionally, in order (what checkpoint packs through
    // saved-tensor hooks around it). Empty in a capture made before 2026-12-06.
    std::map<std::pair<int32_t, int32_t>, std::vector<int32_t>> call_args;
    // The outermost modules whose forward ran inside torch.func's grad, vjp, jacrev or hessian
    // (per-sample gradients, vmap(grad(loss))): meta capture.torch_func_modules. Those transforms
    // refuse saved-tensor hooks, so PyTorch stops a checkpoint or an offload inside them.
    std::vector<int32_t> torch_func_modules;
    // The outermost modules whose forward ran inside torch.func's jvp or jacfwd (forward-mode AD:
    // MeanFlow's du/dt): meta capture.jvp_modules. Their saves are recorded, but PyTorch's checkpoint
    // recomputes them without the tangents and an offload's hooks meet functorch's wrapped tensors.
    std::vector<int32_t> jvp_modules;
    // The kernels (first, last kernel row) of each update of a key/value cache that a Hugging Face
    // model's forward made itself from its config's use_cache, with the model of the trained model
    // whose config that is (checkpointing a module inside it turns the cache off) and the last
    // kernel row before the module calling the update returned (meta capture.model_cache_updates,
    // python/mhc_torch/model_cache.py; empty when none ran).
    std::vector<std::array<int32_t, 4>> model_cache_updates;   // (model, first, last, returned)
    // The modules whose forward updates a cache the setting leaves on (a forward given
    // use_cache=True), with autograd recording: meta capture.kept_cache_callers.
    std::vector<int32_t> kept_cache_callers;

    // What the printed code needs to know of the user's model and optimizer (meta that
    // mhc-torch capture writes; empty in a capture that lacks it).
    std::vector<std::string> hf_checkpoint_layers;   // the layers a Hugging Face model's own call checkpoints
    std::string hf_checkpoint_call;                  // that call: activation_ or gradient_checkpointing_enable
    // The same step captured again with that checkpointing turned off (meta
    // capture.without_hf_checkpointing, python/mhc_torch/cli.py): its peak, reserved bytes (-1
    // when the capture could not run mhc to simulate its allocator), host peak and estimated last
    // step; with_step_ns is the last step with checkpointing on, as the capture estimated it (0:
    // not recorded). off_peak < 0: not captured.
    struct HfOff {
        int64_t peak = -1, reserved = -1, host_peak = 0, step_ns = 0, with_step_ns = 0;
    } hf_off;
    std::string optimizer_class;                     // "torch.optim.adamw.AdamW"
    // PYTORCH_CUDA_ALLOC_CONF as the captured step ran (meta allocator.conf; "" none): an allocator
    // setting is predicted over it, and the printed code keeps it.
    std::string allocator_conf;
    std::string optimizer_defaults;                  // its hyperparameters, a JSON object
    bool optimizer_groups = false;                   // its parameter groups (capture.optimizer_groups)
    // The LR schedulers built on the optimizer ("LambdaLR"; capture.lr_schedulers, "" none): a
    // scheduler steps the optimizer it was built on, so printed code that replaces the optimizer
    // says where the scheduler goes.
    std::string lr_schedulers;
    std::string param_dtype;   // the trained weights' dtype (capture.weights_dtype; before it, the recipe's cast)
    // The dtype of what the optimizer steps (capture.optimizer_dtype; before it, param_dtype): a host
    // optimizer steps fp32 copies of them, so its host bytes are those at 4 bytes an element.
    std::string optimizer_dtype;
    int64_t batch = 0, micro_batches = 1;            // the recipe's (batch 0: not known)
    // A data-parallel wrapper the capture found: "ddp" (DistributedDataParallel on fake ranks, its
    // gradient buckets in the trace) or "fsdp2" (fully_shard: one rank's shards, unsharded
    // parameters and collectives) with its parameters ("world 4, bucket_cap_mb 25, ..."); empty
    // for none. FSDP2 with CPUOffloadPolicy, or under DDP too, is refused when loaded.
    std::string data_parallel, data_parallel_detail;

    int32_t find_module(const std::string& name) const;   // -1 if the model has none so named
    // True when `module` is `ancestor` or lies inside it (by name: "a.b.c" inside "a.b").
    bool within(int32_t module, int32_t ancestor) const;
    // Per module: whether it lies inside any of `roots` (module indices).
    std::vector<uint8_t> inside_any(const std::vector<int32_t>& roots) const;
    // The name a user's code gives the module (model.get_submodule): without the root's class.
    std::string user_name(int32_t module) const;
    // The captured optimizer is torch.optim's Adam or AdamW (also when the capture does not name
    // its class: mhc-torch capture's own AdamW): the optimizer whose fused kernel is modelled.
    bool adam_optimizer() const;
    // Why PyTorch refuses fused=True for the parameters the optimizer steps (capture.fused_refused:
    // a complex or integer parameter); "" when it accepts them.
    std::string fused_refused;
    // Gradients that are sparse COO tensors (nn.Embedding(sparse=True)'s): the parameters' names,
    // ", "-joined ("" none). A capture records a sparse gradient as two allocations of one
    // gradient label made at once (its indices and values). DeepSpeed's ZeRO takes none.
    std::string sparse_grads;
};

// Reads the capture tables of `t`'s file. Throws mhc::Error (bad input, one line naming the
// file) when the trace is not a model capture (no modules, no kernel phases or no saved
// tensors: "capture it with mhc-torch capture") or names kernels/allocations it lacks.
CaptureInfo load_capture_info(const trace::TraceData& t);

// The one line `mhc advise` prints about a data-parallel capture: what it models of the wrapper and
// what not (empty when the capture has none).
std::string data_parallel_note(const CaptureInfo& info);

// The line `mhc advise` prints when the model has no blocks (empty when it has): what blocks are
// (the search's checkpoint and offload choices act on them) and how to predict a module of one's
// own with --setting, naming the model's own children as the capture spells them.
std::string blocks_note(const CaptureInfo& info);
// The blocks the model's own code checkpoints already (their kernels recompute in the backward:
// checkpoint_sequential, torch.utils.checkpoint in its forward), said in one line; "" when none
// or when a Hugging Face model's own call does it (its answers say so).
std::string own_checkpoint_note(const CaptureInfo& info);

}  // namespace mhc::advise
