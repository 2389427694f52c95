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
