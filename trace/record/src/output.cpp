#include "mhc/record/output.hpp"

#include <cctype>

namespace mhc::record {

namespace {
bool usable(const char* v) {
    if (!v || !*v) return false;
    for (const char* p = v; *p; ++p)   // a rank is a number; anything else is not a name part
        if (!std::isdigit(static_cast<unsigned char>(*p))) return false;
    return true;
}

std::string with_tag(std::string_view base, const std::string& tag) {
    // Insert before the extension of the last path component: run.db -> run.rank0.db.
    size_t slash = base.find_last_of('/');
    size_t dot = base.find_last_of('.');
    size_t name = slash == std::string_view::npos ? 0 : slash + 1;
    if (dot == std::string_view::npos || dot <= name)
        return std::string(base) + "." + tag;
    return std::string(base.substr(0, dot)) + "." + tag + std::string(base.substr(dot));
}
}  // namespace

std::string output_path(std::string_view base, const char* rank, const char* local_rank,
                        long pid, bool is_root) {
    if (usable(rank)) return with_tag(base, std::string("rank") + rank);
    if (usable(local_rank)) return with_tag(base, std::string("rank") + local_rank);
    if (is_root) return std::string(base);
    return with_tag(base, "pid" + std::to_string(pid));
}

}  // namespace mhc::record
