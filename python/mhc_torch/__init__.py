"""mhc_torch: traces of PyTorch training steps captured on fake tensors, for mhc-toolkit.

    import mhc_torch
    mhc_torch.capture(build_model, make_batch, steps=2, gpu="h100-sxm", path="model.db")
    runs = mhc_torch.read_runs("model.db")      # pandas DataFrame, one row per simulated run
    model, opt = mhc_torch.apply(model, opt, {"checkpoint": {"modules": ["GPT2LMHeadModel.transformer.h.0"]}})
"""
from .gpus import GPUS, GpuSpec, gpu
from .sizes import SizeError, parse_bandwidth, parse_share, parse_size
from .store import TraceError, read_meta, read_run_table, read_runs, read_table

__all__ = ["capture", "CaptureError", "CaptureResult", "GPUS", "GpuSpec", "gpu", "TraceError",
           "read_meta", "read_runs", "read_run_table", "read_table", "apply", "load_setting", "SettingError",
           "SizeError", "parse_size", "parse_share", "parse_bandwidth"]


def __getattr__(name):
    # torch is imported only when capture or apply is used, so reading runs needs pandas alone.
    if name in ("capture", "CaptureError", "CaptureResult"):
        from . import capturing as _capture_module
        return getattr(_capture_module, name)
    if name == "apply":
        from .applying import apply
        return apply
    if name in ("load_setting", "SettingError"):
        from . import settings
        return getattr(settings, name)
    raise AttributeError(name)
