// PyTorch execution trace (ExecutionTraceObserver / Chakra JSON) -> trace. Tensors are kept
// at storage level (one allocation per storage and device), accesses are exact per op,
// lifetimes run from the first to the last op that touches a storage. With --kineto the
// ops are joined to the Kineto trace of the same run (et_join.hpp) for timing: GPU kernels
// take the accesses of the op that launched them; CPU-only runs take each op's CPU interval.
// Without Kineto the timing is order only (op k at k + 1 ns: event numbers).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <istream>
#include <map>
#include <numeric>
#include <set>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "et_join.hpp"
#include "kineto_write.hpp"
#include "limits.hpp"
#include "mhc/common/error.hpp"
#include "source.hpp"

namespace mhc::trace::import {

namespace {

using json = nlohmann::json;

struct TensorUse {
    int64_t storage;
    int32_t device;
    int64_t bytes;
};

struct Node {
    int64_t id = 0, parent = -1, rf_id = -1, tid = 0, seq = -1;   // seq: autograd seq_id
    std::string name;
    std::vector<TensorUse> ins, outs;
    bool has_children = false;
};

// The tensors of each device type the trace names (c10::Device::str(): "cuda:0", "xpu:1",
// "cpu", "meta", a backend's own name such as "npu:0"), counted as they are read.
using DeviceTypes = std::map<std::string, int64_t>;
constexpr int32_t kNoMemory = INT32_MIN;   // a meta tensor: a shape without storage

// A tensor's device: -1 for the host ("cpu", or none named), kNoMemory for "meta", else the
// index of any accelerator ("cuda" alone is cuda:0; ROCm builds write "cuda" too). Before
// 2026-12-03 only "cuda" was a device: an XPU, HPU, MTIA or custom-backend trace's device
// memory was imported as the host's, without a word.
// A device written otherwise (a number, "cuda:x", an index past 4095) is bad input (`bad` names
// it): before 2026-12-03 it was the host's, without a word.
int32_t device_of(const json& value, DeviceTypes& types, std::string& bad) {
    if (value.is_null()) return -1;
    if (!value.is_string()) {
        if (bad.empty()) bad = "device " + value.dump() + " is not a device name";
        return -1;
    }
    const std::string& text = value.get_ref<const std::string&>();
    const size_t colon = text.find(':');
    const std::string type = text.substr(0, colon);
    if (type.empty()) return -1;
    ++types[type];
    if (type == "cpu") return -1;
    if (type == "meta") return kNoMemory;
    if (colon == std::string::npos) return 0;
    const char* digits = text.c_str() + colon + 1;
    char* end = nullptr;
    const long index = std::strtol(digits, &end, 10);
    if (end == digits || *end != '\0' || index < 0 || index >= 4096) {
        if (bad.empty()) bad = "device '" + text + "' is not TYPE:N with N in [0, 4096)";
        return -1;
    }
    return static_cast<int32_t>(index);
}

// An integer field of a node (ctrl_deps or parent, rf_id, tid, seq_id): PyTorch writes integers;
// anything else is bad input (`bad` names it), where it was read as -1 (no parent, no thread)
// before 2026-12-03.
int64_t int_of(const json& value, const char* what, std::string& bad) {
    if (value.is_number_integer() && !(value.is_number_unsigned() && value.get<uint64_t>() > INT64_MAX)) return value.get<int64_t>();
    if (value.is_number_unsigned()) return -1;   // a uint64 handle past int64: no id this import can use
    if (bad.empty()) bad = std::string(what) + " " + value.dump() + " is not an integer";
    return -1;
}

int64_t as_i64(const json& v) {
    if (v.is_number_integer() || v.is_number_unsigned()) return v.get<int64_t>();
    if (v.is_number_float()) {
        double d = v.get<double>();
        return d > -9e18 && d < 9e18 ? static_cast<int64_t>(d) : -1;
    }
    return -1;
}

// [tensor_id, storage_id, offset, numel, itemsize, device] (schema 1.0.1 on: PyTorch's
// execution_graph_observer.cpp, later execution_trace_observer.cpp). Zero storage, numel or itemsize is an undefined
// tensor (skipped); a field that is not an integer, is negative, or is past 2^40 elements/offset or 64-byte items is
// bad input (`bad` names it). So is a tensor of another length: schema 1.0.0 (PyTorch's
// execution_graph_observer.cpp) wrote [tensor_id, storage_id, offset, numel, itemsize], without
// the device, and before 2026-12-03 such a tensor was the host's, in silence.
void tensor_from(const json& value, std::vector<TensorUse>& out, std::string& bad, DeviceTypes& types) {
    // An empty array is an undefined tensor (skipped). Anything else that is not an array of
    // numbers was skipped in silence before 2026-12-03: its op lost the access.
    if (value.is_array() && value.empty()) return;
    if (!value.is_array() || !value[0].is_number()) {
        if (bad.empty()) {
            std::string shown = value.dump();
            if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
            bad = (value.is_array() ? "has a first field (tensor_id) that is not a number: " : "is not an array: ") +
                  shown + ", not [tensor_id, storage_id, offset, numel, itemsize, device]";
        }
        return;
    }
    if (value.size() != 6) {
        if (bad.empty())
            bad = value.size() == 5 ? "has 5 fields, no device (schema 1.0.0's [tensor_id, storage_id, offset, numel, "
                                      "itemsize]): its memory's device is unknown; recorded before schema 1.0.1"
                                    : "has " + std::to_string(value.size()) +
                                          " fields, not 6 ([tensor_id, storage_id, offset, numel, itemsize, device])";
        return;
    }
    static const char* names[] = {"tensor_id", "storage_id", "offset", "numel", "itemsize"};
    static const int64_t max[] = {INT64_MAX, INT64_MAX, INT64_C(1) << 40, INT64_C(1) << 40, 64};
    int64_t f[5] = {};
    for (int k = 1; k < 5; ++k) {
        f[k] = value[k].is_number_integer() ? as_i64(value[k]) : -1;
        if (f[k] < 0 || f[k] > max[k]) {
            if (bad.empty()) bad = std::string(names[k]) + " " + value[k].dump() + " is out of range";
            return;
        }
    }
    int64_t storage = f[1], offset = f[2], numel = f[3], item = f[4];
    if (storage == 0 || numel == 0 || item == 0) return;
    const int32_t device = device_of(value[5], types, bad);
    if (device == kNoMemory) return;
    out.push_back({storage, device, (offset + numel) * item});   // < 2^47
}

// The element types of "GenericList[A,B[C,D],E]": A, B[C,D] and E (split at its top level).
std::vector<std::string_view> element_types(std::string_view type) {
    std::vector<std::string_view> out;
    const size_t open = type.find('[');
    if (open == std::string_view::npos || type.back() != ']') return out;
    int depth = 0;
    size_t start = open + 1;
    for (size_t i = start; i + 1 < type.size(); ++i) {
        const char ch = type[i];
        if (ch == '[' || ch == '(') ++depth;
        else if (ch == ']' || ch == ')') --depth;
        else if (ch == ',' && depth == 0) {
            out.push_back(type.substr(start, i - start));
            start = i + 1;
        }
    }
    out.push_back(type.substr(start, type.size() - 1 - start));
    return out;
}

// One value of `type`: a tensor, or a list holding tensors at any depth (a collective's list of
// lists: c10d::allgather_'s GenericList[GenericList[Tensor(float),Tensor(float)]]), each element
// by its own type. Before 2026-12-03 only one level was read: the tensors of nested lists were
// no access of their op, and their storages' lifetimes could end early.
void typed_value(std::string_view type, const json& value, std::vector<TensorUse>& out, std::string& bad,
                 DeviceTypes& devices, int depth) {
    if (type.rfind("Tensor", 0) == 0) {
        tensor_from(value, out, bad, devices);
        return;
    }
    if (type.rfind("GenericList", 0) != 0 || type.find("Tensor") == std::string_view::npos || !value.is_array() ||
        depth >= 16)
        return;
    const std::vector<std::string_view> types = element_types(type);
    for (size_t i = 0; i < value.size(); ++i) {
        if (types.size() == value.size()) typed_value(types[i], value[i], out, bad, devices, depth + 1);
        else tensor_from(value[i], out, bad, devices);   // types not one per element: a list of tensors
    }
}

// The tensors of one list of values (`field`: "inputs", "outputs.values", ...); a bad tensor's
// message ends with the value it is in ("(inputs[2])").
void values_from(const json& values, const json& types, const char* field, std::vector<TensorUse>& out,
                 std::string& bad, DeviceTypes& devices) {
    if (!values.is_array() || !types.is_array()) return;
    for (size_t i = 0; i < values.size() && i < types.size(); ++i) {
        if (!types[i].is_string()) continue;
        const bool was_good = bad.empty();
        typed_value(types[i].get_ref<const std::string&>(), values[i], out, bad, devices, 0);
        if (was_good && !bad.empty()) bad += " (" + std::string(field) + "[" + std::to_string(i) + "])";
    }
}

// One element of "nodes" (a small DOM) -> Node.
Node node_from(const std::string& in, const json& n, size_t row, DeviceTypes& devices) {
    if (!n.is_object() || !n.contains("id") || !n["id"].is_number())
        throw Error(where(in, "nodes[" + std::to_string(row) + "]: no numeric 'id'"));
    const json& id = n["id"];
    if (!id.is_number_integer() || (id.is_number_unsigned() && id.get<uint64_t>() > INT64_MAX))
        throw Error(where(in, "nodes[" + std::to_string(row) + "]: 'id' " + id.dump() + " is not an int64 integer"));
    Node x;
    x.id = id.get<int64_t>();
    std::string bad, field_bad;
    if (n.contains("name") && n["name"].is_string()) x.name = n["name"].get<std::string>();
    auto ins = n.find("inputs");
    auto outs = n.find("outputs");
    if (ins != n.end() && ins->is_object()) {   // Chakra style: {values, shapes, types}, attrs list
        values_from(ins->value("values", json()), ins->value("types", json()), "inputs.values", x.ins, bad, devices);
        if (outs != n.end() && outs->is_object())
            values_from(outs->value("values", json()), outs->value("types", json()), "outputs.values", x.outs, bad,
                        devices);
        if (n.contains("ctrl_deps")) x.parent = int_of(n["ctrl_deps"], "ctrl_deps", field_bad);
        if (n.contains("attrs") && n["attrs"].is_array())
            for (const auto& a : n["attrs"]) {
                if (!a.is_object() || !a.contains("name") || !a.contains("value")) continue;
                if (a["name"] == "rf_id") x.rf_id = int_of(a["value"], "attrs rf_id", field_bad);
                if (a["name"] == "tid") x.tid = int_of(a["value"], "attrs tid", field_bad);
                if (a["name"] == "seq_id") x.seq = int_of(a["value"], "attrs seq_id", field_bad);
            }
    } else {   // 1.0.x style: inputs / input_types lists
        if (ins != n.end()) values_from(*ins, n.value("input_types", json()), "inputs", x.ins, bad, devices);
        if (outs != n.end()) values_from(*outs, n.value("output_types", json()), "outputs", x.outs, bad, devices);
        if (n.contains("parent")) x.parent = int_of(n["parent"], "parent", field_bad);
        if (n.contains("rf_id")) x.rf_id = int_of(n["rf_id"], "rf_id", field_bad);
        if (n.contains("tid")) x.tid = int_of(n["tid"], "tid", field_bad);
        if (n.contains("seq_id")) x.seq = int_of(n["seq_id"], "seq_id", field_bad);
    }
    if (!field_bad.empty()) throw Error(where(in, "nodes[" + std::to_string(row) + "] (id " + std::to_string(x.id) + "): " + field_bad));
    if (!bad.empty()) throw Error(where(in, "nodes[" + std::to_string(row) + "]: tensor " + bad));
    return x;
}

// SAX over the streamed JSON: each element of the top-level "nodes" array is built as a small
// DOM, turned into a Node and dropped, so memory holds the Nodes kept, not the JSON (a DOM of
// the whole file took several bytes per input byte). Depth is bounded (kMaxNesting), and the
// gzip input limit counts the bytes of one node or top-level member.
class NodeReader {
public:
    NodeReader(const std::string& in, GzSource& src, GzStreamBuf& buf, std::vector<Node>& out)
        : in_(in), src_(src), buf_(buf), out_(out) {}

    bool null() { return scalar(json(nullptr)); }
    bool boolean(bool v) { return scalar(json(v)); }
    bool number_integer(json::number_integer_t v) { return scalar(json(v)); }
    bool number_unsigned(json::number_unsigned_t v) { return scalar(json(v)); }
    bool number_float(json::number_float_t v, const json::string_t&) { return scalar(json(v)); }
    bool string(json::string_t& v) { return scalar(json(std::move(v))); }
    bool binary(json::binary_t&) { return scalar(json()); }   // not produced by JSON text
    bool start_object(std::size_t) { return open(json::object()); }
    bool start_array(std::size_t) { return open(json::array()); }
    bool key(json::string_t& k) {
        if (depth_ == 1) {
            // The members this reader reads, written twice: JSON readers keep the first or the last
            // (Python's json: the last), so the file has no one meaning. Before 2026-12-05 a second
            // "nodes" array was read after the first, where Python's json sees only the second.
            if ((k == "nodes" || k == "pid") && !top_keys_.insert(k).second)
                throw Error(
                    where(in_, "the top-level key '" + k +
                                   "' appears twice: JSON readers take either one, so the file has no one meaning"));
            top_key_ = k;
            boundary();
        } else if (depth_ >= 3 && in_nodes_) {
            key_ = std::move(k);
        }
        return true;
    }
    bool end_object() { return close(); }
    bool end_array() { return close(); }
    bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception& e) {
        std::string m = e.what();
        auto p = m.find("] ");   // drop nlohmann's "[json.exception.parse_error.101] "
        error_ = "invalid JSON at byte " + std::to_string(pos) + ": " + (p == std::string::npos ? m : m.substr(p + 2));
        return false;
    }

    const std::string& error() const { return error_; }
    bool saw_nodes() const { return saw_nodes_; }
    int64_t pid() const { return pid_; }
    const DeviceTypes& devices() const { return devices_; }

private:
    void boundary() {
        if (depth_ <= 2) src_.mark(buf_.pos());
    }
    json* insert(json v) {
        json* parent = stack_.back();
        if (parent->is_object()) {
            // A key twice in one object of a node ("id" twice): its value is not one (nlohmann and
            // Python's json keep the last; other readers the first). Before 2026-12-05 the last, in silence.
            if (parent->contains(key_))
                throw Error(where(in_, "nodes[" + std::to_string(out_.size()) + "]: key '" + key_ +
                                           "' appears twice in one object: its value is not one"));
            json& slot = (*parent)[key_];
            slot = std::move(v);
            return &slot;
        }
        parent->push_back(std::move(v));
        return &parent->back();
    }
    bool open(json v) {
        if (++depth_ > kMaxNesting) throw Error(where(in_, nesting_message()));
        if (depth_ == 1) root_object_ = v.is_object();
        if (depth_ == 2 && root_object_ && top_key_ == "pid") pid_of(v);   // an array or object: refused
        if (depth_ == 2 && root_object_ && top_key_ == "nodes" && v.is_array()) {
            in_nodes_ = saw_nodes_ = true;
        } else if (depth_ == 3 && in_nodes_) {
            node_ = std::move(v);
            stack_.assign(1, &node_);
        } else if (depth_ > 3 && in_nodes_) {
            stack_.push_back(insert(std::move(v)));
        }
        return true;
    }
    bool close() {
        if (in_nodes_ && depth_ >= 3) stack_.pop_back();
        if (in_nodes_ && depth_ == 3) finish();
        if (depth_ == 2) in_nodes_ = false;
        --depth_;
        boundary();
        return true;
    }
    bool scalar(json v) {
        if (depth_ == 1 && root_object_ && top_key_ == "pid") pid_ = pid_of(v);
        if (in_nodes_ && depth_ == 2) {   // a node that is not an object
            node_ = std::move(v);
            finish();
        } else if (in_nodes_ && depth_ >= 3) {
            insert(std::move(v));
        }
        boundary();
        return true;
    }
    // The top-level "pid": PyTorch writes the recording process's id, an integer (-1 when the
    // observer had none). Anything else is bad input: before 2026-12-03 it was read as "no process"
    // (a float was truncated), in silence, and a Kineto trace of another run was joined by chance.
    int64_t pid_of(const json& value) const {
        if (value.is_number_integer() && !(value.is_number_unsigned() && value.get<uint64_t>() > INT64_MAX))
            return value.get<int64_t>();
        const std::string shown = value.is_array() ? "an array" : value.is_object() ? "an object" : value.dump();
        throw Error(where(in_, "'pid' " + (shown.size() > 40 ? shown.substr(0, 40) + "..." : shown) +
                                   " is not an integer (the recording process's id)"));
    }
    void finish() {
        out_.push_back(node_from(in_, node_, out_.size(), devices_));
        node_ = json();
    }

    const std::string& in_;
    GzSource& src_;
    GzStreamBuf& buf_;
    std::vector<Node>& out_;
    int depth_ = 0;
    int64_t pid_ = -1;   // the top-level "pid" (the recording process), -1 when absent
    bool root_object_ = false, in_nodes_ = false, saw_nodes_ = false;
    std::string top_key_, key_, error_;
    std::set<std::string> top_keys_;   // "nodes" and "pid" once read
    json node_;
    std::vector<json*> stack_;
    DeviceTypes devices_;
};

// The nodes in id order; `pid` is the recording process's (-1 when the trace does not say).
std::vector<Node> parse_nodes(const std::string& in, uint64_t max_input_size, int64_t& pid, DeviceTypes& devices) {
    std::vector<Node> nodes;
    GzSource src(in, max_input_size);
    GzStreamBuf buf(src);
    std::istream is(&buf);
    NodeReader reader(in, src, buf, nodes);
    if (!json::sax_parse(is, &reader)) throw Error(where(in, reader.error().empty() ? "invalid JSON" : reader.error()));
    if (!reader.saw_nodes()) throw Error(where(in, "not an execution trace: no top-level 'nodes' array"));
    pid = reader.pid();
    devices = reader.devices();
    std::sort(nodes.begin(), nodes.end(), [](const Node& a, const Node& b) { return a.id < b.id; });
    std::unordered_map<int64_t, size_t> at;
    for (size_t i = 0; i < nodes.size(); ++i) at[nodes[i].id] = i;
    for (auto& x : nodes) {
        if (x.parent == x.id) continue;
        auto p = at.find(x.parent);
        if (p != at.end()) nodes[p->second].has_children = true;
    }
    return nodes;
}

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

// Storages: one allocation per (storage id, device), alive over the hull of its uses.
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
        kd_.link_ops();
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
        for (size_t i = 0; i < nodes_.size(); ++i) {
            if (!is_unit(nodes_[i])) continue;
            int32_t op = node_op[i];
            if (op < 0) {
                ++unmatched_;
                continue;
            }
            const KOp& o = kd_.ops[op];
            int32_t step = step_of(i);
            if (step < 0) step = kineto_steps.at(o.ts);
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
        std::set<std::pair<int64_t, int32_t>> all;
        for (const Node& node : nodes_) {
            if (!is_unit(node)) continue;
            for (const auto* uses : {&node.ins, &node.outs})
                for (const auto& use : *uses)
                    if (counted(use.device)) all.insert({use.storage, use.device});
        }
        const auto kept = std::count_if(storages_.begin(), storages_.end(),
                                        [&](const auto& kv) { return counted(kv.first.second); });
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
            std::map<std::pair<int64_t, int32_t>, uint8_t> modes;
            for (const auto& t : n.ins) modes[{t.storage, t.device}] |= 1;
            // An output that is also an input is written only by in-place ops (name ends in '_');
            // otherwise it is a view of the input.
            bool inplace = !n.name.empty() && n.name.back() == '_';
            for (const auto& t : n.outs) {
                auto& m = modes[{t.storage, t.device}];
                if (!(m & 1) || inplace) m |= 2;
            }
            auto touch = [&](const TensorUse& t) {
                Storage& s = storages_[{t.storage, t.device}];
                s.bytes = std::max(s.bytes, t.bytes);
                s.device = t.device;
                s.t_first = std::min(s.t_first, units_[u].t_start);
                s.t_last = std::max(s.t_last, units_[u].t_end);
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
            a.label = w_.intern("storage " + std::to_string(key.first));
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
        for (const auto& [step, times] : span)
            w_.add(Marker{++id, w_.intern("ProfilerStep#" + std::to_string(step)), times.first, times.second,
                          MarkerKind::Step, step});
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
        meta["accesses.granularity"] = "storage (one allocation per storage id and device)";
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
            meta["et.threads_not_joined"] = std::to_string(join_.notes.size());
            meta["et.join"] = join_summary();
            if (!gpu_) meta["et.leaf_ops_without_kineto_timing"] = std::to_string(unmatched_);
            if (!kd_.memory.empty()) meta["et.kineto_memory_events_ignored"] = std::to_string(kd_.memory.size());
            meta["et.storages_left_out"] = std::to_string(std::max<int64_t>(0, left_out_));
        }
        meta["et.op_starts_clamped"] = std::to_string(clamped_);
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
    Rows& w_;
    Result& r_;
    KinetoData kd_;
    EtJoin join_;
    bool joined_ = false, gpu_ = false;
    int64_t base_ = 0, matched_ = 0, unmatched_ = 0, clamped_ = 0, left_out_ = 0;
    int64_t ops_to_join_ = 0, threads_to_join_ = 0;   // the execution trace's ops (no profiler ranges)
    std::vector<Unit> units_;
    std::map<std::pair<int64_t, int32_t>, Storage> storages_;
    std::vector<std::vector<std::pair<Storage*, AccessMode>>> unit_access_;
};

// A device type as shown in meta and messages: at most 40 bytes, control bytes as '?' (an error
// is one line whatever the file holds).
std::string shown(const std::string& type) {
    std::string out = type.size() > 40 ? type.substr(0, 40) + "..." : type;
    for (char& byte : out)
        if (static_cast<unsigned char>(byte) < 0x20 || byte == 0x7f) byte = '?';
    return out;
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

}  // namespace

void import_et(const std::string& in, const std::string& kineto, Rows& w, Result& r, uint64_t max_input_size) {
    int64_t pid = -1;
    DeviceTypes devices;
    std::vector<Node> nodes = parse_nodes(in, max_input_size, pid, devices);
    device_types_meta(in, devices, r);
    r.events = static_cast<int64_t>(nodes.size());
    EtImport(std::move(nodes), pid, w, r).run(in, kineto, max_input_size);
}

}  // namespace mhc::trace::import
