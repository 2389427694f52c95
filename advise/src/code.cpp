// Printing a setting as code users paste into a training script.
#include "mhc/advise/code.hpp"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "mhc/advise/transforms.hpp"

namespace mhc::advise {

namespace {

// The group is exactly the layers that a Hugging Face model's own checkpointing call wraps (the
// capture names them; a model that is not a transformers PreTrainedModel has none).
bool hf_layers(const CheckpointGroup& group, const CaptureInfo& info) {
    if (group.policy != Policy::Full || info.hf_checkpoint_layers.empty()) return false;
    std::vector<std::string> asked = group.modules, layers = info.hf_checkpoint_layers;
    std::sort(asked.begin(), asked.end());
    std::sort(layers.begin(), layers.end());
    return asked == layers;
}

// A module a setting names, spelled as the trace does or as model.get_submodule does (without the
// root's class name: resolve_modules takes both, and the code printed for it must find it too).
int32_t named_module(const CaptureInfo& info, const std::string& name) {
    const int32_t index = info.find_module(name);
    return index >= 0 ? index : info.find_module(info.root + "." + name);
}

std::string prefix_of(const std::string& name) {
    const size_t dot = name.rfind('.');
    return dot == std::string::npos ? "" : name.substr(0, dot);
}

std::string names_of_one_prefix(const std::vector<std::string>& names);

// The user's names of `modules`, compact when they are numbered children of one prefix:
// [f"model.layers.{i}" for i in (0, 1, 5)] or range(0, 12); modules of several stacks (an
// encoder's and a decoder's layers) as one such list per stack, unpacked into one list.
std::string names_expr(const std::vector<std::string>& modules, const CaptureInfo& info) {
    std::vector<std::vector<std::string>> runs;
    for (const std::string& module : modules) {
        int32_t index = named_module(info, module);
        std::string name = index >= 0 ? info.user_name(index) : module;
        if (runs.empty() || prefix_of(runs.back().back()) != prefix_of(name)) runs.emplace_back();
        runs.back().push_back(name);
    }
    if (runs.size() <= 1) return names_of_one_prefix(runs.empty() ? std::vector<std::string>{} : runs.front());
    std::string out = "[";
    for (size_t r = 0; r < runs.size(); ++r) out += (r ? ", *" : "*") + names_of_one_prefix(runs[r]);
    return out + "]";
}

std::string names_of_one_prefix(const std::vector<std::string>& names) {
    std::string prefix;
    std::vector<int> idx;
    bool numbered = !names.empty();
    for (const std::string& name : names) {
        size_t dot = name.rfind('.');
        std::string parent = dot == std::string::npos ? "" : name.substr(0, dot);
        std::string tail = dot == std::string::npos ? name : name.substr(dot + 1);
        // At most 9 digits: a module "layers.99999999999" of a hostile trace made std::stoi throw
        // ("mhc: internal error: stoi").
        if (tail.empty() || tail.size() > 9 || tail.find_first_not_of("0123456789") != std::string::npos ||
            (!prefix.empty() && parent != prefix)) {
            numbered = false;
            break;
        }
        prefix = parent;
        idx.push_back(std::stoi(tail));
    }
    std::ostringstream out;
    if (numbered && names.size() > 2) {
        bool run = true;
        for (size_t i = 1; i < idx.size(); ++i) run = run && idx[i] == idx[i - 1] + 1;
        out << "[f\"" << (prefix.empty() ? "" : prefix + ".") << "{i}\" for i in ";
        if (run) {
            out << "range(" << idx.front() << ", " << idx.back() + 1 << ")]";
        } else {
            out << "(";
            for (size_t i = 0; i < idx.size(); ++i) out << (i ? ", " : "") << idx[i];
            out << ")]";
        }
        return out.str();
    }
    out << "[";
    for (size_t i = 0; i < names.size(); ++i) out << (i ? ", " : "") << "\"" << names[i] << "\"";
    out << "]";
    return out.str();
}

size_t block_count(const std::vector<std::string>& modules, const CaptureInfo& info) {
    size_t count = 0;
    for (const std::string& module : modules) {
        int32_t index = named_module(info, module);
        count += index >= 0 && info.module_block[static_cast<size_t>(index)] >= 0 &&
                 info.block_module[static_cast<size_t>(info.module_block[static_cast<size_t>(index)])] == index;
    }
    return count;
}

// The stack a block belongs to: its name less the last component ("ViTMAEForPreTraining.vit.layers").
std::string stack_of(const std::string& block) {
    const size_t dot = block.rfind('.');
    return dot == std::string::npos ? std::string() : block.substr(0, dot);
}

std::string what_modules(const std::vector<std::string>& modules, const CaptureInfo& info) {
    size_t blocks = block_count(modules, info);
    if (blocks != modules.size() || info.block_name.empty())
        return std::to_string(modules.size()) + " module" + (modules.size() == 1 ? "" : "s");
    std::string out = std::to_string(blocks) + " of " + std::to_string(info.block_name.size()) + " blocks";
    // Blocks of two stacks or more (an encoder's and a decoder's): how many of each, so that two
    // answers with as many blocks in all but not in each stack do not read the same ("checkpoint 10
    // of 20 blocks" twice on ViT-MAE, 3 + 7 and 4 + 6 of its encoder's and decoder's layers).
    std::vector<std::pair<std::string, std::pair<int, int>>> stacks;   // stack -> (chosen, all), forward order
    std::vector<std::string> named;   // the modules as the trace spells them (a setting may not)
    for (const std::string& module : modules) {
        const int32_t index = named_module(info, module);
        named.push_back(index >= 0 ? info.module_name[static_cast<size_t>(index)] : module);
    }
    for (const std::string& block : info.block_name) {
        const std::string st = stack_of(block);
        auto it = std::find_if(stacks.begin(), stacks.end(), [&](const auto& entry) { return entry.first == st; });
        if (it == stacks.end()) it = stacks.insert(stacks.end(), {st, {0, 0}});
        ++it->second.second;
        it->second.first += static_cast<int>(std::count(named.begin(), named.end(), block));
    }
    if (stacks.size() < 2) return out;
    std::string parts;
    for (const auto& [st, n] : stacks) {
        if (n.first == 0) continue;
        const size_t dot = st.find('.');   // less the model's class name, as printed code names modules
        parts += (parts.empty() ? "" : ", ") + (dot == std::string::npos ? st : st.substr(dot + 1)) + " " +
                 std::to_string(n.first) + " of " + std::to_string(n.second);
    }
    return out + " (" + parts + ")";
}

// Whether a module of `modules` holds a module whose type name contains `type` (the capture's
// module types: "BatchNorm" finds SyncBatchNorm too).
bool holds_type(const std::vector<std::string>& modules, const CaptureInfo& info, const std::string& type) {
    for (const std::string& name : modules) {
        const int32_t root = named_module(info, name);
        for (size_t m = 0; root >= 0 && m < info.module_name.size(); ++m)
            if (info.module_type[m].find(type) != std::string::npos && info.within(static_cast<int32_t>(m), root))
                return true;
    }
    return false;
}

// Whether a checkpointed module of the setting holds a module of `type`.
bool checkpoints_type(const Setting& setting, const CaptureInfo& info, const std::string& type) {
    std::vector<std::string> all;
    for (const CheckpointGroup& group : setting.checkpoint)
        all.insert(all.end(), group.modules.begin(), group.modules.end());
    return holds_type(all, info, type);
}

// Whether a checkpointed module holds quantization-aware training's modules: fake quantizers and
// observers (their moving min and max), fused conv + BatchNorm (torch.ao.nn.intrinsic.qat).
bool checkpoints_qat(const Setting& setting, const CaptureInfo& info) {
    return checkpoints_type(setting, info, "FakeQuantize") || checkpoints_type(setting, info, "Observer") ||
           checkpoints_type(setting, info, "ConvBn");
}

// Whether a checkpointed module holds state its training forward updates, which the recompute
// must not update again: BatchNorm's running statistics, spectral norm's power iteration, QAT's
// observers.
bool checkpoints_batchnorm(const Setting& setting, const CaptureInfo& info) {
    return checkpoints_type(setting, info, "BatchNorm") || checkpoints_type(setting, info, "_SpectralNorm") ||
           checkpoints_qat(setting, info);
}

// Why the hooks are there: one comment per kind of state the checkpointed modules hold.
void state_hooks_comment(std::ostringstream& out, bool bn, bool sn, bool qat) {
    if (bn)
        out << "# BatchNorm inside the checkpointed modules: the recompute in the backward would update its running\n"
            << "# statistics a second time; these hooks give it copies to update there.\n";
    if (sn)
        out << "# spectral_norm inside the checkpointed modules: the recompute would run its power iteration again\n"
            << "# from the u and v the forward left (advanced twice a step, another sigma in the backward); these\n"
            << "# hooks keep the forward's starting vectors with the call and iterate from copies of them there.\n";
    if (qat)
        out << "# quantization-aware training inside the checkpointed modules: the recompute would move the fake\n"
            << "# quantizers' min and max again and quantize with another scale than the forward (a fused conv +\n"
            << "# BatchNorm would fold its weight with another running variance); these hooks keep the forward's\n"
            << "# starting buffers with the call and recompute from copies of them there.\n";
}

// Marked, marking and the buffer helpers: checkpoint's context_fn tells the hooks whether the
// forward or the recompute runs.
void marking_code(std::ostringstream& out) {
    out << "# checkpoint's context_fn (its two context managers run around the forward and the recompute)\n"
        << "# tells them which is running.\n"
        << "import contextlib\n"
        << "def set_buffer(m, name, b):   # a buffer of m or of a module inside it, as named_buffers() names it\n"
        << "    owner, _, leaf = name.rpartition(\".\")\n"
        << "    setattr(m.get_submodule(owner) if owner else m, leaf, b)\n"
        << "def put_back(m, kept_as):   # the module's own buffers, kept while it ran on copies\n"
        << "    for n, b in (m.__dict__.pop(kept_as, None) or {}).items():\n"
        << "        set_buffer(m, n, b)\n"
        << "class Marked:   # a checkpointed call's forward or recompute, entered once per recompute\n"
        << "    forwards, recomputes = [], []   # the calls whose forward, recompute runs now\n"
        << "    def __init__(self, inner, call, stack):\n"
        << "        self.inner, self.call, self.stack = inner, call, stack\n"
        << "    def __enter__(self):\n"
        << "        self.inner.__enter__()\n"
        << "        self.call[\"read\"] = {}\n"
        << "        self.stack.append(self.call)\n"
        << "    def __exit__(self, *exc):\n"
        << "        self.stack.pop()\n"
        << "        if self.stack is Marked.recomputes:   # also where checkpoint stopped the recompute inside a module\n"
        << "            for m, kept_as in reversed(self.call[\"swapped\"]):\n"
        << "                put_back(m, kept_as)\n"
        << "            self.call[\"swapped\"] = []\n"
        << "        return self.inner.__exit__(*exc)\n"
        << "def marking(context_fn=None):   # checkpoint's context_fn, the forward and the recompute marked\n"
        << "    def fn():\n"
        << "        fwd, rec = context_fn() if context_fn else (contextlib.nullcontext(), contextlib.nullcontext())\n"
        << "        if hasattr(fwd, \"respect_saved_tensors_hooks\"):   # selective checkpointing's mode, which\n"
        << "            fwd.respect_saved_tensors_hooks = True       # checkpoint no longer sees behind Marked\n"
        << "        call = {\"starts\": {}, \"read\": {}, \"swapped\": []}\n"
        << "        return Marked(fwd, call, Marked.forwards), Marked(rec, call, Marked.recomputes)\n"
        << "    return fn\n";
}

// BatchNorm's hook: the recompute updates copies of the running statistics.
void keep_running_stats_code(std::ostringstream& out) {
    out << "def keep_running_stats(bn):\n"
        << "    def swap_in(m, args):\n"
        << "        if not m.training:\n"
        << "            return\n"
        << "        copies = {n: b.clone() for n, b in m.named_buffers(recurse=False)}   # forward too: same ops\n"
        << "        if Marked.recomputes:\n"
        << "            m.stats_kept = dict(m.named_buffers(recurse=False))\n"
        << "            Marked.recomputes[-1][\"swapped\"].append((m, \"stats_kept\"))\n"
        << "            for n, b in copies.items():\n"
        << "                setattr(m, n, b)\n"
        << "    bn.register_forward_pre_hook(swap_in)\n"
        << "    bn.register_forward_hook(lambda m, args, out: put_back(m, \"stats_kept\"))\n";
}

// Spectral norm's and QAT's hook: the recompute starts from copies of the forward's starting
// buffers; keeps_forward_start says which modules need it.
void keep_forward_start_code(std::ostringstream& out, bool sn, bool qat) {
    out << "def keep_forward_start(fs):\n"
        << "    if getattr(fs, \"keeps_forward_start\", False):\n"
        << "        return\n"
        << "    def swap_in(m, args):\n"
        << "        if not m.training:\n"
        << "            return\n"
        << "        call = Marked.recomputes[-1] if Marked.recomputes else None\n"
        << "        i = call[\"read\"].get(id(m), 0) if call else 0\n"
        << "        if call and i < len(call[\"starts\"].get(id(m), ())):\n"
        << "            call[\"read\"][id(m)] = i + 1\n"
        << "            m.start_kept = dict(m.named_buffers())\n"
        << "            call[\"swapped\"].append((m, \"start_kept\"))\n"
        << "            for n, b in call[\"starts\"][id(m)][i].items():\n"
        << "                set_buffer(m, n, b.clone())\n"
        << "        else:\n"
        << "            start = {n: b.clone() for n, b in m.named_buffers()}   # recompute too: same ops\n"
        << "            if Marked.forwards and not Marked.recomputes:\n"
        << "                Marked.forwards[-1][\"starts\"].setdefault(id(m), []).append(start)\n"
        << "    fs.register_forward_pre_hook(swap_in)\n"
        << "    fs.register_forward_hook(lambda m, args, out: put_back(m, \"start_kept\"))\n"
        << "    fs.keeps_forward_start = True\n"
        << "def keeps_forward_start(m, parent):   # its training forward updates buffers its output depends on\n";
    if (sn && !qat)
        out << "    return type(m).__name__ == \"_SpectralNorm\"   # torch.nn.utils.parametrizations.spectral_norm\n";
    if (qat)
        out << "    from torch.ao.nn.intrinsic.qat.modules.conv_fused import _ConvBnNd\n"
        << "    from torch.ao.quantization import FakeQuantizeBase\n"
        << "    from torch.ao.quantization.observer import ObserverBase\n"
        << "    return (type(m).__name__ == \"_SpectralNorm\" or isinstance(m, (FakeQuantizeBase, _ConvBnNd))\n"
        << "            or isinstance(m, ObserverBase) and not isinstance(parent, FakeQuantizeBase))   # a fake quantizer's own\n";
}

// The loop that puts the hooks on every such module inside the checkpointed modules `names`.
void install_state_hooks(std::ostringstream& out, const std::string& names, bool bn, bool sn, bool qat) {
    out << "BATCHNORMS = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d, torch.nn.SyncBatchNorm)\n"
        << "for n in [" << names << "]:\n"
        << "    root = model.get_submodule(n)\n"
        << "    for m, parent in [(root, None)] + [(c, p) for p in root.modules() for c in p.children()]:\n";
    if (bn)
        out << "        if isinstance(m, BATCHNORMS) and m.track_running_stats:\n"
            << "            keep_running_stats(m)\n";
    if (sn || qat)
        out << "        " << (bn ? "elif" : "if") << " keeps_forward_start(m, parent):\n"
            << "            keep_forward_start(m)\n";
}

// BatchNorm recomputed in the backward would update its running statistics a second time:
// hooks that give it copies there (python/mhc_torch/checkpointing.py keep_running_stats does the
// same). Spectral norm would iterate again from the vectors its forward left, and QAT's fake
// quantizers and fused conv + BatchNorm would quantize with the statistics their forward left: the
// forward's starting buffers are kept by the checkpointed call and the recompute runs from copies
// of them (keep_forward_start, as checkpointing.py's), the module's own put back when the
// recompute ends, also where checkpoint stops it early inside the module. The recompute is told by
// checkpoint's context_fn, whose two context managers run around the forward and the recompute
// (public API; the checkpoint code below passes context_fn=marking(...)).
void batchnorm_code(std::ostringstream& out, const Setting& setting, const CaptureInfo& info) {
    if (!checkpoints_batchnorm(setting, info)) return;
    std::string names;
    for (const CheckpointGroup& group : setting.checkpoint)
        names += (names.empty() ? "" : ", ") + std::string("*") + names_expr(group.modules, info);
    const bool bn = checkpoints_type(setting, info, "BatchNorm");
    const bool sn = checkpoints_type(setting, info, "_SpectralNorm");
    const bool qat = checkpoints_qat(setting, info);
    state_hooks_comment(out, bn, sn, qat);
    marking_code(out);
    if (bn) keep_running_stats_code(out);
    if (sn || qat) keep_forward_start_code(out, sn, qat);
    install_state_hooks(out, names, bn, sn, qat);
}

void checkpoint_code(std::ostringstream& out, const Setting& setting, const CaptureInfo& info) {
    bool wrapper = false;
    // With BatchNorm or spectral norm inside, checkpoint's context_fn marks the recompute (batchnorm_code).
    const bool bn = checkpoints_batchnorm(setting, info);
    const std::string marked = bn ? ", context_fn=marking()" : "";
    auto hf_all = [&](const CheckpointGroup& group) {
        return setting.checkpoint.size() == 1 && hf_layers(group, info);
    };
    if (!setting.checkpoint.empty() && !hf_all(setting.checkpoint.front())) out << "import functools\n";
    for (const CheckpointGroup& group : setting.checkpoint) {
        if (hf_all(group)) {
            const bool current = info.hf_checkpoint_call == "activation_checkpointing_enable";
            out << "model." << info.hf_checkpoint_call << "(" << (current ? "activation" : "gradient")
                << "_checkpointing_kwargs={\"use_reentrant\": False" << (bn ? ", \"context_fn\": marking()" : "")
                << "})\n";
            continue;
        }
        if (!wrapper) {
            out << "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (\n"
                << "    CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper)\n";
            // A Hugging Face model's own checkpointing turns its key/value cache off in the layers
            // it checkpoints; checkpoint_wrapper does not, and a recomputed layer writes its keys
            // and values into the cache again (transformers' attention then stops on a mask of
            // half the keys' length; DPO with the policy's layers checkpointed).
            if (!info.hf_checkpoint_layers.empty())
                out << "model.config.use_cache = False   # as transformers' own checkpointing does: a recomputed layer would "
                       "write its keys and values into the cache again\n";
            wrapper = true;
        }
        if (group.policy == Policy::Mhc) {
            out << "# mHC: recompute the hyper-connections' maps (RMSNorm, projection, Sinkhorn-Knopp) in the backward\n"
                << "maps = {m for n in " << names_expr(group.modules, info)
                << " for m in model.get_submodule(n).modules()\n"
                << "        if type(m).__name__ == \"" << kMhcMaps << "\"}\n"
                << "apply_activation_checkpointing(model, check_fn=lambda m: m in maps, checkpoint_wrapper_fn=functools.partial(\n"
                << "    checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT" << marked << "))\n";
            continue;
        }
        if (group.policy == Policy::Full) {
            out << "full = {model.get_submodule(n) for n in " << names_expr(group.modules, info) << "}\n"
                << "apply_activation_checkpointing(model, check_fn=lambda m: m in full, checkpoint_wrapper_fn=functools.partial(\n"
                << "    checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT" << marked << "))\n";
        } else {
            out << "import inspect\n"
                << "from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts\n"
                << "# what selective checkpointing keeps goes through saved-tensor hooks around it (an offload) as\n"
                << "# predicted; PyTorch's default bypasses them (where this PyTorch has the option)\n"
                << "RESPECT = {\"respect_saved_tensors_hooks\": True} if \"respect_saved_tensors_hooks\" in "
                   "inspect.signature(checkpoint).parameters else {}\n"
                << "aten = torch.ops.aten\n"
                << "MATMULS = {aten.mm.default, aten.bmm.default, aten.addmm.default, aten.baddbmm.default,\n"
                << "           aten.convolution.default,\n"
                << "           aten._scaled_dot_product_flash_attention.default,\n"
                << "           aten._scaled_dot_product_flash_attention_for_cpu.default,   # the same on a CPU\n"
                << "           aten._scaled_dot_product_efficient_attention.default,\n"
                << "           aten._scaled_dot_product_cudnn_attention.default}\n"
                << "def save_matmuls(ctx, op, *args, **kwargs):\n"
                << "    return CheckpointPolicy.MUST_SAVE if op in MATMULS else CheckpointPolicy.PREFER_RECOMPUTE\n"
                << "selective = {model.get_submodule(n) for n in " << names_expr(group.modules, info) << "}\n"
                << "apply_activation_checkpointing(model, check_fn=lambda m: m in selective, checkpoint_wrapper_fn=functools.partial(\n"
                << "    checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT,\n"
                << "    context_fn=" << (bn ? "marking(" : "")
                << "functools.partial(create_selective_checkpoint_contexts, save_matmuls)" << (bn ? ")" : "")
                << ", **RESPECT))\n";
        }
    }
}

// The offloaded modules that a checkpoint of policy full wraps too (by the trace's index; a setting
// may spell a name either way): there the offload's hooks go around the checkpoint and take what it
// saves, its call's inputs.
std::vector<int32_t> checkpointed_offloads(const Setting& setting, const CaptureInfo& info) {
    std::vector<int32_t> out;
    if (!setting.offload || !setting.offload->modules) return out;
    for (const std::string& name : *setting.offload->modules) {
        const int32_t index = named_module(info, name);
        for (const CheckpointGroup& group : setting.checkpoint)
            if (group.policy == Policy::Full &&
                std::any_of(group.modules.begin(), group.modules.end(),
                            [&](const std::string& other) { return named_module(info, other) == index; }))
                out.push_back(index);
    }
    return out;
}

void offload_code(std::ostringstream& out, const Setting& setting, const CaptureInfo& info) {
    const OffloadSetting& offload = *setting.offload;
    const bool streamed = offload.mode == OffloadMode::Streamed;
    // mhc_torch's own hooks: the ones the prediction models and --verify captures. torchtune's
    // OffloadActivations, the closest library class, copies per saved tensor (not per storage),
    // moves a weight's view (a Linear saves weight.t(), no Parameter) and needs torchao and CUDA.
    out << "from mhc_torch.offload import SavedTensorOffload   # torch.autograd.graph.saved_tensors_hooks, by storage\n"
        << "offload = SavedTensorOffload(model, \"" << (streamed ? "streamed" : "sync") << "\", min_bytes=" << offload.min_bytes
        << ", max_fwd_stash=" << (streamed ? offload.max_fwd_stash : 0) << ", prefetch=" << offload.prefetch_or_default()
        << ").hooks()\n";
    // Entered and left by forward hooks, as mhc_torch.apply (enter_around_forward) does: the code
    // printed is the code --verify captures. The whole forward: around the model's own call (a
    // loss the model computes inside forward is offloaded, one computed after it is not).
    if (!offload.modules) {
        out << "m = model                          # around the model's forward (not a loss computed after it)\n";
    } else {
        // After apply_activation_checkpointing, get_submodule returns the wrapper: the hooks go
        // around the checkpoint, as predicted (inside it they would offload the saves it recomputes).
        if (!checkpointed_offloads(setting, info).empty())
            out << "# after the checkpoint wrapper: around it, the hooks offload what it saves (its inputs)\n";
        out << "for name in " << names_expr(*offload.modules, info) << ":\n"
            << "    m = model.get_submodule(name)\n";
    }
    const std::string indent = offload.modules ? "    " : "";
    out << indent << "m.register_forward_pre_hook(lambda *_: offload.__enter__())\n"
        << indent << "m.register_forward_hook(lambda *_: offload.__exit__(None, None, None), always_call=True)\n";
}

// The optimizer's class as user code spells it (torch.optim.AdamW); AdamW when the capture
// does not say (mhc-torch capture's own optimizer).
std::string optimizer_class(const CaptureInfo& info) {
    const std::string& cls = info.optimizer_class;
    if (cls.empty()) return "torch.optim.AdamW";
    const std::string name = cls.substr(cls.rfind('.') + 1);
    return cls.rfind("torch.optim.", 0) == 0 ? "torch.optim." + name : name;
}

std::string py_value(const nlohmann::json& value) {
    if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
    if (value.is_null()) return "None";
    if (value.is_array()) {
        std::string out = "(";
        for (size_t i = 0; i < value.size(); ++i) out += (i ? ", " : "") + py_value(value[i]);
        return out + (value.size() == 1 ? ",)" : ")");
    }
    return value.dump();
}

// The captured optimizer's hyperparameters as keyword arguments (lr=0.0001, betas=(0.9, 0.999), ...):
// the printed optimizer changes only what the setting changes.
// The captured optimizer's defaults (an object; anything else reads as none: load_capture_info
// refuses a file whose meta is not an object).
nlohmann::json optimizer_defaults(const CaptureInfo& info) {
    return nlohmann::json::parse(info.optimizer_defaults.empty() ? "{}" : info.optimizer_defaults, nullptr, false);
}

std::string hyperparameters(const CaptureInfo& info) {
    const nlohmann::json defaults = optimizer_defaults(info);
    if (!defaults.is_object() || defaults.empty()) return "lr=1e-4";
    std::string out;
    for (const char* key :
         {"lr", "betas", "eps", "weight_decay", "momentum", "dampening", "nesterov", "amsgrad", "maximize"}) {
        auto it = defaults.find(key);
        if (it == defaults.end() || (it->is_boolean() && !it->get<bool>())) continue;
        if (std::string(key) == "dampening" && it->is_number() && it->get<double>() == 0) continue;
        out += (out.empty() ? "" : ", ") + std::string(key) + "=" + py_value(*it);
    }
    return out.empty() ? "lr=1e-4" : out;
}

void optimizer_code(std::ostringstream& out, const Setting& setting, const CaptureInfo& info) {
    const std::string cls = optimizer_class(info), hp = hyperparameters(info);
    const bool sparse_adam = cls.size() >= 10 && cls.compare(cls.size() - 10, 10, "SparseAdam") == 0;
    if (setting.optimizer_on_host && (sparse_adam || !info.sparse_grads.empty())) {
        // DeepSpeed's ZeRO takes no sparse gradient (deepspeed/runtime/zero has no sparse handling:
        // DeepSpeed's pull request 8504)
        if (sparse_adam)
            out << "# not DeepSpeed's ZeRO-Offload: ZeRO has no sparse gradients, which are all SparseAdam steps;\n";
        else
            out << "# not DeepSpeed's ZeRO-Offload: ZeRO has no sparse gradients, and " << info.sparse_grads
                << (info.sparse_grads.find(", ") == std::string::npos ? " has one" : " have them")
                << " (sparse=True);\n";
        out << "# mhc_torch's host optimizer moves their indices and values to the CPU and steps them there\n";
        return;
    }
    if (setting.optimizer_on_host) {
        const std::string batch = info.batch > 0 ? std::to_string(info.batch)
                                                 : "MICRO_BATCH,   # your batch size per step";
        out << "import deepspeed                   # ZeRO-Offload: optimizer state and step on the CPU\n"
            << "ds_config = {\"train_micro_batch_size_per_gpu\": " << batch << (info.batch > 0 ? ",\n" : "\n");
        if (info.micro_batches > 1)
            out << "             \"gradient_accumulation_steps\": " << info.micro_batches << ",\n";
        // Weights in 16 bits (as captured, or the setting's): DeepSpeed keeps them so, with fp32
        // master weights in the offloaded optimizer, only when told.
        if (setting.bf16_weights || info.param_dtype == "bfloat16")
            out << "             \"bf16\": {\"enabled\": True},   # the weights are bf16\n";
        else if (info.param_dtype == "float16")
            out << "             \"fp16\": {\"enabled\": True},   # the weights are fp16\n";
        out << "             \"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": True}},\n";
        if (info.adam_optimizer()) {   // the planner's test too: one rule for both
            const nlohmann::json defaults = optimizer_defaults(info);
            std::string params;
            for (const char* key : {"lr", "betas", "eps", "weight_decay"})
                if (defaults.is_object() && defaults.contains(key))
                    params += (params.empty() ? "" : ", ") + std::string("\"") + key + "\": " + py_value(defaults[key]);
            if (params.empty()) params = "\"lr\": 1e-4";
            out << "             \"optimizer\": {\"type\": \"" << (cls == "torch.optim.Adam" ? "Adam" : "AdamW")
                << "\", \"params\": {" << params << "}}}\n";
            if (info.optimizer_groups)   // the user's groups and what each sets (lr, weight decay, ...)
                out << "groups = [{k: v for k, v in g.items() if k in (\"params\", \"lr\", \"betas\", \"eps\", "
                       "\"weight_decay\")}"
                    << (info.lr_schedulers.empty()
                            ? ""
                            : " | {\"lr\": g.get(\"initial_lr\", g[\"lr\"])}")   // not the warmup's
                    << " for g in optimizer.param_groups]   # your parameter groups, kept\n"
                    << "model, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=groups, config=ds_config)\n";
            else
                out << "model, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)\n";
        } else {
            out << "             \"zero_allow_untested_optimizer\": True,\n"
                << "             \"zero_force_ds_cpu_optimizer\": False}   # your " << cls << ", stepped on the CPU\n"
                << "model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)\n";
        }
        if (!info.lr_schedulers.empty())
            out << "# your LR scheduler (" << info.lr_schedulers
                << ") steps the optimizer it was built on: give deepspeed.initialize(...) lr_scheduler=a function\n"
                << "# that builds it on DeepSpeed's optimizer (lr_scheduler=lambda opt: ...(opt, ...)); the engine steps it\n";
        out << "# FSDP2's fully_shard(model, offload_policy=CPUOffloadPolicy()) also moves the parameters to the CPU\n";
        // host_impl_factor: the for-loop's and the fused step's CPU times were measured here; a
        // foreach step's varied 0.98 to 1.50 of the for-loop's, and DeepSpeed's CPU Adam was not run
        out << "# time (est.): mhc_torch's host step's (a for-loop, or fused, on fp32 copies);\n# "
            << (info.adam_optimizer() ? "DeepSpeed's CPU Adam" : "DeepSpeed's step of your optimizer")
            << " and a foreach step are not timed\n";
        return;
    }
    const char* impl = setting.optimizer_impl == OptimizerImpl::Fused     ? "fused=True"
                       : setting.optimizer_impl == OptimizerImpl::Foreach ? "foreach=True"
                       : setting.optimizer_impl == OptimizerImpl::Forloop ? "foreach=False"
                                                                          : nullptr;
    if (impl == nullptr) return;
    if (info.optimizer_groups) {   // the user's parameter groups, each with its own hyperparameters
        const char* entries = setting.optimizer_impl == OptimizerImpl::Fused ? "\"foreach\": None, \"fused\": True"
                              : setting.optimizer_impl == OptimizerImpl::Foreach
                                  ? "\"foreach\": True, \"fused\": None"
                                  : "\"foreach\": False, \"fused\": None";
        out << "optimizer = " << cls << "([{**g, " << entries << "} for g in optimizer.param_groups], " << impl
            << ")   # your parameter groups, kept\n";
    } else {
        out << "optimizer = " << cls << "(model.parameters(), " << hp << ", " << impl << ")"
            << (setting.optimizer_impl == OptimizerImpl::Fused ? "   # no foreach temporaries" : "") << "\n"
            << "# (parameter groups of your own: pass them instead of model.parameters(), as before)\n";
    }
    if (!info.lr_schedulers.empty())   // it would go on stepping the old optimizer's learning rate
        out << "# your LR scheduler (" << info.lr_schedulers
            << ") steps the optimizer it was built on: build it after this line, on this optimizer\n";
}

// "unsharded after forward: blocks.0, blocks.1" (reshard_after_forward false), "... true: ...".
std::string reshard_words(const std::vector<std::pair<std::string, int>>& values, const CaptureInfo& info) {
    std::map<int, std::string> by_value;
    for (const auto& [name, value] : values) {
        const int32_t index = named_module(info, name);
        by_value[value] += (by_value[value].empty() ? "" : ", ") + (index >= 0 ? info.user_name(index) : name);
    }
    std::string out;
    for (const auto& [value, modules] : by_value)
        out += (out.empty() ? "" : " + ") +
               (value == 0   ? "keep unsharded after forward: "
                : value == 1 ? "reshard after forward: "
                             : "reshard to " + std::to_string(value) + " ranks: ") +
               modules;
    return out;
}

void reshard_code(std::ostringstream& out, const std::vector<std::pair<std::string, int>>& values,
                  const CaptureInfo& info) {
    out << "# FSDP2: parameters kept unsharded from the forward to the backward (no all-gather in the backward)\n";
    for (const auto& [name, value] : values) {
        const int32_t index = named_module(info, name);
        const std::string module = index >= 0 ? info.user_name(index) : name;
        if (value >= 2) {
            out << "# fully_shard(model.get_submodule(\"" << module << "\"), ..., reshard_after_forward=" << value
                << ")\n";
            continue;
        }
        out << "model.get_submodule(\"" << module << "\").set_reshard_after_forward(" << (value == 1 ? "True" : "False")
            << ", recurse=False)\n";
    }
    out << "# (the same as fully_shard(module, reshard_after_forward=...) where the model is sharded)\n";
}

}  // namespace

std::string describe(const Setting& setting, const CaptureInfo& info) {
    std::vector<std::string> parts;
    for (const CheckpointGroup& group : setting.checkpoint) {
        std::string what = what_modules(group.modules, info);
        if (group.policy == Policy::Full) parts.push_back("checkpoint " + what);
        else if (group.policy == Policy::SaveMatmuls) parts.push_back("selective checkpoint (keep matmuls) of " + what);
        else parts.push_back("mHC recompute in " + what);
    }
    if (setting.offload) {
        std::string what = std::string(setting.offload->mode == OffloadMode::Sync ? "offload (sync) " : "offload ") +
                           (setting.offload->modules ? what_modules(*setting.offload->modules, info)
                                                     : std::string("everything"));
        const size_t inputs = checkpointed_offloads(setting, info).size();
        if (inputs > 0)   // not the same answer as as many checkpointed beside as many offloaded
            what += inputs == setting.offload->modules->size()
                        ? std::string(", checkpointed: their saved inputs")
                        : " (" + std::to_string(inputs) + " checkpointed: their saved inputs)";
        parts.push_back(what);
    }
    // on the host the implementation is said after the placement, "optimizer on host (fused)", which
    // the search offers for a foreach Adam or AdamW: short enough for a row of 100 columns
    if (setting.optimizer_impl != OptimizerImpl::AsCaptured && !setting.optimizer_on_host) {
        const std::string cls = optimizer_class(info);
        parts.push_back(std::string(to_string(setting.optimizer_impl)) + " " + cls.substr(cls.rfind('.') + 1));
    }
    if (setting.optimizer_on_host)
        parts.push_back(setting.optimizer_impl == OptimizerImpl::AsCaptured
                            ? std::string("optimizer on host")
                            : "optimizer on host (" + std::string(to_string(setting.optimizer_impl)) + ")");
    if (setting.bf16_weights) parts.emplace_back("bf16 weights");
    if (!setting.allocator.empty()) parts.push_back(setting.allocator);
    if (!setting.reshard_after_forward.empty()) parts.push_back(reshard_words(setting.reshard_after_forward, info));
    if (parts.empty()) return "as captured";
    std::string out;
    for (const std::string& part : parts) out += (out.empty() ? "" : " + ") + part;
    return out;
}

std::string code_for(const Setting& setting, const CaptureInfo& info) {
    std::ostringstream out;
    if (!setting.allocator.empty()) {
        // Over the settings the step was captured with, as it is predicted (a later key wins in
        // PyTorch's parser): the environment line replaces them.
        const std::string conf = info.allocator_conf.empty() ? setting.allocator
                                                             : info.allocator_conf + "," + setting.allocator;
        out << "import os                          # before torch touches the GPU\n"
            << "os.environ[\"PYTORCH_CUDA_ALLOC_CONF\"] = \"" << conf << "\"";
        if (!info.allocator_conf.empty()) out << "   # the captured step's settings, then the answer's";
        out << "\n";
    }
    batchnorm_code(out, setting, info);   // defines marking(), which the checkpoint code passes
    checkpoint_code(out, setting, info);
    if (setting.offload) offload_code(out, setting, info);
    optimizer_code(out, setting, info);
    if (!setting.reshard_after_forward.empty()) reshard_code(out, setting.reshard_after_forward, info);
    out << "# or, the same in one line (what --verify runs):\n"
        << "import mhc_torch\n"
        << "model, optimizer = mhc_torch.apply(model, optimizer, " << to_json(setting) << ")";
    return out.str();
}

}  // namespace mhc::advise
