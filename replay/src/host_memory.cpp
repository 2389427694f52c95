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
    std::string name, value;
    while (in >> name >> value) {
        if (name == key) return parse_bytes(value);
        in.ignore(1 << 20, '\n');
    }
    return -1;
}

// mountinfo writes a space, tab, newline and backslash in a path as \040, \011, \012, \134.
std::string unescape_mount_path(const std::string& text) {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
        const auto octal = [&](size_t at) { return at < text.size() && text[at] >= '0' && text[at] <= '7'; };
        if (text[i] == '\\' && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
            out += static_cast<char>((text[i + 1] - '0') * 64 + (text[i + 2] - '0') * 8 + (text[i + 3] - '0'));
            i += 3;
        } else {
            out += text[i];
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
        std::vector<std::string> words;
        for (std::string word; fields >> word;) words.push_back(word);
        const auto dash = std::find(words.begin(), words.end(), "-");
        // "... - TYPE SOURCE SUPER_OPTIONS": v1's controllers are among the super options.
        if (words.size() < 5 || dash == words.end() || words.end() - dash < 4) continue;
        const std::string& type = dash[1];
        const std::string& super = dash[3];
        if (v2 ? type != "cgroup2" : type != "cgroup" || ("," + super + ",").find(",memory,") == std::string::npos)
            continue;
        found = {unescape_mount_path(words[3]), unescape_mount_path(words[4])};
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
    Room room;
    room.file = v2 ? "memory.max" : "memory.limit_in_bytes";
    room.limit = parse_bytes(read_first_line(dir + "/" + room.file));
    // v1 writes "no limit" as the largest page-aligned 64-bit number (9223372036854771712).
    if (room.limit < 0 || room.limit >= (int64_t{1} << 62)) return room;
    room.used = parse_bytes(read_first_line(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes")));
    if (room.used < 0) return room;
    int64_t inactive = stat_value(dir + "/memory.stat", v2 ? "inactive_file" : "total_inactive_file");
    if (inactive < 0 && !v2) inactive = stat_value(dir + "/memory.stat", "inactive_file");
    const int64_t used = std::max<int64_t>(room.used - std::max<int64_t>(inactive, 0), 0);
    room.room = std::max<int64_t>(room.limit - used, 0);
    return room;
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
        const Room here = room_in(base + rel, v2);
        if (here.room >= 0 && (out.cgroup_limit < 0 || here.limit < out.cgroup_limit)) out.cgroup_limit = here.limit;
        if (here.room >= 0 && (out.available < 0 || here.room < out.available)) {
            out.available = here.room;
            out.limited_by = "the memory cgroup's limit (" + here.file + " of " + mount.point +
                             (rel.empty() ? "" : rel) + ": " + format_bytes(here.limit) + ", " +
                             format_bytes(here.limit - here.room) + " of it in use)";
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
        const size_t one = line.find(':'), two = one == std::string::npos ? one : line.find(':', one + 1);
        if (two == std::string::npos) continue;
        const std::string controllers = line.substr(one + 1, two - one - 1), path = line.substr(two + 1);
        if (line.compare(0, one, "0") == 0 && controllers.empty()) bound_by_cgroups(root, true, path, out);
        else if (("," + controllers + ",").find(",memory,") != std::string::npos)
            bound_by_cgroups(root, false, path, out);
    }
    return out;
}

}   // namespace mhc::replay
