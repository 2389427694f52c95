#include "mhc/common/error.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace mhc {

std::string where(const std::string& file, const std::string& message) {
    return file + ": " + message;
}

std::string where_row(const std::string& file, const std::string& table, long long row,
                      const std::string& message) {
    return file + ": " + table + " row " + std::to_string(row) + ": " + message;
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
