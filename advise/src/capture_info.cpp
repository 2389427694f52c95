// load_capture_info: the capture tables, resolved to dense indices of the trace.
#include "mhc/advise/capture_info.hpp"

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <tuple>

#include "mhc/common/error.hpp"
#include "mhc/trace/store.hpp"

namespace mhc::advise {

namespace {

// A capture meta value advise cannot read: the file, the key, why, and what to do.
Error bad_meta(const trace::TraceData& trace_data, const std::string& key, const std::string& why) {
    return Error(trace_data.path + ": meta " + key + ": " + why + " (capture the step again with mhc-torch capture)");
}

// The numbered children of one prefix ("X.layers.3" -> "X.layers", 3).
bool split_numbered(const std::string& name, std::string& prefix, int& number) {
    size_t dot = name.rfind('.');
    if (dot == std::string::npos || dot + 1 == name.size()) return false;
    number = 0;
    for (size_t i = dot + 1; i < name.size(); ++i) {
        if (name[i] < '0' || name[i] > '9' || number > 1000000) return false;
        number = number * 10 + (name[i] - '0');
    }
    prefix = name.substr(0, dot);
    return true;
}

bool under(const std::string& inner, const std::string& outer) {   // a module name inside another
    return inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 && inner[outer.size()] == '.';
}

// The model's blocks: the stacks of repeated modules a user checkpoints or offloads one by one,
// found by stage (modules' forward work, candidate stacks, nested stacks, the stacks chosen,
// their members in forward order) into info.block_name, block_module, module_block, block_prefix.
class BlockFinder {
public:
    explicit BlockFinder(CaptureInfo& info) : info_(info), module_count_(info.module_name.size()) {}

    void run() {
        find_ancestors();
        count_forward_kernels();
        find_candidate_stacks();
        count_runs_and_composites();
        add_named_stacks();
        drop_outer_stacks();
        int64_t best = -1;
        std::string top;
        for (auto& [prefix, w] : work_)
            if (w > best) {
                best = w;
                top = prefix;
            }
        info_.module_block.assign(info_.module_name.size(), -1);
        if (best <= 0) return;
        number_blocks(stacks_beside(top));
    }

private:
    CaptureInfo& info_;
    const size_t module_count_;
    std::vector<std::vector<int32_t>> ancestors_;   // per module: itself and its recorded ancestors
    std::vector<int64_t> fwd_;                      // per module: forward kernels inside it
    std::vector<int64_t> runs_;                     // per module: runs of consecutive forward kernels of its own
    std::vector<char> composite_;                   // per module: recorded modules inside it
    // Candidate stacks by prefix: their members (number, module) and forward work.
    std::map<std::string, std::vector<std::pair<int, int32_t>>> groups_;
    std::map<std::string, std::vector<int32_t>> named_;   // named children by prefix
    std::map<std::string, int64_t> work_;
    std::vector<std::string> outer_;   // stacks whose inner stacks are the blocks

    // Each kernel credits its module and the module's recorded ancestors (found by name:
    // containers such as ModuleList are not recorded).
    void find_ancestors() {
        ancestors_.assign(module_count_, {});
        for (size_t m = 0; m < module_count_; ++m) {
            const std::string& name = info_.module_name[m];
            for (size_t dot = name.size(); dot != std::string::npos && dot > 0; dot = name.rfind('.', dot - 1)) {
                int32_t ancestor = info_.find_module(name.substr(0, dot));
                if (ancestor >= 0) ancestors_[m].push_back(ancestor);
            }
        }
    }

    // Forward kernels inside each module.
    void count_forward_kernels() {
        fwd_.assign(module_count_, 0);
        for (size_t k = 0; k < info_.kernel_module.size(); ++k)
            if (info_.kernel_phase[k] == trace::Phase::Forward && info_.kernel_module[k] >= 0)
                for (int32_t ancestor : ancestors_[static_cast<size_t>(info_.kernel_module[k])])
                    ++fwd_[static_cast<size_t>(ancestor)];
    }

    // Modules that saved for a backward or ran in one. One that only ever ran under no_grad (MoCo's
    // and BYOL's momentum encoder beside the trained one, a frozen teacher kept in the model) has
    // nothing to checkpoint or offload: no block, nor a member that makes its twin a stack.
    std::vector<char> trained_modules() const {
        std::vector<char> trained(module_count_, 0);
        auto mark = [&](int32_t kernel) {
            const int32_t module = kernel >= 0 && static_cast<size_t>(kernel) < info_.kernel_module.size()
                                       ? info_.kernel_module[static_cast<size_t>(kernel)]
                                       : -1;
            if (module >= 0)
                for (int32_t ancestor : ancestors_[static_cast<size_t>(module)])
                    trained[static_cast<size_t>(ancestor)] = 1;
        };
        for (int32_t kernel : info_.saved_by) mark(kernel);
        for (size_t k = 0; k < info_.kernel_phase.size(); ++k)
            if (info_.kernel_phase[k] == trace::Phase::Backward) mark(static_cast<int32_t>(k));
        return trained;
    }

    // Candidate stacks: the numbered children of one prefix (ModuleList, Sequential), and the
    // named children of one prefix when there are two or more, all of one type (blocks kept in
    // an nn.ModuleDict and called in a loop of the user's own: add_named_stacks).
    void find_candidate_stacks() {
        const std::vector<char> trained = trained_modules();
        const int32_t root = info_.find_module(info_.root);
        for (size_t m = 0; m < info_.module_name.size(); ++m) {
            if (!info_.made_in.empty() && info_.made_in[m] >= 0)
                continue;   // made in a forward: not the user's to name
            // Another model the step runs beside this one (a distillation teacher, a reward model):
            // model.get_submodule cannot reach its layers, and a setting could not name them.
            if (root >= 0 && !info_.within(static_cast<int32_t>(m), root)) continue;
            if (fwd_[m] > 0 && trained[m] == 0 && info_.saved_rows > 0) continue;
            // A container with no forward (nn.ModuleList, nn.ModuleDict: diffusers' resnets and
            // attentions lists side by side in each UNet block) is never called: the model iterates
            // it. A checkpoint of it wraps nothing that runs (checkpoint_wrapper makes it a module
            // the model cannot iterate), so it is no block; its children may be.
            if (info_.module_type[m] == "ModuleList" || info_.module_type[m] == "ModuleDict") continue;
            std::string prefix;
            int number = 0;
            if (split_numbered(info_.module_name[m], prefix, number)) {
                groups_[prefix].push_back({number, static_cast<int32_t>(m)});
                work_[prefix] += fwd_[m];
            } else if (size_t dot = info_.module_name[m].rfind('.'); dot != std::string::npos) {
                named_[info_.module_name[m].substr(0, dot)].push_back(static_cast<int32_t>(m));
            }
        }
    }

    // A member's type; a block wrapped by checkpoint_wrapper (a capture with a checkpoint setting
    // applied to some blocks) has the type of the module it wraps.
    const std::string& type_of(int32_t module) const {
        const std::string& type = info_.module_type[static_cast<size_t>(module)];
        if (type != "CheckpointWrapper") return type;
        int32_t inner = info_.find_module(info_.module_name[static_cast<size_t>(module)] +
                                          "._checkpoint_wrapped_module");
        return inner >= 0 ? info_.module_type[static_cast<size_t>(inner)] : type;
    }

    bool one_type(const std::string& prefix) {
        const auto& members = groups_[prefix];
        if (members.size() < 2) return false;
        for (auto& [number, m] : members)
            if (type_of(m) != type_of(members.front().second)) return false;
        return true;
    }

    // A stack whose first member alone differs in type, as a front-end's layers often do
    // (Wav2Vec2's feature extractor: a GroupNorm conv layer, then six conv layers without a norm):
    // three or more numbered members, all but the lowest-numbered of one type.
    bool first_differs(const std::string& prefix) {
        auto members = groups_[prefix];
        if (members.size() < 3) return false;
        std::sort(members.begin(), members.end());
        if (type_of(members[0].second) == type_of(members[1].second)) return false;
        for (size_t i = 2; i < members.size(); ++i)
            if (type_of(members[i].second) != type_of(members[1].second)) return false;
        return true;
    }

    // Per module: its runs of consecutive forward kernels of its own (one per call of a module
    // that runs one kernel a call), and whether recorded modules are inside it (its forward calls others).
    void count_runs_and_composites() {
        runs_.assign(module_count_, 0);
        int32_t previous = -1;
        for (size_t k = 0; k < info_.kernel_module.size(); ++k) {
            if (info_.kernel_phase[k] != trace::Phase::Forward) continue;
            const int32_t module = info_.kernel_module[k];
            if (module >= 0 && module != previous) ++runs_[static_cast<size_t>(module)];
            previous = module;
        }
        composite_.assign(module_count_, 0);
        for (size_t m = 0; m < module_count_; ++m)
            for (int32_t outer_module : ancestors_[m])
                if (outer_module != static_cast<int32_t>(m)) composite_[static_cast<size_t>(outer_module)] = 1;
    }

    void add_named_stacks() {
        for (auto& [prefix, members] : named_) {
            if (groups_.count(prefix) != 0) continue;   // numbered and named children mixed: not a stack
            // Named children that are single layers (CLIP's token and position nn.Embedding side by
            // side: no module inside, one kernel a call) are a module's parts, not repeated blocks a
            // user would wrap.
            bool leaves = std::all_of(members.begin(), members.end(), [&](int32_t member) {
                return composite_[static_cast<size_t>(member)] == 0 &&
                       fwd_[static_cast<size_t>(member)] == runs_[static_cast<size_t>(member)];
            });
            if (leaves) continue;
            auto& group = groups_[prefix];
            for (int32_t member : members) group.push_back({0, member});
            if (!one_type(prefix)) {
                groups_.erase(prefix);
                continue;
            }
            for (int32_t member : members) work_[prefix] += fwd_[static_cast<size_t>(member)];
        }
    }

    // A member's structure: the names (below it, checkpoint wrappers left out) and types of the
    // modules inside it.
    std::vector<std::pair<std::string, std::string>> structure(int32_t member) const {
        const std::string& base = info_.module_name[static_cast<size_t>(member)];
        static const std::string wrapper = "._checkpoint_wrapped_module";
        std::vector<std::pair<std::string, std::string>> parts;
        for (size_t m = 0; m < module_count_; ++m) {
            if (!under(info_.module_name[m], base)) continue;
            std::string rest = info_.module_name[m].substr(base.size());
            for (size_t at = rest.find(wrapper); at != std::string::npos; at = rest.find(wrapper))
                rest.erase(at, wrapper.size());
            if (info_.module_type[m] != "CheckpointWrapper") parts.emplace_back(rest, info_.module_type[m]);
        }
        std::sort(parts.begin(), parts.end());
        return parts;
    }

    bool stacked(const std::string& prefix) {   // blocks, each with modules inside (not single layers)
        const auto& members = groups_[prefix];
        return work_[prefix] > 0 && (one_type(prefix) || members.size() == 1) &&
               std::all_of(members.begin(), members.end(),
                           [&](const auto& member) { return composite_[static_cast<size_t>(member.second)] != 0; });
    }

    int64_t inner_work(int32_t member) {   // the forward work of the outermost stacks inside it
        int64_t sum = 0;
        const std::string& base = info_.module_name[static_cast<size_t>(member)];
        for (auto& [other, ow] : work_) {
            if (!under(other, base) || !stacked(other)) continue;
            bool outermost = true;
            for (auto& [around, aw] : work_)
                outermost = outermost && !(under(other, around) && under(around, base) && stacked(around));
            if (outermost) sum += ow;
        }
        return sum;
    }

    // Nested stacks: when the members of a stack differ in structure (Swin's stages of 2, 2, 6
    // and 2 blocks and a downsampling) and stacks inside each of them do most of its forward
    // work, those inner stacks are the blocks (the Swin blocks, which a user checkpoints one by
    // one), and an inner stack of a single block counts.
    void drop_outer_stacks() {
        for (auto& [prefix, w] : work_) {
            const auto& members = groups_[prefix];
            if (w <= 0 || members.size() < 2) continue;
            bool inner = true;
            for (auto& [number, member] : members)
                inner = inner && 2 * inner_work(member) >= fwd_[static_cast<size_t>(member)];
            if (!inner) continue;
            auto first_structure = structure(members.front().second);
            bool same = true;
            for (size_t i = 1; i < members.size() && same; ++i) same = structure(members[i].second) == first_structure;
            if (!same) outer_.push_back(prefix);
        }
        for (const std::string& prefix : outer_) work_.erase(prefix);
    }

    // The stack with the most forward work, and other stacks of repeated layers beside it (an
    // encoder-decoder's encoder and decoder layers): children of one type each, with forward
    // work, neither inside nor around a chosen one.
    std::vector<std::string> stacks_beside(const std::string& top) {
        auto within_outer = [&](const std::string& prefix) {
            return std::any_of(outer_.begin(), outer_.end(),
                               [&](const std::string& stack) { return under(prefix, stack); });
        };
        auto nested = [](const std::string& one, const std::string& other) {   // one inside the other, or around it
            return under(one, other) || under(other, one) || one == other;
        };
        std::vector<std::string> stacks = {top};
        if (one_type(top))
            for (auto& [prefix, w] : work_) {
                bool apart = w > 0 &&
                             (one_type(prefix) || first_differs(prefix) ||
                              (within_outer(prefix) && stacked(prefix) &&
                               type_of(groups_[prefix].front().second) == type_of(groups_[top].front().second)));
                for (const std::string& stack : stacks) apart = apart && !nested(prefix, stack);
                if (apart) stacks.push_back(prefix);
            }
        return stacks;
    }

    // The stacks' members as blocks, in forward order (by each block's first forward kernel),
    // and every module inside a block mapped to it.
    void number_blocks(const std::vector<std::string>& stacks) {
        std::vector<int64_t> first(module_count_, INT64_MAX);
        for (size_t k = 0; k < info_.kernel_module.size(); ++k)
            if (info_.kernel_phase[k] == trace::Phase::Forward && info_.kernel_module[k] >= 0)
                for (int32_t anc : ancestors_[static_cast<size_t>(info_.kernel_module[k])])
                    first[static_cast<size_t>(anc)] = std::min<int64_t>(first[static_cast<size_t>(anc)],
                                                                        static_cast<int64_t>(k));
        std::vector<std::pair<int64_t, int32_t>> members;
        for (const std::string& stack : stacks)
            for (auto& [number, m] : groups_[stack]) members.emplace_back(first[static_cast<size_t>(m)], m);
        std::sort(members.begin(), members.end());
        for (auto& [at, m] : members) {
            info_.module_block[static_cast<size_t>(m)] = static_cast<int32_t>(info_.block_name.size());
            info_.block_name.push_back(info_.module_name[static_cast<size_t>(m)]);
            info_.block_module.push_back(m);
        }
        for (const std::string& stack : stacks) info_.block_prefix += (info_.block_prefix.empty() ? "" : ", ") + stack;
        for (size_t m = 0; m < info_.module_name.size(); ++m)
            for (size_t b = 0; b < info_.block_module.size(); ++b)
                if (info_.within(static_cast<int32_t>(m), info_.block_module[b]))
                    info_.module_block[m] = static_cast<int32_t>(b);
    }
};

void find_blocks(CaptureInfo& info) { BlockFinder(info).run(); }

// The meta of the model and optimizer as built (python/mhc_torch/step_facts.py model_facts).
void read_model_facts(const trace::TraceData& trace_data, CaptureInfo& info) {
    auto bad = [&](const std::string& key, const std::string& why) { return bad_meta(trace_data, key, why); };
    const std::string layers = trace_data.meta_or("capture.hf_checkpoint_layers", "");
    if (!layers.empty()) {
        nlohmann::json names = nlohmann::json::parse(layers, nullptr, false);
        if (!names.is_array()) throw bad("capture.hf_checkpoint_layers", "not a JSON array of module names");
        for (const auto& name : names) {
            if (!name.is_string()) throw bad("capture.hf_checkpoint_layers", "not a JSON array of module names");
            info.hf_checkpoint_layers.push_back(name.get<std::string>());
        }
        info.hf_checkpoint_call = trace_data.meta_or("capture.hf_checkpoint_call", "gradient_checkpointing_enable");
        if (info.hf_checkpoint_call != "activation_checkpointing_enable" &&
            info.hf_checkpoint_call != "gradient_checkpointing_enable")
            throw bad("capture.hf_checkpoint_call",
                      "'" + info.hf_checkpoint_call + "' is not a Hugging Face checkpointing call");
    }
    const std::string off = trace_data.meta_or("capture.without_hf_checkpointing", "");
    if (!off.empty()) {
        const nlohmann::json figures = nlohmann::json::parse(off, nullptr, false);
        auto number = [&](const char* key, int64_t fallback) {
            if (!figures.is_object() || !figures.contains(key)) return fallback;
            if (!figures[key].is_number_integer() || figures[key].get<int64_t>() < 0)
                throw bad("capture.without_hf_checkpointing", std::string("'") + key + "' is not a whole number of bytes or ns");
            return figures[key].get<int64_t>();
        };
        if (!figures.is_object() || !figures.contains("peak_bytes") || !figures.contains("step_time_ns"))
            throw bad("capture.without_hf_checkpointing", "not a JSON object with peak_bytes and step_time_ns");
        info.hf_off.peak = number("peak_bytes", -1);
        info.hf_off.reserved = number("reserved_bytes", -1);
        info.hf_off.host_peak = number("host_peak_bytes", 0);
        info.hf_off.step_ns = number("step_time_ns", 0);
        info.hf_off.with_step_ns = number("with_step_time_ns", 0);
    }
    info.optimizer_class = trace_data.meta_or("capture.optimizer_class", "");
    info.fused_refused = trace_data.meta_or("capture.fused_refused", "");
    info.allocator_conf = trace_data.meta_or("allocator.conf", "");
    info.optimizer_defaults = trace_data.meta_or("capture.optimizer_defaults", "");
    if (!info.optimizer_defaults.empty() && !nlohmann::json::parse(info.optimizer_defaults, nullptr, false).is_object())
        throw bad("capture.optimizer_defaults", "not a JSON object");
    info.optimizer_groups = !trace_data.meta_or("capture.optimizer_groups", "").empty();
    info.lr_schedulers = trace_data.meta_or("capture.lr_schedulers", "");
    info.param_dtype = trace_data.meta_or("capture.weights_dtype", trace_data.meta_or("capture.param_dtype", ""));
    info.optimizer_dtype = trace_data.meta_or("capture.optimizer_dtype", info.param_dtype);
    auto whole = [&](const std::string& key, int64_t fallback) {
        const std::string text = trace_data.meta_or(key, "");
        if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 9)
            return fallback;
        return static_cast<int64_t>(std::stoll(text));
    };
    const std::string model = trace_data.meta_or("capture.model", "");
    const bool file = model.size() > 3 && model.compare(model.size() - 3, 3, ".py") == 0;
    // the batch's leading dimension as captured (a model file makes its own batch; a preset's is
    // --batch, capture.batch, in captures before capture.batch_size)
    info.batch = whole("capture.batch_size", file ? 0 : whole("capture.batch", 0));
    info.micro_batches = std::max<int64_t>(1, whole("capture.micro_batches", 1));
    // Data parallelism (python/mhc_torch/data_parallel.py): DDP with its gradient buckets, FSDP2 as
    // one rank's memory (shards, unsharded parameters between FSDP2's resizes, the collectives'
    // buffers, each collective a kernel). What is not modelled is refused in one line.
    info.data_parallel = trace_data.meta_or("capture.data_parallel", "");
    if (info.data_parallel == "ddp") {
        info.data_parallel_detail = trace_data.meta_or("capture.ddp", "");
    } else if (!info.data_parallel.empty()) {
        info.data_parallel_detail = trace_data.meta_or("capture.fsdp2", "?");
        auto refuse = [&](const std::string& why) {
            return Error(trace_data.path + ": FSDP2 (fully_shard: " + info.data_parallel_detail + ") " + why +
                         " (docs/advise.md, Data parallelism)");
        };
        if (info.data_parallel != "fsdp2") throw refuse("under DDP as well is not modelled");
        if (info.data_parallel_detail.find("cpu_offload true") != std::string::npos)
            throw refuse(
                "with CPUOffloadPolicy is not modelled: the capture does not follow the parameters, "
                "gradients and optimizer step FSDP2 keeps on the host; capture it without offload_policy");
        if (trace_data.meta_or("capture.collectives", "").empty())
            throw refuse(
                "was captured before the capture followed FSDP2's all-gathers and reduce-scatters: its "
                "trace holds every parameter unsharded; capture the step again with mhc-torch capture");
    }
}

// Meta `key`: [[allocation id, kernel id], ...] as (allocation row, kernel row) pairs, on_pair(row_a, row_k).
template <class F> void read_pairs(const trace::TraceData& trace_data, const std::string& key, F&& on_pair) {
    const std::string text = trace_data.meta_or(key, "");
    if (text.empty()) return;
    const nlohmann::json rows = nlohmann::json::parse(text, nullptr, false);
    auto bad = [&](const std::string& why) { return bad_meta(trace_data, key, why); };
    if (!rows.is_array()) throw bad("not a JSON array of [allocation, kernel] pairs");
    for (const auto& row : rows) {
        if (!row.is_array() || row.size() != 2 || !row[0].is_number_integer() || !row[1].is_number_integer())
            throw bad("not a JSON array of [allocation, kernel] pairs");
        const int64_t row_a = trace_data.allocation_at(row[0].get<int64_t>());
        const int64_t row_k = trace_data.kernel_at(row[1].get<int64_t>());
        if (row_a < 0)
            throw bad("names allocation " + std::to_string(row[0].get<int64_t>()) + ", which the trace lacks");
        if (row_k < 0) throw bad("names kernel " + std::to_string(row[1].get<int64_t>()) + ", which the trace lacks");
        on_pair(static_cast<int32_t>(row_a), static_cast<int32_t>(row_k));
    }
}

void read_frame_holds(const trace::TraceData& trace_data, CaptureInfo& info) {
    info.held_until.assign(trace_data.allocations.size(), -1);
    read_pairs(trace_data, "capture.frame_holds",
               [&](int32_t row_a, int32_t row_k) { info.held_until[static_cast<size_t>(row_a)] = row_k; });
}

// Meta capture.module_calls (python/mhc_torch/capture_tables.py, calls_meta): absent when no
// module is called more often than the model.
void read_module_calls(const trace::TraceData& trace_data, CaptureInfo& info) {
    const std::string text = trace_data.meta_or("capture.module_calls", "");
    if (text.empty()) return;
    const nlohmann::json calls = nlohmann::json::parse(text, nullptr, false);
    auto bad = [&](const std::string& why) { return bad_meta(trace_data, "capture.module_calls", why); };
    if (!calls.is_object()) throw bad("not a JSON object of module names and kernel ids");
    for (const auto& [name, ids] : calls.items()) {
        const int32_t module = info.find_module(name);
        if (module < 0) throw bad("names module '" + name + "', which the trace lacks");
        if (!ids.is_array()) throw bad("not a JSON object of module names and kernel ids");
        for (const auto& id : ids) {
            if (!id.is_number_integer()) throw bad("not a JSON object of module names and kernel ids");
            const int64_t row = trace_data.kernel_at(id.get<int64_t>());
            if (row < 0) throw bad("names kernel " + std::to_string(id.get<int64_t>()) + ", which the trace lacks");
            info.call_starts.emplace_back(module, static_cast<int32_t>(row));
        }
    }
    std::sort(info.call_starts.begin(), info.call_starts.end());
}

// Meta capture.call_args (python/mhc_torch/capture_tables.py, args_meta): absent in older captures.
void read_call_args(const trace::TraceData& trace_data, CaptureInfo& info) {
    const std::string text = trace_data.meta_or("capture.call_args", "");
    if (text.empty()) return;
    const nlohmann::json rows = nlohmann::json::parse(text, nullptr, false);
    auto bad = [&](const std::string& why) { return bad_meta(trace_data, "capture.call_args", why); };
    const std::string shape = "not a JSON array of [module, kernel id, [allocation id, ...]]";
    if (!rows.is_array()) throw bad(shape);
    for (const auto& row : rows) {
        if (!row.is_array() || row.size() != 3 || !row[0].is_string() || !row[1].is_number_integer() ||
            !row[2].is_array())
            throw bad(shape);
        const std::string name = row[0].get<std::string>();
        const int32_t module = info.find_module(name);
        if (module < 0) throw bad("names module '" + name + "', which the trace lacks");
        const int64_t kernel = trace_data.kernel_at(row[1].get<int64_t>());
        if (kernel < 0) throw bad("names kernel " + std::to_string(row[1].get<int64_t>()) + ", which the trace lacks");
        std::vector<int32_t>& args = info.call_args[{module, static_cast<int32_t>(kernel)}];
        for (const auto& id : row[2]) {
            if (!id.is_number_integer()) throw bad(shape);
            const int64_t alloc = trace_data.allocation_at(id.get<int64_t>());
            if (alloc < 0) throw bad("names allocation " + std::to_string(id.get<int64_t>()) + ", which the trace lacks");
            args.push_back(static_cast<int32_t>(alloc));
        }
    }
}

// A meta value that is a JSON list of the trace's module names (absent: none), as module indices.
std::vector<int32_t> read_module_list(const trace::TraceData& trace_data, const CaptureInfo& info, const char* key) {
    std::vector<int32_t> modules;
    const std::string text = trace_data.meta_or(key, "");
    if (text.empty()) return modules;
    const nlohmann::json names = nlohmann::json::parse(text, nullptr, false);
    auto bad = [&](const std::string& why) { return bad_meta(trace_data, key, why); };
    if (!names.is_array()) throw bad("not a JSON list of module names");
    for (const auto& name : names) {
        if (!name.is_string()) throw bad("not a JSON list of module names");
        const int32_t module = info.find_module(name.get<std::string>());
        if (module < 0) throw bad("names module '" + name.get<std::string>() + "', which the trace lacks");
        modules.push_back(module);
    }
    return modules;
}

// Meta capture.torch_func_modules (python/mhc_torch/capture_tables.py, torch_func_meta): absent when
// no module ran inside torch.func's grad; meta capture.jvp_modules: absent when none ran inside its jvp. Meta capture.kept_cache_callers (python/mhc_torch/
// model_cache.py): absent when no module updated a cache given use_cache=True with autograd recording.
void read_torch_func(const trace::TraceData& trace_data, CaptureInfo& info) {
    info.torch_func_modules = read_module_list(trace_data, info, "capture.torch_func_modules");
    info.jvp_modules = read_module_list(trace_data, info, "capture.jvp_modules");
    info.kept_cache_callers = read_module_list(trace_data, info, "capture.kept_cache_callers");
}

// Meta capture.model_cache_updates (python/mhc_torch/model_cache.py): absent when no model made a
// cache of its own.
void read_model_cache(const trace::TraceData& trace_data, CaptureInfo& info) {
    info.model_cache_updates.clear();
    const std::string text = trace_data.meta_or("capture.model_cache_updates", "");
    if (text.empty()) return;
    const nlohmann::json updates = nlohmann::json::parse(text, nullptr, false);
    auto bad = [&](const std::string& why) { return bad_meta(trace_data, "capture.model_cache_updates", why); };
    const std::string shape = "not a JSON list of [model, first kernel, last kernel, returned]";
    if (!updates.is_array()) throw bad(shape);
    for (const auto& update : updates) {
        if (!update.is_array() || update.size() != 4 || !update[0].is_string() || !update[1].is_number_integer() ||
            !update[2].is_number_integer() || !update[3].is_number_integer())
            throw bad(shape);
        const int32_t model = info.find_module(update[0].get<std::string>());
        if (model < 0) throw bad("names module '" + update[0].get<std::string>() + "', which the trace lacks");
        std::array<int64_t, 3> rows{};
        for (size_t i = 0; i < rows.size(); ++i) {
            rows[i] = trace_data.kernel_at(update[i + 1].get<int64_t>());
            if (rows[i] < 0) throw bad("names kernel " + update[i + 1].dump() + ", which the trace lacks");
        }
        if (rows[1] < rows[0] || rows[2] < rows[1]) throw bad("kernels " + update.dump() + " out of order");
        info.model_cache_updates.push_back({model, static_cast<int32_t>(rows[0]), static_cast<int32_t>(rows[1]),
                                            static_cast<int32_t>(rows[2])});
    }
}

// Meta capture.unregistered_modules (python/mhc_torch/capture_tables.py, unregistered_meta): absent
// when the model's forward makes no module of its own.
void read_unregistered(const trace::TraceData& trace_data, CaptureInfo& info) {
    info.made_in.assign(info.module_name.size(), -1);
    const std::string text = trace_data.meta_or("capture.unregistered_modules", "");
    if (text.empty()) return;
    const nlohmann::json made = nlohmann::json::parse(text, nullptr, false);
    auto bad = [&](const std::string& why) { return bad_meta(trace_data, "capture.unregistered_modules", why); };
    if (!made.is_object()) throw bad("not a JSON object of module names");
    for (const auto& [name, caller] : made.items()) {
        const int32_t module = info.find_module(name);
        if (module < 0) throw bad("names module '" + name + "', which the trace lacks");
        if (!caller.is_string()) throw bad("not a JSON object of module names");
        const int32_t registered = info.find_module(caller.get<std::string>());
        if (registered < 0) throw bad("names module '" + caller.get<std::string>() + "', which the trace lacks");
        info.made_in[static_cast<size_t>(module)] = registered;
    }
}

// Meta capture.save_unpacks (python/mhc_torch/capture_tables.py, unpack_meta): a kernel id (0:
// none) beside each row of capture.pack_order; absent in older captures.
void read_save_unpacks(const trace::TraceData& trace_data, CaptureInfo& info) {
    info.save_unpacks.clear();
    const std::string text = trace_data.meta_or("capture.save_unpacks", "");
    if (text.empty()) return;
    const nlohmann::json rows = nlohmann::json::parse(text, nullptr, false);
    auto bad = [&](const std::string& why) { return bad_meta(trace_data, "capture.save_unpacks", why); };
    if (!rows.is_array() || rows.size() != info.pack_order.size())
        throw bad("not a JSON array of kernel ids, one per row of capture.pack_order");
    for (const auto& id : rows) {
        if (!id.is_number_integer()) throw bad("not a JSON array of kernel ids, one per row of capture.pack_order");
        const int64_t kernel = id.get<int64_t>();
        const int64_t row = kernel == 0 ? -1 : trace_data.kernel_at(kernel);
        if (kernel != 0 && row < 0) throw bad("names kernel " + std::to_string(kernel) + ", which the trace lacks");
        info.save_unpacks.push_back(static_cast<int32_t>(row));
    }
}

// Meta capture.unpacks (python/mhc_torch/capture_tables.py, on_unpacked): absent in older
// captures (then a storage is taken as unpacked where the backward first reads it).
void read_unpacks(const trace::TraceData& trace_data, CaptureInfo& info) {
    info.unpacks.clear();
    info.unpacks_listed.clear();
    read_pairs(trace_data, "capture.unpacks", [&](int32_t row_a, int32_t row_k) {
        info.unpacks.emplace_back(row_a, row_k);
        info.unpacks_listed.emplace_back(row_a, row_k);
    });
    std::sort(info.unpacks.begin(), info.unpacks.end());
    info.pack_order.clear();
    read_pairs(trace_data, "capture.pack_order",
               [&](int32_t row_a, int32_t row_k) { info.pack_order.emplace_back(row_a, row_k); });
    read_save_unpacks(trace_data, info);
}

}  // namespace

std::string blocks_note(const CaptureInfo& info) {
    if (!info.block_name.empty() || info.module_name.empty()) return "";
    // the root's children (the root is the module every other one is inside)
    std::string root = info.module_name[0];
    for (const std::string& name : info.module_name)
        if (name.find('.') == std::string::npos) root = name;
    std::vector<std::string> children;   // registered ones only: a setting cannot name the others
    for (size_t m = 0; m < info.module_name.size(); ++m) {
        const std::string& name = info.module_name[m];
        const bool registered = m >= info.made_in.size() || info.made_in[m] < 0;
        if (registered && name.size() > root.size() + 1 && name.compare(0, root.size() + 1, root + ".") == 0 &&
            name.find('.', root.size() + 1) == std::string::npos)
            children.push_back(name);
    }
    std::string names;
    for (size_t i = 0; i < children.size() && i < 3; ++i) names += (i ? ", " : "") + children[i];
    if (children.size() > 3) names += ", ...";
    return "no blocks: the search checkpoints and offloads blocks, the numbered layers of an nn.ModuleList or "
           "nn.Sequential (model.layers.0, model.layers.1, ...) or two or more children of one type, and this "
           "model has none, so only the global settings are searched; predict any module with --setting "
           "'{\"checkpoint\": {\"modules\": [\"NAME\"]}}' (names as the capture spells them" +
           (names.empty() ? std::string(")") : ": " + names + ")");
}

std::string own_checkpoint_note(const CaptureInfo& info) {
    if (info.block_name.empty() || !info.hf_checkpoint_layers.empty()) return "";
    std::vector<char> recomputed(info.block_name.size(), 0);
    for (size_t k = 0; k < info.kernel_phase.size(); ++k) {
        const int32_t module = info.kernel_module[k];
        if (info.kernel_phase[k] != trace::Phase::Recompute || module < 0) continue;
        const int32_t block = info.module_block[static_cast<size_t>(module)];
        if (block >= 0) recomputed[static_cast<size_t>(block)] = 1;
    }
    std::vector<std::string> names;
    for (size_t b = 0; b < recomputed.size(); ++b)
        if (recomputed[b] != 0) names.push_back(info.block_name[b]);
    if (names.empty()) return "";
    std::string which;
    for (size_t i = 0; i < names.size(); ++i)
        if (names.size() <= 4 || i == 0 || i + 1 == names.size())
            which += (which.empty() ? "" : names.size() > 4 && i + 1 == names.size() ? " ... " : ", ") + names[i];
    return std::to_string(names.size()) + " of " + std::to_string(info.block_name.size()) +
           " blocks recompute in the backward already, checkpointed by the model's own code (" + which +
           "); the settings' counts of blocks include them";
}

std::string data_parallel_note(const CaptureInfo& info) {
    if (info.data_parallel == "fsdp2")
        return "FSDP2 (" + info.data_parallel_detail +
               "): one rank's step: its parameter shards, each group's unsharded parameters while FSDP2 holds "
               "them, the all-gather and reduce-scatter buffers; the collectives on their streams (all-gathers prefetched, reduce-scatters "
               "overlapped with the backward), timed by the ring model below; not modelled: the host optimizer "
               "(CPUOffloadPolicy)";
    if (info.data_parallel != "ddp") return "";
    return "DDP (" + info.data_parallel_detail +
           "): one rank's step with its gradient bucket; its all-reduce in buckets of bucket_cap_mb overlapped with the "
           "backward, timed by the ring model below; not modelled: the buckets' re-assignment by bucket_cap_mb after "
           "the first step in memory (the same bytes in one buffer), the host optimizer";
}

int32_t CaptureInfo::find_module(const std::string& name) const {
    auto it = module_index.find(name);
    return it == module_index.end() ? -1 : it->second;
}

bool CaptureInfo::within(int32_t module, int32_t ancestor) const {
    if (module < 0 || ancestor < 0) return false;
    if (module == ancestor) return true;
    const std::string& name = module_name[static_cast<size_t>(module)];
    const std::string& ancestor_name = module_name[static_cast<size_t>(ancestor)];
    return name.size() > ancestor_name.size() && name.compare(0, ancestor_name.size(), ancestor_name) == 0 &&
           name[ancestor_name.size()] == '.';
}

std::vector<uint8_t> CaptureInfo::inside_any(const std::vector<int32_t>& roots) const {
    std::vector<uint8_t> in(module_name.size(), 0);
    for (size_t m = 0; m < module_name.size(); ++m)
        for (int32_t root : roots)
            if (within(static_cast<int32_t>(m), root)) {
                in[m] = 1;
                break;
            }
    return in;
}

bool CaptureInfo::adam_optimizer() const {
    return optimizer_class.empty() || optimizer_class == "torch.optim.adamw.AdamW" ||
           optimizer_class == "torch.optim.adam.Adam";
}

std::string CaptureInfo::user_name(int32_t module) const {
    const std::string& name = module_name[static_cast<size_t>(module)];
    if (!root.empty() && name.size() > root.size() && name.compare(0, root.size(), root) == 0 &&
        name[root.size()] == '.')
        return name.substr(root.size() + 1);
    return name == root ? "" : name;
}

// Gradient labels ("<parameter>.grad") with two allocations made at one time: a sparse gradient's
// indices and values (python/mhc_torch/recording.py tracks both parts of a sparse tensor at once).
std::string read_sparse_grads(const trace::TraceData& trace_data) {
    std::map<std::pair<int64_t, int64_t>, int> made;   // (label, t_alloc) -> allocations
    std::set<std::string> names;
    const trace::AllocationColumns& allocs = trace_data.allocations;
    for (size_t i = 0; i < allocs.size(); ++i) {
        if (allocs.category[i] != trace::Category::Grad || allocs.label[i] == trace::kNoString) continue;
        if (++made[{allocs.label[i], allocs.t_alloc[i]}] != 2) continue;
        std::string name = trace_data.str(allocs.label[i]);
        if (name.size() > 5 && name.compare(name.size() - 5, 5, ".grad") == 0) name.resize(name.size() - 5);
        names.insert(name);
    }
    std::string out;
    for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
    return out;
}

CaptureInfo load_capture_info(const trace::TraceData& trace_data) {
    CaptureInfo info;
    info.path = trace_data.path;
    trace::Reader reader(trace_data.path);
    const std::string hint = ": capture the training step with mhc-torch capture (docs/torch.md)";
    std::vector<int64_t> module_ids;
    reader.for_each([&](const trace::Module& module_row) {
        module_ids.push_back(module_row.id);
        info.module_name.push_back(trace_data.str(module_row.name));
        info.module_type.push_back(trace_data.str(module_row.type));
        if (module_row.parent == 0 && info.root.empty()) info.root = trace_data.str(module_row.name);
    });
    if (module_ids.empty()) throw Error(trace_data.path + ": no modules recorded (not a model capture)" + hint);
    for (size_t i = 0; i < info.module_name.size(); ++i)
        info.module_index.emplace(info.module_name[i], static_cast<int32_t>(i));
    auto module_at = [&](int64_t id) -> int32_t {
        auto it = std::lower_bound(module_ids.begin(), module_ids.end(), id);
        return it != module_ids.end() && *it == id ? static_cast<int32_t>(it - module_ids.begin()) : -1;
    };
    const size_t kernel_count = trace_data.kernels.size();
    info.kernel_module.assign(kernel_count, -1);
    info.kernel_phase.assign(kernel_count, trace::Phase::Other);
    std::vector<uint8_t> seen(kernel_count, 0);
    int64_t info_rows = 0;
    reader.for_each([&](const trace::KernelInfo& kernel_info) {
        int64_t row = trace_data.kernel_at(kernel_info.kernel);
        if (row < 0)
            throw Error(where_row(trace_data.path, "kernel_info", kernel_info.kernel,
                                  "names kernel " + std::to_string(kernel_info.kernel) + ", which the trace lacks"));
        int32_t module_index = kernel_info.module == 0 ? -1 : module_at(kernel_info.module);
        if (kernel_info.module != 0 && module_index < 0)
            throw Error(where_row(trace_data.path, "kernel_info", kernel_info.kernel,
                                  "names module " + std::to_string(kernel_info.module) + ", which the trace lacks"));
        info.kernel_module[static_cast<size_t>(row)] = module_index;
        info.kernel_phase[static_cast<size_t>(row)] = kernel_info.phase;
        seen[static_cast<size_t>(row)] = 1;
        ++info_rows;
    });
    if (info_rows < static_cast<int64_t>(kernel_count))
        throw Error(trace_data.path + ": " + std::to_string(kernel_count - static_cast<size_t>(info_rows)) + " of " +
                    std::to_string(kernel_count) + " kernels have no kernel_info row (phase and module)" + hint);
    std::vector<std::tuple<int32_t, int32_t, int32_t>> saved;   // (allocation row, kernel row, packs)
    reader.for_each([&](const trace::SavedTensor& saved_tensor) {
        int64_t allocation_row = trace_data.allocation_at(saved_tensor.allocation),
                kernel_row = trace_data.kernel_at(saved_tensor.kernel);
        if (allocation_row < 0)
            throw Error(
                where_row(trace_data.path, "saved_tensors", saved_tensor.allocation,
                          "names allocation " + std::to_string(saved_tensor.allocation) + ", which the trace lacks"));
        if (kernel_row < 0)
            throw Error(where_row(trace_data.path, "saved_tensors", saved_tensor.allocation,
                                  "names kernel " + std::to_string(saved_tensor.kernel) + ", which the trace lacks"));
        saved.emplace_back(static_cast<int32_t>(allocation_row), static_cast<int32_t>(kernel_row), saved_tensor.packs);
    });
    // A step whose whole forward ran inside torch.func's grad saves nothing through hooks (they are
    // refused there; meta capture.torch_func_modules): its global settings are still searched.
    if (saved.empty() && trace_data.meta_or("capture.torch_func_modules", "").empty())
        throw Error(trace_data.path + ": no saved tensors recorded (which storages autograd keeps for the backward)" +
                    hint);
    std::sort(saved.begin(), saved.end());
    info.saved_rows = static_cast<int64_t>(saved.size());
    info.saved_begin.assign(trace_data.allocations.size() + 1, 0);
    for (auto& [a, k, n] : saved) ++info.saved_begin[static_cast<size_t>(a) + 1];
    for (size_t i = 1; i < info.saved_begin.size(); ++i) info.saved_begin[i] += info.saved_begin[i - 1];
    info.saved_by.resize(saved.size());
    info.saved_packs.resize(saved.size());
    for (size_t i = 0; i < saved.size(); ++i) {
        info.saved_by[i] = std::get<1>(saved[i]);
        info.saved_packs[i] = std::get<2>(saved[i]);
    }
    read_unregistered(trace_data, info);   // before the blocks: such a module is never one
    find_blocks(info);
    read_model_facts(trace_data, info);
    info.sparse_grads = read_sparse_grads(trace_data);
    read_frame_holds(trace_data, info);   // python/mhc_torch/frame_holds.py; absent: free at the last use
    read_unpacks(trace_data, info);
    read_module_calls(trace_data, info);
    read_call_args(trace_data, info);
    read_torch_func(trace_data, info);
    read_model_cache(trace_data, info);
    return info;
}

}  // namespace mhc::advise
