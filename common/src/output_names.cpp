// The checks on an output's name (output_file.hpp): what may not be written or replaced, and the
// names of temporary files, with those a killed process left behind.
#include "output_names.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "mhc/common/error.hpp"
#include "mhc/common/hash.hpp"
#include "mhc/common/output_file.hpp"

namespace mhc {

namespace output_names {

bool process_alive(long pid) {
    if (pid <= 0) return false;
    return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

long pid_after(const std::string& name, const std::string& base, const char* marker) {
    std::string prefix = base + marker;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
    long pid = 0;
    for (size_t i = prefix.size(); i < name.size(); ++i) {
        if (name[i] < '0' || name[i] > '9' || pid > 100000000) return -1;
        pid = pid * 10 + (name[i] - '0');
    }
    return pid;
}

const char* kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "directory";
    if (S_ISCHR(mode)) return "character device";
    if (S_ISBLK(mode)) return "block device";
    if (S_ISFIFO(mode)) return "FIFO";
    if (S_ISSOCK(mode)) return "socket";
    return "special file";
}

std::string link_target(const std::string& path) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(path, ec);
    return ec ? std::string("?") : target.string();
}

// Removes the logs of the file an output replaces (sqlite_log_beside), and a write-ahead log's
// index (-shm) with its log: the new file is not the database they belong to.
void remove_sqlite_logs(const std::string& path) {
    for (std::string log = sqlite_log_beside(path); !log.empty(); log = sqlite_log_beside(path)) {
        if (::unlink(log.c_str()) != 0)
            throw Error(path + ": " + log + ", an SQLite log of the file replaced, cannot be removed: " +
                        std::strerror(errno) + "; the new file is not moved into place");
        if (log.ends_with("-wal")) ::unlink((path + "-shm").c_str());
    }
}

}  // namespace output_names

using output_names::kind_of;
using output_names::link_target;
using output_names::pid_after;
using output_names::process_alive;

namespace {

long name_max(const std::string& dir) {
    long limit = ::pathconf(dir.c_str(), _PC_NAME_MAX);
    return limit > 0 ? limit : 255;
}

// "<name>" or, when "<name>.mhc-tmp-<pid>-journal" would pass the limit on a name, the start of
// <name> and a hash of the whole (the same for every process: stale files are found by it).
std::string temp_stem(const std::string& dir, const std::string& base) {
    constexpr size_t kSuffix = sizeof(".mhc-tmp-") - 1 + 10 + sizeof("-journal") - 1;   // pid: at most 10 digits
    const size_t limit = static_cast<size_t>(name_max(dir));
    if (base.size() + kSuffix <= limit) return base;
    const std::string hash = "~" + Fnv1a().add(base).hex();
    const size_t keep = limit > kSuffix + 17 ? limit - kSuffix - 17 : 0;
    return base.substr(0, keep) + hash;
}

void split(const std::string& path, std::string& dir, std::string& base) {
    std::filesystem::path parts(path);
    dir = parts.has_parent_path() ? parts.parent_path().string() : ".";
    base = parts.filename().string();
}

}  // namespace

void refuse_input_as_output(const std::string& input, const std::string& output) {
    std::error_code ec;
    if (!input.empty() && std::filesystem::equivalent(input, output, ec) && !ec)
        throw Error(output + ": is the input file " + input + "; write the output to another file");
}

namespace {

// Where `path`, or a link on the way from it to its file, lies in /proc (/dev/stdout ->
// /proc/self/fd/1, /dev/fd/1 in /dev/fd -> /proc/self/fd): a descriptor of the process, whatever
// it is open on. "" when it is not.
std::string descriptor_link(const std::string& path) {
    namespace fs = std::filesystem;
    auto in_proc = [](const fs::path& dir) {
        std::error_code ec;
        const std::string real = fs::weakly_canonical(dir.empty() ? fs::path(".") : dir, ec).string();
        return !ec && (real == "/proc" || real.rfind("/proc/", 0) == 0);
    };
    fs::path at(path);
    for (int hop = 0; hop < 40; ++hop) {
        if (in_proc(at.parent_path())) return at.string();
        std::error_code ec;
        if (!fs::is_symlink(fs::symlink_status(at, ec)) || ec) return "";
        fs::path target = fs::read_symlink(at, ec);
        if (ec) return "";
        at = target.is_relative() ? at.parent_path() / target : target;
    }
    return "";
}

}   // namespace

// A write-ahead log begins with magic 0x377f0682 or 0x377f0683, a rollback journal with
// d9d505f920a163d7 (sqlite.org/fileformat.html, sections 4.1 and 4.2); an empty log, or a journal
// whose header is zeroed, is not applied. Left by a process killed while writing the earlier file,
// or one that has it open in WAL mode.
std::string sqlite_log_beside(const std::string& path) {
    static const struct {
        const char* suffix;
        unsigned char magic[8];
        size_t size;
    } kLogs[] = {{"-wal", {0x37, 0x7f, 0x06, 0x82}, 4},
                 {"-wal", {0x37, 0x7f, 0x06, 0x83}, 4},
                 {"-journal", {0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7}, 8}};
    for (const auto& log : kLogs) {
        std::string side = path + log.suffix;
        const int fd = ::open(side.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat st {};
        unsigned char head[8] = {};
        const bool applied = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                             ::pread(fd, head, log.size, 0) == static_cast<ssize_t>(log.size) &&
                             std::memcmp(head, log.magic, log.size) == 0;
        ::close(fd);
        if (applied) return side;
    }
    return "";
}

void refuse_sqlite_side_file(const std::string& path) {
    static const char* const kSides[][2] = {
        {"-journal", "journal"}, {"-wal", "write-ahead log"}, {"-shm", "shared-memory index"}};
    for (const auto& [suffix, name] : kSides) {
        const size_t length = std::strlen(suffix);
        if (path.size() <= length || path.compare(path.size() - length, length, suffix) != 0) continue;
        const std::string db = path.substr(0, path.size() - length);
        struct stat st {};
        if (::stat(db.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
        char head[16] = {};
        FILE* file = std::fopen(db.c_str(), "rb");
        const bool sqlite = file && std::fread(head, 1, sizeof head, file) == sizeof head &&
                            std::memcmp(head, "SQLite format 3", sizeof head) == 0;
        if (file) std::fclose(file);
        if (sqlite)
            throw Error(path + ": is the name of " + db + "'s " + name + " (" + db +
                        " is an SQLite database): SQLite would take the file for an interrupted write of " + db +
                        " and remove it when " + db + " is next opened; name another file");
        return;
    }
}

void refuse_unreachable_name(const std::string& path) {
    // A name past the limits on a name (255 bytes) or a path: every command met it late, after
    // the work (a rename that failed, a runs database SQLite could not open: exit 4) or as an
    // internal error (std::filesystem's "status: File name too long").
    // A loop of symbolic links in its folders (ELOOP) was said five ways ("unable to open database
    // file", "cannot write", "is not a directory", ...), some after the work.
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) return;
    if (errno == ENAMETOOLONG)
        throw Error(path + ": cannot be reached: " + std::strerror(ENAMETOOLONG) + " (at most " +
                    std::to_string(name_max(".")) + " bytes a name, " + std::to_string(PATH_MAX) + " a path)");
    if (errno == ELOOP) throw Error(path + ": cannot be reached: " + std::strerror(ELOOP));
}

void refuse_special_file(const std::string& path) {
    refuse_unreachable_name(path);
    refuse_sqlite_side_file(path);
    // Written through, or replaced, such a link would be the shell's redirection target or the
    // link itself (as root, /dev/stdout): neither is the file the user named.
    if (const std::string fd = descriptor_link(path); !fd.empty()) {
        // /proc/self/fd/1 is a descriptor; /proc/cpuinfo, /proc/self/environ are the kernel's
        // files (they were called descriptors too).
        std::error_code ec;
        const std::string folder =
            std::filesystem::weakly_canonical(std::filesystem::path(fd).parent_path(), ec).filename().string();
        const bool descriptor = folder == "fd" || folder == "fdinfo";
        throw Error(path + (fd == path ? "" : ": is a symbolic link to " + fd) +
                    (descriptor ? ": a descriptor of this process, not a file; name a file"
                                : ": a file of /proc (the kernel's), not a file mhc reads or writes; name a file"));
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;
    struct stat lst {};
    const bool link = ::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode);
    throw Error(path + ": is " + (link ? "a symbolic link to " + link_target(path) + ", " : std::string()) + "a " +
                kind_of(st.st_mode) + ", not a regular file");
}

std::string temp_name(const std::string& path, long pid) {
    std::string dir, base;
    split(path, dir, base);
    std::filesystem::path parts(path);
    return (parts.has_parent_path() ? parts.parent_path().string() + "/" : std::string()) + temp_stem(dir, base) + ".mhc-tmp-" +
           std::to_string(pid);
}

int remove_stale_temps(const std::string& path) {
    namespace fs = std::filesystem;
    std::string dir, base;
    split(path, dir, base);
    const std::string stem = temp_stem(dir, base);
    int removed = 0;
    DIR* folder = ::opendir(dir.c_str());
    if (!folder) return 0;
    while (dirent* entry = ::readdir(folder)) {
        std::string name = entry->d_name;
        long pid = -1;
        for (const char* marker : {".mhc-tmp-", ".tmp-", ".importing-"})
            if ((pid = pid_after(name, base, marker)) > 0 || (pid = pid_after(name, stem, marker)) > 0) break;
        if (pid <= 0 || process_alive(pid)) continue;
        std::string full = (fs::path(dir) / name).string();
        if (::unlink(full.c_str()) == 0) ++removed;
        ::unlink((full + "-journal").c_str());
    }
    ::closedir(folder);
    return removed;
}

std::string already_exists(const std::string& path, const std::string& along, const std::string& note) {
    return path + ": already exists" + note + "; pass --force to replace it" + (along.empty() ? "" : " (and " + along + ")");
}

}  // namespace mhc
