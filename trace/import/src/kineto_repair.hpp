#pragma once
// The faults of Kineto's JSON writer that real traces carry and that have one meaning. A member
// written with no value: Kineto pasted a collective's metadata into its args unquoted and
// unchecked, so an empty Process Group Description became `"Process Group Description": ,` on
// NCCL kernels and record_param_comms ops (pytorch/kineto ca24bca5, April 2024, until b10f04a4,
// August 2025, which left the member out when empty; pytorch/pytorch#172353 quotes the line).
// And names written unescaped (RawStrings below). Every JSON reader refuses such a file. The
// streamed parse (kineto_parse.cpp) reads it through RepairingStream, which reads each missing
// value as null (the member is absent, as the writer meant; a member mhc reads keeps the bad-field
// rule: a null where a number is read is refused) and escapes what a string held raw. Anything
// else broken stays refused as invalid JSON.
#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "source.hpp"

namespace mhc::trace::import {

struct Result;

// The members read with no value: how many, by key, and where the first was (byte offset in the
// decompressed JSON).
struct EmptyValues {
    int64_t count = 0;
    uint64_t first_at = 0;
    std::map<std::string, int64_t> by_key;   // at most kMaxKeys keys; the others under kOtherKeys
    static constexpr size_t kMaxKeys = 8;
    static constexpr const char* kOtherKeys = "(other keys)";
    void add(const std::string& key, uint64_t at);
};

// Strings the writer did not escape. Kineto wrote an event's name as it was: a quote in it ended the
// JSON string early (pytorch/pytorch#113001, #146900: a Python frame's source line or a
// torch.compile file name such as {"device": "cpu"} under with_stack=True; escaped since Kineto
// eba157ad, July 2026), a control character stayed raw (#130622, #136180; names holding one are
// written "unknown" since Kineto 7ae1ce85, January 2025) and so did a Windows path's backslashes
// (#98432, pytorch/kineto#336; '/' since Kineto 21beef37, April 2023). Each mended: how many, the
// first one's byte offset (decompressed JSON) and the key whose value held it. `letters`: those of
// the backslashes that began \b \f \n \r or \t in an event's name (`torch\nn\functional.py`), valid
// JSON read as the path's backslash and letter: no Kineto wrote a control character so (raw until
// 2025, then names holding one written "unknown"), where a raw path made every one of them.
// `in_raw`: those of the backslashes that began a valid JSON escape other than those (\\, \/, \",
// \u and four hex digits, and \b to \t outside names) in a string the writer wrote raw: one that also
// holds a backslash beginning no escape, a raw control character or, in a name, \b to \t. An escaping
// writer never writes either, so every backslash of such a string is its own (`C:\Users\u0123456`,
// a user folder that `\u0123` would turn into one character; `\\server\share`, a UNC path).
struct RawStrings {
    int64_t quotes = 0, controls = 0, backslashes = 0, letters = 0, in_raw = 0;
    bool valid_json = false;   // the file parsed as JSON, its raw names read short (`", "key": "`)
    uint64_t first_at = 0;
    std::string first_key;
    int64_t count() const { return quotes + controls + backslashes; }
    void add(int64_t& kind, uint64_t at, const std::string& key);
};

// Members an event (a node) holds right after its name that no writer of Kineto traces (of
// execution traces) writes there, in a file read as written: how many, the first's key and its
// event's (node's) row. A name written raw that holds `", "key": "` reads so, as valid JSON.
struct StrayMember {
    int64_t count = 0;
    std::string key;
    size_t row = 0;
};

// rapidjson stream over GzSource (as JsonStream) that mends what Kineto wrote wrongly: it supplies
// `null` where a member's value is missing (after a ':' outside strings, whitespace, then ',' or
// '}'), and inside strings escapes a raw control character, a backslash that begins no JSON escape
// and a quote that cannot end the string (what follows it is no ',', '}', ']' or, after a key,
// ':'), and in an event's name a backslash before b, f, n, r or t (RawStrings::letters: the one
// change to valid JSON; a control character written \u00XX stays one). With `event_names`, a
// quote in an event's "name" ends it only where an event's own member (Chrome's trace event format:
// "pid", "ph", ...) that the event has not had yet, or the event's end, follows; and a node's
// "name" in an execution trace only where the member its observer writes next follows with an
// integer ("ctrl_deps" where the node's "id" came first, else "id"). A number there must be the
// member's whole value (a member or the end follows it). So a name that holds `", "dtype": `,
// `", "ph": "X` or `", "ctrl_deps": 1` stays one string. So does an event's "args" "CallFrom" (the
// caller's file and line, which torch 2.15 writes unescaped where it escapes names), ending only
// before the member Kineto writes next, "Python parent id" (or, in the outermost frame, "Python
// id") with its integer, or the args' end. That reading is the last resort
// (kineto_parse.cpp): a valid file whose events hold members of other names after "name" is never
// read so, nor one whose events hold no member twice. Tell() stays the input's offset, so error
// messages name the file's bytes.
class RepairingStream {
public:
    typedef char Ch;
    RepairingStream(GzSource* source, EmptyValues& empty, RawStrings& raw, bool event_names = false)
        : src_(source), empty_(empty), raw_(raw), event_names_(event_names) {}

    // A byte that needs no mending passes straight through (a string's byte other than a quote,
    // backslash or control character; any byte outside strings but a member's missing value); the
    // others, and bytes read ahead, go through produce().
    Ch Peek() {
        if (pos_ < out_.size()) return out_[pos_];
        if (ahead_pos_ == ahead_.size()) {
            const char ch = src_->peek();
            if (in_string_ ? plain_in_string(ch) : !missing_value(ch)) return ch;
        }
        produce();
        return out_[pos_];
    }
    Ch Take() {
        if (pos_ < out_.size()) return out_[pos_++];
        if (ahead_pos_ == ahead_.size()) {
            const char ch = src_->peek();
            if (in_string_ && plain_in_string(ch)) {
                if (text_.size() < kKeyChars) text_ += ch;
                return src_->take();
            }
            if (!in_string_ && !missing_value(ch)) {
                outside_string(ch);
                return src_->take();
            }
        }
        produce();
        return out_[pos_++];
    }
    size_t Tell() const { return pos_ < out_.size() ? out_at_ : static_cast<size_t>(in_pos()); }
    Ch* PutBegin() { return nullptr; }
    void Put(Ch) {}
    void Flush() {}
    size_t PutEnd(Ch*) { return 0; }

private:
    static constexpr size_t kKeyChars = 64;   // of a key named in the warning
    static constexpr size_t kTracked = 4;     // container levels whose key is kept (an event is at 3)
    // The next input byte `off` bytes ahead ('\0' past the end), and taking one.
    char ahead(size_t off);
    char next_in();
    uint64_t in_pos() const { return src_->tell() - (ahead_.size() - ahead_pos_); }
    static bool plain_in_string(char ch) { return ch != '"' && ch != '\\' && static_cast<unsigned char>(ch) >= 0x20; }
    bool missing_value(char ch) const { return after_colon_ && (ch == ',' || ch == '}'); }
    void outside_string(char ch) {
        if (ch == '"' || ch == ':' || ch == '{' || ch == '[' || ch == '}' || ch == ']') structure(ch);
        else if (ch != ' ' && ch != '\n' && ch != '\r' && ch != '\t') after_colon_ = false;
    }
    std::string string_key() const;   // what the open string is: its key, or which other string
    // Reads input bytes and leaves the bytes for rapidjson in out_: at least one (a NUL at the
    // input's end), more where it mends.
    void produce();
    void produce_in_string(char ch, uint64_t at);
    void structure(char ch);
    bool begins_escape();   // after a backslash: a JSON escape follows (in a name, not \b \f \n \r \t)
    bool valid_escape(size_t off);   // the bytes from `off` ahead, after a backslash, are a JSON escape
    bool written_raw();     // after the open string's first backslash: the string was written raw (RawStrings)
    bool ends_string();     // at a quote: it can end the string
    bool ends_event_name(size_t off);
    bool number_ends(size_t off);    // a number from `off` ahead is a member's whole value
    bool ends_call_from(size_t off);
    bool in_args() const;   // in an event's "args"
    size_t skip_space(size_t off);   // the first byte from `off` ahead that is no whitespace
    bool in_event() const;
    bool in_node() const;   // in a node of an execution trace's "nodes"

    GzSource* src_;
    EmptyValues& empty_;
    RawStrings& raw_;
    bool event_names_;
    std::string ahead_;
    size_t ahead_pos_ = 0;
    std::string out_;
    size_t pos_ = 0;
    size_t out_at_ = 0;
    std::string text_, key_;   // the last string read (its first kKeyChars bytes); the last key
    // The open containers, '{' or '[', and the key each was the value of (the first kTracked).
    std::string open_;
    std::array<std::string, kTracked> open_keys_;
    bool in_string_ = false, after_colon_ = false;
    bool value_string_ = false;   // the open string is a value (of a key or in an array), not a key
    bool event_name_ = false;     // the open string is an event's name, read with event_names
    bool in_event_name_ = false;  // the open string is an event's name
    bool call_from_ = false;      // the open string is an event's args.CallFrom, read with event_names
    char string_of_ = 'k';        // the open string is a key ('k'), a member's value ('v') or an element ('e')
    bool raw_known_ = false;      // whether the open string was written raw is known: raw_string_
    bool raw_string_ = false;
    bool node_id_read_ = false;   // the open node of an execution trace has had its "id" member
    uint32_t event_keys_ = 0;     // the members the open event has had, a bit per event_member()
};

// Said in meta `kineto.empty_values` and warned where the parse read members with no value.
// `trace`: what the warning calls the file ("the Kineto trace NAME" beside an execution trace).
void say_empty_values(const EmptyValues& found, const std::string& trace, Result& result);
// The same for strings mended (meta `kineto.raw_strings`).
void say_raw_strings(const RawStrings& found, const std::string& trace, Result& result);
// The same for an event's member after its name that no reading took into the name (meta
// `kineto.members_after_name`).
void say_stray_members(const StrayMember& found, const std::string& trace, Result& result);

}   // namespace mhc::trace::import
