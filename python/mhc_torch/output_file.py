"""Output files written the way the C++ tools write them (docs/trace-format.md, "Durability and
concurrency"): checked before any work, written to OUT.mhc-tmp-PID, renamed into place when
complete; the temporary file is removed on failure, on SIGINT, SIGTERM and SIGHUP, and, after a
SIGKILL, by the next write of the same output."""
from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import sys
import threading

from . import file_bytes
from .number_grammar import message_line


# The name an output is said by, where it is written under another: mhc-torch capture writes to
# the absolute path (a model's os.chdir cannot move the trace) but names what the user gave.
_SHOWN: dict[str, str] = {}


def show_as(path: str, name: str) -> None:
    """Messages about the output `path` name it `name`."""
    _SHOWN[path] = name


class OutputError(OSError):
    """An output that cannot be written: the message is one line naming the file and why."""


class OutputExists(OutputError):
    """The output file exists and replacing it was not asked for."""


def check_output(path: str, replace: bool = True, inputs=()) -> None:
    """Refuses, before any work, an output that cannot be written: a missing or unwritable
    folder, a directory, one of the command's own inputs (even when replacing), or an existing
    file unless `replace`. Raises OutputError (OutputExists) with one line naming `path`."""
    if path in ("", "-"):
        raise OutputError(f"'{path}': not a file name; a trace is a SQLite file (-o trace.db), it cannot go to "
                          "standard output")
    # The folder said as mhc says it (common/src/output_file.cpp): as written in the path, "." when none.
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        why = "not a directory" if os.path.exists(folder) else "no such directory"
        raise OutputError(f"{path}: cannot write into {folder}: {why}")
    if os.path.isdir(path):
        raise OutputError(f"{path}: is a directory")
    _refuse_sqlite_side_file(path)
    # Written through, or replaced, such a link would be the shell's redirection target or the
    # link itself (as root, /dev/stdout): neither is the file the user named.
    fd = _descriptor_link(path)
    if fd:
        link = "" if fd == path else f": is a symbolic link to {fd}"
        raise OutputError(f"{path}{link}: a descriptor of this process, not a file; name a file")
    # A device, a FIFO or a socket (or a link to one) is never replaced, even when replacing.
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = None   # nothing there (or a dangling link): written as a new file
    if mode is not None and not stat.S_ISREG(mode):
        link = f"a symbolic link to {os.readlink(path)}, " if os.path.islink(path) else ""
        raise OutputError(f"{path}: is {link}a {_kind(mode)}, not a regular file")
    for src in inputs:
        if src and os.path.exists(path) and os.path.exists(src) and os.path.samefile(src, path):
            raise OutputError(f"{path}: is the input file {src}; write the output to another file")
    # A link to nothing or a loop of links is there too: os.path.exists said no, the capture ran,
    # and its end said "appeared while it was being written (another process?)".
    if os.path.lexists(path) and not replace:
        link = f" (a symbolic link to {os.readlink(path)})" if os.path.islink(path) else ""
        raise OutputExists(f"{path}: already exists{link}; pass --force to replace it (and everything in it)")
    if not os.access(folder, os.W_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids):
        try:
            read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
        except OSError:
            read_only = False
        why = os.strerror(errno.EROFS if read_only else errno.EACCES)
        raise OutputError(f"{path}: cannot write into {folder}: {why}")
    # A new trace where an earlier one's SQLite log lies got that file's pages written over it when
    # next opened (docs/cli.md); with --force the log goes with the file it belongs to (commit).
    log = sqlite_log_beside(path)
    if log and not replace:
        raise OutputError(f"{path}: {log} is there, an SQLite log of an earlier {path} that SQLite would apply to "
                          "the new file (the earlier file's pages over it): remove it, or pass --force to replace both")


# The magic numbers SQLite's logs begin with (sqlite.org/fileformat.html, sections 4.1 and 4.2):
# a write-ahead log's two, a rollback journal's (a zeroed journal header is not applied).
_SQLITE_LOGS = (("-wal", b"\x37\x7f\x06\x82"), ("-wal", b"\x37\x7f\x06\x83"),
                ("-journal", b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7"))


def sqlite_log_beside(path: str) -> str:
    """The log an earlier file named `path` left beside it (PATH-wal, PATH-journal), which SQLite
    applies to whatever database it next opens there, as mhc's OutputFile finds it; "" if none."""
    for suffix, magic in _SQLITE_LOGS:
        side = path + suffix
        try:
            fd = os.open(side, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode) and os.pread(fd, len(magic), 0) == magic:
                return side
        finally:
            os.close(fd)
    return ""


def _remove_sqlite_logs(path: str) -> None:
    """Removes the logs of the file an output replaces, and a write-ahead log's -shm index with it."""
    while log := sqlite_log_beside(path):
        os.remove(log)
        if log.endswith("-wal"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path + "-shm")


def _descriptor_link(path: str) -> str:
    """The descriptor of this process that `path` names, directly or through symbolic links
    (/dev/stdout, /dev/fd/1, /proc/self/fd/1, a link to one of them: a name in /proc), as
    common/src/output_file.cpp finds it; "" when it names none."""
    def in_proc(folder: str) -> bool:
        real = os.path.realpath(folder or ".")
        return real == "/proc" or real.startswith("/proc/")

    at = path
    for _ in range(40):
        if in_proc(os.path.dirname(at)):
            return at
        if not os.path.islink(at):
            return ""
        try:
            target = os.readlink(at)
        except OSError:
            return ""
        at = target if os.path.isabs(target) else os.path.join(os.path.dirname(at), target)
    return ""


def _refuse_sqlite_side_file(path: str) -> None:
    """An output named as SQLite names a database's side files (T.db-journal, -wal, -shm) beside an
    SQLite file T.db: SQLite takes it for an interrupted write of T.db and removes it when T.db is
    next opened (refused as common/src/output_file.cpp refuses it)."""
    for suffix, name in (("-journal", "journal"), ("-wal", "write-ahead log"), ("-shm", "shared-memory index")):
        if len(path) <= len(suffix) or not path.endswith(suffix):
            continue
        db = path[:-len(suffix)]
        try:
            if not stat.S_ISREG(os.stat(db).st_mode):
                return
        except OSError:
            return
        sqlite = file_bytes.read(db, 0, 16) == b"SQLite format 3\0"   # the process's locks on db kept
        if sqlite:
            raise OutputError(f"{path}: is the name of {db}'s {name} ({db} is an SQLite database): SQLite would take "
                              f"the file for an interrupted write of {db} and remove it when {db} is next opened; "
                              "name another file")
        return


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"), (stat.S_ISFIFO, "FIFO"),
                       (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "special file"


def temp_name(path: str, pid: int) -> str:
    """PATH.mhc-tmp-PID beside PATH, its name shortened (its start and a 64-bit FNV-1a hash of the
    whole) when it would leave no room for SQLite's "-journal" within the folder's limit on a
    name, as the C++ tools name it (common/src/output_file.cpp)."""
    folder, base = os.path.split(path)
    return os.path.join(folder, _temp_stem(folder or ".", base) + f".mhc-tmp-{pid}")


def _temp_stem(folder: str, base: str) -> str:
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    suffix = len(".mhc-tmp-") + 10 + len("-journal")   # a pid has at most 10 digits
    raw = os.fsencode(base)
    if len(raw) + suffix <= limit:
        return base
    h = 1469598103934665603
    for c in raw:
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    keep = max(limit - suffix - 17, 0)
    return os.fsdecode(raw[:keep]) + f"~{h:016x}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def remove_stale_temps(path: str) -> int:
    """Removes PATH.mhc-tmp-PID (and the older PATH.tmp-PID) left by processes that no longer run
    (a SIGKILL or a power cut, which no handler sees); returns how many were removed."""
    folder = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    stem = _temp_stem(folder, base)
    removed = 0
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    for name in names:
        for start, marker in ((base, ".mhc-tmp-"), (base, ".tmp-"), (stem, ".mhc-tmp-")):
            tail = name[len(start) + len(marker):] if name.startswith(start + marker) else ""
            if tail.isdigit() and int(tail) > 0 and int(tail) != os.getpid() and not _pid_alive(int(tail)):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(folder, name))
                    removed += 1
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(folder, name) + "-journal")
    return removed


class _Terminated(BaseException):
    """Raised in the main thread by SIGTERM or SIGHUP while a temporary file exists."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class SignalGuard:
    """While a temporary file exists, SIGTERM and SIGHUP unwind (so that the caller's `except`
    removes it), then `reraise_fatal` lets the process die of the signal as it would have.
    SIGINT already unwinds (KeyboardInterrupt). Only the main thread may install handlers;
    elsewhere nothing changes."""

    def __init__(self):
        self.previous = {}
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if sig is not None:
                self.previous[sig] = signal.signal(sig, self._raise)

    @staticmethod
    def _raise(signum, frame):
        raise _Terminated(signum)

    def restore(self) -> None:
        for sig, h in self.previous.items():
            signal.signal(sig, h)
        self.previous = {}

    def reraise_fatal(self) -> None:
        t = sys.exc_info()[1]
        if isinstance(t, _Terminated):
            self.restore()
            signal.signal(t.signum, signal.SIG_DFL)
            os.kill(os.getpid(), t.signum)


def begin_output(path: str, replace: bool) -> str:
    """Checks `path`, removes dead processes' temporaries of it and returns this process's."""
    check_output(path, replace)
    if replace and os.path.islink(path):   # the new file takes the link's place: say so
        target = os.readlink(path)
        print(message_line(f"mhc-torch: {_SHOWN.get(path, path)} is a symbolic link to {target}: the link is replaced "
                           f"by the new file; {target} is left as it is"), file=sys.stderr)
    remove_stale_temps(path)
    tmp = temp_name(path, os.getpid())
    with contextlib.suppress(FileNotFoundError):
        os.remove(tmp)  # ours from an earlier call of this process, never another's
    return tmp


def commit(tmp: str, path: str, replace: bool) -> None:
    if replace:
        _remove_sqlite_logs(path)
        os.replace(tmp, path)
        return
    # Rename unless the target appeared meanwhile (another process): a hard link fails if it exists.
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise OutputExists(f"{path}: appeared while it was being written (another process?); not replaced") from None
    os.remove(tmp)
