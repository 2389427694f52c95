// SIGBUS from a memory-mapped file cut short under the process (mhc/common/cut_short.hpp). The
// handler calls only async-signal-safe functions: open, read and close of /proc/self/maps to
// find the file, write, unlink and rmdir (output_signals::remove_temporaries), _exit.
#include "mhc/common/cut_short.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

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

// "7f01a000-7f01b000 r--s 00000000 08:01 1234   /tmp/t.db": true, with `name` set to its path,
// when `address` lies in the mapping and it maps a file.
bool maps(const char* row, uintptr_t address, const char*& name) {
    uintptr_t from = 0, to = 0;
    const char* at = row;
    for (; *at && *at != '-'; ++at) from = from * 16 + static_cast<uintptr_t>(*at <= '9' ? *at - '0' : (*at | 0x20) - 'a' + 10);
    if (*at != '-') return false;
    for (++at; *at && *at != ' '; ++at) to = to * 16 + static_cast<uintptr_t>(*at <= '9' ? *at - '0' : (*at | 0x20) - 'a' + 10);
    if (address < from || address >= to) return false;
    for (int field = 0; field < 4 && *at; ++field) {   // to the path: perms, offset, device, inode
        while (*at == ' ') ++at;
        while (*at && *at != ' ') ++at;
    }
    while (*at == ' ') ++at;
    name = at;
    return *at == '/';
}

// The file whose mapping holds `address` (its absolute path), copied into `out`; false when none.
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
            const char* name = nullptr;
            if (maps(row, address, name)) {
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

}  // namespace mhc
