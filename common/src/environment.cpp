#include "mhc/common/environment.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "mhc/common/error.hpp"

namespace mhc {

std::optional<std::string> env_value(const char* name) {
    const char* value = std::getenv(name);
    if (!value) return std::nullopt;
    return std::string(value);
}

bool env_switch(const char* name, bool unset) {
    const auto value = env_value(name);
    if (!value) return unset;
    std::string word = *value;
    std::transform(word.begin(), word.end(), word.begin(), [](unsigned char letter) { return std::tolower(letter); });
    if (word == "1" || word == "on") return true;
    if (word == "0" || word == "off") return false;
    throw Error(std::string(name) + "='" + *value + "': use 1 or on, 0 or off", Error::Kind::BadInput);
}

}   // namespace mhc
