"""Where in the user's code an error happened: one line instead of a traceback through torch."""
from __future__ import annotations

import os
import sys
import traceback

# Frames in these folders are the machinery between the user's code and the failing op.
_PACKAGE_DIRS = [os.path.dirname(os.path.abspath(__file__))]


def _library_dirs() -> list[str]:
    dirs = list(_PACKAGE_DIRS)
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "__file__", None):
        dirs.append(os.path.dirname(os.path.abspath(torch.__file__)))
    dirs.append(os.path.dirname(os.__file__))  # the standard library (contextlib, functools, ...)
    return dirs


def user_frame(exc: BaseException, prefer_file: str | None = None) -> traceback.FrameSummary | None:
    """The innermost frame of `exc`'s traceback in `prefer_file` if any, else the innermost one
    outside torch, mhc_torch and the standard library (a model's own code, or a library such as
    transformers that built it); None when every frame is machinery."""
    frames = traceback.extract_tb(exc.__traceback__)
    if prefer_file:
        want = os.path.abspath(prefer_file)
        mine = [f for f in frames if os.path.abspath(f.filename) == want]
        if mine:
            return mine[-1]
    outside = [f for f in frames if not _machinery(f.filename)]
    return outside[-1] if outside else None


def _installed(filename: str) -> bool:
    return any(p in os.path.abspath(filename) for p in ("site-packages", "dist-packages"))


def called_from(exc: BaseException, frame: traceback.FrameSummary | None) -> str:
    """", called from my_model.py:18 in loss_fn" when `frame` is in an installed package
    (torchvision, timm, transformers): the innermost line of the user's own code that led there,
    which is the one they can change; "" otherwise."""
    if frame is None or not _installed(frame.filename):
        return ""
    own = [f for f in traceback.extract_tb(exc.__traceback__)
           if not _machinery(f.filename) and not _installed(f.filename)]
    return f", called from {where(own[-1])}" if own else ""


def _machinery(filename: str) -> bool:
    """torch, mhc_torch, the standard library (not the packages installed inside it), frozen code."""
    if filename.startswith("<"):
        return True
    path = os.path.abspath(filename)
    dirs = _library_dirs()
    stdlib = dirs[-1]
    for d in dirs[:-1]:
        if path.startswith(d + os.sep):
            return True
    return path.startswith(stdlib + os.sep) and not any(p in path for p in ("site-packages", "dist-packages"))


def where(frame: traceback.FrameSummary | None) -> str:
    """`file.py:12 in forward`, or "" without a frame."""
    if frame is None:
        return ""
    name = frame.filename
    rel = os.path.relpath(name) if os.path.isabs(name) else name
    if not rel.startswith(".." + os.sep):
        name = rel  # as the user would type it from here
    return f"{name}:{frame.lineno} in {frame.name}"


def one_line(exc: BaseException) -> str:
    """The exception's type and the first line of its message."""
    try:
        text = str(exc).strip().splitlines()
    except Exception as e:  # noqa: BLE001 (a model's exception whose __str__ fails: its type, not a traceback)
        return f"{type(exc).__name__} (its message could not be read: {type(e).__name__})"
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def a_kind(value) -> str:
    """'a str', 'an int', 'None': what a user's function returned or a name holds, in words."""
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


class CaptureError(Exception):
    """The model cannot be captured: the message names the op and the reason (one line)."""


class ForkedChild(Exception):
    """Raised in a process the model's code forked (os.fork()) when its copy of the capture is done:
    only the process that began the capture writes the trace (the child wrote it too, racing the
    parent for the output)."""
