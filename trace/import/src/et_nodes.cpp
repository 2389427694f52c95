// Reading an execution trace's nodes (et_nodes.hpp): a streamed SAX parse of the JSON, each
// element of "nodes" built as a small DOM and decoded (ids, name, tensors and their devices).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <climits>
#include <functional>
#include <memory>
#include <cstdlib>
#include <exception>
#include <istream>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "et_nodes.hpp"
#include "limits.hpp"
#include "mhc/common/error.hpp"
#include "source.hpp"

namespace mhc::trace::import {

namespace {

using json = nlohmann::json;

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

int64_t as_i64(const json& value) {
    if (value.is_number_integer() || value.is_number_unsigned()) return value.get<int64_t>();
    if (value.is_number_float()) {
        double number = value.get<double>();
        return number > -9e18 && number < 9e18 ? static_cast<int64_t>(number) : -1;
    }
    return -1;
}

// The members of a node that PyTorch's observer (schemas 1.0.1 to 1.1.1) and chakra_trace_link
// write, but "cat": the linker writes it last, never after a node's name.
bool is_node_member(std::string_view key) {
    static constexpr std::array<std::string_view, 24> kMembers = {
        "id",          "name",          "ctrl_deps",    "inputs",        "outputs",      "attrs",
        "rf_id",       "parent",        "fw_parent",    "seq_id",        "scope",        "tid",
        "fw_tid",      "op_schema",     "input_shapes", "input_types",   "output_shapes", "output_types",
        "ts",          "dur",           "inclusive_dur", "exclusive_dur", "inter_thread_dep", "stream"};
    return std::find(kMembers.begin(), kMembers.end(), key) != kMembers.end();
}

// The shape and strides written beside a tensor value (schema 1.1.1 on: PyTorch 2.5's observer
// writes "strides" beside "shapes", one of each per value, nested as the values are); null where
// the trace writes none.
struct Layout {
    const json* shape = nullptr;
    const json* strides = nullptr;
    Layout at(size_t index) const {   // the layout of element `index` of a list value
        Layout element;
        if (shape != nullptr && shape->is_array() && index < shape->size()) element.shape = &(*shape)[index];
        if (strides != nullptr && strides->is_array() && index < strides->size())
            element.strides = &(*strides)[index];
        return element;
    }
};

// How many elements from its offset on a tensor of `numel` elements spans in its storage: 1 +
// sum((size - 1) * stride) from its shape and strides where both are written, else numel. A view
// made by broadcasting (expand, stride 0) has more elements than its storage holds, and a strided
// slice (x[:, ::2]) fewer than it spans: before 2026-12-06 the storage's bytes were (offset +
// numel) * itemsize, so ResNet's expanded gradients (a [32, 2048, 7, 7] view of a [32, 2048]
// storage) counted 49 times their bytes. A shape and strides that do not describe the tensor
// (lengths differ, not integers, sizes whose product is not numel) are bad input (`bad`).
int64_t span_of(const Layout& layout, int64_t numel, std::string& bad) {
    if (layout.shape == nullptr || layout.strides == nullptr) return numel;
    const json &shape = *layout.shape, &strides = *layout.strides;
    auto describe = [&] {
        std::string text = "shape " + shape.dump() + " and strides " + strides.dump();
        return text.size() > 80 ? text.substr(0, 80) + "..." : text;
    };
    if (!shape.is_array() || !strides.is_array() || shape.size() != strides.size() || shape.size() > 64) {
        if (bad.empty()) bad = describe() + " are not one stride per dimension";
        return numel;
    }
    constexpr int64_t kMax = INT64_C(1) << 40;   // the bound on numel and offset
    int64_t span = 1, product = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
        const int64_t size = shape[d].is_number_integer() ? as_i64(shape[d]) : -1;
        const int64_t stride = strides[d].is_number_integer() ? as_i64(strides[d]) : -1;
        if (size < 0 || size > kMax || stride < 0 || stride > kMax) {
            if (bad.empty()) bad = describe() + " are not sizes and strides in [0, 2^40]";
            return numel;
        }
        product = std::min(product * size, kMax + 1);   // both <= 2^40 + 1: no overflow
        if (size > 1 && stride > 0) {
            if (stride > (kMax - span) / (size - 1)) {
                if (bad.empty()) bad = describe() + " span more than 2^40 elements";
                return numel;
            }
            span += (size - 1) * stride;
        }
    }
    if (product != numel) {
        if (bad.empty()) bad = describe() + " do not hold numel " + std::to_string(numel) + " elements";
        return numel;
    }
    return span;
}

// [tensor_id, storage_id, offset, numel, itemsize, device] (schema 1.0.1 on: PyTorch's
// execution_graph_observer.cpp, later execution_trace_observer.cpp). Zero storage, numel or itemsize is an undefined
// tensor (skipped); a field that is not an integer, is negative, or is past 2^40 elements/offset or 64-byte items is
// bad input (`bad` names it). So is a tensor of another length: schema 1.0.0 (PyTorch's
// execution_graph_observer.cpp) wrote [tensor_id, storage_id, offset, numel, itemsize], without
// the device, and before 2026-12-03 such a tensor was the host's, in silence.
void tensor_from(const json& value, const Layout& layout, std::vector<TensorUse>& out, std::string& bad,
                 DeviceTypes& types) {
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
    int64_t parsed[5] = {};
    for (int k = 1; k < 5; ++k) {
        parsed[k] = value[k].is_number_integer() ? as_i64(value[k]) : -1;
        if (parsed[k] < 0 || parsed[k] > max[k]) {
            if (bad.empty()) bad = std::string(names[k]) + " " + value[k].dump() + " is out of range";
            return;
        }
    }
    int64_t storage = parsed[1], offset = parsed[2], numel = parsed[3], item = parsed[4];
    if (storage == 0 || numel == 0 || item == 0) return;
    const int32_t device = device_of(value[5], types, bad);
    if (device == kNoMemory) return;
    const int64_t span = span_of(layout, numel, bad);
    const bool spanned = layout.shape != nullptr && layout.strides != nullptr;
    out.push_back({storage, device, (offset + span) * item, as_i64(value[0]), spanned});   // < 2^47
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
void typed_value(std::string_view type, const json& value, const Layout& layout, std::vector<TensorUse>& out,
                 std::string& bad, DeviceTypes& devices, int depth) {
    if (type.rfind("Tensor", 0) == 0) {
        tensor_from(value, layout, out, bad, devices);
        return;
    }
    if (type.rfind("GenericList", 0) != 0 || type.find("Tensor") == std::string_view::npos || !value.is_array() ||
        depth >= 16)
        return;
    const std::vector<std::string_view> types = element_types(type);
    for (size_t i = 0; i < value.size(); ++i) {
        if (types.size() == value.size()) typed_value(types[i], value[i], layout.at(i), out, bad, devices, depth + 1);
        else tensor_from(value[i], layout.at(i), out, bad, devices);   // types not one per element: a list of tensors
    }
}

// The tensors of one list of values (`field`: "inputs", "outputs.values", ...); a bad tensor's
// message ends with the value it is in ("(inputs[2])").
void values_from(const json& values, const json& types, const Layout& layouts, const char* field,
                 std::vector<TensorUse>& out, std::string& bad, DeviceTypes& devices) {
    if (!values.is_array() || !types.is_array()) return;
    for (size_t i = 0; i < values.size() && i < types.size(); ++i) {
        if (!types[i].is_string()) continue;
        const bool was_good = bad.empty();
        typed_value(types[i].get_ref<const std::string&>(), values[i], layouts.at(i), out, bad, devices, 0);
        if (was_good && !bad.empty()) bad += " (" + std::string(field) + "[" + std::to_string(i) + "])";
    }
}

// The shapes and strides of an inputs/outputs object, where it writes both.
Layout layouts_of(const json& side) {
    auto shapes = side.find("shapes");
    auto strides = side.find("strides");
    if (shapes == side.end() || strides == side.end()) return {};
    return {&*shapes, &*strides};
}

// One element of "nodes" (a small DOM) -> Node.
Node node_from(const std::string& in, const json& n, size_t row, DeviceTypes& devices) {
    if (!n.is_object() || !n.contains("id") || !n["id"].is_number())
        throw Error(where(in, "nodes[" + std::to_string(row) + "]: no numeric 'id'"));
    const json& id = n["id"];
    if (!id.is_number_integer() || (id.is_number_unsigned() && id.get<uint64_t>() > INT64_MAX))
        throw Error(where(in, "nodes[" + std::to_string(row) + "]: 'id' " + id.dump() + " is not an int64 integer"));
    Node node;
    node.id = id.get<int64_t>();
    std::string bad, field_bad;
    if (n.contains("name") && n["name"].is_string()) node.name = n["name"].get<std::string>();
    auto ins = n.find("inputs");
    auto outs = n.find("outputs");
    if (ins != n.end() && ins->is_object()) {   // Chakra style: {values, shapes, types[, strides]}, attrs list
        values_from(ins->value("values", json()), ins->value("types", json()), layouts_of(*ins), "inputs.values",
                    node.ins, bad, devices);
        if (outs != n.end() && outs->is_object())
            values_from(outs->value("values", json()), outs->value("types", json()), layouts_of(*outs),
                        "outputs.values", node.outs, bad, devices);
        if (n.contains("ctrl_deps")) node.parent = int_of(n["ctrl_deps"], "ctrl_deps", field_bad);
        if (n.contains("attrs") && n["attrs"].is_array())
            for (const auto& attr : n["attrs"]) {
                if (!attr.is_object() || !attr.contains("name") || !attr.contains("value")) continue;
                if (attr["name"] == "rf_id") node.rf_id = int_of(attr["value"], "attrs rf_id", field_bad);
                if (attr["name"] == "tid") node.tid = int_of(attr["value"], "attrs tid", field_bad);
                if (attr["name"] == "seq_id") node.seq = int_of(attr["value"], "attrs seq_id", field_bad);
            }
    } else {   // 1.0.x style: inputs / input_types lists
        if (ins != n.end()) values_from(*ins, n.value("input_types", json()), Layout{}, "inputs", node.ins, bad, devices);
        if (outs != n.end())
            values_from(*outs, n.value("output_types", json()), Layout{}, "outputs", node.outs, bad, devices);
        if (n.contains("parent")) node.parent = int_of(n["parent"], "parent", field_bad);
        if (n.contains("rf_id")) node.rf_id = int_of(n["rf_id"], "rf_id", field_bad);
        if (n.contains("tid")) node.tid = int_of(n["tid"], "tid", field_bad);
        if (n.contains("seq_id")) node.seq = int_of(n["seq_id"], "seq_id", field_bad);
    }
    if (!field_bad.empty())
        throw Error(where(in, "nodes[" + std::to_string(row) + "] (id " + std::to_string(node.id) + "): " + field_bad));
    if (!bad.empty()) throw Error(where(in, "nodes[" + std::to_string(row) + "]: tensor " + bad));
    return node;
}

// SAX over the streamed JSON: each element of the top-level "nodes" array is built as a small
// DOM, turned into a Node and dropped, so memory holds the Nodes kept, not the JSON (a DOM of
// the whole file took several bytes per input byte). Depth is bounded (kMaxNesting), and the
// gzip input limit counts the bytes of one node or top-level member.
class NodeReader {
public:
    // `pos`: the input byte the parse has reached (the gzip input limit counts from marks there).
    NodeReader(const std::string& in, GzSource& src, std::function<uint64_t()> pos, std::vector<Node>& out)
        : in_(in), src_(src), pos_(std::move(pos)), out_(out) {}

    bool null() { return scalar(json(nullptr)); }
    bool boolean(bool value) { return scalar(json(value)); }
    bool number_integer(json::number_integer_t value) { return scalar(json(value)); }
    bool number_unsigned(json::number_unsigned_t value) { return scalar(json(value)); }
    bool number_float(json::number_float_t value, const json::string_t&) { return scalar(json(value)); }
    bool string(json::string_t& value) { return scalar(json(std::move(value))); }
    bool binary(json::binary_t&) { return scalar(json()); }   // not produced by JSON text
    bool start_object(std::size_t) { return open(json::object()); }
    bool start_array(std::size_t) { return open(json::array()); }
    bool key(json::string_t& name) {
        if (depth_ == 1) {
            // The members this reader reads, written twice: JSON readers keep the first or the last
            // (Python's json: the last), so the file has no one meaning. Before 2026-12-05 a second
            // "nodes" array was read after the first, where Python's json sees only the second.
            if ((name == "nodes" || name == "pid") && !top_keys_.insert(name).second)
                throw Error(
                    where(in_, "the top-level key '" + name +
                                   "' appears twice: JSON readers take either one, so the file has no one meaning"));
            top_key_ = name;
            boundary();
        } else if (depth_ >= 3 && in_nodes_) {
            if (depth_ == 3) member_after(name);
            key_ = std::move(name);
        }
        return true;
    }
    bool end_object() { return close(); }
    bool end_array() { return close(); }
    bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception& failure) {
        std::string message = failure.what();
        auto cut = message.find("] ");   // drop nlohmann's "[json.exception.parse_error.101] "
        error_ = "invalid JSON at byte " + std::to_string(pos) + ": " +
                 (cut == std::string::npos ? message : message.substr(cut + 2));
        return false;
    }

    const std::string& error() const { return error_; }
    bool saw_nodes() const { return saw_nodes_; }
    int64_t pid() const { return pid_; }
    const DeviceTypes& devices() const { return devices_; }
    const LinkedNodes& linked() const { return linked_; }
    const StrayMember& stray() const { return stray_; }

private:
    // A node's member after its name that no writer of execution traces writes: the name's own
    // text after a quote the observer wrote raw (`record_function('x", "key": "y')`), where the
    // JSON stays valid.
    void member_after(const std::string& key) {
        if (last_key_ == "name" && !is_node_member(key) && stray_.count++ == 0) {
            stray_.key = key;
            stray_.row = out_.size() + static_cast<size_t>(linked_.count);
        }
        last_key_ = key;
    }
    void boundary() {
        if (depth_ <= 2) src_.mark(pos_());
    }
    json* insert(json value) {
        json* parent = stack_.back();
        if (parent->is_object()) {
            // A key twice in one object of a node ("id" twice): its value is not one (nlohmann and
            // Python's json keep the last; other readers the first). Before 2026-12-05 the last, in silence.
            if (parent->contains(key_))
                throw Error(where(in_, "nodes[" + std::to_string(out_.size()) + "]: key '" + key_ +
                                           "' appears twice in one object: its value is not one"));
            json& slot = (*parent)[key_];
            slot = std::move(value);
            return &slot;
        }
        parent->push_back(std::move(value));
        return &parent->back();
    }
    bool open(json value) {
        if (++depth_ > kMaxNesting) throw Error(where(in_, nesting_message()));
        if (depth_ == 1) root_object_ = value.is_object();
        if (depth_ == 2 && root_object_ && top_key_ == "pid") pid_of(value);   // an array or object: refused
        if (depth_ == 2 && root_object_ && top_key_ == "nodes" && value.is_array()) {
            in_nodes_ = saw_nodes_ = true;
        } else if (depth_ == 3 && in_nodes_) {
            last_key_.clear();
            node_ = std::move(value);
            stack_.assign(1, &node_);
        } else if (depth_ > 3 && in_nodes_) {
            stack_.push_back(insert(std::move(value)));
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
    bool scalar(json value) {
        if (depth_ == 1 && root_object_ && top_key_ == "pid") pid_ = pid_of(value);
        if (in_nodes_ && depth_ == 2) {   // a node that is not an object
            node_ = std::move(value);
            finish();
        } else if (in_nodes_ && depth_ >= 3) {
            insert(std::move(value));
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
        // A Kineto activity chakra_trace_link copied in (its trace_linker.py, process_dependent_gpu_ops):
        // "cat" is a Kineto event's key, which PyTorch's observer never writes on a node. Read as an op
        // it doubled its parent's accesses (simple_add: 20 kernels, 30 accesses for 16 and 22).
        if (node_.is_object() && node_.contains("cat") && node_.contains("id")) {
            if (linked_.count++ == 0 && node_.contains("name") && node_["name"].is_string())
                linked_.first = node_["name"].get<std::string>();
            node_ = json();
            return;
        }
        out_.push_back(node_from(in_, node_, out_.size() + static_cast<size_t>(linked_.count), devices_));
        node_ = json();
    }

    const std::string& in_;
    GzSource& src_;
    std::function<uint64_t()> pos_;
    std::vector<Node>& out_;
    int depth_ = 0;
    int64_t pid_ = -1;   // the top-level "pid" (the recording process), -1 when absent
    bool root_object_ = false, in_nodes_ = false, saw_nodes_ = false;
    std::string top_key_, key_, error_, last_key_;   // last_key_: the node's member read last
    StrayMember stray_;
    std::set<std::string> top_keys_;   // "nodes" and "pid" once read
    json node_;
    std::vector<json*> stack_;
    DeviceTypes devices_;
    LinkedNodes linked_;
};

// The bytes RepairingStream gives (kineto_repair.hpp), for the istream nlohmann's parse reads: the
// input with what the writer left unescaped in strings escaped. Its NUL is the input's end.
class RepairingBuf : public std::streambuf {
public:
    explicit RepairingBuf(RepairingStream& stream) : stream_(stream) {}
    uint64_t pos() const { return stream_.Tell(); }

protected:
    int_type underflow() override {
        size_t count = 0;
        while (count < sizeof buf_) {
            const char ch = stream_.Take();
            if (ch == '\0') break;
            buf_[count++] = ch;
        }
        if (count == 0) return traits_type::eof();
        setg(buf_, buf_, buf_ + count);
        return traits_type::to_int_type(buf_[0]);
    }

private:
    RepairingStream& stream_;
    char buf_[4096];
};

// A name holding a backspace, form feed, newline, carriage return or tab: in a valid file, the
// observer's raw `\b` `\f` `\n` `\r` `\t` of a Windows path (kineto_repair.hpp), read again.
bool names_hold_letter_controls(const std::vector<Node>& nodes) {
    return std::any_of(nodes.begin(), nodes.end(),
                       [](const Node& node) { return node.name.find_first_of("\b\f\n\r\t") != std::string::npos; });
}

struct Parsed {
    std::vector<Node> nodes;
    int64_t pid = -1;
    DeviceTypes devices;
    LinkedNodes linked;
    StrayMember stray;
    std::string error;   // of the JSON; empty when it parsed
};

// `raw`: read through RepairingStream, counting what it mends there; `node_names`: its reading of a
// node's name to the quote before "id" or "ctrl_deps".
Parsed parse_once(const std::string& in, uint64_t max_input_size, EmptyValues* empty, RawStrings* raw,
                  bool node_names) {
    Parsed out;
    GzSource src(in, max_input_size);
    GzStreamBuf plain(src);
    std::unique_ptr<RepairingStream> stream;
    std::unique_ptr<RepairingBuf> mended;
    std::function<uint64_t()> pos = [&plain] { return plain.pos(); };
    if (raw != nullptr) {
        stream = std::make_unique<RepairingStream>(&src, *empty, *raw, node_names);
        mended = std::make_unique<RepairingBuf>(*stream);
        pos = [&mended] { return mended->pos(); };
    }
    std::istream is(raw != nullptr ? static_cast<std::streambuf*>(mended.get()) : &plain);
    NodeReader reader(in, src, pos, out.nodes);
    if (!json::sax_parse(is, &reader)) {
        out.error = reader.error().empty() ? "invalid JSON" : reader.error();
        return out;
    }
    if (!reader.saw_nodes()) throw Error(where(in, "not an execution trace: no top-level 'nodes' array"));
    out.pid = reader.pid();
    out.devices = reader.devices();
    out.linked = reader.linked();
    out.stray = reader.stray();
    return out;
}

// The first reading through RepairingStream (kineto_repair.hpp) that parses, mends nothing but
// strings and leaves no member after a name the observer never writes there, into `parsed`:
// without, then with its reading of node names; false where none stands. A reading that finds bad
// input (a node it read apart) fails, its error kept in `thrown` unless one is there already.
bool read_mended(const std::string& in, uint64_t max_input_size, Parsed& parsed, RawStrings& raw,
                 std::exception_ptr& thrown) {
    for (bool node_names : {false, true}) {
        EmptyValues empty;
        RawStrings found;
        Parsed mended;
        try {
            mended = parse_once(in, max_input_size, &empty, &found, node_names);
        } catch (const Error&) {
            if (!thrown) thrown = std::current_exception();
            continue;
        }
        if (mended.error.empty() && empty.count == 0 && mended.stray.count == 0) {
            parsed = std::move(mended);
            raw = found;
            return true;
        }
    }
    return false;
}

}  // namespace

// The nodes in id order; `pid` is the recording process's (-1 when the trace does not say). A file
// that does not parse, whose names hold a control character JSON writes by a letter, or whose node
// holds another member after its name than the observer writes there, is read once more through
// RepairingStream, and where that reading fails or leaves such a member, once more with each node's
// name read to the quote before its "id" or "ctrl_deps" (a name holding `", "key": `). The first of
// those readings that parses, mends nothing but strings and leaves no such member stands (a raw
// name can also make the plain parse find a member twice); else the plain parse's error (or the
// first mended reading's bad input where the plain parse found invalid JSON), or its nodes and
// `stray`: the members after a name it kept (valid JSON).
std::vector<Node> parse_nodes(const std::string& in, uint64_t max_input_size, int64_t& pid, DeviceTypes& devices,
                              LinkedNodes& linked, RawStrings& raw, StrayMember& stray) {
    Parsed parsed;
    std::exception_ptr thrown;   // bad input the plain parse found, else the first mended reading's
    try {
        parsed = parse_once(in, max_input_size, nullptr, nullptr, false);
    } catch (const Error&) {
        thrown = std::current_exception();
    }
    const bool failed = thrown || !parsed.error.empty();
    if ((failed || names_hold_letter_controls(parsed.nodes) || parsed.stray.count > 0) &&
        !read_mended(in, max_input_size, parsed, raw, thrown) && failed && thrown)
        std::rethrow_exception(thrown);
    if (!parsed.error.empty()) throw Error(where(in, parsed.error));
    stray = parsed.stray;
    std::vector<Node> nodes = std::move(parsed.nodes);
    pid = parsed.pid;
    devices = parsed.devices;
    linked = parsed.linked;
    std::sort(nodes.begin(), nodes.end(), [](const Node& lhs, const Node& rhs) { return lhs.id < rhs.id; });
    std::unordered_map<int64_t, size_t> at;
    for (size_t i = 0; i < nodes.size(); ++i) at[nodes[i].id] = i;
    for (auto& node : nodes) {
        if (node.parent == node.id) continue;
        auto parent_at = at.find(node.parent);
        if (parent_at != at.end()) nodes[parent_at->second].has_children = true;
    }
    return nodes;
}

int64_t number_allocations(std::vector<Node>& nodes) {
    // Only leaf ATen ops begin an allocation: they are the ones that allocate their outputs (a
    // view's, an in-place or out= op's output is among its inputs), where a range such as
    // record_param_comms writes the collective's output list, made before, as its outputs. And
    // only leaf ops end one's reuse (a parent's outputs are its children's).
    struct Allocation {
        int32_t generation = 0;
        size_t last_user = SIZE_MAX;   // the last leaf op that used this allocation
    };
    std::map<std::pair<int64_t, int32_t>, Allocation> current;
    int64_t begun = 0;
    for (size_t i = 0; i < nodes.size(); ++i) {
        Node& node = nodes[i];
        const bool leaf = !node.has_children && node.name.rfind("[pytorch|", 0) != 0;
        if (leaf && node.name.rfind("aten::", 0) == 0)
            for (const TensorUse& out : node.outs) {
                const bool an_input = std::any_of(node.ins.begin(), node.ins.end(), [&](const TensorUse& in) {
                    return in.storage == out.storage && in.device == out.device;
                });
                auto it = current.find({out.storage, out.device});
                if (an_input || it == current.end() || it->second.last_user == i || it->second.last_user == SIZE_MAX)
                    continue;
                ++it->second.generation;
                it->second.last_user = i;
                ++begun;
            }
        for (auto* uses : {&node.ins, &node.outs})
            for (TensorUse& use : *uses) {
                Allocation& allocation = current[{use.storage, use.device}];
                use.generation = allocation.generation;
                if (leaf) allocation.last_user = i;
            }
    }
    return begun;
}

}  // namespace mhc::trace::import
