// PyTorch execution trace (ExecutionTraceObserver / Chakra JSON) -> trace. Tensors are kept
// at storage level (one allocation per storage and device), accesses are exact per op,
// lifetimes run from the first to the last op that touches a storage. With --kineto the
// ops are joined to the Kineto trace of the same run (et_join.hpp) for timing: GPU kernels
// take the accesses of the op that launched them; CPU-only runs take each op's CPU interval.
// Without Kineto the timing is order only (op k at k + 1 ns: event numbers).
#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "et_join.hpp"
#include "et_nodes.hpp"
#include "kineto_steps.hpp"
#include "kineto_write.hpp"
#include "limits.hpp"
#include "mhc/common/error.hpp"
#include "quoted_name.hpp"
#include "steps.hpp"

namespace mhc::trace::import {

namespace {

struct Unit {   // one row of the kernels table
    int64_t t_start, t_end, stream;
    int32_t device, step;
    size_t node;      // index into nodes, or SIZE_MAX
    size_t kineto;    // index into KinetoData::kernels, or SIZE_MAX
    std::string name;
};

// The kernels' device: of the op's first output, else of its first input.
int32_t op_device(const Node& n) { return !n.outs.empty() ? n.outs[0].device : n.ins[0].device; }

// An op that becomes a row of the kernels table: a leaf with tensors, not a profiler range.
bool is_unit(const Node& n) {
    return !n.has_children && (!n.ins.empty() || !n.outs.empty()) && n.name.rfind("[pytorch|", 0) != 0;
}

// Indexes 0..n-1 in the order `before` gives, ties in index order.
template <class Before>
std::vector<size_t> stable_order(size_t n, Before before) {
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), before);
    return order;
}

// Storages: one allocation per (storage id, device, generation), alive over the hull of its uses.
using StorageKey = std::tuple<int64_t, int32_t, int32_t>;
StorageKey key_of(const TensorUse& use) { return {use.storage, use.device, use.generation}; }

struct Storage {
    int64_t bytes = 0, t_first = INT64_MAX, t_last = INT64_MIN, id = 0;
    int32_t device = 0;
};

// One import of an execution trace, by stage: the decoded nodes (parse_nodes) are mapped to
// units (ops, or the Kineto kernels they launched) and storages, then written.
class EtImport {
public:
    EtImport(std::vector<Node> nodes, int64_t pid, Rows& rows, Result& result)
        : nodes_(std::move(nodes)), pid_(pid), w_(rows), r_(result) {
        for (size_t i = 0; i < nodes_.size(); ++i) node_at_[nodes_[i].id] = i;
        index_steps();
    }

    void run(const std::string& in, const std::string& kineto, uint64_t max_input_size) {
        joined_ = !kineto.empty();
        if (joined_) join_kineto(in, kineto, max_input_size);
        else units_in_order();
        // Ops on one thread are serial (timing of their own), kernels keep Kineto's times.
        if (!(joined_ && gpu_)) clamp_serial_ops();
        map_storages();
        if (joined_) count_storages_left_out();
        write_allocations();
        if (joined_ && gpu_) write_gpu_timeline();
        else write_ops();
        write_meta();
    }

private:
    // Step of a node: the ProfilerStep#N above it; else, for a node on another thread (the
    // autograd thread runs the backward of a step while the step's thread waits in backward()),
    // the step whose ids its id falls within: ids are given as ops start, on every thread, so a
    // step's ops hold the ids from the ProfilerStep#N node's to the last one below it.
    int32_t step_of(size_t i) const {
        int32_t step = step_in_tree(i);
        if (step_ids_.empty() && use_optimizer_) return step_at(optimizer_.steps, nodes_[i].id);
        if (step >= 0 || step_ids_.empty()) return step;
        int64_t id = nodes_[i].id;
        auto after = std::upper_bound(step_ids_.begin(), step_ids_.end(), id,
                                      [](int64_t value, const StepIds& range) { return value < range.first; });
        if (after == step_ids_.begin() || id > std::prev(after)->last) return -1;
        ++steps_by_id_;
        return std::prev(after)->step;
    }

    // The id range of each ProfilerStep#N's ops, in id order.
    void index_steps() {
        // Each node's step in the tree, from its parent's: a parent starts first, so its id (and
        // index) is smaller and its step is known; a file where it is not is walked up instead.
        tree_step_.assign(nodes_.size(), -1);
        for (size_t i = 0; i < nodes_.size(); ++i) {
            auto parent = node_at_.find(nodes_[i].parent);
            const bool before = parent != node_at_.end() && parent->second < i;
            tree_step_[i] = nodes_[i].name.rfind("ProfilerStep#", 0) == 0 || !before ? walk_to_step(i)
                                                                                     : tree_step_[parent->second];
        }
        std::unordered_map<int32_t, size_t> at;
        for (size_t i = 0; i < nodes_.size(); ++i) {
            int32_t step = tree_step_[i];
            if (step < 0) continue;
            auto [it, fresh] = at.emplace(step, step_ids_.size());
            if (fresh) step_ids_.push_back({nodes_[i].id, nodes_[i].id, step});
            StepIds& range = step_ids_[it->second];
            range.first = std::min(range.first, nodes_[i].id);
            range.last = std::max(range.last, nodes_[i].id);
        }
        std::sort(step_ids_.begin(), step_ids_.end(),
                  [](const StepIds& lhs, const StepIds& rhs) { return lhs.first < rhs.first; });
        if (step_ids_.empty()) index_optimizer_steps();
    }

    // Without ProfilerStep#N, the optimizer's step nodes delimit the steps (steps.hpp), by id: ids
    // are given as ops start, on every thread, so step k holds the ids after the last one of the
    // optimizer step before it, through the last one below its own (the outermost
    // Optimizer.step#... node; step 0 from the first id). Used where a joined Kineto trace has no
    // ProfilerStep#N either; meta steps_from says so.
    void index_optimizer_steps() {
        std::unordered_map<size_t, NamedSpan> outermost;   // node index -> (name, its id, last id below + 1, nodes)
        for (size_t i = 0; i < nodes_.size(); ++i) {
            size_t top = SIZE_MAX, index = i;
            for (int depth = 0; depth < 256; ++depth) {
                if (is_optimizer_step(nodes_[index].name)) top = index;
                auto parent = node_at_.find(nodes_[index].parent);
                if (parent == node_at_.end() || parent->second == index) break;
                index = parent->second;
            }
            if (top == SIZE_MAX) continue;
            auto [it, fresh] = outermost.try_emplace(
                top, NamedSpan{nodes_[top].name, nodes_[top].id, nodes_[top].id + 1, 0});
            it->second.t_end = std::max(it->second.t_end, nodes_[i].id + 1);
            ++it->second.work;   // its nodes, itself included: what it runs (steps.hpp)
            for (const TensorUse& use : nodes_[i].ins) it->second.inputs.push_back(use.storage);   // what it steps
        }
        std::vector<NamedSpan> spans;
        spans.reserve(outermost.size());
        for (auto& [index, span] : outermost) {
            std::sort(span.inputs.begin(), span.inputs.end());
            span.inputs.erase(std::unique(span.inputs.begin(), span.inputs.end()), span.inputs.end());
            spans.push_back(std::move(span));
        }
        for (const auto& node : nodes_)   // where the loop zeroes the gradients: step 0's start
            if (is_loop_range(node.name)) spans.push_back(NamedSpan{node.name, node.id, node.id + 1});
        optimizer_ = optimizer_steps(spans, INT64_MIN);
        use_optimizer_ = !optimizer_.steps.empty();
    }

    // The ProfilerStep#N above a node (or the node itself), -1 if none.
    int32_t step_in_tree(size_t index) const { return tree_step_[index]; }

    int32_t walk_to_step(size_t index) const {
        for (int depth = 0; depth < 256; ++depth) {
            if (nodes_[index].name.rfind("ProfilerStep#", 0) == 0) {
                long value = std::strtol(nodes_[index].name.c_str() + 13, nullptr, 10);
                return value >= 0 && value < INT32_MAX ? static_cast<int32_t>(value) : -1;
            }
            auto parent = node_at_.find(nodes_[index].parent);
            if (parent == node_at_.end() || parent->second == index) return -1;
            index = parent->second;
        }
        return -1;
    }

    // Without Kineto: the leaf ops in id order, the k-th (from 0) at k + 1 ns for 1 ns (order-only
    // timing: a time is an event number, as a snapshot without time_us numbers its events; with
    // 1 us slots, the viewer and info showed op k as event #1000 k).
    void units_in_order() {
        int64_t slot = 0;
        for (size_t i = 0; i < nodes_.size(); ++i) {
            if (!is_unit(nodes_[i])) continue;
            units_.push_back(
                {slot + 1, slot + 2, nodes_[i].tid, op_device(nodes_[i]), step_of(i), i, SIZE_MAX, nodes_[i].name});
            ++slot;
        }
    }

    // Kineto op <-> ET node (et_join.hpp), then the units: the GPU kernels with the tensors of
    // the op that launched them, or (a CPU-only run) the leaf ops timed by their Kineto interval.
    void join_kineto(const std::string& in, const std::string& kineto, uint64_t max_input_size) {
        kd_ = parse_kineto(kineto, max_input_size);
        refuse_foreign_trace(kineto, kd_);
        const std::string trace = "the Kineto trace " + std::filesystem::path(kineto).filename().string();
        say_empty_values(kd_.empty_values, trace, r_);
        say_raw_strings(kd_.raw_strings, trace, r_);
        say_stray_members(kd_.members_after_name, trace, r_);
        kd_.link_ops();
        mend_profiler_steps(kd_, r_);   // before the ops take Kineto's steps (units_from_ops)
        base_ = kineto_base(kd_);
        check_same_process(in, kineto);
        std::vector<EtOpRef> refs(nodes_.size());
        for (size_t i = 0; i < nodes_.size(); ++i) {
            const Node& node = nodes_[i];
            auto parent = node_at_.find(node.parent);
            const bool has_parent = parent != node_at_.end() && parent->second != i;
            const int64_t up = has_parent ? static_cast<int64_t>(parent->second) : -1;
            refs[i] = {node.name, node.id, node.tid, node.rf_id, node.seq, up};
        }
        join_ = join_et_kineto(refs, kd_, pid_);
        std::set<int64_t> threads;
        for (const EtOpRef& ref : refs) {
            if (is_et_profiler_range(ref.name)) continue;
            ++ops_to_join_;
            threads.insert(ref.tid);
        }
        threads_to_join_ = static_cast<int64_t>(threads.size());
        for (const auto& note : join_.notes) r_.warnings.push_back(note);
        if (join_.parent_disagreements > 0)
            r_.warnings.push_back(std::to_string(join_.parent_disagreements) +
                                  " joined ops are not inside their joined parent op on the Kineto timeline");
        std::vector<size_t> op_node(kd_.ops.size(), SIZE_MAX);
        for (size_t i = 0; i < nodes_.size(); ++i)
            if (join_.node_op[i] >= 0) op_node[join_.node_op[i]] = i;
        matched_ = join_.by_key + join_.by_order;
        for (const auto& k : kd_.kernels) gpu_ = gpu_ || !(k.is_copy || k.is_memset);
        if (gpu_) units_from_kernels(op_node);
        else units_from_ops(join_.node_op);
    }

    // Both traces name their process: a Kineto trace none of whose CPU ops is of the execution
    // trace's process is another run's, and joining it would only pair ops by chance.
    void check_same_process(const std::string& in, const std::string& kineto) const {
        if (pid_ < 0 || kd_.ops.empty()) return;
        if (std::any_of(kd_.ops.begin(), kd_.ops.end(), [&](const KOp& op) { return op.pid == pid_; })) return;
        throw Error(where(kineto, "not the Kineto trace of " + in + "'s run: its CPU ops are of process " +
                                      std::to_string(kd_.ops.front().pid) + ", the execution trace's of process " +
                                      std::to_string(pid_)));
    }

    void units_from_kernels(const std::vector<size_t>& op_node) {
        std::stable_sort(kd_.kernels.begin(), kd_.kernels.end(), [](const KKernel& a, const KKernel& b) { return a.ts < b.ts; });
        for (size_t i = 0; i < kd_.kernels.size(); ++i) {
            const KKernel& k = kd_.kernels[i];
            if (k.is_copy || k.is_memset) continue;
            // The innermost launching op that the execution trace knows and that has tensors.
            size_t node = SIZE_MAX;
            for (int32_t op = kd_.launcher(k); op >= 0; op = kd_.ops[op].parent) {
                size_t n = op_node[op];
                if (n != SIZE_MAX && (!nodes_[n].ins.empty() || !nodes_[n].outs.empty())) {
                    node = n;
                    break;
                }
            }
            units_.push_back({k.ts - base_, k.ts + k.dur - base_, k.stream, k.device, -1, node, i, {}});
        }
    }

    void units_from_ops(const std::vector<int32_t>& node_op) {
        const StepRanges kineto_steps(kd_.ranges);   // for an execution trace without ProfilerStep#
        const ProcessSteps own_steps(kd_.ranges);     // a merged Kineto file: the op's own process's
        if (kineto_steps.size() > 0) use_optimizer_ = false;   // the profiler's steps, better
        for (size_t i = 0; i < nodes_.size(); ++i) {
            if (!is_unit(nodes_[i])) continue;
            int32_t op = node_op[i];
            if (op < 0) {
                ++unmatched_;
                continue;
            }
            const KOp& o = kd_.ops[op];
            int32_t step = step_of(i);
            if (step < 0) step = own_steps.at(o.pid, o.ts, kineto_steps);
            units_.push_back({o.ts - base_, o.ts + o.dur - base_, o.tid, op_device(nodes_[i]), step, i, SIZE_MAX,
                              nodes_[i].name});
        }
    }

    // A start inside the previous op of its thread (timer jitter, or an op the execution trace
    // lacks) is moved to the previous end, before lifetimes are computed.
    void clamp_serial_ops() {
        const auto order = stable_order(units_.size(), [&](size_t a, size_t b) {
            if (units_[a].device != units_[b].device) return units_[a].device < units_[b].device;
            if (units_[a].stream != units_[b].stream) return units_[a].stream < units_[b].stream;
            return units_[a].t_start < units_[b].t_start;
        });
        for (size_t j = 1; j < order.size(); ++j) {
            const Unit& p = units_[order[j - 1]];
            Unit& u = units_[order[j]];
            if (p.device != u.device || p.stream != u.stream || u.t_start >= p.t_end) continue;
            u.t_start = p.t_end;
            u.t_end = std::max(u.t_end, u.t_start);
            ++clamped_;
        }
    }

    // Storages of the execution trace's leaf ops that no joined unit uses are left out of the
    // trace: said, since the peak then misses them (a join key that stops matching part way, a
    // thread the profiler did not record). On a GPU run, the GPU's storages; host storages of ops
    // that launch no kernel are left out by design. On a CPU-only run the ops are the timeline and
    // the host's storages its memory: those count (before 2026-12-03 they were left out in
    // silence, and meta et.storages_left_out said 0).
    void count_storages_left_out() {
        const bool cpu_run = !gpu_;
        auto counted = [&](int32_t device) { return device >= 0 || cpu_run; };
        std::set<StorageKey> all;
        for (const Node& node : nodes_) {
            if (!is_unit(node)) continue;
            for (const auto* uses : {&node.ins, &node.outs})
                for (const auto& use : *uses)
                    if (counted(use.device)) all.insert(key_of(use));
        }
        const auto kept = std::count_if(storages_.begin(), storages_.end(),
                                        [&](const auto& kv) { return counted(std::get<1>(kv.first)); });
        left_out_ = static_cast<int64_t>(all.size()) - static_cast<int64_t>(kept);
        if (left_out_ <= 0) return;
        const std::string what = cpu_run ? " storages are used by no op joined to a Kineto op ("
                                         : " GPU storages are used by no op that a Kineto kernel was joined to (";
        r_.warnings.push_back(std::to_string(left_out_) + " of the execution trace's " + std::to_string(all.size()) +
                              what + std::to_string(matched_) + " ops joined): left out, the " +
                              (cpu_run ? "host's" : "GPU's") + " figures miss them");
    }

    // Each unit's storages with their access modes, and each storage's size and lifetime.
    void map_storages() {
        unit_access_.resize(units_.size());
        for (size_t u = 0; u < units_.size(); ++u) {
            if (units_[u].node == SIZE_MAX) continue;
            const Node& n = nodes_[units_[u].node];
            std::map<StorageKey, uint8_t> modes;
            for (const auto& use : n.ins) modes[key_of(use)] |= 1;
            // An output that is also an input is written only by in-place ops (name ends in '_');
            // otherwise it is a view of the input.
            bool inplace = !n.name.empty() && n.name.back() == '_';
            for (const auto& use : n.outs) {
                auto& mode = modes[key_of(use)];
                if (!(mode & 1) || inplace) mode |= 2;
            }
            auto touch = [&](const TensorUse& use) {
                Storage& storage = storages_[key_of(use)];
                storage.bytes = std::max(storage.bytes, use.bytes);
                storage.device = use.device;
                storage.t_first = std::min(storage.t_first, units_[u].t_start);
                storage.t_last = std::max(storage.t_last, units_[u].t_end);
            };
            for (const auto& t : n.ins) touch(t);
            for (const auto& t : n.outs) touch(t);
            for (auto& [key, m] : modes) unit_access_[u].push_back({&storages_[key], static_cast<AccessMode>(m)});
        }
    }

    void write_allocations() {
        int64_t next = 1;
        for (auto& [key, s] : storages_) {
            s.id = next++;
            Allocation a;
            a.id = s.id;
            a.device = s.device;
            a.bytes = s.bytes;
            a.t_alloc = s.t_first;
            a.t_free = s.t_last;
            // A storage id's later allocations (its address given again) are "storage N #2", ...
            const int32_t generation = std::get<2>(key);
            a.label = w_.intern("storage " + std::to_string(std::get<0>(key)) +
                                (generation > 0 ? " #" + std::to_string(generation + 1) : ""));
            w_.add(a);
        }
    }

    void add_accesses(size_t u, int64_t kernel_id) {
        for (auto& [s, m] : unit_access_[u]) w_.add(Access{kernel_id, s->id, m});
    }

    // The Kineto timeline as it is, its kernels taking their launching op's accesses.
    void write_gpu_timeline() {
        std::vector<size_t> unit_of(kd_.kernels.size(), SIZE_MAX);
        for (size_t u = 0; u < units_.size(); ++u) unit_of[units_[u].kineto] = u;
        write_kineto_timeline(kd_, base_, w_, r_, [&](size_t ki, int64_t id) {
            if (unit_of[ki] != SIZE_MAX) add_accesses(unit_of[ki], id);
        });
    }

    // The ops as kernels in time order; a CPU-only Kineto run adds its markers.
    void write_ops() {
        std::unordered_map<std::string, int64_t> names;
        int64_t id = 0;
        for (size_t u : stable_order(units_.size(), [&](size_t a, size_t b) { return units_[a].t_start < units_[b].t_start; })) {
            Kernel k;
            k.id = ++id;
            k.device = units_[u].device;
            k.stream = units_[u].stream;
            auto it = names.find(units_[u].name);
            k.name = it != names.end() ? it->second : (names[units_[u].name] = w_.intern(units_[u].name));
            k.t_start = units_[u].t_start;
            k.t_end = units_[u].t_end;
            k.step = units_[u].step;
            k.correlation = nodes_[units_[u].node].id;
            w_.add(k);
            add_accesses(u, k.id);
        }
        if (joined_) {
            kd_.kernels.clear();   // CPU-only run: the ops above are the timeline; keep markers
            write_kineto_timeline(kd_, base_, w_, r_, nullptr);
        } else {
            write_step_markers();
        }
    }

    // Without Kineto, a step marker per ProfilerStep#N that has ops: from its first op's start to
    // its last op's end (the ops' slots), so that `mhc info` counts the steps the trace records.
    // A ProfilerStep#N node with no op under it (the profiler stopped as it began) has none.
    void write_step_markers() {
        std::map<int32_t, std::pair<int64_t, int64_t>> span;
        for (const Unit& unit : units_) {
            if (unit.step < 0) continue;
            auto [it, fresh] = span.try_emplace(unit.step, unit.t_start, unit.t_end);
            if (!fresh)
                it->second = {std::min(it->second.first, unit.t_start), std::max(it->second.second, unit.t_end)};
        }
        int64_t id = 0;
        const std::string prefix = step_ids_.empty() ? "step#" : "ProfilerStep#";
        for (const auto& [step, times] : span)
            w_.add(Marker{++id, w_.intern(prefix + std::to_string(step)), times.first, times.second, MarkerKind::Step,
                          step});
        if (!span.empty()) r_.meta["et.step_markers"] = std::to_string(span.size());
    }

    // The rule that joined (et_join.hpp): a Kineto trace that writes the key is joined by it alone.
    std::string join_key() const {
        if (join_.by_key > 0) return "Record function id == rf_id";
        if (join_.by_order > 0) return "op order per thread (names and autograd sequence numbers)";
        return "none";
    }

    // What the accesses are: the execution trace's, exact, for the ops joined; none when none
    // joined (before 2026-12-03 a join of nothing still said "exact" of a trace with no access),
    // "partial" when a thread, a leaf op or a GPU storage was left out.
    std::string accesses() const {
        if (!joined_) return "exact";
        if (matched_ == 0) return "none";
        const bool partial = !join_.notes.empty() || left_out_ > 0 || (!gpu_ && unmatched_ > 0);
        return partial ? "partial" : "exact";
    }

    // One line for meta et.join (`mhc info` shows it): how many ops and threads joined, by what,
    // and why the others did not (the threads' notes, at most four).
    std::string join_summary() const {
        const int64_t threads_joined = threads_to_join_ - static_cast<int64_t>(join_.notes.size());
        std::string line = std::to_string(matched_) + " of " + std::to_string(ops_to_join_) + " ops joined (" +
                           std::to_string(std::max<int64_t>(0, threads_joined)) + " of " +
                           std::to_string(threads_to_join_) + " threads)";
        if (matched_ > 0) line += " by " + join_key();
        for (size_t i = 0; i < join_.notes.size() && i < 4; ++i) line += (i ? "; " : ": ") + join_.notes[i];
        if (join_.notes.size() > 4) line += "; and " + std::to_string(join_.notes.size() - 4) + " more threads";
        if (matched_ == 0) line += gpu_ ? "; the kernels have no accesses" : "; no op is in the trace";
        return line;
    }

    void write_meta() {
        auto& meta = r_.meta;
        meta["source"] = joined_ ? "pytorch-execution-trace+kineto" : "pytorch-execution-trace";
        meta["import.format"] = "et";
        meta["import.events"] = std::to_string(nodes_.size());
        meta["accesses"] = accesses();
        meta["accesses.granularity"] = "storage (one allocation per storage id and device, a new one where an op "
                                       "allocates the id again)";
        meta["lifetimes"] = "inferred (first to last op that touches the storage)";
        meta["categories"] = "unknown";
        // A CPU-only run's ops are timed by the Kineto ops they joined: none joined, none timed.
        meta["timing"] = !joined_ ? "order-only" : !gpu_ && matched_ == 0 ? "none" : "exact";
        meta["et.ops_as_kernels"] = joined_ && gpu_ ? "no (GPU kernels from Kineto)" : std::to_string(units_.size());
        meta["et.storages"] = std::to_string(storages_.size());
        if (joined_) {
            meta["et.kineto_ops_matched"] = std::to_string(matched_);
            meta["et.join_key"] = join_key();
            meta["et.kineto_ops_matched_by_key"] = std::to_string(join_.by_key);
            meta["et.kineto_ops_matched_by_order"] = std::to_string(join_.by_order);
            meta["et.join_parent_disagreements"] = std::to_string(join_.parent_disagreements);
            if (join_.parent_on_other_thread > 0)
                meta["et.join_parent_on_other_thread"] =
                    std::to_string(join_.parent_on_other_thread) +
                    " joined ops run on another Kineto thread than their joined parent (work handed to another "
                    "thread, such as gloo's collectives): not held to lie inside it";
            meta["et.threads_not_joined"] = std::to_string(join_.notes.size());
            meta["et.join"] = join_summary();
            if (!gpu_) meta["et.leaf_ops_without_kineto_timing"] = std::to_string(unmatched_);
            if (!kd_.memory.empty()) meta["et.kineto_memory_events_ignored"] = std::to_string(kd_.memory.size());
            meta["et.storages_left_out"] = std::to_string(std::max<int64_t>(0, left_out_));
        }
        meta["et.op_starts_clamped"] = std::to_string(clamped_);
        if (joined_ && gpu_) {   // kernels take Kineto's steps: write_kineto_timeline said where from
        } else if (!step_ids_.empty()) {
            meta["steps_from"] = kStepsFromProfiler;
        } else if (use_optimizer_) {
            meta["steps_from"] = optimizer_.said();
            meta["steps_optimizers"] = optimizer_.optimizers_said();
            if (const std::string warning = optimizer_.warning(); !warning.empty()) r_.warnings.push_back(warning);
        }
        if (steps_by_id_ > 0)
            meta["et.steps_by_id"] = std::to_string(steps_by_id_) +
                                     " ops under no ProfilerStep#N (another thread's: the backward) took the step "
                                     "whose ids they fall within";
    }

    std::vector<Node> nodes_;
    int64_t pid_;
    std::unordered_map<int64_t, size_t> node_at_;
    struct StepIds {
        int64_t first, last;
        int32_t step;
    };
    std::vector<StepIds> step_ids_;     // ProfilerStep#N id ranges, by first id
    std::vector<int32_t> tree_step_;    // per node: the ProfilerStep#N above it, -1 if none
    mutable int64_t steps_by_id_ = 0;   // ops given a step by their id (not under a ProfilerStep#N)
    OptimizerSteps optimizer_;          // steps by id from the optimizer's step nodes (no ProfilerStep#N)
    bool use_optimizer_ = false;
    Rows& w_;
    Result& r_;
    KinetoData kd_;
    EtJoin join_;
    bool joined_ = false, gpu_ = false;
    int64_t base_ = 0, matched_ = 0, unmatched_ = 0, clamped_ = 0, left_out_ = 0;
    int64_t ops_to_join_ = 0, threads_to_join_ = 0;   // the execution trace's ops (no profiler ranges)
    std::vector<Unit> units_;
    std::map<StorageKey, Storage> storages_;
    std::vector<std::vector<std::pair<Storage*, AccessMode>>> unit_access_;
};

// A device type as shown in meta and messages: at most 40 bytes, control bytes as '?' (an error
// is one line whatever the file holds).
std::string shown(const std::string& type) {
    return printable(type.size() > 40 ? type.substr(0, 40) + "..." : type);
}

// What the tensors' device types say (meta et.device_types); tensors of two kinds of
// accelerator (cuda:0 and xpu:0) cannot both be device 0 of one trace: refused by name.
void device_types_meta(const std::string& in, const DeviceTypes& devices, Result& result) {
    std::string list, accelerators;
    for (const auto& [type, tensors] : devices) {
        list += (list.empty() ? "" : ", ") + shown(type) + " " + std::to_string(tensors);
        if (type == "cpu" || type == "meta") continue;
        if (!accelerators.empty())
            throw Error(where(in, "tensors on two kinds of accelerator (" + shown(accelerators) + " and " +
                                      shown(type) +
                                      "): a trace numbers the devices of one kind; import a trace of one"));
        accelerators = type;
    }
    if (list.empty()) return;
    result.meta["et.device_types"] = list + " tensors" +
                                     (accelerators.empty() ? "" : " (" + shown(accelerators) + ":N is device N)");
    if (auto meta_tensors = devices.find("meta"); meta_tensors != devices.end())
        result.warnings.push_back(std::to_string(meta_tensors->second) +
                                  " tensors on the meta device (shapes without storage) hold no memory: not imported");
}

// A trace without strides (schemas before 1.1.1) sizes a storage by its tensors' numel, so a
// view made by broadcasting (aten::expand: stride 0) counts elements its storage does not hold
// (param's ResNet of schema 1.1.0 counts a [32, 2048] gradient as its [32, 2048, 7, 7] expansion).
// Such views are told by what the op writes: an output with a tensor id of its own on an input's
// storage, larger than that input. Said (meta et.broadcast_views) with how many bytes the
// storages count above their other tensors; not corrected, as a view may also span more of its
// storage than the tensors seen before it.
void broadcast_views_meta(const std::vector<Node>& nodes, Result& result) {
    using Key = std::pair<int64_t, int32_t>;   // storage, device
    std::set<std::pair<int64_t, Key>> views;   // tensor id, storage
    const Node* first = nullptr;
    for (const Node& node : nodes)
        for (const TensorUse& out : node.outs) {
            if (out.spanned || out.tensor == 0) continue;
            int64_t base = -1;
            bool own_id = true;
            for (const TensorUse& in : node.ins) {
                if (in.tensor == out.tensor) own_id = false;
                if (in.storage == out.storage && in.device == out.device) base = std::max(base, in.bytes);
            }
            if (!own_id || base < 0 || out.bytes <= base) continue;
            if (views.insert({out.tensor, {out.storage, out.device}}).second && first == nullptr) first = &node;
        }
    if (views.empty()) return;
    std::map<Key, std::pair<int64_t, int64_t>> sizes;   // every use's largest bytes, and without the views
    for (const Node& node : nodes)
        for (const auto* side : {&node.ins, &node.outs})
            for (const TensorUse& use : *side) {
                auto& [all, kept] = sizes[{use.storage, use.device}];
                all = std::max(all, use.bytes);
                if (views.count({use.tensor, {use.storage, use.device}}) == 0) kept = std::max(kept, use.bytes);
            }
    int64_t more = 0;
    for (const auto& [key, size] : sizes)
        if (size.second > 0) more += size.first - size.second;
    const std::string what =
        std::to_string(views.size()) + (views.size() == 1 ? " view" : " views") +
        " larger than the tensor viewed (the first made by " + quoted_name(first->name) + ", node id " +
        std::to_string(first->id) + "): without strides (written from schema 1.1.1 on) their storages count the " +
        "views' elements, " + std::to_string(more) + " B more than their other tensors span";
    result.meta["et.broadcast_views"] = what;
    if (more > 0) result.warnings.push_back(what + ": those storages' bytes may be too large by as much");
}

// PyTorch's ExecutionTraceObserver writes a node's name as it is (torch 2.15 too; its string
// inputs and op schemas it escapes): a record_function name holding a quote, a backslash or a
// control character makes the file invalid JSON, and a Windows path's `\n` reads as a newline.
void raw_names_meta(const RawStrings& raw, Result& result) {
    if (raw.count() == 0) return;
    said_and_warned(result, "et.raw_strings",
                    std::to_string(raw.count()) + (raw.count() == 1 ? " character" : " characters") +
                        " of the execution trace's strings written unescaped (" + std::to_string(raw.quotes) +
                        " quotes, " + std::to_string(raw.controls) + " control characters, " +
                        std::to_string(raw.backslashes) + " backslashes; the first at byte " +
                        std::to_string(raw.first_at) + ", in '" + raw.first_key +
                        "') read as characters of their string: PyTorch's ExecutionTraceObserver writes a "
                        "record_function's name without escaping it");
}

// A member after a node's name that no writer of execution traces writes and that no reading of the
// name to the quote before "id" or "ctrl_deps" takes as the name's text: read as written, and said.
void stray_members_meta(const StrayMember& stray, Result& result) {
    if (stray.count == 0) return;
    said_and_warned(result, "et.members_after_name",
                    std::to_string(stray.count) + (stray.count == 1 ? " node holds" : " nodes hold") +
                        " a member after its name that no writer of execution traces writes (the first: '" + stray.key + "' in nodes[" + std::to_string(stray.row) +
                        "]): read as written, the name ending at its first quote");
}

}  // namespace

void import_et(const std::string& in, const std::string& kineto, Rows& w, Result& r, uint64_t max_input_size) {
    int64_t pid = -1;
    DeviceTypes devices;
    LinkedNodes linked;
    RawStrings raw;
    StrayMember stray;
    std::vector<Node> nodes = parse_nodes(in, max_input_size, pid, devices, linked, raw, stray);
    raw_names_meta(raw, r);
    stray_members_meta(stray, r);
    device_types_meta(in, devices, r);
    broadcast_views_meta(nodes, r);
    // Before 2026-12-06 each storage id was one allocation alive from its first use to its last:
    // param's 1.1.1 ResNet trace gives 340 ids again, 1,098 times, over its three steps, and its
    // device peak was 3.44 GiB where its allocations' is 1.85 GiB.
    if (const int64_t again = number_allocations(nodes); again > 0)
        r.meta["et.storage_ids_given_again"] =
            std::to_string(again) + " allocations on a storage id an earlier op used (the observer names a storage by " +
            "its address, and a freed block's address is given again): each its own allocation, 'storage N #2', ...";
    r.events = static_cast<int64_t>(nodes.size()) + linked.count;
    if (linked.count > 0) {
        const std::string what = std::to_string(linked.count) +
                                 " nodes chakra_trace_link added (Kineto's kernels, copies and memsets, each a copy "
                                 "of the op that ran it; the first: " +
                                 quoted_name(linked.first) + ")";
        r.meta["et.linked_kineto_nodes"] = what + " left out: the ops are read as the execution trace it linked";
        r.warnings.push_back("an execution trace linked by chakra_trace_link (ET+): " + what +
                             " left out; for the kernels and their times import the execution trace and the Kineto "
                             "trace it was linked from (mhc import ET --kineto KINETO)");
    }
    EtImport(std::move(nodes), pid, w, r).run(in, kineto, max_input_size);
}

}  // namespace mhc::trace::import
