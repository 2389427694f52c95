// SIGBUS from a memory-mapped file cut short under the process (mhc/common/cut_short.hpp). The
// handler calls only async-signal-safe functions: open, read and close of /proc/self/maps to
// find the file (named as given when name_file_as_given was told its name), write, unlink and rmdir
// (output_signals::remove_temporaries), _exit.
#include "mhc/common/cut_short.hpp"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>

#include "mhc/common/message_line.hpp"

#include "output_signals.hpp"

namespace mhc {

namespace {

const char* g_program = "mhc";
struct sigaction g_before {};

// Appends `text` to line[at..cap), a byte a terminal would act on shown as '?'.
void append(char* line, size_t& at, size_t cap, const char* text) {
    for (; text && *text && at + 1 < cap; ++text) {
        const auto byte = static_cast<unsigned char>(*text);
        line[at++] = byte < 0x20 || byte == 0x7f ? '?' : *text;
    }
}

// The files named as given (name_file_as_given): filled before any read, read by the handler.
struct GivenName {
    dev_t device = 0;
    ino_t inode = 0;
    char absolute[4200] = {};
    char shown[4200] = {};
};
constexpr int kGivenNames = 32;
GivenName g_given[kGivenNames];
std::atomic<int> g_given_count{0};
std::mutex g_given_mutex;

// The number in text[at..] up to the first byte that is no digit of `base`, `at` moved past it.
uint64_t number_at(const char*& at, unsigned base) {
    uint64_t value = 0;
    for (;; ++at) {
        const char folded = static_cast<char>(*at | 0x20);
        const unsigned digit = folded >= '0' && folded <= '9'                 ? static_cast<unsigned>(folded - '0')
                               : base == 16 && folded >= 'a' && folded <= 'f' ? static_cast<unsigned>(folded - 'a' + 10)
                                                                              : base;
        if (digit >= base) return value;
        value = value * base + digit;
    }
}

// A mapped file: its path, device and inode, as a row of /proc/self/maps says them.
struct Mapped {
    const char* name = nullptr;
    dev_t device = 0;
    ino_t inode = 0;
};

// "7f01a000-7f01b000 r--s 00000000 08:01 1234   /tmp/t.db": true, with `file` set to its path,
// device and inode, when `address` lies in the mapping and it maps a file.
bool maps(const char* row, uintptr_t address, Mapped& file) {
    const char* at = row;
    const uint64_t from = number_at(at, 16);
    if (*at != '-') return false;
    const uint64_t to = number_at(++at, 16);
    if (address < from || address >= to) return false;
    for (int field = 0; field < 2 && *at; ++field) {   // perms, offset
        while (*at == ' ') ++at;
        while (*at && *at != ' ') ++at;
    }
    while (*at == ' ') ++at;
    const auto major = static_cast<unsigned>(number_at(at, 16));
    const auto minor = static_cast<unsigned>(*at == ':' ? number_at(++at, 16) : 0);
    while (*at == ' ') ++at;
    file.inode = static_cast<ino_t>(number_at(at, 10));
    file.device = makedev(major, minor);
    while (*at == ' ') ++at;
    file.name = at;
    return *at == '/';
}

bool same_text(const char* first, const char* second) {
    for (; *first && *first == *second; ++first, ++second) {}
    return *first == *second;
}

// The name the user gave the mapped file, or its absolute path.
const char* as_given(const Mapped& file) {
    const int count = g_given_count.load(std::memory_order_acquire);
    for (int i = 0; i < count; ++i)
        if ((g_given[i].device == file.device && g_given[i].inode == file.inode) ||
            same_text(g_given[i].absolute, file.name))
            return g_given[i].shown;
    return file.name;
}

// The file whose mapping holds `address` (as given, else its absolute path), copied into `out`;
// false when none.
bool mapped_file(uintptr_t address, char* out, size_t cap) {
    const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    static char buffer[8192];
    static char row[4608];   // a path of PATH_MAX and the fields before it
    size_t used = 0;
    bool found = false;
    for (ssize_t got; !found && (got = ::read(fd, buffer, sizeof buffer)) > 0;)
        for (ssize_t i = 0; i < got && !found; ++i) {
            if (buffer[i] != '\n') {
                if (used + 1 < sizeof row) row[used++] = buffer[i];
                continue;
            }
            row[used] = '\0';
            used = 0;
            Mapped mapped;
            if (maps(row, address, mapped)) {
                const char* name = as_given(mapped);
                size_t length = 0;
                for (; name[length] && length + 1 < cap; ++length) out[length] = name[length];
                out[length] = '\0';
                found = true;
            }
        }
    ::close(fd);
    return found;
}

extern "C" void file_cut_short(int sig, siginfo_t* info, void* context) {
    static char file[4200];
    if (!mapped_file(reinterpret_cast<uintptr_t>(info->si_addr), file, sizeof file)) {
        // Not a mapped file's page: as before this handler, the signal ends the process.
        if (g_before.sa_flags & SA_SIGINFO) {
            if (g_before.sa_sigaction) return g_before.sa_sigaction(sig, info, context);
        } else if (g_before.sa_handler != SIG_DFL && g_before.sa_handler != SIG_IGN) {
            return g_before.sa_handler(sig);
        }
        ::signal(SIGBUS, SIG_DFL);
        ::raise(SIGBUS);
        return;
    }
    // One line, however many threads read the file: the others wait for the first's _exit.
    static std::atomic<bool> said{false};
    if (said.exchange(true))
        for (;;) ::pause();
    char line[4800];
    size_t at = 0;
    const size_t cap = sizeof line - 1;
    append(line, at, cap, g_program);
    append(line, at, cap, ": ");
    append(line, at, cap, file);
    append(line, at, cap, ": cut short by another process while ");
    append(line, at, cap, g_program);
    append(line, at, cap, " read it (SIGBUS); stopped, nothing half-written left");
    line[at++] = '\n';
    ssize_t ignored = ::write(STDERR_FILENO, line, at);
    (void)ignored;
    output_signals::remove_temporaries();
    ::_exit(2);
}

}  // namespace

void catch_files_cut_short(const char* program) {
    g_program = program;
    struct sigaction sa {};
    sa.sa_sigaction = file_cut_short;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO;
    ::sigaction(SIGBUS, &sa, &g_before);
}

void name_file_as_given(const std::string& given) {
    struct stat st {};
    if (::stat(given.c_str(), &st) != 0) return;
    char absolute[PATH_MAX];
    if (::realpath(given.c_str(), absolute) == nullptr) absolute[0] = '\0';
    const std::string shown = message_line(given);
    std::lock_guard<std::mutex> lock(g_given_mutex);
    const int count = g_given_count.load(std::memory_order_relaxed);
    for (int i = 0; i < count; ++i)
        if (g_given[i].device == st.st_dev && g_given[i].inode == st.st_ino) return;   // the first name kept
    if (count == kGivenNames) return;
    GivenName& entry = g_given[count];
    entry.device = st.st_dev;
    entry.inode = st.st_ino;
    std::snprintf(entry.absolute, sizeof entry.absolute, "%s", absolute);
    std::snprintf(entry.shown, sizeof entry.shown, "%s", shown.c_str());
    g_given_count.store(count + 1, std::memory_order_release);
}

}  // namespace mhc
