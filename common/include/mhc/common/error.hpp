#pragma once
// mhc::Error: bad input or environment problems, thrown at library boundaries.
// Front-ends catch it, print what() on one line and exit with exit_code().
#include <stdexcept>
#include <string>
#include <vector>

namespace mhc {

class Error : public std::runtime_error {
public:
    // kind decides the exit status of a front-end: bad input (2) or internal (1).
    enum class Kind { BadInput, Internal };

    explicit Error(std::string message, Kind kind = Kind::BadInput)
        : std::runtime_error(std::move(message)), kind_(kind) {}

    Kind kind() const { return kind_; }
    int exit_code() const { return kind_ == Kind::BadInput ? 2 : 1; }

private:
    Kind kind_;
};

// "file: message", "file: table row 12: message", "file: field 'x': message".
std::string where(const std::string& file, const std::string& message);
std::string where_row(const std::string& file, const std::string& table, long long row,
                      const std::string& message);

// The one wording of an input file that is not there, in every command: "<file>: no such file".
std::string no_such_file(const std::string& file);

// The candidate a mistyped `word` most likely meant ("simualte" -> "simulate"): the closest by
// edit distance (a swap of two neighbours counts one), within a third of the word's length
// (at least 1, at most 2), or the only candidate it begins; "" when none. Ties: the first.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);
// "; did you mean simulate?" when nearest() finds one, else "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

// Text as written by an importer, or by anyone, for a message: a control byte (a NUL, a newline,
// an escape) shown as '?', so that a message is one line and nothing reaches the terminal.
inline std::string printable(std::string text) {
    for (char& byte : text)
        if (static_cast<unsigned char>(byte) < 0x20 || byte == 0x7f) byte = '?';
    return text;
}

}  // namespace mhc
