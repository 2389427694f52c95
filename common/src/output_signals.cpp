// The signal handler behind OutputFile: on a SIGINT, SIGTERM or SIGHUP it says in one line what
// the command leaves, removes the temporary files and folders, and dies of the signal.
#include "output_signals.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <new>
#include <utility>

#include "mhc/common/message_line.hpp"
#include "mhc/common/output_file.hpp"

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
    output_signals::remove_temporaries();
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

}  // namespace

namespace output_signals {

void remove_temporaries() {
    for (auto& slot : g_slots)
        if (slot.used.load() && !slot.directory.load()) ::unlink(slot.name);
    // Then the folders made for outputs, when empty: a parent before its child fails, so again.
    for (int pass = 0; pass < 4; ++pass)
        for (auto& slot : g_slots)
            if (slot.used.load() && slot.directory.load()) ::rmdir(slot.name);
}

int claim(const std::string& name, bool directory, const std::string& target) {
    std::lock_guard<std::mutex> lock(g_mutex);
    install_handlers();
    for (int i = 0; i < kSlots; ++i) {
        Slot& slot = g_slots[i];
        if (slot.used.load()) continue;
        // The target as every message names a file (the handler cannot make it so): one line, capped.
        if (!fill(slot.name, slot.capacity, name) ||
            !fill(slot.target, slot.target_capacity, target.empty() ? target : message_line(target)))
            return -1;
        slot.directory.store(directory);
        slot.used.store(true);
        return i;
    }
    return -1;   // more files at once: still removed by the destructor or the next run
}

void release(int slot) {
    if (slot >= 0) g_slots[slot].used.store(false);
}

void note_written(const std::string& path) {
    if (t_not_outputs > 0) return;
    auto* written = new WrittenName{g_written_names.load(), message_line(path)};
    while (!g_written_names.compare_exchange_weak(written->before, written)) {}
}

void forget_written(const std::string& path) {
    for (WrittenName* w = g_written_names.load(); w; w = w->before)
        if (w->name == message_line(path) && !w->gone.load()) {
            w->gone.store(true);
            break;
        }
}

Hold::Hold() {
    // Held back on this thread (a command's own handler, generate's SIGINT flag, runs later) and,
    // for the handler that removes temporary files, on every thread.
    sigset_t held;
    sigemptyset(&held);
    for (int sig : kSignals) sigaddset(&held, sig);
    ::pthread_sigmask(SIG_BLOCK, &held, &before_);
    g_hold_depth.fetch_add(1);
}

void Hold::release() {
    const bool outermost = g_hold_depth.fetch_sub(1) == 1;
    ::pthread_sigmask(SIG_SETMASK, &before_, nullptr);   // a signal blocked here is delivered now
    // Inside a SignalsDeferred, the signal waits for it to let go.
    if (outermost)
        if (int sig = g_held.exchange(0)) remove_temps_and_die(sig);
}

}  // namespace output_signals

void set_stop_note(const std::string& note) {
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        install_handlers();
    }
    if (note.empty()) {
        g_stop_note.store(nullptr);
        return;
    }
    auto* kept = new WrittenName{g_stop_notes.load(), message_line(note)};
    while (!g_stop_notes.compare_exchange_weak(kept->before, kept)) {}
    g_stop_note.store(kept->name.c_str());
}

NotOutputs::NotOutputs() { ++t_not_outputs; }
NotOutputs::~NotOutputs() { --t_not_outputs; }

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

}  // namespace mhc
