#pragma once
// Arguments of the benchmark programs, checked as the commands check theirs: a value that is
// not what the usage line says is refused with one line naming it and the usage, exit status 2,
// never an uncaught exception or a silent 0 from atoi.
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "mhc/common/error.hpp"

namespace mhc::bench {

class Args {
public:
    // usage: what follows the program's name, e.g. "[EVENTS] [DIR] [REPS] | memory [EVENTS] [DIR]".
    Args(int argc, char** argv, std::string usage)
        : program_(base_name(argc > 0 ? argv[0] : "bench")), usage_(std::move(usage)) {
        for (int i = 1; i < argc; ++i) words_.emplace_back(argv[i]);
    }

    size_t size() const { return words_.size(); }
    bool has(size_t i) const { return i < words_.size(); }
    const std::string& word(size_t i) const { return words_.at(i); }
    std::string text(size_t i, std::string fallback) const { return has(i) ? words_[i] : std::move(fallback); }

    // Word i (0: the first after the program's name) as a whole number in [min, max];
    // `fallback` when there is no word i.
    int64_t count(size_t i, const char* name, int64_t fallback, int64_t min, int64_t max) const {
        return has(i) ? whole(words_[i], name, min, max) : fallback;
    }
    // `text` as a whole number in [min, max] (the value of an option).
    int64_t whole(std::string_view text, const char* name, int64_t min, int64_t max) const {
        int64_t v = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (text.empty() || ec == std::errc::invalid_argument || end != text.data() + text.size())
            refuse(std::string(name) + " '" + std::string(text) + "' is not a whole number");
        if (ec == std::errc::result_out_of_range || v < min || v > max)
            refuse(std::string(name) + " '" + std::string(text) + "' is outside [" + std::to_string(min) + ", " +
                   std::to_string(max) + "]");
        return v;
    }
    // The word after option word i (i is advanced past it), refused when missing.
    const std::string& value_after(size_t& i) const {
        if (i + 1 >= words_.size()) refuse(words_[i] + " needs a value");
        return words_[++i];
    }
    // More words than the usage takes.
    void at_most(size_t n) const {
        if (words_.size() > n) refuse("unexpected argument '" + words_[n] + "'");
    }
    [[noreturn]] void refuse(const std::string& what) const {
        std::fprintf(stderr, "%s: %s (usage: %s %s)\n", program_.c_str(), what.c_str(), program_.c_str(),
                     usage_.c_str());
        std::exit(2);
    }

private:
    static std::string base_name(std::string_view p) {
        size_t slash = p.rfind('/');
        return std::string(slash == std::string_view::npos ? p : p.substr(slash + 1));
    }
    std::string program_, usage_;
    std::vector<std::string> words_;
};

// Runs a benchmark's body as the commands run theirs: mhc::Error (bad input) one line and its
// exit status, any other exception one line and 1.
template <class Body>
int guarded(const char* program, Body&& body) {
    try {
        return body();
    } catch (const Error& e) {
        std::fprintf(stderr, "%s: %s\n", program, e.what());
        return e.exit_code();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", program, e.what());
        return 1;
    }
}

}  // namespace mhc::bench
