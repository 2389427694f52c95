"""`mhc-torch capture`: the step captured on fake tensors, written as a trace, and its summary."""
from __future__ import annotations

import argparse
import os
import time

from .cli_capture_notes import _flops_line, _say_notes, _without_hf_checkpointing
from .cli_io import _say
from .cli_model_file import (_forked_children_end, _load_model_file, _model_failed, _no_os_exit, _not_a_file,
                             _streams_kept, _unknown_model)
from .cli_options import _check_options, _no_effect, _unused
from .cli_recipe import _recipe
from .formatting import format_bytes, format_ns
from .output_file import OutputError, _Terminated, check_output, show_as


def _capture_command(a, parser: argparse.ArgumentParser, recipe: str | None) -> int:
    """`mhc-torch capture` once its arguments are parsed: the model and options checked, and the
    output, before anything is imported or run (`recipe`: --recipe as given, a file it names is an input)."""
    from .models import PRESETS

    if a.model is None:
        _say("mhc-torch: capture needs MODEL (a preset or FILE.py) or --recipe")
        return 2
    if not a.model.endswith(".py") and a.model not in PRESETS:
        _say(f"mhc-torch: {_unknown_model(a.model, PRESETS)}")
        return 2
    for w in _no_effect(a):
        _say(f"mhc-torch: warning: {w}")
    wrong = _check_options(a)
    if wrong:
        _say(f"mhc-torch: {wrong}")
        return 2
    if a.model.endswith(".py") and not os.path.isfile(a.model):
        # said before torch is imported (about 2 s), as _load_model_file would say it
        _say(f"mhc-torch: {a.model}: {_not_a_file(a.model)}")
        return 2
    try:  # before the model is loaded or run: a refused output costs nothing
        # the files read (a setting, a recipe or a profile named as a file) are inputs too
        check_output(a.out, replace=a.force, inputs=[a.model if a.model.endswith(".py") else None, a.setting,
                                                     recipe, a.kernel_times])
    except OutputError as e:
        _say(f"mhc-torch: {e}")
        return 2
    return _capture(a, parser)


def _capture(a, parser: argparse.ArgumentParser) -> int:
    if not a.model.endswith(".py"):
        return _capture_guarded(a, parser)
    with _no_os_exit():
        return _capture_guarded(a, parser)


class _Refused(Exception):
    """The command ends here with `status`, its reason already said on stderr."""

    def __init__(self, status: int = 2):
        super().__init__(status)
        self.status = status


def _refuse(message: str, status: int = 2):
    _say(message)
    raise _Refused(status)


def _capture_guarded(a, parser: argparse.ArgumentParser) -> int:
    """The setting, the kernel times and the options checked, the model loaded, the step captured
    and its summary said; each stage that refuses says why in one line (_Refused)."""
    # The output where it was named: a model file may change the working folder (os.chdir at its
    # top level or in build_model()), and the trace was written there, under the name given.
    out = os.path.abspath(a.out)
    show_as(out, a.out)
    try:
        setting = _setting_read(a)
        kernel_times = _kernel_times_read(a)
        import torch

        _capture_modules_imported()
        dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "none": None, "as-built": None}
        _recipe_checked(a, dtypes)
        build, make_batch, loss_fn, step, build_optimizer = _model_loaded(a)
        meta = _capture_meta(a, parser, build_optimizer)
        # What both captures of the step share (this one and, for a Hugging Face model that
        # checkpoints itself, the one without its checkpointing).
        shared = dict(steps=a.steps, gpu=a.gpu, loss_fn=loss_fn, optimizer=_optimizer(a, build_optimizer),
                      autocast_dtype=dtypes[a.autocast], autocast_policy=a.autocast_policy,
                      param_dtype=dtypes[a.weights], micro_batches=a.micro_batches, zero_grad=a.zero_grad,
                      step=step, build_optimizer=build_optimizer)
        t0 = time.perf_counter()
        r = _captured(a, out, build, make_batch, dict(shared, path=out, meta=meta, replace=a.force,
                                                      forward_only=a.forward_only, setting=setting,
                                                      kernel_times=kernel_times))
    except _Refused as refused:
        return refused.status
    wall = time.perf_counter() - t0
    _say_result(a, r, wall)
    if r.meta.get("capture.hf_checkpointing_on") == "true" and setting is None and not a.forward_only:
        off = _without_hf_checkpointing(r, build, make_batch, a, capture_kwargs=shared)
        if off is not None:
            print(off)
    if kernel_times is not None:
        m = kernel_times.meta()
        print(f"kernel times: {m['capture.kernel_times.matched']} measured in {a.kernel_times} "
              f"({m['capture.kernel_times.device']}); the roofline for the rest: {m['capture.kernel_times.unmatched']}")
    return 0


def _capture_modules_imported() -> None:
    """The capture's modules, imported once torch is and before a model file's top level runs (as
    they always were: flops.py, for one, sets the level of torch's FLOP counter's log at import)."""
    import importlib

    for name in ("capturing", "models", "recipes"):
        importlib.import_module(f".{name}", __package__)


def _setting_read(a):
    """--setting read and checked before torch is imported (a bad setting is told at once), and
    the environment PyTorch's import would end the process on refused."""
    from .allocator_environment import refuse_unreadable_env
    from .settings import SettingError, load_setting

    try:
        setting = load_setting(a.setting) if a.setting is not None else None
        refuse_unreadable_env()   # PyTorch's import ends the process on some
    except SettingError as e:
        _refuse(f"mhc-torch: {e}")
    if a.forward_only and setting is not None and setting.get("optimizer"):
        _say("mhc-torch: warning: the setting's \"optimizer\" has no effect: a --forward-only step has no optimizer")
    return setting


def _kernel_times_read(a):
    """--kernel-times read before torch is imported and the model loaded: a profile that cannot give
    times is told at once (the import alone is about 4 s of CPU)."""
    from .kernel_times import KernelTimes, KernelTimesError

    try:
        return KernelTimes(a.kernel_times, a.max_input_size) if a.kernel_times is not None else None
    except KernelTimesError as e:
        _refuse(f"mhc-torch: --kernel-times: {e}")


def _recipe_checked(a, dtypes) -> None:
    """Options that contradict each other, refused before the model is loaded."""
    from .recipes import Recipe

    try:
        Recipe(dtypes[a.autocast], a.autocast_policy, dtypes[a.weights], a.forward_only, a.micro_batches,
               a.zero_grad).check()
    except ValueError as e:
        _refuse(f"mhc-torch: {e}")


def _model_loaded(a):
    """(build_model, make_batch, loss_fn, step, build_optimizer) of the preset or the model file."""
    if not a.model.endswith(".py"):
        from .models import preset

        build, make_batch, loss_fn, _ = preset(a.model, batch=a.batch, seq=a.seq, layers=a.layers, hc=a.hc)
        return build, make_batch, loss_fn, None, None
    try:
        with _forked_children_end(os.getpid()), _streams_kept():
            build, make_batch, loss_fn, step, build_optimizer = _load_model_file(a.model)
    except OSError as e:
        _refuse(f"mhc-torch: {a.model}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    except (KeyboardInterrupt, _Terminated):
        raise
    except BaseException as e:  # the file's own code failed while loading (GeneratorExit, its own classes)
        _refuse(_model_failed(a.model, e))
    if step is not None and (a.forward_only or a.micro_batches != 1):
        _refuse(f"mhc-torch: {a.model}: defines step(), which says itself what a step does: drop --forward-only "
                "and --micro-batches")
    return build, make_batch, loss_fn, step, build_optimizer


def _capture_meta(a, parser: argparse.ArgumentParser, build_optimizer) -> dict:
    """The command's own meta rows: the model, its shape options, the optimizer and the recipe."""
    import json

    meta = {"capture.model": a.model}
    meta.update({f"capture.{d}": str(getattr(a, d)) for d in ("batch", "seq", "hc") if d not in _unused(a.model)})
    meta["capture.optimizer"] = a.optimizer if build_optimizer is None else "build_optimizer"
    if build_optimizer is not None and a.optimizer != "adamw":
        _say(f"mhc-torch: warning: --optimizer {a.optimizer} has no effect: {a.model} builds its own optimizer "
             "(build_optimizer())")
    meta["capture.recipe"] = json.dumps(_recipe(a, parser), sort_keys=True)
    return meta


def _optimizer(a, build_optimizer):
    """The optimizer of a preset or of a model file without build_optimizer(): AdamW with foreach
    kernels (PyTorch's default on GPUs) or the fused kernel, which makes no temporaries; None
    where the model file builds its own (its class, groups, hyperparameters)."""
    if build_optimizer is not None:
        return None
    import torch

    fused = a.optimizer == "adamw-fused"
    return lambda ps: torch.optim.AdamW(ps, lr=1e-4, fused=fused, foreach=None if fused else True)


def _captured(a, out: str, build, make_batch, capture_kwargs: dict):
    """The step captured and written to `out`; a failure is said in one line (the output's name
    as given) and refused, but a preset's own failure, a bug of this package, keeps its traceback."""
    from .capturing import CaptureError, capture
    from .settings import SettingError

    try:
        with _forked_children_end(os.getpid()), _streams_kept():
            return capture(build, make_batch, **capture_kwargs)
    except (CaptureError, SettingError) as e:
        _refuse(f"mhc-torch: {a.model}: {e}")
    except KeyboardInterrupt:
        _refuse(f"mhc-torch: {a.out}: interrupted; no trace written", 130)
    except OutputError as e:  # the output, refused or unwritable
        _refuse(f"mhc-torch: {str(e).replace(out, a.out)}")
    except _Terminated:
        raise
    except BaseException as e:  # Exception, SystemExit, GeneratorExit, a model's own BaseException
        if not a.model.endswith(".py"):
            raise  # a preset failing is a bug of this package: keep the traceback
        _refuse(_model_failed(a.model, e))


def _say_result(a, r, wall: float) -> None:
    """The trace's summary on stdout: its size, peak and estimated step times, FLOPs and notes."""
    step_times = ", ".join(format_ns(t) for t in r.step_time_ns)
    print(f"{a.out}: {r.kernels} kernels, {r.allocations} allocations, {r.steps} steps; "
          f"peak {format_bytes(r.peak_bytes)}; estimated step time {step_times} on {a.gpu}; "
          f"captured in {format_ns(wall * 1e9)}")
    print(_flops_line(r, a.gpu))
    _say_notes(r)
