"""JSON that users give mhc-torch (a --setting, a --recipe, a --kernel-times profile), read as the C++
tools read theirs: a file that is no regular file (a named pipe, a device) is refused before it is
opened, never waited on; a key given twice in one object (which JSON readers resolve differently) and
nesting too deep for the parser are bad input, each said in one line (ValueError), not a traceback."""
from __future__ import annotations

import json
import os
import stat

from .formatting import format_bytes


def not_a_regular_file(path: str) -> str | None:
    """Why `path` cannot be read as a JSON file (a named pipe waits for a writer, a device never
    ends), or None for a regular file, a folder or nothing there (open() says those)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kind = ("a named pipe" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "a special file")
    return f"is {kind}, not a regular file: give a file"


def unreachable(path: str) -> str:
    """Why there is no file at `path`, as mhc says it (common/src/error.cpp, no_such_file): "no
    such file", "X is a file, not a folder", or "cannot be reached: REASON" (a loop of symbolic
    links, a folder on the way that cannot be searched: each was "no such file")."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return "no such file"
    except NotADirectoryError:
        parts = path.split("/")
        for i in range(1, len(parts)):
            part = "/".join(parts[:i])
            if part and os.path.exists(part) and not os.path.isdir(part):
                return f"{part} is a file, not a folder"
        return "no such file"
    except OSError as e:
        return f"cannot be reached: {e.strerror or e}"
    return "no such file"


# The most bytes of a setting or recipe file read: such a file is a few KiB; a trace or an image
# given by mistake (or a sparse file of terabytes) was read whole into memory before its first byte
# was looked at.
MAX_FILE_BYTES = 16 << 20


def read_file(path: str, what: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a user's JSON file (`what`: "setting file"), at most `limit` of them: ValueError
    (one line, as mhc's read_small_file says it) for more, or for no regular file (a named pipe, a
    device: not_a_regular_file); OSError for what open() refuses (no such file, a folder, no
    permission)."""
    special = not_a_regular_file(path)
    if special:
        raise ValueError(special)
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"more than {format_bytes(limit)}, larger than a {what} is (a trace or another file "
                         "given by mistake?)")
    return data


def _no_repeated_keys(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"key '{key}' is given twice: JSON readers take either value; give it once")
        seen[key] = value
    return seen


def loads(text: str, strict_keys: bool = True):
    """`json.loads` of a user's JSON: ValueError (one line) for what is no JSON, a key repeated in
    an object (unless not `strict_keys`), nesting too deep, or a number past Python's digit limit."""
    try:
        return json.loads(text, object_pairs_hook=_no_repeated_keys if strict_keys else None)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise ValueError("not JSON mhc-torch reads: nested too deeply") from None
    except ValueError as e:   # a repeated key, or an integer of more digits than Python converts
        what = str(e).splitlines()[0] if str(e) else "not JSON"
        if what.startswith("Exceeds the limit"):
            what = f"not JSON mhc-torch reads: a number of more digits than it converts ({what.split(':')[0]})"
        raise ValueError(what) from None
