#pragma once
// Reading a PyTorch memory snapshot's dicts fast (keys classified once per memoized string) and
// choosing the stack frame that labels an allocation (docs/import.md, "Labels").
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "mhc/trace/import/pickle.hpp"
#include "mhc/trace/import/rows.hpp"

namespace mhc::trace::import::snapshot {

using Id = PickleDoc::Id;

// Which frame labels an allocation (docs/import.md): memory_viz shows a block's whole stack;
// a label is one frame, the first (innermost) of, in this order of preference (declaration
// order: a class that compares lower is preferred):
enum class FrameClass : uint8_t {
    UserPython,     // Python code of the user or of a library (transformers' modeling_llama.py)
    TorchPython,    // Python code of PyTorch itself or of the standard library
    AutogradNode,   // a backward node's apply (BmmBackward0, AccumulateGrad): the autograd engine's
                    // threads run no Python, so this names what the backward pass computed
    Native,         // C/C++ that memory_viz's frame filter keeps (an ATen op's implementation)
    Allocator,      // C/C++ that makes the tensor's memory for any op: the caching allocator, the
                    // empty-tensor factories, TensorIterator's outputs, the dispatcher's calls, the
                    // autograd engine's loop. memory_viz keeps them; as a label they say nothing
                    // about the code (every backward allocation read DeviceCachingAllocator::malloc)
    Plumbing,       // C/C++ it leaves out: the unwinder, the interpreter loop, the dispatcher
};

inline bool has(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// By file name: Python files end in .py (or are <stdin>, <string>, an IPython cell).
inline FrameClass file_class(std::string_view file) {
    const bool python = (file.size() >= 3 && file.substr(file.size() - 3) == ".py") ||
                        (!file.empty() && file.front() == '<' && !has(file, "<frozen"));
    if (python) {
        const bool torch = has(file, "/torch/") || has(file, "\\torch\\");
        const bool package = has(file, "site-packages") || has(file, "dist-packages");
        const bool stdlib = !package && (has(file, "/lib/python") || has(file, "\\Lib\\"));
        return torch || stdlib ? FrameClass::TorchPython : FrameClass::UserPython;
    }
    if (has(file, "<frozen")) return FrameClass::TorchPython;
    // memory_viz's frameFilter (torch/utils/viz/MemoryViz.js): file names it omits.
    for (std::string_view f : {"core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c",
                               "Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c",
                               "cpython/abstract.h"})
        if (has(file, f)) return FrameClass::Plumbing;
    // The same generated dispatcher files named without their folder ("RegisterCUDA_0.cpp", as
    // torch 2.x's symbolizer writes them), which "/Register" misses.
    const std::string_view base = file.substr(file.find_last_of("/\\") + 1);
    if (base.substr(0, 8) == "Register" || base.substr(0, 10) == "Redispatch") return FrameClass::Plumbing;
    return FrameClass::Native;
}

// A C++ frame's function without its parameters and return type: "at::_sum_to<c10::SymInt>" for
// "at::Tensor at::_sum_to<c10::SymInt>(at::Tensor, ...)", "torch::unwind::unwind" for
// "torch::unwind::unwind()". Brackets are counted so that template arguments and
// "(anonymous namespace)" stay whole; a name without a parameter list is kept as it is.
inline std::string_view native_function(std::string_view name) {
    int depth = 0;
    size_t start = 0;
    for (size_t i = 0; i < name.size(); ++i) {
        const char ch = name[i];
        if (ch == '<' || ch == '[') ++depth;
        else if ((ch == '>' || ch == ']') && depth > 0) --depth;
        else if (ch == ' ' && depth == 0) start = i + 1;   // after the return type
        else if (ch == '(' && depth == 0) {
            if (name.substr(i, 21) == "(anonymous namespace)") {
                i += 20;
                continue;
            }
            return name.substr(start, i - start);
        }
    }
    return name;
}

// The autograd node a frame is the apply of ("BmmBackward0" for
// "torch::autograd::generated::BmmBackward0::apply(std::vector<...>&&)", "AccumulateGrad"),
// empty for any other frame.
inline std::string_view autograd_node(std::string_view name) {
    const std::string_view function = native_function(name);
    constexpr std::string_view apply = "::apply";
    if (function.substr(0, 17) != "torch::autograd::" || function.size() <= apply.size() + 17 ||
        function.substr(function.size() - apply.size()) != apply)
        return {};
    const std::string_view node = function.substr(0, function.size() - apply.size());
    const std::string_view last = node.substr(node.rfind("::") + 2);
    return last == "Node" ? std::string_view{} : last;
}

// The allocator's and the dispatcher's own C++ frames (FrameClass::Allocator), by function: what
// every allocation's stack passes through on its way to cudaMalloc, whatever op asked.
inline bool allocator_function(std::string_view function) {
    const auto starts = [&](std::string_view prefix) { return function.substr(0, prefix.size()) == prefix; };
    const auto ends = [&](std::string_view suffix) {
        return function.size() >= suffix.size() && function.substr(function.size() - suffix.size()) == suffix;
    };
    if (has(function, "CachingAllocator") || has(function, "VariableType::") || has(function, "ADInplaceOrView"))
        return true;
    for (std::string_view prefix :
         {"c10::cuda::", "c10::hip::", "at::detail::", "at::empty", "at::native::empty",
          "at::TensorIteratorBase::", "at::meta::", "c10::impl::wrap_kernel_functor",
          "c10::Dispatcher::", "at::_ops::", "torch::autograd::Node::", "torch::autograd::Engine::",
          "torch::autograd::python::PythonEngine::", "std::", "pthread_", "__clone", "start_thread"})
        if (starts(prefix)) return true;
    return ends("::create_out") || ends("::set_output_raw_strided") || ends("::set_output_strided");
}

// memory_viz's frameFilter: function names it omits.
inline bool plumbing_name(std::string_view name) {
    for (std::string_view f : {"unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
                               "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_"})
        if (has(name, f)) return true;
    return false;
}

inline std::string_view basename(std::string_view f) {
    size_t p = f.find_last_of("/\\");
    return p == std::string_view::npos ? f : f.substr(p + 1);
}

// A byte per pickle node, computed once per distinct string object: CPython memoizes
// strings, so every "action" key, every "alloc" value and every file name is one node, and
// a lookup here replaces string compares per event. calloc'd: only the pages of the nodes
// looked up are ever touched. Inline ints (ids >= node count) are computed every time.
class NodeCodes {
public:
    explicit NodeCodes(size_t n) : p_(static_cast<uint8_t*>(std::calloc(n ? n : 1, 1))), n_(n) {
        if (!p_) throw std::bad_alloc();
    }
    ~NodeCodes() { std::free(p_); }
    NodeCodes(const NodeCodes&) = delete;
    NodeCodes& operator=(const NodeCodes&) = delete;
    // compute() gives a value of one byte (an enum of uint8_t, a bool), returned as its own type.
    template <class F>
    auto get(Id node, F compute) -> decltype(compute()) {
        using Value = decltype(compute());
        if (node >= n_) return compute();
        uint8_t& code = p_[node];
        if (!code) code = static_cast<uint8_t>(static_cast<uint8_t>(compute()) + 1);
        return static_cast<Value>(code - 1);
    }

private:
    uint8_t* p_;
    size_t n_;
};

// The keys of a snapshot's dicts that the importer reads.
// Known: a trace event's keys PyTorch writes that the import does not need (they allocate and
// free nothing: docs/import.md); Other: any key this reader does not know.
enum class KeyCode : uint8_t { Other, Action, Addr, Size, Stream, TimeUs, Frames, Name, Filename, Line, PoolId, Known };

inline KeyCode key_code(std::string_view k) {
    if (k == "action") return KeyCode::Action;
    if (k == "addr") return KeyCode::Addr;
    if (k == "size") return KeyCode::Size;
    if (k == "stream") return KeyCode::Stream;
    if (k == "time_us") return KeyCode::TimeUs;
    if (k == "frames") return KeyCode::Frames;
    if (k == "name") return KeyCode::Name;
    if (k == "filename") return KeyCode::Filename;
    if (k == "line") return KeyCode::Line;
    if (k == "pool_id") return KeyCode::PoolId;
    // torch 2.15's _snapshot() TraceEntry: compile_context, user_metadata (_set_memory_metadata),
    // internal_metadata (the allocator's own tag, "mallocWithAddress"), device_free (on oom),
    // forward_frames (the forward's stack of a backward allocation). pool_id is read (PoolId).
    for (std::string_view known :
         {"compile_context", "user_metadata", "internal_metadata", "device_free", "forward_frames"})
        if (k == known) return KeyCode::Known;
    return KeyCode::Other;
}

// Labels "forward (model.py:54)" from the first frame of the best FrameClass, else the first
// frame. CPython memoizes repeated strings, so (name node, file node, line) identifies a label
// and the string is built and interned once per distinct frame; classes are kept per node.
class Labels {
public:
    Labels(const PickleDoc& d, Rows& w, NodeCodes& keys)
        : d_(d), w_(w), keys_(keys), file_class_(d.node_count()), name_class_(d.node_count()) {}
    int64_t of(std::optional<Id> frames) {
        if (!frames || d_.kind(*frames) != PickleDoc::Kind::List) return kNoString;
        auto fs = d_.items(*frames);
        if (fs.empty()) return kNoString;
        const Fields first = fields(fs.front());
        Fields pick = first;   // the first frame unless a better one comes
        FrameClass best = FrameClass::Plumbing;
        for (size_t i = 0; i < fs.size(); ++i) {
            const Fields ff = i == 0 ? first : fields(fs[i]);
            FrameClass cls = class_of(ff);
            if (cls < best) {
                best = cls;
                pick = ff;
                if (cls == FrameClass::UserPython) break;
            }
        }
        auto name = pick.name, file = pick.file, line = pick.line;
        Key key{name ? *name : UINT32_MAX, file ? *file : UINT32_MAX,
                line && d_.is_int(*line) ? d_.as_int(*line) : INT64_MIN};
        auto it = cache_.find(key);
        if (it != cache_.end()) return it->second;
        const std::string label = best <= FrameClass::TorchPython ? python_label(pick, key.line)
                                                                  : native_label(pick, key.line);
        int64_t id = label.empty() ? kNoString : w_.intern(label);
        cache_.emplace(key, id);
        return id;
    }

private:
    // A frame's name, filename and line: the value of the first key of each (as PickleDoc::get),
    // found in one pass over the dict.
    struct Fields {
        std::optional<Id> name, file, line;
    };
    Fields fields(Id frame) {
        Fields found;
        if (d_.kind(frame) != PickleDoc::Kind::Dict) return found;
        auto kv = d_.items(frame);
        for (size_t k = 0; k + 1 < kv.size(); k += 2) {
            if (d_.kind(kv[k]) != PickleDoc::Kind::Str) continue;
            std::optional<Id>* slot = nullptr;
            switch (keys_.get(kv[k], [&] { return key_code(d_.as_str(kv[k])); })) {
                case KeyCode::Name: slot = &found.name; break;
                case KeyCode::Filename: slot = &found.file; break;
                case KeyCode::Line: slot = &found.line; break;
                default: break;
            }
            if (slot && !*slot) *slot = kv[k + 1];
        }
        return found;
    }
    FrameClass class_of(const Fields& frame) {
        if (!frame.file) return FrameClass::Plumbing;
        const Id file = *frame.file;
        FrameClass cls = file_class_.get(file, [&] { return file_class(d_.as_str(file)); });
        if (cls != FrameClass::Native) return cls;
        if (!frame.name) return FrameClass::Native;
        return name_class_.get(*frame.name, [&] {
            const std::string_view name = d_.as_str(*frame.name);
            if (plumbing_name(name)) return FrameClass::Plumbing;
            if (!autograd_node(name).empty()) return FrameClass::AutogradNode;
            return allocator_function(native_function(name)) ? FrameClass::Allocator : FrameClass::Native;
        });
    }
    // "forward (model.py:54)": the function, the file's name and the line.
    std::string python_label(const Fields& pick, int64_t line) const {
        std::string out(pick.name ? d_.as_str(*pick.name) : std::string_view{});
        if (pick.file) {
            out += " (";
            out += basename(d_.as_str(*pick.file));
            if (line != INT64_MIN) {
                out += ':';
                out += std::to_string(line);
            }
            out += ')';
        }
        return out;
    }
    // A C++ frame: "BmmBackward0 (backward)" for an autograd node's apply; else the function
    // without its parameters, with the file and line where the symbolizer knew them
    // ("torch::autograd::accumulate (input_buffer.cpp)", "at::_sum_to<c10::SymInt>"): it writes
    // "??" or "" for a file it does not know and 0 for a line.
    std::string native_label(const Fields& pick, int64_t line) const {
        const std::string_view name = pick.name ? d_.as_str(*pick.name) : std::string_view{};
        const std::string_view node = autograd_node(name);
        if (!node.empty()) return std::string(node) + " (backward)";
        std::string out(native_function(name));
        const std::string_view file = pick.file ? basename(d_.as_str(*pick.file)) : std::string_view{};
        if (!file.empty() && file != "??") {
            out += out.empty() ? "(" : " (";
            out += file;
            if (line > 0) {
                out += ':';
                out += std::to_string(line);
            }
            out += ')';
        }
        return out;
    }
    struct Key {
        Id name, file;
        int64_t line;
        bool operator==(const Key& o) const { return name == o.name && file == o.file && line == o.line; }
    };
    struct KeyHash {
        size_t operator()(const Key& k) const {
            return std::hash<uint64_t>{}(uint64_t(k.line) * 1000003u + (uint64_t(k.name) << 20) + k.file);
        }
    };
    const PickleDoc& d_;
    Rows& w_;
    NodeCodes& keys_;
    NodeCodes file_class_;      // file name node -> FrameClass
    NodeCodes name_class_;      // function name node -> its FrameClass (of a native file)
    std::unordered_map<Key, int64_t, KeyHash> cache_;
};

}  // namespace mhc::trace::import::snapshot
