#include "mhc/common/error.hpp"

namespace mhc {

std::string where(const std::string& file, const std::string& message) {
    return file + ": " + message;
}

std::string where_row(const std::string& file, const std::string& table, long long row,
                      const std::string& message) {
    return file + ": " + table + " row " + std::to_string(row) + ": " + message;
}

}  // namespace mhc
