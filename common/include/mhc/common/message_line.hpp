#pragma once

#include <string>
#include <string_view>

namespace mhc {

// A line for stderr as every message of mhc and mhc-view is said: printable(), then
// capped_words() (mhc/common/error.hpp): a word past 1,024 bytes is its first 60 and its length
// (a value quoted by quoted_value() is shortened past 80 already). mhc::Error's text passes
// through it.
std::string message_line(std::string_view text);
// One line on stderr, formatted as printf formats it (a trailing newline is its end), then said
// as message_line() says it: a note or a warning that names a file is capped as a refusal is.
void say(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace mhc
