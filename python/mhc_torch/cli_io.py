"""What mhc-torch says and how it ends: one line on stderr per message, and the standard output
finished whole or its failure said (a reader gone, a full disk), as mhc ends (docs/cli.md)."""
from __future__ import annotations

import contextlib
import os
import sys

from .number_grammar import capped_words, printable


def _say(line: str) -> None:
    """One line on stderr, whatever it quotes: a newline or an escape in a file name or a value is
    shown as '?', as mhc shows it (it was sent as is: two lines, or the terminal's escape)."""
    print(capped_words(printable(line)), file=sys.stderr)


def _stdout_to_devnull() -> None:
    """Nothing more reaches the standard output (Python's own flush at exit would fail again)."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


_stdout_error: OSError | None = None   # a write to the standard output that failed (argparse's help)


def _stdout_failed(e: OSError | None) -> None:
    """Records a write to the standard output that failed, for _finish_stdout to say (None: none yet)."""
    global _stdout_error
    _stdout_error = e


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
