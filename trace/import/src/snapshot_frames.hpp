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
    UserPython,   // Python code of the user or of a library (transformers' modeling_llama.py)
    TorchPython,  // Python code of PyTorch itself or of the standard library
    Native,       // C/C++ that memory_viz's frame filter keeps (an ATen op)
    Plumbing,     // C/C++ it leaves out: the unwinder, the interpreter loop, the dispatcher
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
    return FrameClass::Native;
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
        : d_(d), w_(w), keys_(keys), file_class_(d.node_count()), name_plumbing_(d.node_count()) {}
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
        std::string s(name ? d_.as_str(*name) : std::string_view{});
        if (file) {
            s += " (";
            s += basename(d_.as_str(*file));
            if (key.line != INT64_MIN) {
                s += ':';
                s += std::to_string(key.line);
            }
            s += ')';
        }
        int64_t id = s.empty() ? kNoString : w_.intern(s);
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
        const bool omit =
            frame.name && name_plumbing_.get(*frame.name, [&] { return plumbing_name(d_.as_str(*frame.name)); });
        return omit ? FrameClass::Plumbing : FrameClass::Native;
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
    NodeCodes name_plumbing_;   // function name node -> omitted by memory_viz's filter
    std::unordered_map<Key, int64_t, KeyHash> cache_;
};

}  // namespace mhc::trace::import::snapshot
