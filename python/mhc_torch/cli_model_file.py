"""Running the user's model file (FILE.py) in mhc-torch's own process: it is imported as Python, and
what its code does to the process (os._exit(), sys.exit(), replaced streams, a fork) is contained and
said in one line naming its file and line."""
from __future__ import annotations

import contextlib
import os
import sys

from . import json_input
from .json_input import not_a_regular_file


def _load_model_file(path: str):
    """build_model, make_batch, and the optional loss_fn, step and build_optimizer defined by a
    Python file."""
    import importlib.util

    from .errors import a_kind

    if not os.path.isfile(path):
        raise OSError(_not_a_file(path))
    spec = importlib.util.spec_from_file_location("mhc_torch_user_model", path)
    mod = importlib.util.module_from_spec(spec)
    # as `python FILE.py` runs it: modules beside the file import (from my_blocks import Block)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    from .autocast_cuda import user_cuda_autocast

    with user_cuda_autocast():  # a decorator made as the file loads, @torch.autocast("cuda", ...), acts in the capture
        spec.loader.exec_module(mod)
    for name in ("build_model", "make_batch"):
        if not callable(getattr(mod, name, None)):
            raise AttributeError(f"defines no function {name}()")
    for name in ("loss_fn", "step", "build_optimizer"):
        v = getattr(mod, name, None)
        if v is not None and not callable(v):
            raise TypeError(f"{name} is {a_kind(v)}, not a function")
    return (mod.build_model, mod.make_batch, getattr(mod, "loss_fn", None), getattr(mod, "step", None),
            getattr(mod, "build_optimizer", None))


def _unknown_model(model: str, presets: list[str]) -> str:
    import difflib

    if os.path.isfile(model):
        return f"{model}: a model file's name ends in .py (it is imported as Python)"
    near = difflib.get_close_matches(model.lower().replace("_", "-"), presets, n=1)
    hint = f"; did you mean {near[0]}?" if near else ""
    return f"unknown model '{model}'{hint} (valid: {', '.join(presets)} or FILE.py)"


def _not_a_file(path: str) -> str:
    """Why `path` is no model file to import: a named pipe, a device (a link to /dev/zero) and a loop of
    symbolic links were each "no such file" beside the name."""
    if os.path.isdir(path):
        return "is a directory, not a model file"
    return not_a_regular_file(path) or json_input.unreachable(path)


class _OsExit(SystemExit):
    """os._exit() called by a model file's code, raised instead of ending the process at once
    (exit status 0, no trace and nothing said)."""


@contextlib.contextmanager
def _no_os_exit():
    """While a model file's code runs in this process, os._exit() raises _OsExit; in a process it
    forks (a DataLoader's workers) os._exit() ends that process as it would."""
    real, pid = os._exit, os.getpid()

    def guarded(code):
        if os.getpid() != pid:
            real(code)
        raise _OsExit(code)

    os._exit = guarded
    try:
        yield
    finally:
        os._exit = real


@contextlib.contextmanager
def _streams_kept():
    """mhc-torch's own standard output, standard error and print() after the model's code ran, as
    they were before: a model that replaced sys.stdout or sys.stderr (io.StringIO()), closed one or
    replaced builtins.print had mhc-torch's summary go nowhere (exit 0, nothing printed), its
    one-line refusal too (exit 2, nothing said), or ended in a traceback of ValueError (exit 1)."""
    import builtins

    kept = []
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        try:
            kept.append((name, stream, stream.fileno()))
        except (AttributeError, ValueError, OSError):  # already not a file: nothing to restore
            kept.append((name, stream, None))
    real_print = builtins.print
    try:
        yield
    finally:
        builtins.print = real_print
        for name, stream, fd in kept:
            if getattr(stream, "closed", False) and fd is not None:  # closed by the model: its descriptor is not
                with contextlib.suppress(Exception):
                    stream = open(fd, "w", buffering=1 if stream.line_buffering else -1, encoding=stream.encoding,  # noqa: SIM115
                                  errors=stream.errors, closefd=False)
            setattr(sys, name, stream)


def _model_failed(model: str, e: BaseException) -> str:
    """One line for an exception raised by the user's model code: the file and line where it
    happened (the model file's innermost frame, else the innermost outside torch) and what."""
    from .errors import one_line, user_frame, where

    if isinstance(e, _OsExit):
        what = f"the model called os._exit({e.code!r}); no trace written"
    elif isinstance(e, SystemExit):
        what = f"the model called sys.exit({e.code!r}); no trace written"
    else:
        what = one_line(e)
    frame = user_frame(e, prefer_file=model if model.endswith(".py") else None)
    return f"mhc-torch: {where(frame) or model}: {what}"


@contextlib.contextmanager
def _forked_children_end(pid: int):
    """A process the model's code forked (os.fork() in the file, build_model() or forward) ends here,
    silently, once its copy of the loading or the capture is done: it wrote the trace too, racing
    its parent for the output, and said its own summary or refusal. The parent alone writes."""
    try:
        yield
    finally:
        if os.getpid() != pid:
            os._exit(0)  # nothing flushed: the parent's buffered output is the parent's to print
