#pragma once
// The windowed parse of a Kineto trace (the fast path): the JSON, plain or gzip, read into a
// sliding window and each event parsed in place by rapidjson into the handler
// (kineto_handler.hpp). Used by parse_kineto (kineto_parse.cpp) and by the second thread of a
// large file (kineto_two_parts.cpp).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kineto_handler.hpp"
#include "source.hpp"

namespace mhc::trace::import {

constexpr unsigned kStreamFlags = rapidjson::kParseNumbersAsStringsFlag | rapidjson::kParseNanAndInfFlag;
constexpr unsigned kInsituFlags = kStreamFlags | rapidjson::kParseInsituFlag | rapidjson::kParseStopWhenDoneFlag;

struct KeyCatcher : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, KeyCatcher> {
    std::string_view s;
    bool ok = false;
    bool String(const char* text, rapidjson::SizeType n, bool) {
        s = {text, n};
        ok = true;
        return true;
    }
    bool Default() { return false; }   // a key must be a string
};

// Where the windowed parse may hand the rest of the input to a second thread: an element of
// traceEvents that starts at byte `at` (only a guess until the first parse meets an element there).
struct SplitPoint {
    uint64_t at = UINT64_MAX;
    std::function<bool()> take_over;   // true: the rest is parsed and merged, the first parse stops
};

// Fast path: the JSON text, plain or gzip, is read into a sliding window; the top-level
// object and the traceEvents array are walked here and each member value / event is
// parsed by rapidjson in situ (no string or number is copied; the handler sees views of
// the window). The window (256 KiB, doubled up to 32 MiB while the input lasts) holds at
// least kKeep bytes ahead of each value, so an event is parsed while whole in memory. Anything unexpected (a syntax error, a value longer than
// the window, a root that is not an object) returns false: the caller starts again with
// parse_streamed, which gives the same result or the error message.
class Windowed {
public:
    // The window stays within `limit` too (at least its first 256 KiB): an event longer than it
    // goes to the streamed parse, which refuses it past the limit. `start`: the byte to begin at
    // (a plain file's second part: run with `stop`). `inflate_ahead`: as ReadAhead's.
    Windowed(const std::string& path, Handler& handler, uint64_t limit, uint64_t start, bool inflate_ahead)
        : src_(path, start, inflate_ahead), h_(handler),
          max_cap_(std::max(cap_, static_cast<size_t>(std::min<uint64_t>(kCap, limit)))),
          keep_(std::min(kKeep, max_cap_ / 2)), base_(start), limit_(src_.is_gzip() ? limit : UINT64_MAX) {
        buf_.resize(cap_ + kPad);
    }

    // The whole document; or, with `stop` (the second part, whose handler is inside
    // traceEvents), from the element at the start through the end of the document, polling
    // `stop` between elements (set: false). With a split point, the first part stops there
    // if the second part took over from there (true), and goes on by itself where it did not.
    // One loop for both: the per-element path is the hot one of an import.
    bool run(const SplitPoint* split = nullptr, const std::atomic<bool>* stop = nullptr) {
        bool at_element = stop != nullptr;
        if (!at_element) {
            if (!ws() || at() != '{') return false;
            ++beg_;
            h_.open_root();
            if (!ws()) return false;
        }
        if (!at_element && at() == '}') {
            ++beg_;
        } else {
            while (true) {
                if (!at_element && !member_key()) return false;
                if (at_element || (h_.top_key == "traceEvents" && at() == '[')) {
                    if (!at_element) {
                        ++beg_;
                        h_.StartArray();
                        if (!ws()) return false;
                    }
                    if (!at_element && at() == ']') {
                        ++beg_;
                    } else {
                        at_element = false;
                        while (true) {
                            if (split && base_ + beg_ == split->at && split->take_over()) return true;
                            if (stop && stop->load(std::memory_order_relaxed)) return false;
                            if (!value(h_) || !ws()) return false;
                            char next = at();
                            ++beg_;
                            if (next == ']') break;
                            if (next != ',' || !ws()) return false;
                        }
                    }
                    h_.EndArray(0);
                } else if (!value(h_)) {
                    return false;
                }
                if (!ws()) return false;
                char next = at();
                ++beg_;
                if (next == '}') break;
                if (next != ',') return false;
            }
        }
        h_.close_root();
        ws();
        return beg_ == end_ && eof_;   // nothing but whitespace after the root
    }

private:
    static constexpr size_t kCap = size_t{32} << 20, kKeep = size_t{4} << 20, kPad = 64;

    // A member's key and the ':' after it, up to its value.
    bool member_key() {
        if (!ws() || at() != '"') return false;
        KeyCatcher kc;
        if (!value(kc) || !kc.ok) return false;
        if (!h_.Key(kc.s.data(), static_cast<rapidjson::SizeType>(kc.s.size()), false)) return false;   // a key twice
        if (!ws() || at() != ':') return false;
        ++beg_;
        return ws();
    }

    char at() const { return buf_[beg_]; }
    // Keeps at least kKeep bytes ahead of beg_ (or all that is left), a NUL after them.
    void fill() {
        if (eof_ || end_ - beg_ >= keep_) return;
        std::memmove(buf_.data(), buf_.data() + beg_, end_ - beg_);
        base_ += beg_;
        end_ -= beg_;
        beg_ = 0;
        while (!eof_) {
            if (end_ == cap_) {   // small inputs keep a small buffer; large ones grow it to kCap
                if (cap_ >= max_cap_) break;
                cap_ *= 2;
                buf_.resize(cap_ + kPad);
            }
            size_t got = src_.read(buf_.data() + end_, cap_ - end_);
            if (got == 0) eof_ = true;
            end_ += got;
        }
        std::memset(buf_.data() + end_, 0, kPad);   // sentinel, and room for 16-byte loads
    }
    // Skips whitespace; false at the end of the input.
    bool ws() {
        while (true) {
            fill();
            while (beg_ < end_) {
                char ch = buf_[beg_];
                if (ch != ' ' && ch != '\n' && ch != '\r' && ch != '\t') return true;
                ++beg_;
            }
            if (eof_) return false;
        }
    }
    template <typename H>
    bool value(H& handler) {
        fill();
        rapidjson::InsituStringStream ss(buf_.data() + beg_);
        rapidjson::ParseResult res = reader_.Parse<kInsituFlags>(ss, handler);
        // A value of gzip input longer than the limit (which may be under the window's size)
        // goes to the streamed parse, which refuses it: the limit holds for every value.
        if (res.IsError() || ss.Tell() > limit_) return false;
        beg_ += ss.Tell();
        return beg_ <= end_;
    }

    ReadAhead src_;
    Handler& h_;
    rapidjson::Reader reader_;
    std::vector<char> buf_;
    size_t beg_ = 0, end_ = 0, cap_ = size_t{256} << 10, max_cap_, keep_;
    uint64_t base_ = 0;   // offset in the input of buf_[0]
    uint64_t limit_;      // the most bytes of one value (gzip input; plain files: no limit)
    bool eof_ = false;
};

}  // namespace mhc::trace::import
