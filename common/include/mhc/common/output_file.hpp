#pragma once
// OutputFile: the one way mhc writes a whole file (a trace, an export, a profile). The content
// goes to "<path>.mhc-tmp-<pid>" beside the target and is renamed into place by commit(), so
// the target is either the old file or the complete new one, never half of one. The temporary
// file is removed when the object dies uncommitted, when the process gets SIGINT, SIGTERM or
// SIGHUP, and, after a SIGKILL or a power cut, by the next OutputFile for the same target (the
// pid in the name no longer runs). Errors name the target, never the temporary file.
#include <string>
#include <string_view>
#include <vector>

namespace mhc {

enum class IfExists {
    Refuse,    // an existing target is an error ("pass --force to replace it")
    Replace,   // an existing target is replaced atomically
};

class OutputFile {
public:
    // Throws mhc::Error (bad input) when `path` exists and `if_exists` is Refuse, and whatever
    // `if_exists` says when it exists and is not a regular file (a directory, a device, a FIFO,
    // a socket, a symbolic link to one of them or into /proc or /dev/fd such as /dev/stdout: never
    // replaced). A symbolic link to a regular file is replaced by the new file (its target is
    // left as it is), and one line on stderr says so.
    OutputFile(std::string path, IfExists if_exists);
    ~OutputFile();   // uncommitted: the temporary file is removed
    OutputFile(const OutputFile&) = delete;
    OutputFile& operator=(const OutputFile&) = delete;

    const std::string& path() const { return path_; }
    const std::string& temp_path() const { return temp_; }
    // Moves the temporary file into place. With Refuse, a target that appeared meanwhile (another
    // process) is not replaced: commit() throws and the temporary file is removed.
    // From then on, a SIGINT, SIGTERM or SIGHUP that stops the command says on stderr that this
    // file was written whole, as one that comes while it is written says that no part of it is left.
    void commit();
    bool committed() const { return committed_; }
    // A file the command makes for its own use, not an output the user asked for (an empty runs
    // database made before the first store): a signal's line does not name it as written.
    void not_an_output() { output_ = false; }

private:
    std::string path_, temp_;
    IfExists if_exists_;
    bool committed_ = false;
    bool output_ = true;
    int slot_ = -1;   // in the signal handler's list of files to remove
};

// While one lives on a thread, the files that thread moves into place are the command's own (a
// cache: validate --link auto's calibration), not outputs the user asked for: a signal's line
// does not name them as written (OutputFile::not_an_output for each).
class NotOutputs {
public:
    NotOutputs();
    ~NotOutputs();
    NotOutputs(const NotOutputs&) = delete;
    NotOutputs& operator=(const NotOutputs&) = delete;
};

// What a SIGINT, SIGTERM or SIGHUP that stops the command from now on leaves besides its output
// files, said at the end of the handler's line ("mhc: stopped by SIGTERM; runs 1 and 2 are left in
// t.db marked incomplete"); "" says nothing more. Installs the handler (without an output file,
// such a signal stopped the command without a word).
void set_stop_note(const std::string& note);

// Throws mhc::Error (bad input) when `path` exists and is not a regular file once symbolic links
// are followed (a directory, a device such as /dev/null, a FIFO, a socket), or when one of its
// links points into /proc or /dev/fd (/dev/stdout: a descriptor of this process, whatever it is
// open on): what mhc writes into or beside a file (a runs database and its journal) must be a
// regular file the user named.
void refuse_special_file(const std::string& path);
// The one refusal of an output that exists: "PATH: already exists[NOTE]; pass --force to replace
// it[ (and ALONG)]" (NOTE: what it is, e.g. a symbolic link; ALONG: what goes with it, e.g. "the
// runs stored in it").
std::string already_exists(const std::string& path, const std::string& along = "", const std::string& note = "");
// Throws mhc::Error (bad input) when `path` is longer than a name or a path may be (ENAMETOOLONG)
// or its folders hold a loop of symbolic links (ELOOP): said before the work, in one way. OutputFile and
// refuse_special_file check it.
void refuse_unreachable_name(const std::string& path);
// Throws mhc::Error (bad input) when `path` is the name SQLite gives a side file of an existing
// SQLite database ("T.db-journal", "-wal", "-shm" of T.db): SQLite takes such a file for an
// interrupted write of T.db and removes it (an export, a runs database) when T.db is next opened.
// refuse_special_file and OutputFile check it.
void refuse_sqlite_side_file(const std::string& path);
// The log an earlier file named `path` left beside it, which SQLite applies to whatever database
// it next opens there: PATH-wal or PATH-journal beginning as SQLite's logs do (a write-ahead log, a
// journal whose header is not zeroed); "" when there is none. OutputFile refuses an output with one
// (with --force, removes it as the file it belongs to is replaced).
std::string sqlite_log_beside(const std::string& path);

// The name of the temporary file beside `path` that process `pid` writes: "<name>.mhc-tmp-<pid>",
// with <name> shortened (its start and a hash of it) when the whole would leave no room for
// SQLite's "-journal" within the directory's limit on a name (255 bytes).
std::string temp_name(const std::string& path, long pid);

// A private temporary file in $TMPDIR named "mhc-<purpose>-<pid>-XXXXXX", open for writing. It is
// removed when the object dies, on SIGINT, SIGTERM and SIGHUP, and, after a SIGKILL, by the next
// TempFile of the same purpose (its pid no longer runs).
class TempFile {
public:
    explicit TempFile(const std::string& purpose);   // throws mhc::Error when it cannot be made
    ~TempFile();
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;
    const std::string& path() const { return path_; }
    int fd() const { return fd_; }
    // Closes the descriptor; false when the last writes failed (a full disk).
    bool close();

private:
    std::string path_;
    int fd_ = -1;
    int slot_ = -1;
};

// Moves every file into place together (the rank files of one job): SIGINT, SIGTERM and SIGHUP
// are held back until the last is in place, so that a signal never leaves part of the set; when
// one cannot be moved, those already moved are removed again, so that none of the set appears.
// (A SIGKILL or a power cut during the renames, which take milliseconds, can still leave part
// of them: each names its job, and `simulate --ranks` refuses an incomplete job.)
void commit_together(const std::vector<OutputFile*>& files);

// Holds SIGINT, SIGTERM and SIGHUP back while a command stores what it has computed (runs into a
// trace: one SQLite transaction), on whatever thread they arrive, so that a signal never leaves a
// transaction half done (a hot journal): the store finishes, then release() says which signal
// came (0: none) and the command stops there, saying so, with status 128+signal. The first
// signal held writes `note` (a whole line) on stderr at once. Undisturbed signals keep their way
// (ignored stays ignored; a command's own handler, as generate's SIGINT, is kept and not held).
// Dropped without release(), a held signal is acted on as it would have been.
class SignalsDeferred {
public:
    explicit SignalsDeferred(std::string note);
    ~SignalsDeferred();
    SignalsDeferred(const SignalsDeferred&) = delete;
    SignalsDeferred& operator=(const SignalsDeferred&) = delete;
    int release();

private:
    std::string note_;
    bool released_ = false;
};

// Writes `content` as the whole of `path` through an OutputFile (temp + rename).
void write_file_atomically(const std::string& path, std::string_view content, IfExists if_exists);

// Throws mhc::Error (bad input) when `output` is the same file as `input` (the same path, a
// link to it): writing would replace what the command reads, even with --force.
void refuse_input_as_output(const std::string& input, const std::string& output);

// Removes "<path>.mhc-tmp-<pid>" files (and those of earlier versions, ".tmp-<pid>" and
// ".importing-<pid>") whose process no longer runs. Returns how many it removed.
int remove_stale_temps(const std::string& path);

}  // namespace mhc
