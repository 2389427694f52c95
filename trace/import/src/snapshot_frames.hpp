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
// a label is one frame, the first (innermost) of, in this order of preference:
enum FrameClass : uint8_t {
    kUserPython,   // Python code of the user or of a library (transformers' modeling_llama.py)
    kTorchPython,  // Python code of PyTorch itself or of the standard library
    kNative,       // C/C++ that memory_viz's frame filter keeps (an ATen op)
    kPlumbing,     // C/C++ it leaves out: the unwinder, the interpreter loop, the dispatcher
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
        return torch || stdlib ? kTorchPython : kUserPython;
    }
    if (has(file, "<frozen")) return kTorchPython;
    // memory_viz's frameFilter (torch/utils/viz/MemoryViz.js): file names it omits.
    for (std::string_view f : {"core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c",
                               "Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c",
                               "cpython/abstract.h"})
        if (has(file, f)) return kPlumbing;
    return kNative;
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
    template <class F>
    uint8_t get(Id v, F compute) {
        if (v >= n_) return compute();
        uint8_t& c = p_[v];
        if (!c) c = static_cast<uint8_t>(compute() + 1);
        return static_cast<uint8_t>(c - 1);
    }

private:
    uint8_t* p_;
    size_t n_;
};

enum KeyCode : uint8_t { kKeyOther, kKeyAction, kKeyAddr, kKeySize, kKeyStream, kKeyTimeUs, kKeyFrames, kKeyName,
                         kKeyFilename, kKeyLine };

inline KeyCode key_code(std::string_view k) {
    if (k == "action") return kKeyAction;
    if (k == "addr") return kKeyAddr;
    if (k == "size") return kKeySize;
    if (k == "stream") return kKeyStream;
    if (k == "time_us") return kKeyTimeUs;
    if (k == "frames") return kKeyFrames;
    if (k == "name") return kKeyName;
    if (k == "filename") return kKeyFilename;
    if (k == "line") return kKeyLine;
    return kKeyOther;
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
        std::optional<Id> pick;
        int best = kPlumbing;
        for (Id f : fs) {
            int c = class_of(f);
            if (c < best) {
                best = c;
                pick = f;
                if (c == kUserPython) break;
            }
        }
        if (!pick && !fs.empty()) pick = fs.front();
        if (!pick) return kNoString;
        auto name = field(*pick, kKeyName);
        auto file = field(*pick, kKeyFilename);
        auto line = field(*pick, kKeyLine);
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
    // The value of the first `key` in dict `v` (as PickleDoc::get), by key code.
    std::optional<Id> field(Id v, KeyCode key) {
        if (d_.kind(v) != PickleDoc::Kind::Dict) return std::nullopt;
        auto kv = d_.items(v);
        for (size_t k = 0; k + 1 < kv.size(); k += 2)
            if (keys_.get(kv[k], [&] { return key_code(d_.as_str(kv[k])); }) == key &&
                d_.kind(kv[k]) == PickleDoc::Kind::Str)
                return kv[k + 1];
        return std::nullopt;
    }
    int class_of(Id frame) {
        auto file = field(frame, kKeyFilename);
        if (!file) return kPlumbing;
        int c = file_class_.get(*file, [&] { return static_cast<uint8_t>(file_class(d_.as_str(*file))); });
        if (c != kNative) return c;
        auto name = field(frame, kKeyName);
        bool omit = name && name_plumbing_.get(*name, [&] { return static_cast<uint8_t>(plumbing_name(d_.as_str(*name))); });
        return omit ? kPlumbing : kNative;
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
