#pragma once
// mhc::Error: bad input or environment problems, thrown at library boundaries.
// Front-ends catch it, print what() on one line and exit with exit_code().
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace mhc {

class Error : public std::runtime_error {
public:
    // kind decides the exit status of a front-end: bad input (2) or internal (1).
    enum class Kind { BadInput, Internal };

    // The message is kept as printable() shows it: what() is read as a C string, so a NUL byte
    // quoted from an input (a JSON key "a\u0000b", a rule "ge\0mm") cut the message there, and
    // every reader of what() (mhc, mhc-view's window, check's report) would have to clean it.
    explicit Error(const std::string& message, Kind kind = Kind::BadInput);

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

// Text as written by an importer, or by anyone, for a message: each character a terminal acts on
// or does not show reads as one '?', so that a message is one line, nothing reaches the terminal and
// a name cannot pass for another: control characters (C0, DEL, and C1 such as U+009B, the escape
// of 8-bit terminals), line and paragraph separators, invisible format characters (zero-width
// ones; the bidirectional overrides and isolates that show "x\u202Egpj.db" as "xbd.jpg"), and
// each byte that is not part of valid UTF-8.
std::string printable(std::string_view text);
// The first character of `text` that printable() hides, as "U+000A" (a byte of no UTF-8 is not
// one: such names are kept, shown with '?'), or "" when there is none: a name that goes into
// other names and lines (a link profile's, a run's) is refused with it.
std::string hidden_character(std::string_view text);
// A value as a message quotes it, printable: a value of more than 80 bytes (a 120 KB argument, a
// file's line of megabytes) as its first 60 and its length, "xxxx...(122880 bytes)": a refusal
// quoted it whole, one line of 120 KB on the terminal. quoted_value adds the quotes: 'value'.
std::string shortened(std::string_view text);
std::string quoted_value(std::string_view value);
// A message with each run of more than 1,024 bytes without a space (a value formed into it whole,
// not by quoted_value), then each path between ": " still past 1,024 (spaces in it), shortened as
// shortened() does: every line on stderr passes through it (mhc/common/message_line.hpp), so that
// no refusal is megabytes long, while a file name, which the user must recognise, is said whole.
std::string capped_words(std::string_view message);

}  // namespace mhc
