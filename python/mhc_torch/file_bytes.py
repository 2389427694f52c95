"""Bytes of an SQLite file read without a descriptor of this module's own (the C++ store's
sql::read_bytes, trace/src/sqlite_util.cpp).

A POSIX lock belongs to the process, and closing any descriptor of a file drops every lock the
process holds on it: a header read by open() and close() dropped the locks of this process's own
sqlite3 connections to the trace (a write transaction's too: another writer then wrote beside it and
the commit failed, "disk I/O error"). SQLite's unix VFS keeps a descriptor it opened until the
process's SQLite locks on the file are gone, so the bytes are read through the VFS of the SQLite
library that Python's sqlite3 module uses (the only one whose locks can be kept so).

Where that library's functions cannot be reached (an SQLite linked into _sqlite3 without its
symbols exported) or the platform's locks are not the process's (Windows), the file is read by
open() as before.
"""
from __future__ import annotations

import ctypes
import os
import sys

_OPEN_READONLY = 0x00000001
_OPEN_MAIN_DB = 0x00000100


class _IoMethods(ctypes.Structure):
    _fields_ = [("iVersion", ctypes.c_int),
                ("xClose", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)),
                ("xRead", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                                           ctypes.c_int64))]


class _File(ctypes.Structure):
    _fields_ = [("pMethods", ctypes.POINTER(_IoMethods))]


class _Vfs(ctypes.Structure):
    _fields_ = [("iVersion", ctypes.c_int), ("szOsFile", ctypes.c_int), ("mxPathname", ctypes.c_int),
                ("pNext", ctypes.c_void_p), ("zName", ctypes.c_char_p), ("pAppData", ctypes.c_void_p),
                ("xOpen", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                           ctypes.c_int, ctypes.POINTER(ctypes.c_int)))]


_library: ctypes.CDLL | None | bool = False   # False: not looked for yet


def _sqlite_library() -> ctypes.CDLL | None:
    """The SQLite library of Python's sqlite3 module (dlsym on the extension's handle finds it in the
    extension or in what it links), with the functions this reads by; None where they are not there."""
    global _library
    if _library is False:
        _library = None
        if os.name == "posix":
            try:
                import _sqlite3

                lib = ctypes.CDLL(_sqlite3.__file__)
                lib.sqlite3_vfs_find.restype = ctypes.POINTER(_Vfs)
                lib.sqlite3_vfs_find.argtypes = [ctypes.c_char_p]
                lib.sqlite3_create_filename.restype = ctypes.c_void_p
                lib.sqlite3_create_filename.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                                        ctypes.c_int, ctypes.c_void_p]
                lib.sqlite3_free_filename.argtypes = [ctypes.c_void_p]
                lib.sqlite3_free_filename.restype = None
                _library = lib
            except (ImportError, OSError, AttributeError):
                pass
    return _library


def read(path: str | os.PathLike, offset: int, count: int) -> bytes | None:
    """`count` bytes of the file at `offset` (fewer at its end), or None where it cannot be read."""
    lib = _sqlite_library()
    if lib is None:
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                return f.read(count)
        except OSError:
            return None
    vfs = lib.sqlite3_vfs_find(None)
    if not vfs:
        return None
    name = lib.sqlite3_create_filename(os.fsencode(path), b"", b"", 0, None)
    if not name:
        return None
    handle = ctypes.create_string_buffer(max(vfs.contents.szOsFile, ctypes.sizeof(_File)))
    opened = ctypes.cast(handle, ctypes.POINTER(_File))
    out_flags = ctypes.c_int(0)
    out = ctypes.create_string_buffer(count)
    try:
        if vfs.contents.xOpen(vfs, name, handle, _OPEN_READONLY | _OPEN_MAIN_DB, ctypes.byref(out_flags)) != 0:
            return None
        rc = opened.contents.pMethods.contents.xRead(handle, out, count, offset)
        if rc == 0:
            return out.raw
        if rc == 522:   # SQLITE_IOERR_SHORT_READ: the file ends before offset + count
            try:
                left = max(0, os.stat(path).st_size - offset)
            except OSError:
                return None
            return out.raw[:min(count, left)]
        return None
    finally:
        if opened.contents.pMethods:
            opened.contents.pMethods.contents.xClose(handle)
        lib.sqlite3_free_filename(name)


if sys.platform == "win32":   # LockFileEx locks are the handle's: closing another handle keeps them
    _library = None
