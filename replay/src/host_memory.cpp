// The memory this process may still take (host_memory.hpp): MemAvailable, bounded by the room
// left under every memory cgroup limit that holds the process (v2's memory.max, v1's
// memory.limit_in_bytes), from its own cgroup up to the hierarchy's root as this process sees it.
#include "mhc/replay/host_memory.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "mhc/common/units.hpp"

namespace mhc::replay {

namespace {

std::string read_first_line(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    if (!in || !std::getline(in, line)) return {};
    return line;
}

// A whole number of bytes as a cgroup file writes it; -1 for "max", nothing or anything else.
int64_t parse_bytes(const std::string& text) {
    if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos) return -1;
    return static_cast<int64_t>(std::stoull(text));
}

// A key's value in a "key value" file (memory.stat, /proc/meminfo), -1 when absent.
int64_t stat_value(const std::string& path, const std::string& key) {
    std::ifstream in(path);
    std::string k, v;
    while (in >> k >> v) {
        if (k == key) return parse_bytes(v);
        in.ignore(1 << 20, '\n');
    }
    return -1;
}

// mountinfo writes a space, tab, newline and backslash in a path as \040, \011, \012, \134.
std::string unescape_mount_path(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        const auto octal = [&](size_t j) { return j < s.size() && s[j] >= '0' && s[j] <= '7'; };
        if (s[i] == '\\' && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
            out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
            i += 3;
        } else {
            out += s[i];
        }
    }
    return out;
}

struct Mount {
    std::string root, point;   // the mount's root within its hierarchy, and where it is mounted
};

// The mount of the cgroup2 hierarchy (v2) or of the v1 hierarchy with the memory controller.
bool find_mount(const std::string& root, bool v2, Mount& found) {
    std::ifstream in(root + "/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::vector<std::string> f;
        for (std::string w; fields >> w;) f.push_back(w);
        const auto dash = std::find(f.begin(), f.end(), "-");
        // "... - TYPE SOURCE SUPER_OPTIONS": v1's controllers are among the super options.
        if (f.size() < 5 || dash == f.end() || f.end() - dash < 4) continue;
        const std::string& type = dash[1];
        const std::string& super = dash[3];
        if (v2 ? type != "cgroup2" : type != "cgroup" || ("," + super + ",").find(",memory,") == std::string::npos)
            continue;
        found = {unescape_mount_path(f[3]), unescape_mount_path(f[4])};
        return true;
    }
    return false;
}

// The room under one cgroup folder's limit, -1 when it has none (or it cannot be read).
struct Room {
    int64_t room = -1, limit = -1, used = -1;
    std::string file;
};
Room room_in(const std::string& dir, bool v2) {
    Room r;
    r.file = v2 ? "memory.max" : "memory.limit_in_bytes";
    r.limit = parse_bytes(read_first_line(dir + "/" + r.file));
    // v1 writes "no limit" as the largest page-aligned 64-bit number (9223372036854771712).
    if (r.limit < 0 || r.limit >= (int64_t{1} << 62)) return r;
    r.used = parse_bytes(read_first_line(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes")));
    if (r.used < 0) return r;
    int64_t inactive = stat_value(dir + "/memory.stat", v2 ? "inactive_file" : "total_inactive_file");
    if (inactive < 0 && !v2) inactive = stat_value(dir + "/memory.stat", "inactive_file");
    const int64_t used = std::max<int64_t>(r.used - std::max<int64_t>(inactive, 0), 0);
    r.room = std::max<int64_t>(r.limit - used, 0);
    return r;
}

// The tightest room over the cgroups holding this process in one hierarchy (v2, or v1's memory).
void bound_by_cgroups(const std::string& root, bool v2, const std::string& cgroup_path, HostMemory& out) {
    Mount mount;
    if (!find_mount(root, v2, mount)) return;
    // The process's path is relative to the hierarchy's root as its cgroup namespace sees it;
    // the mount shows the hierarchy from mount.root down.
    std::string rel = cgroup_path;
    if (mount.root != "/" && rel.compare(0, mount.root.size(), mount.root) == 0 &&
        (rel.size() == mount.root.size() || rel[mount.root.size()] == '/'))
        rel = rel.substr(mount.root.size());
    else if (mount.root != "/") rel.clear();   // not below the mount's root (another namespace's view): the mount's own
    while (!rel.empty() && rel.back() == '/') rel.pop_back();
    const std::string base = root + mount.point;
    for (;;) {
        const Room r = room_in(base + rel, v2);
        if (r.room >= 0 && (out.cgroup_limit < 0 || r.limit < out.cgroup_limit)) out.cgroup_limit = r.limit;
        if (r.room >= 0 && (out.available < 0 || r.room < out.available)) {
            out.available = r.room;
            out.limited_by = "the memory cgroup's limit (" + r.file + " of " + mount.point + (rel.empty() ? "" : rel) +
                             ": " + format_bytes(r.limit) + ", " + format_bytes(r.limit - r.room) + " of it in use)";
        }
        if (rel.empty()) break;
        const size_t slash = rel.rfind('/');
        rel = slash == std::string::npos ? std::string() : rel.substr(0, slash);
    }
}

}   // namespace

HostMemory available_host_memory(const std::string& root) {
    HostMemory out;
    const int64_t kib = stat_value(root + "/proc/meminfo", "MemAvailable:");
    if (kib >= 0) out.available = kib * 1024;
    // /proc/self/cgroup: "0::/path" for v2, "N:memory,...:/path" for v1's memory hierarchy.
    std::ifstream in(root + "/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line)) {
        const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
        if (b == std::string::npos) continue;
        const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
        if (line.compare(0, a, "0") == 0 && controllers.empty()) bound_by_cgroups(root, true, path, out);
        else if (("," + controllers + ",").find(",memory,") != std::string::npos)
            bound_by_cgroups(root, false, path, out);
    }
    return out;
}

}   // namespace mhc::replay
