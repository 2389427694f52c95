#include "mhc/common/output_file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "mhc/common/error.hpp"
#include "mhc/common/hash.hpp"
#include "mhc/common/made_directory.hpp"

namespace mhc {

namespace {

// Temporary files to remove on a fatal signal. The handler may only call async-signal-safe
// functions: each slot's name is written into its own buffer before the slot is published with
// an atomic flag, and a buffer is never freed (a later file reuses it), so the handler never
// reads freed memory. Enough slots for a job's every rank file (generate --all-ranks: 4096).
constexpr int kSlots = 8192;
struct Slot {
    std::atomic<bool> used{false};
    std::atomic<bool> directory{false};   // a folder made for outputs (MadeDirectory): rmdir, after the files
    char* name = nullptr;
    size_t capacity = 0;
    // The file the temporary one becomes (an OutputFile's target; "" for a TempFile or a
    // folder): named by the line the handler says.
    char* target = nullptr;
    size_t target_capacity = 0;
};
Slot g_slots[kSlots];
std::mutex g_mutex;   // guards claiming slots and installing handlers (not the handler itself)
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous[3];

// While a set of files is moved into place together (commit_together), or a command stores what
// it computed (SignalsDeferred), a signal waits until the last holder lets go, on whatever thread
// it arrives. Holds nest: the depth counts them.
std::atomic<int> g_hold_depth{0};
std::atomic<int> g_held{0};
// The line said at once when a SignalsDeferred holds the first signal (set before it holds).
std::atomic<const char*> g_note{nullptr};
size_t g_note_size = 0;
// The outputs this process moved into place (OutputFile::commit), newest first, chained from
// here: each name published whole and kept for the process's life (the handler may be reading
// it), and reachable, so that a leak checker (the fuzzers' sanitizer) does not take the older
// ones for leaks. One that commit_together removed again is marked gone.
thread_local int t_not_outputs = 0;   // NotOutputs alive on this thread
struct WrittenName {
    WrittenName* before;
    std::string name;
    std::atomic<bool> gone{false};
};
std::atomic<WrittenName*> g_written_names{nullptr};
// What the command leaves besides its files (set_stop_note), said after them: the current one,
// and every one set before, kept for the process's life as the names are (the handler may be
// reading an older one).
std::atomic<const char*> g_stop_note{nullptr};
std::atomic<WrittenName*> g_stop_notes{nullptr};

// Async-signal-safe pieces of the line the handler says.
void append(char* line, size_t& at, size_t cap, const char* text) {
    for (; text && *text && at + 1 < cap; ++text) line[at++] = *text;
}
void append_count(char* line, size_t& at, size_t cap, int64_t n) {
    char digits[24];
    int used = 0;
    do digits[used++] = static_cast<char>('0' + n % 10);
    while ((n /= 10) > 0 && used < 20);
    while (used > 0 && at + 1 < cap) line[at++] = digits[--used];
}
// The length of `path`'s folder part, its last '/' included (0: none).
size_t folder_length(const char* path) {
    size_t length = 0;
    for (size_t i = 0; path[i]; ++i)
        if (path[i] == '/') length = i + 1;
    return length;
}
bool same_folder(const char* first, const char* second) {
    const size_t length = folder_length(first);
    if (length != folder_length(second)) return false;
    for (size_t i = 0; i < length; ++i)
        if (first[i] != second[i]) return false;
    return true;
}

// A set of files, named in one line: up to kShown of them (the first ones and the last).
constexpr int kShown = 6;
struct FileSet {
    const char* shown[kShown] = {};   // the first kShown - 1, then the last (in `last`)
    const char* last = nullptr;
    int64_t count = 0;
    bool one_folder = true;   // every file in the folder of the first
    void add(const char* name) {
        if (count > 0 && !same_folder(shown[0], name)) one_folder = false;
        if (count < kShown - 1) shown[count] = name;
        last = name;
        ++count;
    }
};

// "csv/a.csv"; "16 files in csv/ (a.csv, b.csv, c.csv, d.csv, e.csv, ..., z.csv)";
// "a.db and b.json"; "a.db, b.json, ..., z.csv (9 files)": every file is counted, and each shown
// is named as given.
void append_set(char* line, size_t& at, size_t cap, const FileSet& set) {
    if (set.count == 1) return append(line, at, cap, set.last);
    const int64_t listed = set.count <= kShown ? set.count : kShown - 1;
    const size_t skip = set.one_folder ? folder_length(set.last) : 0;
    if (set.one_folder && skip > 0) {
        append_count(line, at, cap, set.count);
        append(line, at, cap, " files in ");
        const size_t start = at;
        append(line, at, cap, set.last);
        at = start + skip < at ? start + skip : at;   // the folder alone
        append(line, at, cap, " (");
    }
    for (int64_t i = 0; i < listed; ++i) {
        const char* name = i < kShown - 1 ? set.shown[i] : set.last;
        if (i > 0) append(line, at, cap, i + 1 == set.count && !(set.one_folder && skip > 0) ? " and " : ", ");
        append(line, at, cap, name + skip);
    }
    if (set.count > kShown) {
        append(line, at, cap, ", ..., ");
        append(line, at, cap, set.last + skip);
    }
    if (set.one_folder && skip > 0) append(line, at, cap, ")");
    else if (set.count > kShown) {
        append(line, at, cap, " (");
        append_count(line, at, cap, set.count);
        append(line, at, cap, " files)");
    }
}

// On a signal that stops the command: one line naming what it leaves, the outputs written whole
// before it and those it was writing (their temporary files are removed: nothing of them
// appears, and a file of that name already there is left as it was). Nothing when neither.
void say_what_is_left(int sig) {
    FileSet pending, written;
    for (auto& slot : g_slots)
        if (slot.used.load() && !slot.directory.load() && slot.target && slot.target[0]) pending.add(slot.target);
    // The chain is newest first: every name is counted and its folder compared, and the oldest
    // kShown - 1 (those met last) are kept, as FileSet::add keeps the first.
    const WrittenName* newest = nullptr;
    for (const WrittenName* w = g_written_names.load(); w; w = w->before) {
        if (w->gone.load()) continue;
        if (!newest) newest = w;
        else if (!same_folder(newest->name.c_str(), w->name.c_str())) written.one_folder = false;
        ++written.count;
    }
    int64_t seen = 0;
    for (const WrittenName* w = g_written_names.load(); w; w = w->before) {
        if (w->gone.load()) continue;
        const int64_t from_oldest = written.count - 1 - seen++;
        if (from_oldest < kShown - 1) written.shown[from_oldest] = w->name.c_str();
    }
    if (newest) written.last = newest->name.c_str();
    const char* note = g_stop_note.load();
    if (note && !*note) note = nullptr;
    if (pending.count == 0 && written.count == 0 && !note) return;
    char line[2048];
    size_t at = 0;
    const size_t cap = sizeof line - 1;
    append(line, at, cap, "mhc: stopped by ");
    append(line, at, cap,
           sig == SIGINT    ? "SIGINT"
           : sig == SIGTERM ? "SIGTERM"
           : sig == SIGHUP  ? "SIGHUP"
                            : "a signal");
    if (written.count > 0) {
        append(line, at, cap, " after ");
        append_set(line, at, cap, written);
        append(line, at, cap, written.count == 1 ? " was written whole" : " were written whole");
    }
    if (pending.count > 0) {
        append(line, at, cap, written.count > 0 ? ", before " : " before ");
        append_set(line, at, cap, pending);
        append(line, at, cap,
               pending.count == 1 ? " was written (no part of it left)" : " were written (no part of them left)");
    }
    if (note) {
        append(line, at, cap, "; ");
        append(line, at, cap, note);
    }
    line[at++] = '\n';
    ssize_t ignored = ::write(STDERR_FILENO, line, at);
    (void)ignored;
}

extern "C" void remove_temps_and_die(int sig) {
    if (g_hold_depth.load() > 0) {
        const char* note = g_note.load();
        if (g_held.exchange(sig) == 0 && note != nullptr) {
            ssize_t ignored = ::write(STDERR_FILENO, note, g_note_size);
            (void)ignored;
        }
        return;
    }
    say_what_is_left(sig);
    for (auto& slot : g_slots)
        if (slot.used.load() && !slot.directory.load()) ::unlink(slot.name);
    // Then the folders made for outputs, when empty: a parent before its child fails, so again.
    for (int pass = 0; pass < 4; ++pass)
        for (auto& slot : g_slots)
            if (slot.used.load() && slot.directory.load()) ::rmdir(slot.name);
    // Then die of the signal as the process would have (exit status 128+sig in a shell).
    for (int i = 0; i < 3; ++i)
        if (kSignals[i] == sig) ::sigaction(sig, &g_previous[i], nullptr);
    ::raise(sig);
}

// Checked at every new file: a handler reset to the default since (a forked child) is put back.
void install_handlers() {
    for (int i = 0; i < 3; ++i) {
        struct sigaction cur {};
        ::sigaction(kSignals[i], nullptr, &cur);
        if (cur.sa_handler == remove_temps_and_die) continue;
        g_previous[i] = cur;
        // A command that handles the signal itself (generate's graceful SIGINT) keeps its handler:
        // it unwinds, and the destructor removes the file. An ignored signal stays ignored.
        if (cur.sa_handler != SIG_DFL || (cur.sa_flags & SA_SIGINFO)) continue;
        struct sigaction sa {};
        sa.sa_handler = remove_temps_and_die;
        sigemptyset(&sa.sa_mask);
        ::sigaction(kSignals[i], &sa, nullptr);
    }
}

// The buffers slots outgrew, kept for the process's life (the handler may still be reading one)
// and reachable from here, so that LeakSanitizer does not call them leaks (it did: every test
// that wrote a longer name into a slot, tests/trace under MHC_SANITIZE). Guarded by g_mutex.
struct Outgrown {
    Outgrown* before;
    char* buffer;
};
Outgrown* g_outgrown = nullptr;

// Copies `text` into a slot's buffer, growing it first (unused: the handler does not read it).
bool fill(char*& buffer, size_t& capacity, const std::string& text) {
    if (capacity < text.size() + 1) {
        char* bigger = new (std::nothrow) char[text.size() + 1];
        if (!bigger) return false;
        if (buffer) {
            auto* kept = new (std::nothrow) Outgrown{g_outgrown, buffer};
            if (!kept) {
                delete[] bigger;
                return false;
            }
            g_outgrown = kept;
        }
        buffer = bigger;
        capacity = text.size() + 1;
    }
    std::memcpy(buffer, text.c_str(), text.size() + 1);
    return true;
}

int claim(const std::string& name, bool directory = false, const std::string& target = "") {
    std::lock_guard<std::mutex> lock(g_mutex);
    install_handlers();
    for (int i = 0; i < kSlots; ++i) {
        Slot& s = g_slots[i];
        if (s.used.load()) continue;
        if (!fill(s.name, s.capacity, name) || !fill(s.target, s.target_capacity, target)) return -1;
        s.directory.store(directory);
        s.used.store(true);
        return i;
    }
    return -1;   // more files at once: still removed by the destructor or the next run
}

void release(int slot) {
    if (slot >= 0) g_slots[slot].used.store(false);
}

bool process_alive(long pid) {
    if (pid <= 0) return false;
    return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// "<base><marker><digits>" -> the pid, else -1.
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

}  // namespace

void refuse_input_as_output(const std::string& input, const std::string& output) {
    std::error_code ec;
    if (!input.empty() && std::filesystem::equivalent(input, output, ec) && !ec)
        throw Error(output + ": is the input file " + input + "; write the output to another file");
}

namespace {

const char* kind_of(mode_t m) {
    if (S_ISDIR(m)) return "directory";
    if (S_ISCHR(m)) return "character device";
    if (S_ISBLK(m)) return "block device";
    if (S_ISFIFO(m)) return "FIFO";
    if (S_ISSOCK(m)) return "socket";
    return "special file";
}

std::string link_target(const std::string& path) {
    std::error_code ec;
    auto t = std::filesystem::read_symlink(path, ec);
    return ec ? std::string("?") : t.string();
}

long name_max(const std::string& dir) {
    long m = ::pathconf(dir.c_str(), _PC_NAME_MAX);
    return m > 0 ? m : 255;
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
    std::filesystem::path p(path);
    dir = p.has_parent_path() ? p.parent_path().string() : ".";
    base = p.filename().string();
}

}  // namespace

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

namespace {

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

}   // namespace

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
    std::filesystem::path p(path);
    return (p.has_parent_path() ? p.parent_path().string() + "/" : std::string()) + temp_stem(dir, base) + ".mhc-tmp-" +
           std::to_string(pid);
}

int remove_stale_temps(const std::string& path) {
    namespace fs = std::filesystem;
    std::string dir, base;
    split(path, dir, base);
    const std::string stem = temp_stem(dir, base);
    int removed = 0;
    DIR* d = ::opendir(dir.c_str());
    if (!d) return 0;
    while (dirent* e = ::readdir(d)) {
        std::string name = e->d_name;
        long pid = -1;
        for (const char* marker : {".mhc-tmp-", ".tmp-", ".importing-"})
            if ((pid = pid_after(name, base, marker)) > 0 || (pid = pid_after(name, stem, marker)) > 0) break;
        if (pid <= 0 || process_alive(pid)) continue;
        std::string full = (fs::path(dir) / name).string();
        if (::unlink(full.c_str()) == 0) ++removed;
        ::unlink((full + "-journal").c_str());
    }
    ::closedir(d);
    return removed;
}

std::string already_exists(const std::string& path, const std::string& along, const std::string& note) {
    return path + ": already exists" + note + "; pass --force to replace it" + (along.empty() ? "" : " (and " + along + ")");
}

OutputFile::OutputFile(std::string path, IfExists if_exists)
    : path_(std::move(path)), if_exists_(if_exists) {
    refuse_unreachable_name(path_);
    refuse_sqlite_side_file(path_);
    struct stat lst {};
    if (::lstat(path_.c_str(), &lst) == 0) {
        const bool link = S_ISLNK(lst.st_mode);
        struct stat st {};
        const bool target = ::stat(path_.c_str(), &st) == 0;
        if (S_ISDIR(target ? st.st_mode : lst.st_mode)) throw Error(path_ + ": is a directory");
        refuse_special_file(path_);
        if (!link && !S_ISREG(lst.st_mode))
            throw Error(path_ + ": is a " + kind_of(lst.st_mode) + ", not a regular file");
        const std::string what = link ? " (a symbolic link to " + link_target(path_) + ")" : "";
        if (if_exists_ == IfExists::Refuse)
            throw Error(already_exists(path_, "everything in it", what));
        // The new file takes the link's place: say so, since the file it pointed to stays.
        if (link)
            std::fprintf(stderr, "mhc: %s is a symbolic link to %s: the link is replaced by the new file; %s is left as it is\n",
                         path_.c_str(), link_target(path_).c_str(), link_target(path_).c_str());
    }
    // A folder that is not there, said one way by every command (SQLite says "unable to open
    // database file", a stream "No such file or directory").
    const size_t slash = path_.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path_.substr(0, slash);
    struct stat ds {};
    if (::stat(dir.c_str(), &ds) != 0 && errno == ENOENT)
        throw Error(path_ + ": cannot write into " + dir + ": no such directory");
    if (::stat(dir.c_str(), &ds) == 0 && !S_ISDIR(ds.st_mode))
        throw Error(path_ + ": cannot write into " + dir + ": not a directory");
    // A folder this process may not write into (its mode, a read-only mount), said one way too:
    // SQLite said "cannot create: unable to open database file", an export "cannot write:
    // Permission denied", kernels "cannot open for writing".
    if (::faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) != 0 && (errno == EACCES || errno == EROFS))
        throw Error(path_ + ": cannot write into " + dir + ": " + std::strerror(errno));
    // A new file opened by SQLite where such a log lies got the earlier file's pages written over
    // its own (`generate -o t.db` beside a t.db-wal left by a killed writer: a trace of both,
    // which check found changed). With --force the log goes with the file it belongs to (commit).
    if (const std::string log = sqlite_log_beside(path_); !log.empty() && if_exists_ == IfExists::Refuse)
        throw Error(path_ + ": " + log + " is there, an SQLite log of an earlier " + path_ +
                    " that SQLite would apply to the new file (the earlier file's pages over it): remove it, "
                    "or pass --force to replace both");
    remove_stale_temps(path_);
    temp_ = temp_name(path_, ::getpid());
    ::unlink(temp_.c_str());   // ours from an earlier object of this process, never another's
    slot_ = claim(temp_, false, path_);
}

OutputFile::~OutputFile() {
    if (!committed_) ::unlink(temp_.c_str());
    release(slot_);
}

void OutputFile::commit() {
    if (committed_) return;
    int rc;
    if (if_exists_ == IfExists::Replace) {
        try {
            remove_sqlite_logs(path_);
        } catch (const Error&) {
            ::unlink(temp_.c_str());
            throw;
        }
        rc = ::rename(temp_.c_str(), path_.c_str());
    } else {
        // Atomic "rename unless the target exists": renameat2, or a hard link where the
        // filesystem lacks it.
        rc = ::renameat2(AT_FDCWD, temp_.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE);
        if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {
            rc = ::link(temp_.c_str(), path_.c_str());
            if (rc == 0) ::unlink(temp_.c_str());
        }
    }
    if (rc != 0) {
        int err = errno;
        ::unlink(temp_.c_str());
        if (err == EEXIST)
            throw Error(path_ + ": appeared while it was being written (another process?); not replaced");
        throw Error(path_ + ": cannot move the new file into place: " + std::strerror(err));
    }
    committed_ = true;
    // Said by the line of a signal that stops the command from here on (say_what_is_left).
    if (output_ && t_not_outputs == 0) {
        auto* written = new WrittenName{g_written_names.load(), path_};
        while (!g_written_names.compare_exchange_weak(written->before, written)) {}
    }
    release(slot_);
    slot_ = -1;
    // A test's signal at this very moment, the file in place and the command not done
    // (tests/cli/interrupt_output_test.sh): MHC_TEST_SIGNAL_AFTER_COMMIT=15.
    if (const char* hook = std::getenv("MHC_TEST_SIGNAL_AFTER_COMMIT"); hook && std::atoi(hook) > 0)
        ::raise(std::atoi(hook));
}

void set_stop_note(const std::string& note) {
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        install_handlers();
    }
    if (note.empty()) {
        g_stop_note.store(nullptr);
        return;
    }
    auto* kept = new WrittenName{g_stop_notes.load(), note};
    while (!g_stop_notes.compare_exchange_weak(kept->before, kept)) {}
    g_stop_note.store(kept->name.c_str());
}

NotOutputs::NotOutputs() { ++t_not_outputs; }
NotOutputs::~NotOutputs() { --t_not_outputs; }

MadeDirectory::MadeDirectory(const std::string& path) {
    namespace fs = std::filesystem;
    refuse_sqlite_side_file(path);   // a folder named T.db-wal: SQLite can no longer open T.db
    std::error_code ec;
    // The folders that do not exist yet, deepest first: those this object makes.
    for (fs::path p = fs::path(path).lexically_normal(); !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
        if (!made_.empty() && made_.back() == p.string()) break;   // "/" or "." is its own parent
        made_.push_back(p.string());
    }
    for (const std::string& dir : made_) slots_.push_back(claim(dir, true));
    fs::create_directories(path, ec);
    if (ec) {
        for (int slot : slots_) release(slot);
        // A file where the folder goes (`export --format csv -o t.db`): "Not a directory" named
        // nothing; say which file is in the way.
        for (fs::path part = fs::path(path).lexically_normal(); !part.empty(); part = part.parent_path()) {
            // What is in the way, said as it is (a named pipe was "a file").
            struct stat st{};
            if (::stat(part.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
                throw Error(path + ": cannot create directory: " + part.string() + " is a " +
                            (S_ISREG(st.st_mode) ? "file" : kind_of(st.st_mode)) + ", not a folder");
            if (part == part.parent_path()) break;
        }
        throw Error(path + ": cannot create directory: " + ec.message());
    }
}

MadeDirectory::~MadeDirectory() {
    for (const std::string& dir : made_) ::rmdir(dir.c_str());   // only when empty
    for (int slot : slots_) release(slot);
}

void MadeDirectory::keep() {
    made_.clear();
    for (int slot : slots_) release(slot);
    slots_.clear();
}

TempFile::TempFile(const std::string& purpose) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path dir = fs::temp_directory_path(ec);
    if (ec) dir = "/tmp";
    // Files of this purpose whose process no longer runs (killed before it could remove them).
    const std::string prefix = "mhc-" + purpose + "-";
    if (DIR* d = ::opendir(dir.c_str())) {
        while (dirent* e = ::readdir(d)) {
            std::string name = e->d_name;
            if (name.compare(0, prefix.size(), prefix) != 0) continue;
            size_t dash = name.find('-', prefix.size());
            if (dash == std::string::npos) continue;
            long pid = pid_after(name.substr(0, dash), prefix.substr(0, prefix.size() - 1), "-");
            if (pid > 0 && !process_alive(pid)) ::unlink((dir / name).c_str());
        }
        ::closedir(d);
    }
    std::string tmpl = (dir / (prefix + std::to_string(::getpid()) + "-XXXXXX")).string();
    fd_ = ::mkstemp(tmpl.data());
    if (fd_ < 0) throw Error(tmpl + ": cannot create a temporary file: " + std::strerror(errno));
    path_ = tmpl;
    slot_ = claim(path_);
}

TempFile::~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    ::unlink(path_.c_str());
    release(slot_);
}

bool TempFile::close() {
    if (fd_ < 0) return true;
    int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0;
}

namespace {

// Two commands moving their sets of files into one folder at once (two `export --format csv -o D
// --force` of different traces) interleaved their renames: D was left holding some tables of each.
// A set is moved into place under an exclusive lock (flock) on each of its folders, taken in one
// order (device, inode) by every process, so that one set replaces the other whole. A folder that
// cannot be locked (a file system without flock) is moved into unlocked, as before.
class FolderLocks {
public:
    explicit FolderLocks(const std::vector<OutputFile*>& files) {
        std::vector<std::pair<std::pair<dev_t, ino_t>, int>> opened;
        for (const OutputFile* file : files) {
            const std::string& path = file->path();
            const size_t slash = path.find_last_of('/');
            const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
            const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            struct stat st {};
            if (fd < 0) continue;
            if (::fstat(fd, &st) != 0) {
                ::close(fd);
                continue;
            }
            opened.push_back({{st.st_dev, st.st_ino}, fd});
        }
        std::sort(opened.begin(), opened.end());
        for (size_t i = 0; i < opened.size(); ++i) {
            if (i > 0 && opened[i].first == opened[i - 1].first) {   // the same folder again
                ::close(opened[i].second);
                continue;
            }
            while (::flock(opened[i].second, LOCK_EX) != 0 && errno == EINTR) {}
            fds_.push_back(opened[i].second);
        }
    }
    ~FolderLocks() {
        for (int fd : fds_) ::close(fd);   // closing the descriptor lets go of its lock
    }
    FolderLocks(const FolderLocks&) = delete;
    FolderLocks& operator=(const FolderLocks&) = delete;

private:
    std::vector<int> fds_;
};

}   // namespace

void commit_together(const std::vector<OutputFile*>& files) {
    const FolderLocks locks(files);
    // Held back on this thread (a command's own handler, generate's SIGINT flag, runs later) and,
    // for the handler that removes temporary files, on every thread.
    sigset_t held, before;
    sigemptyset(&held);
    for (int sig : kSignals) sigaddset(&held, sig);
    ::pthread_sigmask(SIG_BLOCK, &held, &before);
    g_hold_depth.fetch_add(1);
    auto release = [&] {
        const bool outermost = g_hold_depth.fetch_sub(1) == 1;
        ::pthread_sigmask(SIG_SETMASK, &before, nullptr);   // a signal blocked here is delivered now
        // Inside a SignalsDeferred, the signal waits for it to let go.
        if (outermost)
            if (int sig = g_held.exchange(0)) remove_temps_and_die(sig);
    };
    size_t done = 0;
    try {
        for (; done < files.size(); ++done) files[done]->commit();
    } catch (...) {
        for (size_t i = 0; i < done; ++i) {
            ::unlink(files[i]->path().c_str());
            // No longer written whole: a signal's line does not name it.
            for (WrittenName* w = g_written_names.load(); w; w = w->before)
                if (w->name == files[i]->path() && !w->gone.load()) {
                    w->gone.store(true);
                    break;
                }
        }
        release();
        throw;
    }
    release();
}

SignalsDeferred::SignalsDeferred(std::string note) : note_(std::move(note)) {
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        install_handlers();
    }
    if (g_hold_depth.load() == 0) {
        g_held.store(0);
        g_note_size = note_.size();
        g_note = note_.c_str();
    }
    g_hold_depth.fetch_add(1);
}

SignalsDeferred::~SignalsDeferred() {
    if (int sig = release()) remove_temps_and_die(sig);   // not asked: die of it as without the hold
}

int SignalsDeferred::release() {
    if (released_) return 0;
    released_ = true;
    if (g_hold_depth.fetch_sub(1) != 1) return 0;   // an outer hold answers for it
    g_note = nullptr;
    return g_held.exchange(0);
}

void write_file_atomically(const std::string& path, std::string_view content, IfExists if_exists) {
    OutputFile out(path, if_exists);
    FILE* f = std::fopen(out.temp_path().c_str(), "wb");
    if (!f) throw Error(path + ": cannot open for writing: " + std::strerror(errno));
    bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size();
    ok = (std::fclose(f) == 0) && ok;
    if (!ok) throw Error(path + ": write failed (disk full?)");
    out.commit();
}

}  // namespace mhc
