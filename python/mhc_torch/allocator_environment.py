"""The caching allocator's settings from the environment, as PyTorch reads them and as the trace
records them (meta allocator.conf)."""
from __future__ import annotations

import os

from .errors import CaptureError


# The variables PyTorch reads its caching allocator's settings from, the one it follows first
# (torch 2.15 takes PYTORCH_CUDA_ALLOC_CONF when both are set).
ALLOCATOR_ENV = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")


def allocator_env() -> str:
    """The allocator settings PyTorch would read from the environment now ("" for none)."""
    return next((os.environ[v].strip() for v in ALLOCATOR_ENV if os.environ.get(v, "").strip()), "")


def _readable_allocator_conf(conf: str) -> None:
    """The environment's allocator settings, which the trace records (meta allocator.conf), as mhc reads
    them: settings it cannot read made a trace that `mhc simulate` and `mhc advise` refused."""
    from .settings import allocator_conf_problem

    why = allocator_conf_problem(conf) if conf else None
    if why:
        name = next((v for v in ALLOCATOR_ENV if os.environ.get(v, "").strip()), ALLOCATOR_ENV[0])
        raise CaptureError(f"{name}: {why}; the trace records these settings (meta allocator.conf) and mhc "
                           "could not read them")


def refuse_unreadable_env() -> None:
    """Raises SettingError (one line naming the variable) for allocator settings in the environment
    that mhc cannot read, before torch is imported: PyTorch ends the process on some of them when
    it is imported (SIGABRT and a C++ backtrace for 'garbage', 'max_split_size_mb:' or ','), so
    the capture's own check, after the import, was never reached. Nothing is checked once torch is
    imported (a library caller's own process)."""
    import sys

    conf = allocator_env()
    if not conf or "torch" in sys.modules:
        return
    from .settings import SettingError

    name = next(v for v in ALLOCATOR_ENV if os.environ.get(v, "").strip())
    try:
        _readable_allocator_conf(conf)
    except CaptureError as e:
        raise SettingError(str(e)) from None
    # Settings mhc reads whole (an empty one between commas is skipped) that PyTorch's own reader
    # may end the process on: tried in a child process, only then.
    if any(not part.strip(" \t") for part in conf.split(",")):
        import signal
        import subprocess

        child = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True)
        if child.returncode == -signal.SIGABRT:
            raise SettingError(f"{name}: '{conf}': PyTorch ends the process when it is imported with these "
                               "settings (an empty setting between commas); leave it out")
