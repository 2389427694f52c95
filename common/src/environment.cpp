#include "mhc/common/environment.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "mhc/common/error.hpp"

namespace mhc {

std::optional<std::string> env_value(const char* name) {
    const char* value = std::getenv(name);
    if (!value) return std::nullopt;
    return std::string(value);
}

std::string env_refusal(std::string_view name, std::string_view value, std::string_view why) {
    return std::string(name) + "=" + quoted_value(value) + ": " + std::string(why);
}

bool env_switch(const char* name, bool unset) {
    const auto value = env_value(name);
    if (!value) return unset;
    std::string word = *value;
    std::transform(word.begin(), word.end(), word.begin(), [](unsigned char letter) { return std::tolower(letter); });
    if (word == "1" || word == "on") return true;
    if (word == "0" || word == "off") return false;
    throw Error(env_refusal(name, *value, "use 1 or on, 0 or off"), Error::Kind::BadInput);
}

std::string user_cache_dir(std::string& why) {
    namespace fs = std::filesystem;
    why.clear();
    const auto tried = [&why](const fs::path& dir, const std::string& problem) {
        why += (why.empty() ? "" : "; ") + dir.string() + ": " + problem;
    };
    std::vector<fs::path> shared;   // the user's own places
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg == '/') shared.push_back(fs::path(xdg) / "mhc");
    if (const char* home = std::getenv("HOME"); home && *home == '/') shared.push_back(fs::path(home) / ".cache" / "mhc");
    for (const fs::path& dir : shared) {
        std::error_code ec;
        fs::create_directories(dir, ec);
        if (ec) tried(dir, ec.message());
        else if (::access(dir.c_str(), W_OK | X_OK) != 0) tried(dir, std::strerror(errno));
        else return dir.string();
    }
    std::error_code ec;
    fs::path tmp = fs::temp_directory_path(ec);   // $TMPDIR when it names a folder
    if (ec) tmp = "/tmp";
    const fs::path dir = tmp / ("mhc-" + std::to_string(::geteuid()));
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
        tried(dir, std::strerror(errno));
        return {};
    }
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0) tried(dir, std::strerror(errno));
    else if (!S_ISDIR(st.st_mode)) tried(dir, "not a folder (a link or a file in its place)");
    else if (st.st_uid != ::geteuid()) tried(dir, "a folder of another user's");
    else if ((st.st_mode & 077) != 0) tried(dir, "others may read or write it (chmod 700 it)");
    else if (::access(dir.c_str(), W_OK | X_OK) != 0) tried(dir, std::strerror(errno));
    else return dir.string();
    return {};
}

}   // namespace mhc
