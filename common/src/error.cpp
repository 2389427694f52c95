#include "mhc/common/error.hpp"
#include "mhc/common/message_line.hpp"
#include "mhc/common/refusal.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <utility>

namespace mhc {

namespace {

// Unicode 15.1's format characters (Cf) above U+00A0 and its line and paragraph separators (Zl,
// Zp), as ranges: python/mhc_torch/number_grammar.py holds the same list (its test checks it
// against Python's unicodedata).
constexpr std::pair<char32_t, char32_t> kHidden[] = {
    {0xAD, 0xAD},       {0x600, 0x605},     {0x61C, 0x61C},     {0x6DD, 0x6DD},   {0x70F, 0x70F},
    {0x890, 0x891},     {0x8E2, 0x8E2},     {0x180E, 0x180E},   {0x200B, 0x200F}, {0x2028, 0x202E},
    {0x2060, 0x2064},   {0x2066, 0x206F},   {0xFEFF, 0xFEFF},   {0xFFF9, 0xFFFB}, {0x110BD, 0x110BD},
    {0x110CD, 0x110CD}, {0x13430, 0x1343F}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0001, 0xE0001},
    {0xE0020, 0xE007F}};

bool hidden(char32_t code) {
    if (code < 0x20 || (code >= 0x7f && code <= 0x9f)) return true;
    return std::any_of(std::begin(kHidden), std::end(kHidden),
                       [code](const auto& range) { return code >= range.first && code <= range.second; });
}

// The length of the valid UTF-8 sequence at text[at] and its code point, or 0 where none begins
// there (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, cut short).
size_t utf8_at(std::string_view text, size_t at, char32_t& code) {
    const auto byte = [&](size_t offset) { return static_cast<unsigned char>(text[at + offset]); };
    const unsigned char lead = byte(0);
    if (lead < 0x80) {
        code = lead;
        return 1;
    }
    size_t length = 0;
    unsigned char low = 0x80, high = 0xbf;   // the second byte's range (RFC 3629's table)
    if (lead >= 0xc2 && lead <= 0xdf) length = 2;
    else if (lead >= 0xe0 && lead <= 0xef) length = 3, low = lead == 0xe0 ? 0xa0 : 0x80, high = lead == 0xed ? 0x9f : 0xbf;
    else if (lead >= 0xf0 && lead <= 0xf4) length = 4, low = lead == 0xf0 ? 0x90 : 0x80, high = lead == 0xf4 ? 0x8f : 0xbf;
    if (length == 0 || at + length > text.size() || byte(1) < low || byte(1) > high) return 0;
    code = lead & (0x7f >> length);
    for (size_t offset = 1; offset < length; ++offset) {
        if ((byte(offset) & 0xc0) != 0x80) return 0;
        code = (code << 6) | (byte(offset) & 0x3f);
    }
    return length;
}

}   // namespace

std::string hidden_character(std::string_view text) {
    for (size_t at = 0; at < text.size();) {
        char32_t code = 0;
        const size_t length = utf8_at(text, at, code);
        if (length > 0 && hidden(code)) {
            char name[16];
            std::snprintf(name, sizeof name, "U+%04X", static_cast<unsigned>(code));
            return name;
        }
        at += length == 0 ? 1 : length;
    }
    return {};
}

std::string printable(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t at = 0; at < text.size();) {
        char32_t code = 0;
        const size_t length = utf8_at(text, at, code);
        if (length == 0 || hidden(code)) out += '?';
        else out.append(text.substr(at, length));
        at += length == 0 ? 1 : length;
    }
    return out;
}

std::string shortened(std::string_view text) {
    constexpr size_t kMost = 80, kKept = 60;
    if (text.size() <= kMost) return std::string(text);
    size_t cut = kKept;   // not inside a UTF-8 sequence
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
    return std::string(text.substr(0, cut)) + "...(" + std::to_string(text.size()) + " bytes)";
}

std::string quoted_value(std::string_view value) { return "'" + shortened(printable(value)) + "'"; }

namespace {

// `message` with each part between two `separator`s past `longest` bytes (and holding `within`,
// where it is not empty) shortened as shortened() does, the quote opening it and the quotes,
// colons and brackets closing it kept.
std::string capped_parts(std::string_view message, std::string_view separator, size_t longest,
                         std::string_view within = {}) {
    std::string out;
    for (size_t at = 0; at <= message.size();) {
        const size_t end = std::min(message.find(separator, at), message.size());
        const std::string_view part = message.substr(at, end - at);
        const size_t head = !part.empty() && std::string_view("'\"(").find(part.front()) != std::string_view::npos ? 1 : 0;
        size_t tail = part.size();
        while (tail > head && std::string_view("'\":;,)]").find(part[tail - 1]) != std::string_view::npos) --tail;
        if (tail - head <= longest || (!within.empty() && part.find(within) == std::string_view::npos))
            out += part;
        else
            out += std::string(part.substr(0, head)) + shortened(part.substr(head, tail - head)) + std::string(part.substr(tail));
        if (end == message.size()) break;
        out += separator;
        at = end + separator.size();
    }
    return out;
}

}  // namespace

std::string capped_words(std::string_view message) {
    // Longer than a file name a user writes (a name's parts are 255 bytes at most), so a name is
    // said whole and a pasted value of kilobytes is not; a value quoted by quoted_value() is
    // shortened past 80 bytes already.
    constexpr size_t kLongest = 1024;
    if (message.size() <= kLongest) return std::string(message);
    // Word by word, then a path between two ": " (a name with spaces in it, 5 KB through folders
    // named "my runs", was said whole: no word of it was long). Only a path: a value is quoted
    // short already, and a sentence of long words stays as it is.
    return capped_parts(capped_parts(message, " ", kLongest), ": ", kLongest, "/");
}

std::string message_line(std::string_view text) { return capped_words(printable(text)); }

void say(const char* format, ...) {
    std::va_list args;
    va_start(args, format);
    std::va_list again;
    va_copy(again, args);
    const int length = std::vsnprintf(nullptr, 0, format, args);
    va_end(args);
    std::string line(length > 0 ? static_cast<size_t>(length) : 0, '\0');
    if (length > 0) std::vsnprintf(line.data(), line.size() + 1, format, again);
    va_end(again);
    if (!line.empty() && line.back() == '\n') line.pop_back();
    std::fprintf(stderr, "%s\n", message_line(line).c_str());
}

Error::Error(const std::string& message, Kind kind) : std::runtime_error(message_line(message)), kind_(kind) {}

std::string where(const std::string& file, const std::string& message) {
    return file + ": " + message;
}

std::string where_row(const std::string& file, const std::string& table, long long row,
                      const std::string& message) {
    return file + ": " + table + " row " + std::to_string(row) + ": " + message;
}

std::string refused_value(std::string_view option, std::string_view value, std::string_view why) {
    return of_option(option, quoted_value(value) + ": " + std::string(why));
}

std::string of_option(std::string_view option, std::string_view refusal) {
    return std::string(option) + ": " + std::string(refusal);
}

std::string no_such_file(const std::string& file) {
    // A file that stat cannot reach for another reason than its absence is not "no such file": a
    // folder on the way that cannot be searched (EACCES), a symbolic link loop (ELOOP).
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0 && errno != ENOENT && errno != ENOTDIR)
        return file + ": cannot be reached: " + std::strerror(errno);
    // A file where the name needs a folder: "t.db/" (a name ending in '/' is a folder's) was "no
    // such file" beside the file itself; "t.db/x" too.
    if (errno == ENOTDIR)
        for (size_t slash = file.find('/', 1); slash != std::string::npos; slash = file.find('/', slash + 1)) {
            const std::string part = file.substr(0, slash);
            if (::stat(part.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
                return file + ": " + part + " is a file, not a folder" +
                       (file.find_first_not_of('/', slash) == std::string::npos
                            ? " (a name ending in '/' names a folder)"
                            : "");
        }
    return file + ": no such file";
}

namespace {
// Optimal string alignment distance: insertions, deletions, substitutions and swaps of
// neighbouring characters, each 1.
size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= a.size(); ++i)
        for (size_t j = 1; j <= b.size(); ++j) {
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    return d[a.size()][b.size()];
}
}  // namespace

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
    const size_t limit = std::clamp<size_t>(word.size() / 3, 1, 2);
    std::string best;
    size_t best_d = limit + 1;
    for (const auto& c : candidates)
        if (size_t d = edit_distance(word, c); d < best_d) best = c, best_d = d;
    if (!best.empty()) return best;
    std::string prefixed;
    for (const auto& c : candidates)
        if (word.size() >= 2 && c.rfind(word, 0) == 0) {
            if (!prefixed.empty()) return "";   // two begin so: no guess
            prefixed = c;
        }
    return prefixed;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
    std::string n = nearest(word, candidates);
    return n.empty() ? std::string() : "; did you mean " + n + "?";
}

}  // namespace mhc
