#pragma once
// A small, safe reader for Python pickles (protocols 2-5) that holds only plain data:
// dict, list, tuple, set, str, bytes, int, float, bool and None. Opcodes that would import
// or call code (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, ...) are refused
// with an error naming the opcode and its byte offset. Containers and MARKs nested deeper
// than kMaxNesting (limits.hpp) are refused too. Strings point into the input buffer,
// which must outlive the document.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mhc::trace::import {

class PickleDoc {
public:
    enum class Kind : uint8_t { None, Bool, Int, BigInt, Float, Str, Bytes, List, Tuple, Dict };
    using Id = uint32_t;   // node index

    // Parses `data`; `name` is used in error messages ("<name>: pickle: ...").
    PickleDoc(std::string_view data, const std::string& name);
    // Parses the first pickle of a sequence (torch.save's legacy format writes several one after
    // the other); `end` receives the offset of the byte after its STOP.
    PickleDoc(std::string_view data, const std::string& name, size_t& end);

    Id root() const { return root_; }
    Kind kind(Id v) const { return is_inline(v) ? Kind::Int : nodes_[v].kind; }
    bool is_int(Id v) const { return is_inline(v) || nodes_[v].kind == Kind::Int || nodes_[v].kind == Kind::Bool; }
    int64_t as_int(Id v) const { return is_inline(v) ? inline_value(v) : nodes_[v].i; }
    double as_float(Id v) const {
        if (is_inline(v)) return static_cast<double>(inline_value(v));
        return nodes_[v].kind == Kind::Float ? nodes_[v].f : static_cast<double>(nodes_[v].i);
    }
    bool is_number(Id v) const { return is_int(v) || nodes_[v].kind == Kind::Float; }
    std::string_view as_str(Id v) const;   // empty unless Str or Bytes
    // Items of a list/tuple/set; for a dict, keys and values alternate.
    struct Items {
        const Id* b = nullptr;
        const Id* e = nullptr;
        const Id* begin() const { return b; }
        const Id* end() const { return e; }
        size_t size() const { return static_cast<size_t>(e - b); }
        bool empty() const { return b == e; }
        Id operator[](size_t i) const { return b[i]; }
        Id front() const { return *b; }
    };
    Items items(Id v) const;
    size_t size(Id v) const;   // list/tuple length, dict entry count
    // Dict lookup by string key (dicts here are small: a linear scan).
    std::optional<Id> get(Id dict, std::string_view key) const;
    size_t node_count() const { return nodes_.size(); }

private:
    // Ints in [-2^30, 2^30) (sizes, streams, line numbers: most ints of a snapshot) live in
    // the id itself, top bit set: no node. Node ids stay below 2^31.
    static constexpr Id kInline = 0x80000000u;
    // No object: the largest node id, which no node is given (an inline int can be any id with
    // the top bit set, -1 is 0xFFFFFFFF, so the mark of an empty memo slot must be below it).
    static constexpr Id kNoObject = kInline - 1;
    static constexpr int64_t kInlineMin = -(int64_t(1) << 30), kInlineMax = (int64_t(1) << 30) - 1;
    static bool is_inline(Id v) { return (v & kInline) != 0; }
    static int64_t inline_value(Id v) { return static_cast<int32_t>(v << 1) >> 1; }
    static Id make_inline(int64_t x) { return (static_cast<Id>(x) & ~kInline) | kInline; }

    // 16 bytes. Containers keep their items in one arena: `i` is the offset, `len` the
    // size; capacity is the size (cap_log2 = 0) until a batch that cannot grow in place
    // moves the items to the end with 2^cap_log2 slots (amortised O(1) per item).
    struct Node {
        Kind kind = Kind::None;
        uint8_t cap_log2 = 0;
        uint16_t depth = 0;      // containers: nesting depth (1 + the deepest item's), bounded
        uint32_t len = 0;        // string length, container size
        union {
            int64_t i = 0;       // int value, string offset into data_, arena offset
            double f;
        };
    };
    class Parser;   // the stack machine that builds the nodes (pickle.cpp)
    Id push(Node n);
    uint16_t depth(Id v) const { return is_inline(v) ? 0 : nodes_[v].depth; }
    void append(Id container, const Id* first, size_t n);
    std::string name_;
    std::string_view data_;
    std::vector<Node> nodes_;
    std::vector<Id> arena_;
    Id root_ = 0;
};

}  // namespace mhc::trace::import
