#pragma once
// The one known fault of Kineto's JSON writer that real traces carry and that has one meaning: a
// member written with no value. Kineto pasted a collective's metadata into its args unquoted and
// unchecked, so an empty Process Group Description became `"Process Group Description": ,` on
// NCCL kernels and record_param_comms ops (pytorch/kineto ca24bca5, April 2024, until b10f04a4,
// August 2025, which left the member out when empty; pytorch/pytorch#172353 quotes the line).
// Every JSON reader refuses such a file. The streamed parse (kineto_parse.cpp) reads it through
// RepairingStream, which reads each such value as null: the member is absent, as the writer meant,
// and a member mhc reads keeps the bad-field rule (a null where a number is read is refused).
// Only a member's value is supplied; anything else broken stays refused as invalid JSON.
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

// rapidjson stream over GzSource (as JsonStream) that supplies `null` where a member's value is
// missing: after a ':' outside strings, whitespace, then ',' or '}'. Tell() stays the input's
// offset, so error messages name the file's bytes.
class RepairingStream {
public:
    typedef char Ch;
    RepairingStream(GzSource* source, EmptyValues& found) : src_(source), found_(found) {}

    Ch Peek() {
        if (supply_ == 0 && after_colon_) {
            const char next = src_->peek();
            if (next == ',' || next == '}') {
                found_.add(key_, src_->tell());
                supply_ = 4;
                after_colon_ = false;
            }
        }
        return supply_ > 0 ? kNull[4 - supply_] : src_->peek();
    }
    Ch Take() {
        if (supply_ == 0 && after_colon_) Peek();
        if (supply_ > 0) return kNull[4 - supply_--];
        const char ch = src_->take();
        if (in_string_) {
            if (escape_) {
                escape_ = false;
            } else if (ch == '\\') {
                escape_ = true;
            } else if (ch == '"') {
                in_string_ = false;
                return ch;
            }
            if (text_.size() < kKeyChars) text_ += ch;
        } else if (ch == '"') {
            in_string_ = true;
            after_colon_ = false;
            text_.clear();
        } else if (ch == ':') {
            after_colon_ = true;
            key_ = text_;
        } else if (ch != ' ' && ch != '\n' && ch != '\r' && ch != '\t') {
            after_colon_ = false;
        }
        return ch;
    }
    size_t Tell() const { return src_->tell(); }
    Ch* PutBegin() { return nullptr; }
    void Put(Ch) {}
    void Flush() {}
    size_t PutEnd(Ch*) { return 0; }

private:
    static constexpr const char* kNull = "null";
    static constexpr size_t kKeyChars = 64;   // of a key named in the warning
    GzSource* src_;
    EmptyValues& found_;
    std::string text_, key_;   // the last string read (its first kKeyChars bytes); the last key
    int supply_ = 0;           // bytes of "null" still to supply
    bool in_string_ = false, escape_ = false, after_colon_ = false;
};

// Said in meta `kineto.empty_values` and warned where the parse read members with no value.
// `trace`: what the warning calls the file ("the Kineto trace NAME" beside an execution trace).
void say_empty_values(const EmptyValues& found, const std::string& trace, Result& result);

}   // namespace mhc::trace::import
