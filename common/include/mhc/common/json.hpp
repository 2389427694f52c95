#pragma once
// The one JSON string writer of the C++ side (nlohmann's escaping): for exports and --json
// outputs written by hand for speed or layout.
#include <string>
#include <string_view>

namespace mhc {

// `text` as a JSON string, quotes included: quotes, backslashes and control characters escaped,
// and each byte that is not part of valid UTF-8 (names from imported traces) as U+FFFD, as
// browsers decode them, so that the output is always valid JSON.
std::string json_string(std::string_view text);
// The same appended to `out`.
void append_json_string(std::string& out, std::string_view text);

// The first key that one object of the JSON text `text` holds twice, as the path to it
// ("h2d.bandwidth_Bps", "checkpoint[1].policy"), or "" when no object repeats a key (or the text
// is no JSON: the caller's parse says so). JSON leaves a repeated key's meaning open (a reader may
// take the first value or the last), so the files users write (link profiles, settings) refuse it.
std::string repeated_json_key(std::string_view text);
// The refusal of a file users write when repeated_json_key() finds a key: "field 'KEY' is given
// twice: JSON readers take either value; give it once", or "" when none is.
std::string repeated_json_key_refusal(std::string_view text);
// A JSON parser's error said for users: without nlohmann's tag ("[json.exception.parse_error.101] ")
// and the raw bytes it last read (a binary file's are control bytes): "parse error at line 1,
// column 1: syntax error ...".
std::string json_error_text(std::string what);

// How deep the arrays and objects of the JSON text `text` nest ("1": 0, "[[1]]": 2), counted over
// the brackets outside strings, without parsing and without recursion. Code that walks a parsed
// value recursively (nlohmann's dump(), a printer of Python literals) bounds what it is given by it.
size_t json_nesting(std::string_view text);

}  // namespace mhc
