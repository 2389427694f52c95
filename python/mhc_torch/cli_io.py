"""What mhc-torch says and how it ends: one line on stderr per message, and the standard output
finished whole or its failure said (a reader gone, a full disk), as mhc ends (docs/cli.md)."""
from __future__ import annotations

import contextlib
import errno
import os
import sys

from .number_grammar import capped_words, printable


def _say(line: str) -> None:
    """One line on stderr, whatever it quotes: a newline or an escape in a file name or a value is
    shown as '?', as mhc shows it (it was sent as is: two lines, or the terminal's escape). With no
    standard error (closed: `2>&-`) nothing is said: print(file=None) wrote the line on stdout."""
    if sys.stderr is not None:
        print(capped_words(printable(line)), file=sys.stderr)


def _stdout_to_devnull() -> None:
    """Nothing more reaches the standard output (Python's own flush at exit would fail again)."""
    _to_devnull(sys.stdout)


_stdout_error: OSError | None = None   # a write to the standard output that failed (argparse's help)


def _stdout_failed(e: OSError | None) -> None:
    """Records a write to the standard output that failed, for _finish_stdout to say (None: none yet)."""
    global _stdout_error
    _stdout_error = e


class _Kept:
    """sys.stdout or sys.stderr while mhc-torch runs: a write that fails (a full disk behind
    `> out.txt`, /dev/full, a reader gone) is recorded, not raised, and what follows is dropped.
    It was raised from the print() of the capture's summary or of `runs`: a traceback and exit 1
    after the trace was written. The standard output's failure is said by _finish_stdout; the
    standard error's cannot be said anywhere: the exit status is the command's."""

    def __init__(self, stream, on_failure):
        self._stream = stream
        self._on_failure = on_failure
        self._failed = False

    def _guarded(self, call, *args):
        if self._failed:
            return None
        try:
            return call(*args)
        except OSError as e:
            self._failed = True
            self._on_failure(e)
            return None

    def write(self, text):
        self._guarded(self._stream.write, text)
        return len(text)

    def flush(self):
        self._guarded(self._stream.flush)

    def __getattr__(self, name):
        return getattr(self._stream, name)


class _Closed:
    """A standard stream that was closed when mhc-torch started (`>&-`): Python sets it to None,
    and print() to None drops what it prints (`runs` ended 0 with its table gone), print(file=None)
    writes on the standard output (a refusal meant for stderr went there), argparse's help went
    to stderr. A write fails here as it fails in mhc (EBADF)."""

    def write(self, text):
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))

    def flush(self):
        pass


def _to_devnull(stream) -> None:
    """Nothing more reaches `stream`'s descriptor (Python's own flush at exit would fail again)."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


@contextlib.contextmanager
def _streams_guarded():
    """mhc-torch's standard output and error as _Kept, the streams as they were restored after."""
    kept = sys.stdout, sys.stderr
    errors = _unencodable_as_question_marks(sys.stdout)
    sys.stdout = _Kept(_Closed() if sys.stdout is None else sys.stdout, _stdout_failed)
    stderr = _Closed() if sys.stderr is None else sys.stderr
    sys.stderr = _Kept(stderr, lambda e: _to_devnull(stderr))
    try:
        yield
    finally:
        sys.stdout, sys.stderr = kept
        if errors is not None:
            with contextlib.suppress(Exception):
                kept[0].reconfigure(errors=errors)


def _unencodable_as_question_marks(stream) -> str | None:
    """A character the standard output's encoding cannot hold (PYTHONIOENCODING=ascii, a name with
    an 'é') printed as '?', as printable() shows what a terminal would not: it was a traceback of
    UnicodeEncodeError, exit 1. The stream's own setting, to put back, or None where unchanged."""
    errors = getattr(stream, "errors", None)
    if errors is None or errors != "strict":
        return None
    try:
        stream.reconfigure(errors="replace")
    except (AttributeError, ValueError, OSError):
        return None
    return errors


def _finish_stdout(code) -> int:
    """What was printed reached the standard output whole, or that is said, as mhc says it: a
    reader gone (`| head -1`) was a traceback of BrokenPipeError after the trace was written (exit
    1), or "Exception ignored ... BrokenPipeError" (exit 120); a full disk behind `> out.txt` cut
    the output short with exit 0 (argparse's help swallows the error). A reader gone ends as SIGPIPE
    would (141, nothing said); a failed write is one line and exit 2 where the command succeeded."""
    code = 0 if code is None else code if isinstance(code, int) else 1
    try:
        sys.stdout.flush()
        if _stdout_error is not None:
            raise _stdout_error
    except BrokenPipeError:
        _stdout_to_devnull()
        return 141 if code == 0 else code
    except OSError as e:
        _stdout_to_devnull()
        _say(f"mhc-torch: standard output: cannot be written: {e.strerror or e}; what was printed is cut short")
        return 2 if code == 0 else code
    except (AttributeError, ValueError):  # no standard output (closed): nothing was printed
        pass
    return code


def _end_threads_left(code: int) -> None:
    """A model's thread that still runs (not a daemon: a poller, a logger's worker) kept mhc-torch
    alive after the trace was written, for as long as the thread ran (forever, for a loop): Python
    waits for such threads before it exits. It is named, and the process ends with `code`."""
    import threading

    left = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if not left:
        return
    names = ", ".join(f"'{t.name}'" for t in left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
    _say(f"mhc-torch: note: the model's thread{'s' if len(left) > 1 else ''} {names} still ran when mhc-torch was "
         "done; ended with it (what was written is whole)")
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


class _ExitHandlerOsExit(SystemExit):
    """os._exit() called by an exit handler (atexit) once mhc-torch was done, raised instead: it
    replaced mhc-torch's exit status (a refusal's 2 ended 0)."""


def _said_instead_of_tracebacks() -> None:
    """What Python reports with a traceback outside mhc-torch's own flow, said in one line each:
    an exception a model's __del__ or exit handler (atexit) raised ("Exception ignored in ..."), one
    that ended a model's thread ("Exception in thread ..."). Each is a note or a warning and leaves
    the exit status as it is. For mhc-torch run as a program only: a caller's hooks are its own."""
    import threading

    def unraisable(u) -> None:
        place = "an atexit handler" if "atexit" in (u.err_msg or "") else "a cleanup"
        _say(f"mhc-torch: note: {_raised(u.exc_value)} (in {place}; ignored)")

    def thread_failed(t) -> None:
        if t.exc_type is SystemExit:
            return   # as threading has it: a thread's sys.exit() ends that thread alone, silently
        _say(f"mhc-torch: warning: the model's thread '{t.thread.name if t.thread else '?'}' ended: "
             f"{_raised(t.exc_value)}")

    sys.unraisablehook = unraisable
    threading.excepthook = thread_failed


def _exit_handlers_keep_status() -> None:
    """An exit handler a model registered (atexit) that calls os._exit() no longer replaces the exit
    status: registered last, this runs first, and os._exit() then raises, said as a note."""
    import atexit

    def raised(code):
        raise _ExitHandlerOsExit(code)

    atexit.register(lambda: setattr(os, "_exit", raised))


def _raised(exc: BaseException | None) -> str:
    """'m.py:4 in __del__: ValueError: boom': where in the model's code and what."""
    from .errors import one_line, user_frame, where

    from .cli_model_file import _OsExit

    if exc is None:
        return "an exception"
    what = one_line(exc)
    if isinstance(exc, (_OsExit, _ExitHandlerOsExit)):
        what = f"the model called os._exit({exc.code!r})"
    elif isinstance(exc, SystemExit):
        what = f"the model called sys.exit({exc.code!r})"
    frame = user_frame(exc)
    return f"{where(frame)}: {what}" if frame is not None else what
