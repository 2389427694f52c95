#include "mhc/trace/comm_kernels.hpp"

#include <cctype>

namespace mhc::trace {

namespace {
bool contains_lower(std::string_view name, std::string_view lower_needle) {
    if (name.size() < lower_needle.size()) return false;
    for (size_t at = 0; at + lower_needle.size() <= name.size(); ++at) {
        size_t same = 0;
        while (same < lower_needle.size() &&
               std::tolower(static_cast<unsigned char>(name[at + same])) == lower_needle[same])
            ++same;
        if (same == lower_needle.size()) return true;
    }
    return false;
}
}  // namespace

bool is_comm_kernel(std::string_view name) {
    return contains_lower(name, "nccl") || contains_lower(name, "rccl");
}

std::string comm_kernel_op(std::string_view name) {
    if (name.substr(0, 4) != "nccl") return {};
    constexpr std::string_view kTag = "Kernel_";
    const size_t tag = name.find(kTag);
    if (tag == std::string_view::npos) return {};
    const size_t begin = tag + kTag.size();
    size_t end = begin;
    while (end < name.size() && std::isalnum(static_cast<unsigned char>(name[end]))) ++end;
    return std::string(name.substr(begin, end - begin));
}

}  // namespace mhc::trace
