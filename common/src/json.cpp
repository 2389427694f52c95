#include "mhc/common/json.hpp"

#include <nlohmann/json.hpp>

namespace mhc {

void append_json_string(std::string& out, std::string_view text) {
    out += nlohmann::json(std::string(text)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string json_string(std::string_view text) {
    std::string out;
    append_json_string(out, text);
    return out;
}

}  // namespace mhc
