// What validate may still take from the host (replay::available_host_memory): MemAvailable,
// bounded by every memory cgroup limit over the process (v2 and v1), read from a folder laid out
// as / is. validate read MemAvailable alone: in a container limited to 2 GiB on a 64 GiB host it
// allocated past the limit and the kernel killed it without a word.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "mhc/replay/host_memory.hpp"
#include "mhc/replay/pages.hpp"
#include "mhc/replay/replay.hpp"
#include "mhc/sim/config.hpp"
#include "mhc/test/temp.hpp"
#include "validate_load.hpp"

namespace replay = mhc::replay;
namespace sim = mhc::sim;
namespace test = mhc::test;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

void write(const fs::path& file, const std::string& text) {
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
}

// A root with /proc/meminfo saying `avail_mib` MiB available, and the given cgroup and mountinfo lines.
void lay_out(const fs::path& root, int64_t avail_mib, const std::string& cgroup, const std::string& mountinfo) {
    write(root / "proc/meminfo", "MemTotal:       67108864 kB\nMemFree:  1000 kB\nMemAvailable:   " +
                                     std::to_string(avail_mib * 1024) + " kB\nBuffers: 0 kB\n");
    write(root / "proc/self/cgroup", cgroup);
    write(root / "proc/self/mountinfo", mountinfo);
}

const char* kV2Mount = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
const char* kV1Mount =
    "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "36 31 0:33 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu,cpuacct\n";

}   // namespace

TEST_CASE("host memory: MemAvailable alone without cgroup files, or under a limit of max", "[replay][host_memory]") {
    test::TempPath root("host-memory");
    lay_out(root.path, 4096, "", "");
    auto got = replay::available_host_memory(root.path);
    CHECK(got.available == 4096 * kMiB);
    CHECK(got.limited_by.empty());
    CHECK(got.cgroup_limit == -1);
    lay_out(root.path, 4096, "0::/job\n", kV2Mount);
    write(fs::path(root.path) / "sys/fs/cgroup/job/memory.max", "max\n");
    write(fs::path(root.path) / "sys/fs/cgroup/job/memory.current", "1000\n");
    got = replay::available_host_memory(root.path);
    CHECK(got.available == 4096 * kMiB);
    CHECK(got.limited_by.empty());
    // v1's "no limit" is the largest page-aligned 64-bit number.
    lay_out(root.path, 4096, "4:memory:/\n", kV1Mount);
    write(fs::path(root.path) / "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    write(fs::path(root.path) / "sys/fs/cgroup/memory/memory.usage_in_bytes", "5000\n");
    CHECK(replay::available_host_memory(root.path).available == 4096 * kMiB);
}

TEST_CASE("host memory: a cgroup v2 limit below MemAvailable bounds it, inactive page cache given back",
          "[replay][host_memory]") {
    test::TempPath root("host-memory");
    const fs::path cg = fs::path(root.path) / "sys/fs/cgroup/system.slice/job.service";
    lay_out(root.path, 60000, "0::/system.slice/job.service\n", kV2Mount);
    // 2048 MiB limit, 1500 MiB charged of which 300 MiB inactive file pages: 2048 - 1200 = 848 MiB.
    write(cg / "memory.max", std::to_string(2048 * kMiB) + "\n");
    write(cg / "memory.current", std::to_string(1500 * kMiB) + "\n");
    write(cg / "memory.stat", "anon 1000\nfile 5\nactive_file 7\ninactive_file " + std::to_string(300 * kMiB) + "\n");
    auto got = replay::available_host_memory(root.path);
    CHECK(got.available == 848 * kMiB);
    CHECK(got.cgroup_limit == 2048 * kMiB);
    CHECK(got.limited_by ==
          "the memory cgroup's limit (memory.max of /sys/fs/cgroup/system.slice/job.service: "
          "2.00 GiB, 1.17 GiB of it in use)");
    // A parent's tighter limit binds the child: 1024 MiB - 900 MiB (no memory.stat) = 124 MiB.
    write(cg.parent_path() / "memory.max", std::to_string(1024 * kMiB) + "\n");
    write(cg.parent_path() / "memory.current", std::to_string(900 * kMiB) + "\n");
    got = replay::available_host_memory(root.path);
    CHECK(got.available == 124 * kMiB);
    CHECK(got.limited_by.find("memory.max of /sys/fs/cgroup/system.slice: 1.00 GiB") != std::string::npos);
    // MemAvailable below both: the host's figure, said as such.
    lay_out(root.path, 100, "0::/system.slice/job.service\n", kV2Mount);
    got = replay::available_host_memory(root.path);
    CHECK(got.available == 100 * kMiB);
    CHECK(got.limited_by.empty());
    // Usage past the limit (possible a moment under reclaim): no room, never negative.
    lay_out(root.path, 60000, "0::/system.slice/job.service\n", kV2Mount);
    write(cg / "memory.current", std::to_string(3000 * kMiB) + "\n");
    write(cg / "memory.stat", "inactive_file 0\n");
    CHECK(replay::available_host_memory(root.path).available == 0);
}

TEST_CASE("host memory: a container's view (cgroup namespace, or v1 mounted at its own cgroup)",
          "[replay][host_memory]") {
    test::TempPath root("host-memory");
    // cgroup namespace: the process sees itself at / and the mount shows its own cgroup.
    lay_out(root.path, 60000, "0::/\n", kV2Mount);
    write(fs::path(root.path) / "sys/fs/cgroup/memory.max", std::to_string(512 * kMiB) + "\n");
    write(fs::path(root.path) / "sys/fs/cgroup/memory.current", std::to_string(12 * kMiB) + "\n");
    CHECK(replay::available_host_memory(root.path).available == 500 * kMiB);
    // Docker on cgroup v1 without a namespace: /proc/self/cgroup names /docker/ID, and the memory
    // hierarchy is mounted from /docker/ID; total_inactive_file is given back.
    test::TempPath v1("host-memory");
    lay_out(v1.path, 60000, "12:pids:/docker/abc\n4:memory:/docker/abc\n1:name=systemd:/docker/abc\n",
            "22 1 8:1 / / rw - overlay overlay rw\n"
            "35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n");
    const fs::path mem = fs::path(v1.path) / "sys/fs/cgroup/memory";
    write(mem / "memory.limit_in_bytes", std::to_string(1024 * kMiB) + "\n");
    write(mem / "memory.usage_in_bytes", std::to_string(600 * kMiB) + "\n");
    write(mem / "memory.stat", "cache 1\ninactive_file 7\ntotal_inactive_file " + std::to_string(100 * kMiB) + "\n");
    const auto got = replay::available_host_memory(v1.path);
    CHECK(got.available == 524 * kMiB);   // 1024 - (600 - 100)
    CHECK(got.limited_by.find("memory.limit_in_bytes of /sys/fs/cgroup/memory: 1.00 GiB") != std::string::npos);
    // A mount point written with an escaped space (\040).
    test::TempPath sp("host-memory");
    lay_out(sp.path, 60000, "0::/a b\n", "30 23 0:26 / /cg\\040root rw - cgroup2 cgroup2 rw\n");
    write(fs::path(sp.path) / "cg root/a b/memory.max", std::to_string(256 * kMiB) + "\n");
    write(fs::path(sp.path) / "cg root/a b/memory.current", "0\n");
    CHECK(replay::available_host_memory(sp.path).available == 256 * kMiB);
}

// The margins a replay's pool and host arena get beyond the prediction scale with it: a fixed
// 64 MiB each made a tiny trace's validation several times its memory (a 40 MiB peak: 214 MB of RSS).
TEST_CASE("host memory: the replay's margins are an eighth of what they pad, between 4 and 64 MiB",
          "[replay][host_memory]") {
    // Unlimited caching baseline of 40 MiB: 40 + 40/64 + 5 (an eighth) MiB.
    CHECK(replay::replay_capacity(sim::kUnlimited, 40 * kMiB, "caching") == 40 * kMiB + 40 * kMiB / 64 + 5 * kMiB);
    // 8 MiB: the 4 MiB floor; 8 GiB: the 64 MiB ceiling, as before.
    CHECK(replay::replay_capacity(sim::kUnlimited, 8 * kMiB, "caching") == 8 * kMiB + 8 * kMiB / 64 + 4 * kMiB);
    CHECK(replay::replay_capacity(sim::kUnlimited, 8192 * kMiB, "ideal") == 8192 * kMiB + 1024 * kMiB + 64 * kMiB);
    CHECK(replay::replay_capacity(100 * kMiB, 40 * kMiB, "caching") == 100 * kMiB);   // a limit is the limit
}

// The kernel's resident set counts a page once per mapping: the page pool's aliases (pages past
// distinct_pages show the memory below them) and freed ranges left mapped beside the range that
// took their pages were counted twice in validate's process_peak_rss_bytes (gpt2-small, 2 layers:
// 1,162.7 MiB for about 1.04 GB in use).
TEST_CASE("host memory: a pool page mapped twice is counted once in validate's peak memory", "[replay][host_memory]") {
    constexpr int64_t kPage = replay::PageMapper::kPage;
    // Stale mappings: pool pages 0 and 1 at virtual pages 0-1, unmapped (left mapped), then at 4-5.
    auto stale = replay::make_host_mapper(4, 8 * kPage);
    const int32_t two[2] = {0, 1};
    stale->map(0, two, 2);
    CHECK(stale->aliased_host_bytes() == 0);
    stale->unmap(0, 2);
    stale->map(4 * kPage, two, 2);
    CHECK(stale->aliased_host_bytes() == 2 * kPage);   // 4 virtual pages show 2 pool pages

    // A premapped pool of 48 pages (96 MiB) over 8 pages of memory (16 MiB): 40 pages aliased.
    mhc::replay::detail::ResidentPeak peak;
    peak.sample(0);
    const int64_t hwm_before = mhc::replay::detail::peak_resident_bytes();
    const int64_t before = mhc::replay::detail::resident_bytes();
    REQUIRE(before > 0);
    auto pool = replay::make_host_mapper(48, 64 * kPage, true, 8);
    CHECK(pool->aliased_host_bytes() == 40 * kPage);
    // The kernel counts the 48 pages mapped (96 MiB more)...
    CHECK(mhc::replay::detail::resident_bytes() - before >= 90 * kMiB);
    peak.sample(pool->aliased_host_bytes());
    // ... the memory is 16 MiB more (8 MiB of slack: page tables, the mapper's vectors). Before:
    // ru_maxrss, at least before + 96 MiB.
    CHECK(peak.bytes() <= std::max(hwm_before, before + 16 * kMiB) + 8 * kMiB);
    CHECK(peak.bytes() >= before + 16 * kMiB);
    pool.reset();
    peak.sample(0);
    CHECK(peak.bytes() <= std::max(hwm_before, before + 16 * kMiB) + 8 * kMiB);   // the hwm less the most aliased
}
