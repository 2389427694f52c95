// What the repairing parse mends (kineto_repair.hpp): members with no value read as null, and
// strings the writer did not escape; counted while the streamed parse reads them, then said in meta
// and a warning.
#include "kineto_repair.hpp"

#include <cstdio>
#include <string_view>

#include "kineto_fields.hpp"
#include "kineto_write.hpp"

namespace mhc::trace::import {

namespace {

constexpr size_t kMaxLook = 256;   // bytes read ahead of a quote to tell whether it ends its string
constexpr size_t kMaxRawLook = 65536;   // bytes of a string read ahead to tell whether it was written raw

bool is_space(char ch) { return ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t'; }

// What follows a backslash in JSON's escape of a control character by a letter.
bool is_letter_escape(char ch) { return ch == 'b' || ch == 'f' || ch == 'n' || ch == 'r' || ch == 't'; }

bool is_hex(char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F'); }

bool starts_number(char ch) { return ch == '-' || (ch >= '0' && ch <= '9'); }

bool is_number_char(char ch) {
    return (ch >= '0' && ch <= '9') || ch == '-' || ch == '+' || ch == '.' || ch == 'e' || ch == 'E';
}

// The backslashes that JSON would read with their letter as a control character, where any.
std::string letters_note(const RawStrings& found) {
    std::string note;
    if (found.letters > 0)
        note = ", " + std::to_string(found.letters) +
               " of them before b, f, n, r or t in an event's name, read as a Windows path's backslash and letter, "
               "not as a control character";
    if (found.in_raw > 0)
        note += ", " + std::to_string(found.in_raw) +
                (found.letters > 0 ? " more" : " of them") +
                " beginning \\\\, \\/, \\\" or \\u in a string written raw (it holds a backslash beginning no escape "
                "or a raw control character), read as its own backslash";
    return note;
}

}   // namespace

void EmptyValues::add(const std::string& key, uint64_t at) {
    if (count == 0) first_at = at;
    ++count;
    if (by_key.count(key) > 0 || by_key.size() < kMaxKeys) ++by_key[key];
    else ++by_key[kOtherKeys];
}

void RawStrings::add(int64_t& kind, uint64_t at, const std::string& key) {
    if (count() == 0) {
        first_at = at;
        first_key = key;
    }
    ++kind;
}

char RepairingStream::ahead(size_t off) {
    while (ahead_.size() - ahead_pos_ <= off) {
        const uint64_t before = src_->tell();
        const char ch = src_->take();
        if (src_->tell() == before) return '\0';   // the end of the input
        ahead_ += ch;
    }
    return ahead_[ahead_pos_ + off];
}

char RepairingStream::next_in() {
    if (ahead_pos_ == ahead_.size()) return src_->take();
    const char ch = ahead_[ahead_pos_];
    if (++ahead_pos_ == ahead_.size()) {
        ahead_.clear();
        ahead_pos_ = 0;
    }
    return ch;
}

void RepairingStream::produce() {
    out_.clear();
    pos_ = 0;
    out_at_ = static_cast<size_t>(in_pos());
    if (!in_string_ && after_colon_) {
        const char next = ahead(0);
        if (next == ',' || next == '}') {
            empty_.add(key_, out_at_);
            out_ = "null";
            after_colon_ = false;
            return;
        }
    }
    const char ch = next_in();   // '\0' at the end of the input, which does not move
    if (in_string_) {
        produce_in_string(ch, out_at_);
        return;
    }
    outside_string(ch);
    out_ += ch;
}

void RepairingStream::structure(char ch) {
    if (ch == '"') {
        const bool in_array = !open_.empty() && open_.back() == '[';
        value_string_ = after_colon_ || in_array || open_.empty();
        string_of_ = after_colon_ ? 'v' : in_array ? 'e' : 'k';
        in_event_name_ = after_colon_ && key_ == "name" && in_event();
        event_name_ = event_names_ && in_event_name_;
        call_from_ = event_names_ && after_colon_ && key_ == "CallFrom" && in_args();
        raw_known_ = raw_string_ = false;
        in_string_ = true;
        after_colon_ = false;
        text_.clear();
    } else if (ch == ':') {
        after_colon_ = true;
        key_ = text_;
        if (key_ == "id" && in_node()) node_id_read_ = true;
        const int member = in_event() ? event_member(key_) : -1;
        if (member >= 0) event_keys_ |= 1U << static_cast<unsigned>(member);
    } else if (ch == '{' || ch == '[') {
        if (open_.size() < kTracked) open_keys_[open_.size()] = after_colon_ ? key_ : "";
        open_ += ch;
        if (in_node()) node_id_read_ = false;   // a node begins
        if (in_event()) event_keys_ = 0;        // an event begins
        after_colon_ = false;
    } else if (ch == '}' || ch == ']') {
        if (!open_.empty()) open_.pop_back();
        after_colon_ = false;
    }
}

std::string RepairingStream::string_key() const {
    return string_of_ == 'v' ? key_ : string_of_ == 'e' ? "(an array's element)" : "(a key)";
}

void RepairingStream::produce_in_string(char ch, uint64_t at) {
    if (ch == '\\' && !raw_known_) {
        raw_known_ = true;
        raw_string_ = written_raw();
    }
    if (ch == '\\' && raw_string_ && begins_escape()) {
        raw_.add(raw_.backslashes, at, string_key());
        ++raw_.in_raw;
        if (text_.size() < kKeyChars) text_ += ch;
        out_ += "\\\\";
        return;
    }
    if (ch == '\\' && begins_escape()) {
        out_ += ch;
        out_ += next_in();   // the escaped character: a quote there is the string's
        return;
    }
    if (ch == '"' && ends_string()) {
        in_string_ = false;
        out_ += ch;
        return;
    }
    if (text_.size() < kKeyChars) text_ += ch;
    if (ch == '\\' || ch == '"') {
        raw_.add(ch == '"' ? raw_.quotes : raw_.backslashes, at, string_key());
        if (ch == '"') raw_known_ = raw_string_ = true;   // the writer did not escape this string
        if (ch == '\\' && in_event_name_ && is_letter_escape(ahead(0))) ++raw_.letters;
        out_ += '\\';
        out_ += ch;
    } else if (ch != '\0' && static_cast<unsigned char>(ch) < 0x20) {   // NUL: the input ends or is broken
        raw_.add(raw_.controls, at, string_key());
        raw_known_ = raw_string_ = true;   // the writer did not escape this string
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(ch)));
        out_ += escaped;
    } else {
        out_ += ch;
    }
}

bool RepairingStream::begins_escape() {
    if (in_event_name_ && is_letter_escape(ahead(0))) return false;
    return valid_escape(0);
}

bool RepairingStream::valid_escape(size_t off) {
    const char next = ahead(off);
    if (next == 'u')
        return is_hex(ahead(off + 1)) && is_hex(ahead(off + 2)) && is_hex(ahead(off + 3)) && is_hex(ahead(off + 4));
    return std::string_view("\"\\/bfnrt").find(next) != std::string_view::npos && next != '\0';
}

bool RepairingStream::written_raw() {
    // From the byte after the string's first backslash to its end (the first quote no backslash
    // escapes): a backslash beginning no JSON escape, a raw control character, or in a name a
    // backslash before b, f, n, r or t. Read ahead, so a long string costs its bytes once more.
    for (size_t off = 0; off < kMaxRawLook;) {   // `off`: just after a backslash
        if (!valid_escape(off) || (in_event_name_ && is_letter_escape(ahead(off)))) return true;
        off += ahead(off) == 'u' ? 5 : 1;
        for (;; ++off) {
            const char ch = ahead(off);
            if (ch == '\0' || ch == '"' || off >= kMaxRawLook) return false;
            if (static_cast<unsigned char>(ch) < 0x20) return true;
            if (ch == '\\') break;
        }
        ++off;
    }
    return false;
}

size_t RepairingStream::skip_space(size_t off) {
    while (off < kMaxLook && is_space(ahead(off))) ++off;
    return off;
}

bool RepairingStream::ends_string() {
    if (!value_string_) return true;   // a key: Kineto writes its own
    const size_t off = skip_space(0);
    if (off == kMaxLook) return true;
    const char next = ahead(off);
    if (event_name_) return ends_event_name(off);
    if (call_from_) return ends_call_from(off);
    return next == ',' || next == '}' || next == ']' || next == '\0';
}

bool RepairingStream::ends_event_name(size_t off) {
    const char next = ahead(off);
    if (next == '\0') return true;
    if (next == '}') {
        const char after = ahead(skip_space(off + 1));
        return after == ',' || after == ']' || after == '\0';
    }
    if (next != ',') return false;
    size_t at = skip_space(off + 1);
    if (ahead(at) != '"') return false;
    std::string key;
    for (++at; key.size() <= 16 && ahead(at) != '"' && ahead(at) != '\0'; ++at) key += ahead(at);
    if (ahead(at) != '"') return false;
    const size_t colon = skip_space(at + 1);
    if (ahead(colon) != ':') return false;
    const size_t value = skip_space(colon + 1);
    if (!in_node()) {
        // A member the event has had is the name's text: Kineto writes each member once, "ph" and
        // "cat" before the name (a name holding `", "ph": "X` is one name).
        const int member = event_member(key);
        if (member < 0 || (event_keys_ >> member & 1U) != 0) return false;
        return !starts_number(ahead(value)) || number_ends(value);
    }
    // The observer writes "id" before the name from schema 1.0.2 on, "ctrl_deps" after it; 1.0.x's
    // name comes first, "id" after it. Both hold an integer, which a member or the node's end follows.
    return key == (node_id_read_ ? "ctrl_deps" : "id") && starts_number(ahead(value)) && number_ends(value);
}

bool RepairingStream::ends_call_from(size_t off) {
    // Kineto writes "Python parent id" and its integer next (torch 2.15), "Python id" in the
    // outermost frame, which has no parent; or would end the args.
    const char next = ahead(off);
    if (next == '}') return ahead(skip_space(off + 1)) == '}';
    if (next != ',') return false;
    for (std::string_view key : {std::string_view("\"Python parent id\""), std::string_view("\"Python id\"")}) {
        size_t at = skip_space(off + 1);
        bool same = true;
        for (char ch : key) same = same && ahead(at++) == ch;
        if (!same) continue;
        at = skip_space(at);
        if (ahead(at) != ':') return false;
        at = skip_space(at + 1);
        return starts_number(ahead(at)) && number_ends(at);
    }
    return false;
}

bool RepairingStream::number_ends(size_t off) {
    // A name holding `", "ctrl_deps": 1` reads a number that its quote follows: no value.
    while (off < kMaxLook && is_number_char(ahead(off))) ++off;
    const size_t next = skip_space(off);
    if (ahead(next) == ',') return ahead(skip_space(next + 1)) == '"';
    if (ahead(next) != '}') return false;
    const char after = ahead(skip_space(next + 1));
    return after == ',' || after == ']' || after == '\0';
}

bool RepairingStream::in_event() const {
    // {"traceEvents": [{ ...: an event; or [{ ...: an event of a trace written as an array; or
    // {"nodes": [{ ...: a node of an execution trace, whose observer writes its name raw too.
    if (open_ == "{[{") return open_keys_[1] == "traceEvents" || open_keys_[1] == "nodes";
    return open_ == "[{";
}

bool RepairingStream::in_args() const {
    // {"traceEvents": [{ ... "args": {: an event's args; or [{ ... "args": { in a trace written as an array.
    if (open_ == "{[{{") return open_keys_[1] == "traceEvents" && open_keys_[3] == "args";
    return open_ == "[{{" && open_keys_[2] == "args";
}

bool RepairingStream::in_node() const { return open_ == "{[{" && open_keys_[1] == "nodes"; }

void say_empty_values(const EmptyValues& found, const std::string& trace, Result& result) {
    if (found.count == 0) return;
    std::string keys;
    for (const auto& [key, n] : found.by_key) keys += (keys.empty() ? "" : ", ") + std::to_string(n) + " '" + key + "'";
    said_and_warned(result, "kineto.empty_values",
                    std::to_string(found.count) + (found.count == 1 ? " member" : " members") + " of " + trace +
                        " written with no value (" + keys + "; the first at byte " + std::to_string(found.first_at) +
                        ") read as absent: invalid JSON that PyTorch's profiler wrote for an empty process group "
                        "description (Kineto from April 2024 to August 2025)");
}

void say_stray_members(const StrayMember& found, const std::string& trace, Result& result) {
    if (found.count == 0) return;
    said_and_warned(result, "kineto.members_after_name",
                    std::to_string(found.count) + (found.count == 1 ? " event of " : " events of ") + trace +
                        (found.count == 1 ? " holds" : " hold") +
                        " a member after its name that is none of a trace event's (the first: '" + found.key +
                        "' in traceEvents[" + std::to_string(found.row) +
                        "]): read as written, the name ending at its first quote (a name PyTorch's profiler wrote "
                        "unescaped that holds `\", \"" + found.key + "\": ` would read so)");
}

void say_raw_strings(const RawStrings& found, const std::string& trace, Result& result) {
    if (found.count() == 0) return;
    said_and_warned(result, "kineto.raw_strings",
                    std::to_string(found.count()) + (found.count() == 1 ? " character of " : " characters of ") + trace + "'s strings written unescaped (" +
                        std::to_string(found.quotes) + " quotes, " + std::to_string(found.controls) +
                        " control characters, " + std::to_string(found.backslashes) +
                        " backslashes" + letters_note(found) + "; the first at byte " + std::to_string(found.first_at) +
                        ", in '" + found.first_key + "') read as characters of their string: " +
                        (found.valid_json || found.letters + found.in_raw == found.count() ? "valid JSON of names that PyTorch's profiler wrote unescaped"
                                                        : "invalid JSON that PyTorch's profiler wrote for names it did not escape") +
                        " (with_stack's Python frames: quotes in names until Kineto of July 2026 and in "
                        "args 'CallFrom' still in torch 2.15, control characters until January 2025, a Windows path's "
                        "backslashes until 2023)");
}

}   // namespace mhc::trace::import
