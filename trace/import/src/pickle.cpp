// Safe pickle reader: a stack machine over the data-only opcodes (see pickle.hpp).
#include "mhc/trace/import/pickle.hpp"

#include <algorithm>
#include <cstring>

#include "limits.hpp"
#include "mhc/common/error.hpp"

namespace mhc::trace::import {

namespace {

const char* refused_name(uint8_t op) {
    switch (op) {
        case 'c': return "GLOBAL";
        case 0x93: return "STACK_GLOBAL";
        case 'R': return "REDUCE";
        case 'b': return "BUILD";
        case 'i': return "INST";
        case 'o': return "OBJ";
        case 0x81: return "NEWOBJ";
        case 0x92: return "NEWOBJ_EX";
        case 0x82: return "EXT1";
        case 0x83: return "EXT2";
        case 0x84: return "EXT4";
        case 'P': return "PERSID";
        case 'Q': return "BINPERSID";
        case 0x97: return "NEXT_BUFFER";
        case 0x98: return "READONLY_BUFFER";
        default: return nullptr;
    }
}

std::string hex(uint8_t op) {
    char b[8];
    std::snprintf(b, sizeof b, "0x%02x", op);
    return b;
}

}  // namespace

PickleDoc::Id PickleDoc::push(Node n) {
    // kNoObject (2^31 - 1) is never a node's id: the memo marks its empty slots with it.
    if (nodes_.size() >= kNoObject) throw Error(where(name_, "pickle: more than 2^31 - 1 objects"));
    nodes_.push_back(n);
    return static_cast<Id>(nodes_.size() - 1);
}

std::string_view PickleDoc::as_str(Id v) const {
    if (is_inline(v)) return {};
    const Node& n = nodes_[v];
    if (n.kind != Kind::Str && n.kind != Kind::Bytes) return {};
    return data_.substr(static_cast<size_t>(n.i), n.len);
}

PickleDoc::Items PickleDoc::items(Id v) const {
    if (is_inline(v)) return {};
    const Node& n = nodes_[v];
    if (n.kind != Kind::List && n.kind != Kind::Tuple && n.kind != Kind::Dict) return {};
    const Id* b = arena_.data() + n.i;
    return {b, b + n.len};
}

void PickleDoc::append(Id c, const Id* first, size_t n) {
    if (n == 0) return;
    // Depth is known when an item is added (pickles build containers bottom up); a nesting
    // past the bound is refused here, before anything walks the document.
    int deepest = nodes_[c].depth;
    for (size_t k = 0; k < n; ++k) deepest = std::max(deepest, depth(first[k]) + 1);
    if (deepest > kMaxNesting) throw Error(where(name_, "pickle: " + nesting_message()));
    Node& nd = nodes_[c];
    nd.depth = static_cast<uint16_t>(deepest);
    uint64_t off = static_cast<uint64_t>(nd.i), size = nd.len;
    if (size + n > UINT32_MAX) throw Error(where(name_, "pickle: a container with more than 2^32 items"));
    // Most containers get all their items in one APPENDS/SETITEMS: exactly n slots at the
    // end (a doubled capacity here doubled the arena, the largest array of a snapshot).
    if (size == 0 && nd.cap_log2 == 0) {
        nd.i = static_cast<int64_t>(arena_.size());
        arena_.insert(arena_.end(), first, first + n);
        nd.len = static_cast<uint32_t>(n);
        return;
    }
    if (off + size == arena_.size()) {   // at the end: grow in place, capacity = size
        arena_.insert(arena_.end(), first, first + n);
        nd.len += static_cast<uint32_t>(n);
        nd.cap_log2 = 0;
        return;
    }
    uint64_t cap = nd.cap_log2 ? uint64_t(1) << nd.cap_log2 : size;
    if (size + n <= cap) {
        std::copy(first, first + n, arena_.begin() + static_cast<long>(off + size));
        nd.len += static_cast<uint32_t>(n);
        return;
    }
    uint8_t lg = 2;
    while ((uint64_t(1) << lg) < 2 * (size + n)) ++lg;
    uint64_t to = arena_.size();
    arena_.resize(to + (uint64_t(1) << lg));
    std::copy(arena_.begin() + static_cast<long>(off), arena_.begin() + static_cast<long>(off + size),
              arena_.begin() + static_cast<long>(to));
    std::copy(first, first + n, arena_.begin() + static_cast<long>(to + size));
    nd.i = static_cast<int64_t>(to);
    nd.len += static_cast<uint32_t>(n);
    nd.cap_log2 = lg;
}

size_t PickleDoc::size(Id v) const {
    size_t s = items(v).size();
    return kind(v) == Kind::Dict ? s / 2 : s;
}

std::optional<PickleDoc::Id> PickleDoc::get(Id dict, std::string_view key) const {
    if (kind(dict) != Kind::Dict) return std::nullopt;
    auto it = items(dict);
    for (size_t k = 0; k + 1 < it.size(); k += 2)
        if (kind(it[k]) == Kind::Str && as_str(it[k]) == key) return it[k + 1];
    return std::nullopt;
}

// The pickle stack machine over the data-only opcodes, building the document's nodes. Each
// group of opcodes has its own step; one that is not in a group is refused by name.
class PickleDoc::Parser {
public:
    Parser(PickleDoc& doc, std::string_view data, const std::string& name)
        : doc_(doc), data_(data), name_(name), n_(data.size()) {
        memo_.reserve(data.size() / 16 + 16);
    }

    // Let other pickles follow this one's STOP; end() is then where they start.
    void allow_rest() { rest_allowed_ = true; }
    size_t end() const { return pos_; }

    // The root object, at the STOP opcode.
    Id run() {
        while (true) {
            if (pos_ >= n_) {
                op_pos_ = pos_;
                fail("truncated: no STOP opcode before the end of the file");
            }
            op_pos_ = pos_;
            op_ = static_cast<uint8_t>(data_[pos_++]);
            if (op_ == '.') {   // STOP
                if (stack_.empty()) fail("STOP with an empty stack");
                // Bytes after the end were dropped without a word (Python's pickle.load leaves them
                // unread): a damaged or appended file, refused as bytes after gzip data are.
                if (pos_ < n_ && !rest_allowed_)
                    fail("byte " + std::to_string(pos_) + " follows the pickle's end (STOP): " +
                         std::to_string(n_ - pos_) + " bytes that are no part of it (an appended or damaged file)");
                return stack_.back();
            }
            if (!step()) refuse();
        }
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        throw Error(where(name_, "pickle: " + what + " (opcode " + hex(op_) + " at byte " + std::to_string(op_pos_) + ")"));
    }
    [[noreturn]] void refuse() const {
        // torch.save's pickler writes each tensor's storage as a persistent id; the data is elsewhere.
        if (op_ == 'P' || op_ == 'Q')
            fail(std::string("refused opcode ") + refused_name(op_) +
                 ": a persistent id (torch.save's reference to a tensor's storage): the pickle holds "
                 "tensors, which a memory snapshot never does; only plain data is read");
        if (op_ == 'c') {
            const std::string global = global_name();
            fail("refused opcode GLOBAL " + global + ": it would import or call code; only plain data is read" +
                 (global.rfind("torch", 0) == 0
                      ? " (a tensor or other torch object: torch.save of one; a memory snapshot holds none)"
                      : ""));
        }
        if (const char* r = refused_name(op_))
            fail(std::string("refused opcode ") + r + ": it would import or call code; only plain data is read");
        fail("unknown or unsupported opcode");
    }
    // GLOBAL's operand, "module.name" (two lines after the opcode), for a refusal that names it.
    std::string global_name() const {
        const std::string_view rest = data_.substr(pos_, std::min<size_t>(n_ - pos_, 200));
        const size_t eol = rest.find('\n');
        if (eol == std::string_view::npos) return "(truncated)";
        const size_t eol2 = rest.find('\n', eol + 1);
        return std::string(rest.substr(0, eol)) + "." +
               std::string(rest.substr(eol + 1, eol2 == std::string_view::npos ? 0 : eol2 - eol - 1));
    }
    void need(size_t k) const {
        if (k > n_ - pos_) fail("truncated: the file ends inside an opcode");
    }
    uint64_t u8() {
        need(1);
        return static_cast<uint8_t>(data_[pos_++]);
    }
    uint64_t le(int bytes) {
        need(static_cast<size_t>(bytes));
        uint64_t v = 0;
        for (int k = 0; k < bytes; ++k) v |= uint64_t(static_cast<uint8_t>(data_[pos_ + k])) << (8 * k);
        pos_ += static_cast<size_t>(bytes);
        return v;
    }
    Id pop() {
        if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) fail("stack underflow");
        Id v = stack_.back();
        stack_.pop_back();
        return v;
    }
    Id top() const {
        if (stack_.empty()) fail("stack underflow");
        return stack_.back();
    }
    size_t pop_mark() {
        if (marks_.empty()) fail("no MARK on the stack");
        size_t m = marks_.back();
        marks_.pop_back();
        return m;
    }
    Id container(Kind k) {
        Node nd;
        nd.kind = k;
        nd.depth = 1;
        return doc_.push(nd);
    }
    void check_kind(Id c, Kind want) const {
        if (doc_.kind(c) != want) fail("the target is not a container of the right kind");
    }

    // One opcode other than STOP; false for one that is not read. A single switch: the
    // opcodes of a snapshot come in every order, and a chain of group switches cost a call
    // and a mispredicted jump per group tried.
    bool step() {
        switch (op_) {
            case 0x80: proto(); return true;                                      // PROTO
            case 0x95: frame(); return true;                                      // FRAME
            case '(': mark(); return true;                                        // MARK
            case '0': pop(); return true;                                         // POP
            case '1': stack_.resize(pop_mark()); return true;                     // POP_MARK
            case '2': stack_.push_back(top()); return true;                       // DUP
            case 'N': stack_.push_back(doc_.push(Node{})); return true;           // NONE
            case 0x88: case 0x89: bool_node(); return true;                       // NEWTRUE, NEWFALSE
            case 'J': int_node(static_cast<int32_t>(static_cast<uint32_t>(le(4)))); return true;   // BININT
            case 'K': int_node(static_cast<int64_t>(u8())); return true;          // BININT1
            case 'M': int_node(static_cast<int64_t>(le(2))); return true;         // BININT2
            case 0x8a: long_node(u8()); return true;                              // LONG1
            case 0x8b: long_node(le(4)); return true;                             // LONG4
            case 'G': float_node(); return true;                                  // BINFLOAT
            case 0x8c: string_node(Kind::Str, u8()); return true;                 // SHORT_BINUNICODE
            case 'X': string_node(Kind::Str, le(4)); return true;                 // BINUNICODE
            case 0x8d: string_node(Kind::Str, le(8)); return true;                // BINUNICODE8
            case 'U': string_node(Kind::Str, u8()); return true;                  // SHORT_BINSTRING
            case 'T': string_node(Kind::Str, le(4)); return true;                 // BINSTRING
            case 'C': string_node(Kind::Bytes, u8()); return true;                // SHORT_BINBYTES
            case 'B': string_node(Kind::Bytes, le(4)); return true;               // BINBYTES
            case 0x8e: case 0x96: string_node(Kind::Bytes, le(8)); return true;   // BINBYTES8, BYTEARRAY8
            case ']': case 0x8f: stack_.push_back(container(Kind::List)); return true;   // EMPTY_LIST, EMPTY_SET (a list)
            case '}': stack_.push_back(container(Kind::Dict)); return true;      // EMPTY_DICT
            case ')': stack_.push_back(container(Kind::Tuple)); return true;     // EMPTY_TUPLE
            case 'a': append(); return true;                                      // APPEND
            case 'e': case 0x90: appends(); return true;                          // APPENDS, ADDITEMS (sets)
            case 's': setitem(); return true;                                     // SETITEM
            case 'u': setitems(); return true;                                    // SETITEMS
            case 'l': case 't': case 'd': case 0x91: from_mark(); return true;    // LIST, TUPLE, DICT, FROZENSET
            case 0x85: case 0x86: case 0x87: small_tuple(); return true;          // TUPLE1..3
            case 'q': memo_put(u8()); return true;                                // BINPUT
            case 'r': memo_put(le(4)); return true;                               // LONG_BINPUT
            case 0x94: memo_put(memo_.size()); return true;                       // MEMOIZE
            case 'h': memo_get(u8()); return true;                                // BINGET
            case 'j': memo_get(le(4)); return true;                               // LONG_BINGET
            default: return false;
        }
    }

    void proto() {
        uint64_t protocol = u8();
        if (protocol > 5) fail("unsupported protocol " + std::to_string(protocol));
    }
    void frame() {   // the next opcodes; as CPython, a frame past the end is an error
        uint64_t len = le(8);
        if (len > n_ - pos_)
            fail("truncated: a FRAME of " + std::to_string(len) + " bytes runs past the end of the file (" +
                 std::to_string(n_ - pos_) + " bytes left)");
    }
    void mark() {
        if (marks_.size() >= static_cast<size_t>(kMaxNesting)) fail(nesting_message());
        marks_.push_back(stack_.size());
    }

    void int_node(int64_t v) {
        if (v >= kInlineMin && v <= kInlineMax) {
            stack_.push_back(make_inline(v));
            return;
        }
        Node nd;
        nd.kind = Kind::Int;
        nd.i = v;
        stack_.push_back(doc_.push(nd));
    }
    void long_node(uint64_t len) {
        if (len > n_ - pos_) fail("truncated: a long runs past the end of the file");
        Node nd;
        if (len <= 8) {
            uint64_t v = 0;
            for (size_t k = 0; k < len; ++k) v |= uint64_t(static_cast<uint8_t>(data_[pos_ + k])) << (8 * k);
            if (len > 0 && len < 8 && (static_cast<uint8_t>(data_[pos_ + len - 1]) & 0x80))
                v |= ~uint64_t(0) << (8 * len);   // sign-extend two's complement
            nd.kind = Kind::Int;
            nd.i = static_cast<int64_t>(v);
            if (nd.i >= kInlineMin && nd.i <= kInlineMax) {
                pos_ += static_cast<size_t>(len);
                stack_.push_back(make_inline(nd.i));
                return;
            }
        } else {
            nd.kind = Kind::BigInt;   // beyond int64: kept as an opaque number
        }
        pos_ += static_cast<size_t>(len);
        stack_.push_back(doc_.push(nd));
    }
    void float_node() {   // big-endian IEEE 754 double
        need(8);
        uint64_t bits = 0;
        for (int k = 0; k < 8; ++k) bits = (bits << 8) | static_cast<uint8_t>(data_[pos_ + k]);
        pos_ += 8;
        Node nd;
        nd.kind = Kind::Float;
        std::memcpy(&nd.f, &bits, sizeof bits);
        stack_.push_back(doc_.push(nd));
    }

    void bool_node() {
        Node nd;
        nd.kind = Kind::Bool;
        nd.i = op_ == 0x88;
        stack_.push_back(doc_.push(nd));
    }

    void string_node(Kind k, uint64_t len) {
        if (len > n_ - pos_) fail("truncated: a string runs past the end of the file");
        if (len > UINT32_MAX) fail("string too long");
        Node nd;
        nd.kind = k;
        nd.i = static_cast<int64_t>(pos_);
        nd.len = static_cast<uint32_t>(len);
        pos_ += static_cast<size_t>(len);
        stack_.push_back(doc_.push(nd));
    }

    // The items above the MARK `m` into container `c` (of kind `k`), replacing them on the stack.
    void collect(size_t m, Id c, bool push_container) {
        doc_.append(c, stack_.data() + m, stack_.size() - m);
        stack_.resize(m);
        if (push_container) stack_.push_back(c);
    }

    // Items added to the container below them, containers built from the MARK.
    void append() {
        Id item = pop();
        Id list = top();
        check_kind(list, Kind::List);
        doc_.append(list, &item, 1);
    }
    void appends() {
        size_t mark = pop_mark();
        if (mark == 0) fail("no list below the MARK");
        check_kind(stack_[mark - 1], Kind::List);
        collect(mark, stack_[mark - 1], false);
    }
    void setitem() {
        Id value = pop();
        Id key = pop();
        Id dict = top();
        check_kind(dict, Kind::Dict);
        Id kv[2] = {key, value};
        doc_.append(dict, kv, 2);
    }
    void setitems() {
        size_t mark = pop_mark();
        if (mark == 0) fail("no dict below the MARK");
        if ((stack_.size() - mark) % 2) fail("SETITEMS with an odd number of items");
        check_kind(stack_[mark - 1], Kind::Dict);
        collect(mark, stack_[mark - 1], false);
    }
    void from_mark() {
        size_t mark = pop_mark();
        Kind kind = op_ == 't' ? Kind::Tuple : op_ == 'd' ? Kind::Dict : Kind::List;
        if (kind == Kind::Dict && (stack_.size() - mark) % 2) fail("DICT with an odd number of items");
        collect(mark, container(kind), true);
    }
    void small_tuple() {
        size_t items = op_ - 0x84u;
        if (stack_.size() < items || (!marks_.empty() && stack_.size() - items < marks_.back())) fail("stack underflow");
        collect(stack_.size() - items, container(Kind::Tuple), true);
    }

    // The memo opcodes are a third of a snapshot's: the usual case (the next slot, a slot that
    // exists) is a few instructions, the message of a bad one is built out of line.
    void memo_put(uint64_t idx) {
        const Id object = top();
        if (idx == memo_.size()) {   // MEMOIZE, and BINPUT as CPython numbers its slots
            memo_.push_back(object);
            return;
        }
        // A slot far beyond the objects read so far is corrupt input, not a reason to
        // allocate gigabytes.
        if (idx > 2 * doc_.nodes_.size() + 1024) bad_memo(idx, "memo index ", " is implausibly large");
        if (memo_.size() <= idx) memo_.resize(static_cast<size_t>(idx) + 1, kNoObject);
        memo_[static_cast<size_t>(idx)] = object;
    }
    void memo_get(uint64_t idx) {
        const Id object = idx < memo_.size() ? memo_[static_cast<size_t>(idx)] : kNoObject;
        if (object == kNoObject) bad_memo(idx, "memo entry ", " does not exist");
        stack_.push_back(object);
    }
    [[noreturn, gnu::noinline, gnu::cold]] void bad_memo(uint64_t idx, const char* before, const char* after) const {
        fail(before + std::to_string(idx) + after);
    }

    PickleDoc& doc_;
    std::string_view data_;
    const std::string& name_;
    const size_t n_;
    bool rest_allowed_ = false;   // bytes may follow STOP (a sequence of pickles)
    size_t pos_ = 0, op_pos_ = 0;
    uint8_t op_ = 0;
    std::vector<Id> stack_;
    std::vector<size_t> marks_;
    std::vector<Id> memo_;
};

PickleDoc::PickleDoc(std::string_view data, const std::string& name) : name_(name), data_(data) {
    // About one node per 8 input bytes in real snapshots (most strings are memo references).
    // Container items: about one per 3 bytes (a memo reference is 2). Reserving untouched
    // capacity costs address space only; regrowing copies and faults in fresh pages.
    nodes_.reserve(data.size() / 8 + 16);
    arena_.reserve(data.size() / 3 + 16);
    root_ = Parser(*this, data, name).run();
}

PickleDoc::PickleDoc(std::string_view data, const std::string& name, size_t& end) : name_(name), data_(data) {
    Parser parser(*this, data, name);
    parser.allow_rest();
    root_ = parser.run();
    end = parser.end();
}

}  // namespace mhc::trace::import
