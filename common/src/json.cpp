#include "mhc/common/json.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <set>
#include <vector>

namespace mhc {

void append_json_string(std::string& out, std::string_view text) {
    out += nlohmann::json(std::string(text)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string json_string(std::string_view text) {
    std::string out;
    append_json_string(out, text);
    return out;
}

namespace {

// A SAX reader that builds nothing (no depth of recursion: nlohmann's SAX parser keeps its own
// stack) and stops at the first key an object holds twice.
class RepeatedKey {
public:
    using json = nlohmann::json;
    std::string found;

    bool null() { return value(); }
    bool boolean(bool /*unused*/) { return value(); }
    bool number_integer(json::number_integer_t /*unused*/) { return value(); }
    bool number_unsigned(json::number_unsigned_t /*unused*/) { return value(); }
    bool number_float(json::number_float_t /*unused*/, const json::string_t& /*unused*/) { return value(); }
    bool string(json::string_t& /*unused*/) { return value(); }
    bool binary(json::binary_t& /*unused*/) { return value(); }
    bool start_object(std::size_t /*unused*/) {
        frames_.push_back({true, {}, {}, 0});
        return true;
    }
    bool key(json::string_t& name) {
        Frame& f = frames_.back();
        if (!f.keys.insert(name).second) {
            f.key = name;
            found = path();
            return false;
        }
        f.key = name;
        return true;
    }
    bool end_object() { return end(); }
    bool start_array(std::size_t /*unused*/) {
        frames_.push_back({false, {}, {}, 0});
        return true;
    }
    bool end_array() { return end(); }
    bool parse_error(std::size_t /*unused*/, const std::string& /*unused*/,
                     const nlohmann::detail::exception& /*unused*/) {
        return false;
    }

private:
    struct Frame {
        bool object;
        std::set<std::string> keys;
        std::string key;   // an object's key being read
        size_t index;      // an array's next element
    };
    std::vector<Frame> frames_;

    bool value() {
        if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
        return true;
    }
    bool end() {
        frames_.pop_back();
        return value();   // the finished object or array is one value of its parent
    }
    std::string path() const {
        std::string out;
        for (const Frame& f : frames_) {
            if (f.object) {
                if (!out.empty()) out += '.';
                out += f.key;
            } else {
                out += "[" + std::to_string(f.index) + "]";
            }
        }
        return out;
    }
};

}   // namespace

size_t json_nesting(std::string_view text) {
    size_t depth = 0, deepest = 0;
    bool in_string = false;
    for (size_t at = 0; at < text.size(); ++at) {
        const char ch = text[at];
        if (in_string) {
            if (ch == '\\') ++at;   // the escaped character is no quote
            else if (ch == '"') in_string = false;
        } else if (ch == '"') {
            in_string = true;
        } else if (ch == '[' || ch == '{') {
            deepest = std::max(deepest, ++depth);
        } else if ((ch == ']' || ch == '}') && depth > 0) {
            --depth;
        }
    }
    return deepest;
}

std::string repeated_json_key(std::string_view text) {
    RepeatedKey reader;
    nlohmann::json::sax_parse(text.begin(), text.end(), &reader, nlohmann::json::input_format_t::json, false);
    return reader.found;
}

std::string repeated_json_key_refusal(std::string_view text) {
    const std::string twice = repeated_json_key(text);
    return twice.empty() ? "" : "field '" + twice + "' is given twice: JSON readers take either value; give it once";
}

std::string json_error_text(std::string what) {
    if (const size_t tag = what.find("] "); tag != std::string::npos) what = what.substr(tag + 2);
    if (const size_t raw = what.find("; last read"); raw != std::string::npos) what.resize(raw);
    return what;
}

}  // namespace mhc
