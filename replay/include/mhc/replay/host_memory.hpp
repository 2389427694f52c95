#pragma once
// How much memory this process may still take before the kernel's OOM killer ends it: the
// host's MemAvailable, or less where a memory cgroup (v1 or v2: a container's limit, a systemd
// unit's MemoryMax) that holds this process has less room left. validate refuses a replay whose
// page pool and host arena need more, before it allocates them.
#include <cstdint>
#include <string>

namespace mhc::replay {

struct HostMemory {
    int64_t available = -1;   // bytes; -1 when neither /proc/meminfo nor a cgroup could be read
    // What set `available`, for the message that refuses a replay: "" for the host's
    // MemAvailable, else the cgroup, e.g. "the memory cgroup's limit (memory.max of
    // /sys/fs/cgroup/job: 2.00 GiB, 1.20 GiB of it in use)".
    std::string limited_by;
    // The smallest memory cgroup limit over the process, in bytes; -1 when none limits it.
    int64_t cgroup_limit = -1;
};

// `root` prefixes every path read (/proc/self/cgroup, /proc/self/mountinfo, /proc/meminfo and
// the cgroup files under the mount points): "" on a real system, a folder laid out alike in
// tests. Every cgroup from the process's own up to its mount's root counts (a parent's limit
// binds its children); a limit's room is the limit less the usage, the inactive page cache
// (which the kernel reclaims before it kills) given back.
HostMemory available_host_memory(const std::string& root = "");

}   // namespace mhc::replay
