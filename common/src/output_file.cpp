#include "mhc/common/output_file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "mhc/common/error.hpp"

namespace mhc {

namespace {

// Temporary files to remove on a fatal signal. The handler may only call async-signal-safe
// functions, so the names live in fixed buffers, published with an atomic flag.
constexpr int kSlots = 32;
constexpr size_t kNameMax = 4096;
struct Slot {
    std::atomic<bool> used{false};
    char name[kNameMax];
};
Slot g_slots[kSlots];
std::mutex g_mutex;   // guards claiming slots and installing handlers (not the handler itself)
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous[3];

extern "C" void remove_temps_and_die(int sig) {
    for (auto& s : g_slots)
        if (s.used.load()) ::unlink(s.name);
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

int claim(const std::string& name) {
    std::lock_guard<std::mutex> lock(g_mutex);
    install_handlers();
    if (name.size() >= kNameMax) return -1;
    for (int i = 0; i < kSlots; ++i)
        if (!g_slots[i].used.load()) {
            std::memcpy(g_slots[i].name, name.c_str(), name.size() + 1);
            g_slots[i].used.store(true);
            return i;
        }
    return -1;   // more than 32 files at once: still removed by the destructor or the next run
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

int remove_stale_temps(const std::string& path) {
    namespace fs = std::filesystem;
    fs::path p(path);
    std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
    std::string base = p.filename().string();
    int removed = 0;
    DIR* d = ::opendir(dir.c_str());
    if (!d) return 0;
    while (dirent* e = ::readdir(d)) {
        std::string name = e->d_name;
        long pid = -1;
        for (const char* marker : {".mhc-tmp-", ".tmp-", ".importing-"})
            if ((pid = pid_after(name, base, marker)) > 0) break;
        if (pid <= 0 || process_alive(pid)) continue;
        std::string full = (fs::path(dir) / name).string();
        if (::unlink(full.c_str()) == 0) ++removed;
        ::unlink((full + "-journal").c_str());
    }
    ::closedir(d);
    return removed;
}

OutputFile::OutputFile(std::string path, IfExists if_exists)
    : path_(std::move(path)), if_exists_(if_exists) {
    struct stat st {};
    if (::stat(path_.c_str(), &st) == 0) {
        if (S_ISDIR(st.st_mode)) throw Error(path_ + ": is a directory");
        if (if_exists_ == IfExists::Refuse)
            throw Error(path_ + ": already exists; pass --force to replace it (and everything in it)");
    }
    remove_stale_temps(path_);
    temp_ = path_ + ".mhc-tmp-" + std::to_string(::getpid());
    ::unlink(temp_.c_str());   // ours from an earlier object of this process, never another's
    slot_ = claim(temp_);
}

OutputFile::~OutputFile() {
    if (!committed_) ::unlink(temp_.c_str());
    release(slot_);
}

void OutputFile::commit() {
    if (committed_) return;
    int rc;
    if (if_exists_ == IfExists::Replace) {
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
    release(slot_);
    slot_ = -1;
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
