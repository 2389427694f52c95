// OutputFile, MadeDirectory and TempFile: a file written whole or not at all; the checks on its
// name are in output_names.cpp, the signal handler that removes what is left in output_signals.cpp.
#include "mhc/common/output_file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "mhc/common/error.hpp"
#include "mhc/common/message_line.hpp"
#include "mhc/common/made_directory.hpp"
#include "output_names.hpp"
#include "output_signals.hpp"

namespace mhc {

using output_names::kind_of;
using output_names::link_target;
using output_names::pid_after;
using output_names::process_alive;
using output_names::remove_sqlite_logs;
using output_signals::claim;
using output_signals::release;

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
            mhc::say("mhc: %s is a symbolic link to %s: the link is replaced by the new file; %s is left as it is\n",
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
    if (output_) output_signals::note_written(path_);
    release(slot_);
    slot_ = -1;
    // A test's signal at this very moment, the file in place and the command not done
    // (tests/cli/interrupt_output_test.sh): MHC_TEST_SIGNAL_AFTER_COMMIT=15.
    if (const char* hook = std::getenv("MHC_TEST_SIGNAL_AFTER_COMMIT"); hook && std::atoi(hook) > 0)
        ::raise(std::atoi(hook));
}

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
    output_signals::Hold hold;
    size_t done = 0;
    try {
        for (; done < files.size(); ++done) files[done]->commit();
    } catch (...) {
        for (size_t i = 0; i < done; ++i) {
            ::unlink(files[i]->path().c_str());
            output_signals::forget_written(files[i]->path());   // a signal's line no longer names it
        }
        hold.release();
        throw;
    }
    hold.release();
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
