#include "sqlite_util.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "mhc/common/cut_short.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/message_line.hpp"
#include "mhc/common/numbers.hpp"

namespace mhc::trace::sql {

int busy_timeout_ms() {
    if (const char* e = std::getenv("MHC_BUSY_TIMEOUT_MS")) {
        // The options' number grammar (docs/cli.md, "Numbers"): 010 was read as 10.
        if (const std::string why = whole_number_refusal(e, false); !why.empty())
            throw Error("MHC_BUSY_TIMEOUT_MS=" + why + "; a whole number of milliseconds in [0, 3600000]");
        const auto ms = parse_integer<int>(e);
        if (!ms || *ms < 0 || *ms > 3600000)
            throw Error(std::string("MHC_BUSY_TIMEOUT_MS='") + e + "': not a whole number of milliseconds in [0, 3600000]");
        return *ms;
    }
    return 600000;   // 10 minutes: a long reader (a multi-GB trace loading) never costs a run
}

namespace {
// "600 s", "0.25 s"
std::string timeout_text() {
    char b[32];
    std::snprintf(b, sizeof b, "%g s", busy_timeout_ms() / 1000.0);
    return b;
}
// A hot journal beside a file whose folder cannot be written: SQLite can roll the file back
// but not delete the journal, and says only "disk I/O error".
bool journal_stuck(const std::string& file) {
    const std::string journal = file + "-journal";
    if (::access(journal.c_str(), F_OK) != 0) return false;
    const size_t slash = file.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : file.substr(0, slash);
    return ::access(dir.c_str(), W_OK) != 0;
}
}  // namespace

namespace {
std::atomic<bool> g_lock_note{false};

// What a connection's busy handler knows: its file, its timeout, whether the note was said.
// One entry per file name for the process (a command opens its trace several times).
struct Wait {
    std::string file;
    int timeout_ms = 0;
    bool noted = false;
};
std::mutex g_waits_mutex;
std::map<std::string, Wait>& waits() {
    static std::map<std::string, Wait> by_file;   // nodes never move: handlers keep pointers
    return by_file;
}

// SQLite's own schedule of sleeps (ms), then 100 ms at a time; gives up at the timeout. After a
// second of waiting, one line on stderr says why nothing happens (a silent wait of up to ten
// minutes reads as a hang), when the front-end asked for it (no -q).
int busy_wait(void* ctx, int count) {
    static constexpr int kDelays[] = {1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100};
    constexpr int kSteps = static_cast<int>(sizeof kDelays / sizeof kDelays[0]);
    Wait& wait = *static_cast<Wait*>(ctx);
    int64_t waited = 0;
    for (int i = 0; i < std::min(count, kSteps); ++i) waited += kDelays[i];
    if (count > kSteps) waited += int64_t{100} * (count - kSteps);
    const int delay = count < kSteps ? kDelays[count] : 100;
    if (waited >= wait.timeout_ms) return 0;
    if (waited >= 1000 && g_lock_note.load()) {
        std::lock_guard<std::mutex> lock(g_waits_mutex);
        if (!wait.noted) {
            wait.noted = true;
            mhc::say("%s: %s: locked by another process; waiting for it (at most %g s: MHC_BUSY_TIMEOUT_MS)\n",
                         program_invocation_short_name, wait.file.c_str(), wait.timeout_ms / 1000.0);
        }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(delay, wait.timeout_ms - waited)));
    return 1;
}
}  // namespace

void set_lock_note(bool on) { g_lock_note = on; }

void wait_when_busy(sqlite3* db, const std::string& file) {
    const int ms = busy_timeout_ms();
    Wait* wait = nullptr;
    {
        std::lock_guard<std::mutex> lock(g_waits_mutex);
        wait = &waits()[file];
        wait->file = file;
        wait->timeout_ms = ms;
    }
    if (ms <= 0) sqlite3_busy_handler(db, nullptr, nullptr);
    else sqlite3_busy_handler(db, busy_wait, wait);
}

std::string open_failure(sqlite3* db, const std::string& file, const std::string& opened, const char* doing) {
    std::error_code ec;
    const size_t full = std::filesystem::absolute(opened, ec).string().size();
    if (!ec && full >= 512)
        return file + ": " + doing + ": its full path is " + std::to_string(full) +
               " bytes, and SQLite opens files whose full path is under 512 (from /, links resolved): use a "
               "shorter folder";
    return file + ": " + doing + ": " + (db ? sqlite3_errmsg(db) : "error");
}

bool read_bytes(const std::string& file, unsigned char* out, int bytes, int64_t offset) {
    // Through SQLite's own VFS: a POSIX lock belongs to the process, and closing any descriptor of
    // a file drops every lock the process holds on it, so a plain open() and close() here dropped
    // the locks of this process's connections to the file (a prune's write lock: another writer
    // then wrote beside it). SQLite's unix VFS keeps such a descriptor open until those locks go.
    sqlite3_vfs* vfs = sqlite3_vfs_find(nullptr);
    if (!vfs) return false;
    const char* name = sqlite3_create_filename(file.c_str(), "", "", 0, nullptr);
    if (!name) return false;
    std::vector<unsigned char> handle(static_cast<size_t>(vfs->szOsFile));
    auto* opened = reinterpret_cast<sqlite3_file*>(handle.data());
    int flags = 0;
    bool read = vfs->xOpen(vfs, name, opened, SQLITE_OPEN_READONLY | SQLITE_OPEN_MAIN_DB, &flags) == SQLITE_OK;
    read = read && opened->pMethods->xRead(opened, out, bytes, offset) == SQLITE_OK;
    if (opened->pMethods) opened->pMethods->xClose(opened);
    sqlite3_free_filename(name);
    return read;
}

namespace {

// SQLite's file header says WAL mode (PRAGMA journal_mode=WAL) in its bytes 18 and 19 ("file format
// write version" and "read version", 2 for WAL: sqlite.org/fileformat.html, section 1.3).
bool wal_mode(const std::string& file) {
    unsigned char versions[2] = {0, 0};
    return read_bytes(file, versions, 2, 18) && versions[0] == 2 && versions[1] == 2;
}

// "file:" URI of `file` for sqlite3_open_v2 with SQLITE_OPEN_URI: every byte but a few
// percent-encoded (a '?' or '#' in a name would start the query).
std::string file_uri(const std::string& file) {
    std::error_code ec;
    const std::string full = std::filesystem::absolute(file, ec).string();
    std::string uri = "file://";
    for (const unsigned char byte : ec ? file : full) {
        if (std::isalnum(byte) || byte == '/' || byte == '.' || byte == '-' || byte == '_' || byte == '~') {
            uri += static_cast<char>(byte);
        } else {
            char hex[4];
            std::snprintf(hex, sizeof hex, "%%%02X", byte);
            uri += hex;
        }
    }
    return uri;
}

// What an immutable connection saw of its file when it was opened: a process that can write the
// folder may checkpoint its writes into the file while the connection reads it, unseen (no lock).
struct Snapshot {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
};
std::mutex g_snapshots_mutex;
std::map<sqlite3*, Snapshot>& snapshots() {
    static std::map<sqlite3*, Snapshot> taken;
    return taken;
}

bool same(const Snapshot& taken, const struct stat& st) {
    return taken.dev == st.st_dev && taken.ino == st.st_ino && taken.size == st.st_size &&
           taken.mtime.tv_sec == st.st_mtim.tv_sec && taken.mtime.tv_nsec == st.st_mtim.tv_nsec &&
           taken.ctime.tv_sec == st.st_ctim.tv_sec && taken.ctime.tv_nsec == st.st_ctim.tv_nsec;
}

// A file's times are stamped from the kernel's coarse clock, which ticks every few ms (a second or two
// on file systems that keep whole seconds): a write in the tick of the snapshot's stat would leave
// them as the snapshot saw them, and a read it mixed into would pass as whole. So the snapshot is
// taken only once the file's last change (its ctime, which no process can set) is older than a
// tick: any write after it then stamps another ctime. Waits at most 3 s; a file still changing
// then is being written without pause, said so.
std::string settled_stat(const std::string& file, struct stat& st) {
    namespace chrono = std::chrono;
    const auto give_up = chrono::steady_clock::now() + chrono::seconds(3);
    for (;;) {
        if (::stat(file.c_str(), &st) != 0) {
            st = {};   // gone: the plain open says so
            return "";
        }
        const bool whole_seconds = st.st_ctim.tv_nsec == 0 && st.st_mtim.tv_nsec == 0;
        const chrono::nanoseconds tick = whole_seconds ? chrono::nanoseconds(chrono::seconds(2))
                                                       : chrono::nanoseconds(chrono::milliseconds(20));
        const chrono::nanoseconds changed = chrono::seconds(st.st_ctim.tv_sec) + chrono::nanoseconds(st.st_ctim.tv_nsec);
        const chrono::nanoseconds age = chrono::system_clock::now().time_since_epoch() - changed;
        if (age > tick) return "";
        if (chrono::steady_clock::now() >= give_up)
            return file + ": changed while it was read (it is in SQLite's WAL mode in a folder this process cannot "
                          "write, so it is read without a lock, and another process kept writing it: in 3 s of "
                          "waiting its last change was never a tick old): run the command again when it is done";
        std::this_thread::sleep_for(std::min<chrono::nanoseconds>(tick - age, chrono::milliseconds(100)));
    }
}

// A WAL-mode file is read through an index SQLite keeps beside it in FILE-shm, which it makes on
// first use: in a folder this process cannot write, with no -shm there, every read of such a file
// failed with "attempt to write a readonly database". It is opened immutable instead (read-only,
// no index, no lock), which reads it whole when its write-ahead log FILE-wal is absent or empty: the
// writes of a process that can write the folder go into that log first. A log with content holds
// writes not yet in the file, which an immutable reader would miss: refused, saying what to do.
// Returns nullptr with `problem` empty where this is not such a file.
sqlite3* open_wal_without_index(const std::string& file, std::string& problem) {
    struct stat st {};
    const std::filesystem::path parent = std::filesystem::path(file).parent_path();
    const std::string dir = parent.empty() ? "." : parent.string();
    if (!wal_mode(file) || ::stat((file + "-shm").c_str(), &st) == 0 ||
        ::faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) == 0)
        return nullptr;
    if (::stat((file + "-wal").c_str(), &st) == 0 && st.st_size > 0) {
        problem = file + ": cannot read: it is in SQLite's WAL mode with writes in " + file +
                  "-wal not yet in it, which SQLite reads only through an index it must make in " + dir +
                  ", where this process cannot write: copy both files to a folder you can write, or have "
                  "the owner run sqlite3 " + file + " 'PRAGMA journal_mode=DELETE'";
        return nullptr;
    }
    struct stat before {};
    if (problem = settled_stat(file, before); !problem.empty()) return nullptr;
    if (before.st_ino == 0) return nullptr;
    sqlite3* db = nullptr;
    if (sqlite3_open_v2((file_uri(file) + "?immutable=1").c_str(), &db,
                        SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
        problem = open_failure(db, file, file, "cannot open");
        sqlite3_close(db);
        return nullptr;
    }
    std::lock_guard<std::mutex> lock(g_snapshots_mutex);
    snapshots()[db] = {before.st_dev, before.st_ino, before.st_size, before.st_mtim, before.st_ctim};
    return db;
}

// SQLite's write-ahead logs begin with one of two magic numbers (sqlite.org/fileformat.html, 4.1).
bool begins_as_wal(const std::string& log) {
    const int fd = ::open(log.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return false;
    unsigned char magic[4] = {0, 0, 0, 0};
    struct stat st {};
    const bool read = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::pread(fd, magic, 4, 0) == 4;
    ::close(fd);
    return read && magic[0] == 0x37 && magic[1] == 0x7f && magic[2] == 0x06 && (magic[3] == 0x82 || magic[3] == 0x83);
}

}  // namespace

sqlite3* open_existing(const std::string& file, bool writable, std::string& problem) {
    sqlite3* db = nullptr;
    // READWRITE opens read-only by itself when the file is write-protected; opening for writing
    // whenever possible lets SQLite roll back the journal a killed writer left (a "hot journal"),
    // which a read-only connection cannot do.
    int flags = (writable ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY) | SQLITE_OPEN_NOMUTEX;
    // A file that is not there, said as every command says it (SQLite: "unable to open database
    // file"; `info T.db --runs-db missing.db`).
    struct stat st {};
    // Nor one whose name stat refuses as a folder's ("t.db/", ENOTDIR), which SQLite opened as t.db,
    // nor one stat cannot reach (a loop of links, a folder that cannot be searched): SQLite said
    // "unable to open database file" for each.
    if (::stat(file.c_str(), &st) != 0) {
        problem = no_such_file(file);
        return nullptr;
    }
    if (problem = stray_log(file); !problem.empty()) return nullptr;
    name_file_as_given(file);   // a cut made while it is read is said of `file`, not its absolute path
    db = open_wal_without_index(file, problem);
    if (!problem.empty()) return nullptr;
    if (!db && sqlite3_open_v2(file.c_str(), &db, flags, nullptr) != SQLITE_OK) {
        problem = open_failure(db, file, file, "cannot open");
        sqlite3_close(db);
        return nullptr;
    }
    // A bad MHC_BUSY_TIMEOUT_MS throws here: the connection is closed first (it was left open:
    // LeakSanitizer, tests/trace "a lock is not a problem of the trace").
    try {
        wait_when_busy(db, file);
    } catch (...) {
        sqlite3_close(db);
        throw;
    }
    sqlite3_extended_result_codes(db, 1);
    return db;
}

std::string stray_log(const std::string& file) {
    const std::string log = file + "-wal";
    if (wal_mode(file) || !begins_as_wal(log)) return "";
    return file + ": " + log + " is there, a write-ahead log that " + file +
           " (not in SQLite's WAL mode) did not leave: SQLite would apply its pages over the file's when it "
           "is opened (another file's log, copied or left beside it); move it away and rerun";
}

std::string changed_while_read(sqlite3* db, const std::string& file) {
    // Keyed by the connection's address, which a later connection may take: only an immutable
    // one (opened with the URI parameter) has a snapshot of its own.
    const char* name = sqlite3_db_filename(db, "main");
    if (!name || !sqlite3_uri_boolean(name, "immutable", 0)) return "";
    Snapshot taken{};
    {
        std::lock_guard<std::mutex> lock(g_snapshots_mutex);
        auto it = snapshots().find(db);
        if (it == snapshots().end()) return "";
        taken = it->second;
    }
    struct stat now {};
    if (::stat(file.c_str(), &now) == 0 && same(taken, now)) return "";
    return file + ": changed while it was read (it is in SQLite's WAL mode in a folder this process cannot "
                  "write, so it is read without a lock, and another process wrote it meanwhile): what was read may "
                  "mix two versions of it; run the command again";
}

std::string side_file_in_the_way(const std::string& file) {
    static const char* const kSides[][2] = {
        {"-journal", "journal"}, {"-wal", "write-ahead log"}, {"-shm", "shared-memory index"}};
    for (const auto& [suffix, name] : kSides) {
        const std::string side = file + suffix;
        struct stat st {};
        if (::lstat(side.c_str(), &st) != 0 || S_ISREG(st.st_mode)) continue;
        const char* what = S_ISDIR(st.st_mode)   ? "a directory"
                           : S_ISLNK(st.st_mode) ? "a symbolic link"
                                                 : "a special file";
        return side + " is " + what + ", where SQLite keeps " + file + "'s " + name + ": move it away and rerun";
    }
    return "";
}

std::string gzip_note(const std::string& file) {
    unsigned char magic[2] = {0, 0};   // read_bytes: this process's locks on the file kept
    if (!read_bytes(file, magic, 2, 0) || magic[0] != 0x1f || magic[1] != 0x8b) return "";
    const bool gz = file.size() > 3 && file.compare(file.size() - 3, 3, ".gz") == 0;
    const std::string how = gz ? "gunzip -k " + file : "gunzip -c " + file + " > trace.db";
    return "gzip-compressed, not an SQLite database: decompress it first (" + how + ")";
}

void fail(sqlite3* db, const std::string& file, const std::string& what) {
    std::string msg = db ? sqlite3_errmsg(db) : "cannot open";
    int ext = db ? sqlite3_extended_errcode(db) : SQLITE_CANTOPEN;
    int code = ext & 0xff;
    if (code == SQLITE_NOTADB) {
        msg = gzip_note(file);
        if (msg.empty()) msg = "not an SQLite database (wrong format or corrupt header)";
    }
    else if (code == SQLITE_BUSY || code == SQLITE_LOCKED)
        throw Busy(file + ": " + what + ": the file stayed locked by another process for " + timeout_text() +
                   " (MHC_BUSY_TIMEOUT_MS; " + msg + ")");
    else if (ext == SQLITE_READONLY_ROLLBACK || (code == SQLITE_IOERR && journal_stuck(file)))
        msg = "an interrupted write left " + file + "-journal, which only a process that can write "
              "the file and its directory can roll back: make them writable and rerun";
    else if (code == SQLITE_CORRUPT) msg = "the file is corrupt or truncated (" + msg + ")";
    else if (ext == SQLITE_READONLY_DBMOVED)   // was "write failed: attempt to write a readonly database"
        throw Error(file + kMovedDuringWrite + " (its name now leads to another file, or none)");
    else if (ext == SQLITE_READONLY_DIRECTORY) {   // the file writable, its folder not: the same words
        const std::string dir = std::filesystem::path(file).parent_path().string();
        msg = "SQLite writes a journal (" + file + "-journal) beside the file while it writes, and the folder " +
              (dir.empty() ? std::string(".") : dir) + " cannot be written by this process: make it writable";
    }
    if (code == SQLITE_CANTOPEN || code == SQLITE_IOERR || code == SQLITE_ERROR)
        if (std::string side = side_file_in_the_way(file); !side.empty()) msg = side;
    if (code == SQLITE_IOERR && msg == sqlite3_errstr(ext)) {
        // "disk I/O error" alone, with what the system said (a full disk, a file size limit): a WAL
        // file is read through an index SQLite makes beside it, which a reader writes too.
        const int os_error = db ? sqlite3_system_errno(db) : 0;
        const bool index = ext == SQLITE_IOERR_SHMOPEN || ext == SQLITE_IOERR_SHMSIZE || ext == SQLITE_IOERR_SHMMAP;
        if (index) msg += " making " + file + "-shm, the index SQLite reads a file in WAL mode through";
        if (os_error != 0) msg += std::string(index ? ": " : " (") + std::strerror(os_error) + (index ? "" : ")");
    }
    throw Error(file + ": " + what + ": " + msg);
}

void no_triggers(sqlite3* db) { sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, nullptr); }

void exec(sqlite3* db, const std::string& file, const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
        std::string m = err ? err : "error";
        sqlite3_free(err);
        fail(db, file, m.empty() ? std::string(sql) : "SQL failed");
    }
}

namespace {

// The tables `sql` reads or writes: the word after each FROM, JOIN, INTO and UPDATE, quotes
// dropped, "schema.table" split.
std::vector<std::pair<std::string, std::string>> tables_named(std::string_view sql) {
    std::vector<std::string> words;
    std::string word;
    for (const char letter : std::string(sql) + " ") {
        if (std::isalnum(static_cast<unsigned char>(letter)) || letter == '_' || letter == '.') word += letter;
        else if (letter != '"' && letter != '`' && letter != '[' && letter != ']') {
            if (!word.empty()) words.push_back(word);
            word.clear();
        }
    }
    std::vector<std::pair<std::string, std::string>> tables;
    for (size_t i = 0; i + 1 < words.size(); ++i) {
        std::string upper = words[i];
        for (char& letter : upper) letter = static_cast<char>(std::toupper(static_cast<unsigned char>(letter)));
        if (upper != "FROM" && upper != "JOIN" && upper != "INTO" && upper != "UPDATE") continue;
        const std::string& name = words[i + 1];
        const size_t dot = name.find('.');
        tables.emplace_back(dot == std::string::npos ? "main" : name.substr(0, dot),
                            dot == std::string::npos ? name : name.substr(dot + 1));
    }
    return tables;
}

// SQLite's "no such column: stream" said with its table, "table kernels has no column stream (a
// damaged or foreign file)", when one table `sql` names is there without it; "" otherwise.
std::string missing_column(sqlite3* db, std::string_view sql) {
    const std::string said = sqlite3_errmsg(db), prefix = "no such column: ";
    if (said.rfind(prefix, 0) != 0) return "";
    std::string column = said.substr(prefix.size());
    if (const size_t dot = column.rfind('.'); dot != std::string::npos) column.erase(0, dot + 1);
    for (const auto& [schema, table] : tables_named(sql)) {
        sqlite3_stmt* info = nullptr;
        if (sqlite3_prepare_v2(db, "SELECT count(*), sum(name = ?3) FROM pragma_table_info(?2, ?1)", -1, &info,
                               nullptr) != SQLITE_OK) {
            sqlite3_finalize(info);
            return "";
        }
        sqlite3_bind_text(info, 1, schema.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(info, 2, table.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(info, 3, column.c_str(), -1, SQLITE_TRANSIENT);
        const bool lacks = sqlite3_step(info) == SQLITE_ROW && sqlite3_column_int64(info, 0) > 0 &&
                           sqlite3_column_int64(info, 1) == 0;
        sqlite3_finalize(info);
        if (lacks) return "table " + table + " has no column " + column + " (a damaged or foreign file)";
    }
    return "";
}

}   // namespace

Stmt::Stmt(sqlite3* db, const std::string& file, const char* sql) : db_(db), file_(file) {
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s_, nullptr) == SQLITE_OK) return;
    // Its table named: "no such column: stream" left the user to guess which of the file's tables.
    if (const std::string lacks = missing_column(db, sql); !lacks.empty()) throw Error(file + ": " + lacks);
    fail(db, file, "cannot prepare query");
}

Stmt::~Stmt() { sqlite3_finalize(s_); }

Stmt& Stmt::operator=(Stmt&& o) noexcept {
    if (this != &o) {
        sqlite3_finalize(s_);
        s_ = o.s_;
        db_ = o.db_;
        file_ = std::move(o.file_);
        o.s_ = nullptr;
    }
    return *this;
}

void Stmt::run() {
    int rc = sqlite3_step(s_);
    sqlite3_reset(s_);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) fail(db_, file_, "write failed");
}

bool Stmt::step() {
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, file_, "read failed");
}

std::string Stmt::text(int col) const {
    const unsigned char* t = sqlite3_column_text(s_, col);
    return t ? std::string(reinterpret_cast<const char*>(t),
                           static_cast<size_t>(sqlite3_column_bytes(s_, col)))
             : std::string();
}

std::vector<std::string> quick_check(sqlite3* db, const std::string& file, const std::string& table, bool full) {
    std::string pragma = full ? "PRAGMA integrity_check" : "PRAGMA quick_check";
    if (!table.empty()) pragma += "(\"" + table + "\")";   // names of the schema's own tables: no quote in them
    std::vector<std::string> problems;
    Stmt check(db, file, pragma.c_str());
    for (;;) {
        const int rc = sqlite3_step(check.get());
        if (rc == SQLITE_DONE) break;
        if (rc != SQLITE_ROW) {
            // A page too damaged for the check to go on (a table's root): what it found so far,
            // then SQLite's word. A lock is no damage: said as such (Busy).
            if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) fail(db, file, "cannot read");
            problems.emplace_back(sqlite3_errmsg(db));
            break;
        }
        std::string line = check.text(0);
        if (line == "ok") continue;
        // SQLite heads its first problem with "*** in database main ***" and a newline.
        if (const auto head = line.find("***\n"); line.rfind("*** in database", 0) == 0 && head != std::string::npos)
            line.erase(0, head + 4);
        for (char& byte : line)
            if (byte == '\n' || byte == '\r') byte = ' ';
        problems.push_back(line);
    }
    return problems;
}

namespace {

std::string quoted(const std::string& name) {
    std::string out = "\"";
    for (char ch : name) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return out + "\"";
}

// Steps `query` to its end: "" when every row was read, else SQLite's message. A lock is no
// damage: thrown (Busy).
std::string read_through(sqlite3* db, const std::string& file, const std::string& query) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db, query.c_str(), -1, &stmt, nullptr);
    if (rc == SQLITE_OK)
        while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {}
    sqlite3_finalize(stmt);
    if (rc == SQLITE_OK || rc == SQLITE_DONE) return "";
    if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) fail(db, file, "cannot read");
    return sqlite3_errmsg(db);
}

// "ORDER BY" of index `index`'s key columns, each against the index's own order (so that the
// scan walks it backwards from its last entry, with no sort). "" for a column that is an
// expression: then the index is not read from its end.
std::string backwards_order(sqlite3* db, const std::string& file, const std::string& index) {
    Stmt columns(db, file, ("PRAGMA index_xinfo(" + quoted(index) + ")").c_str());
    std::string order;
    while (columns.step()) {
        if (columns.i64(5) == 0) continue;   // not a key column (the rowid, a WITHOUT ROWID table's other columns)
        if (columns.i64(1) < 0) return "";   // an expression
        order += std::string(order.empty() ? " ORDER BY " : ", ") + quoted(columns.text(2)) + " COLLATE " +
                 quoted(columns.text(4)) + (columns.i64(3) != 0 ? " ASC" : " DESC");
    }
    return order;
}

uint32_t big_endian(const unsigned char* bytes) {
    return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) | bytes[3];
}

}   // namespace

std::string read_table_end(sqlite3* db, const std::string& file, const std::string& table, int entries) {
    const std::string limit = " LIMIT " + std::to_string(entries);
    std::vector<std::string> indexes;   // a WITHOUT ROWID table's tree is its key's ("pk") index
    {
        Stmt list(db, file, ("PRAGMA index_list(" + quoted(table) + ")").c_str());
        while (list.step()) indexes.push_back(list.text(1));
    }
    bool with_rowid = true;
    {
        // As the schema says it (pragma table_list, which tells it too, needs SQLite 3.37).
        Stmt kind(db, file,
                  "SELECT upper(sql) LIKE '%WITHOUT%ROWID%' FROM sqlite_master WHERE type = 'table' AND name = ?");
        kind.bind(1, table);
        with_rowid = !kind.step() || kind.i64(0) == 0;
    }
    if (with_rowid) {
        std::string why = read_through(
            db, file, "SELECT 1 FROM " + quoted(table) + " NOT INDEXED ORDER BY rowid DESC" + limit);
        if (!why.empty()) return why;
    }
    for (const std::string& index : indexes) {
        const std::string order = backwards_order(db, file, index);
        if (order.empty()) continue;
        std::string why = read_through(
            db, file, "SELECT 1 FROM " + quoted(table) + " INDEXED BY " + quoted(index) + order + limit);
        if (!why.empty()) return why;
    }
    return "";
}

std::string read_freelist(sqlite3* db, const std::string& file) {
    auto number = [&](const char* pragma) {
        Stmt stmt(db, file, pragma);
        return stmt.step() ? stmt.i64(0) : 0;
    };
    const int64_t free_pages = number("PRAGMA freelist_count");
    if (free_pages == 0) return "";
    {
        // In WAL mode the file's own pages may be older than the log's: read from the file, a
        // trunk would be judged on what it was. Left to SQLite, which checks it when it allocates.
        Stmt mode(db, file, "PRAGMA journal_mode");
        if (mode.step() && mode.text(0) == "wal") return "";
    }
    const int64_t page_size = number("PRAGMA page_size");
    const int64_t pages = number("PRAGMA page_count");
    // Read through the connection's own file: a descriptor opened and closed here would drop the
    // connection's locks (POSIX locks are the process's; read_bytes).
    sqlite3_file* own = nullptr;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &own) != SQLITE_OK || !own || !own->pMethods)
        return "";   // nothing to read it by (an in-memory file): SQLite checks it when it allocates
    std::vector<unsigned char> page(static_cast<size_t>(page_size));
    auto read_at = [&](int64_t offset, size_t bytes) {
        return own->pMethods->xRead(own, page.data(), static_cast<int>(bytes), offset) == SQLITE_OK;
    };
    std::string why;
    if (!read_at(0, 100)) why = "cannot read the file's header";
    const int64_t usable = page_size - (why.empty() ? page[20] : 0);
    int64_t trunk = why.empty() ? big_endian(page.data() + 32) : 0;
    for (int64_t seen = 0; why.empty() && trunk != 0; ++seen) {
        const std::string at = "Freelist: trunk page " + std::to_string(trunk);
        if (trunk < 2 || trunk > pages || seen > free_pages) {
            why = at + ": not a page of the file's free-page list";
            break;
        }
        if (!read_at((trunk - 1) * page_size, static_cast<size_t>(page_size))) {
            why = at + ": cannot be read";
            break;
        }
        const int64_t leaves = big_endian(page.data() + 4);
        if (leaves > usable / 4 - 2) {
            why = at + ": lists " + std::to_string(leaves) + " free pages, more than it holds";
            break;
        }
        for (int64_t i = 0; i < leaves && why.empty(); ++i)
            if (const int64_t leaf = big_endian(page.data() + 8 + 4 * i); leaf < 2 || leaf > pages)
                why = at + ": free page " + std::to_string(leaf) + " is not a page of the file";
        trunk = big_endian(page.data());
    }
    return why;
}

}  // namespace mhc::trace::sql
