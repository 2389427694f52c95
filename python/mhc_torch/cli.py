"""mhc-torch: capture a model's training steps (a preset or FILE.py) as a trace on fake tensors, and
print a trace's runs (see docs/torch.md)."""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import sys
import time

from . import file_bytes, json_input
from .formatting import format_bytes, format_ns
from .help_format import format_help
from .json_input import not_a_regular_file
from .number_grammar import capped_words, printable, size, whole
from .output_file import OutputError, _Terminated, check_output, show_as


def _say(line: str) -> None:
    """One line on stderr, whatever it quotes: a newline or an escape in a file name or a value is
    shown as '?', as mhc shows it (it was sent as is: two lines, or the terminal's escape)."""
    print(capped_words(printable(line)), file=sys.stderr)


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


# The options that shape a preset's model and batch, and their defaults: a model file makes its own.
_SHAPE = {"batch": 1, "seq": 4096, "layers": None, "hc": 4}
# The most tokens a step may hold (batch x seq): far beyond any GPU's step, and token counts times a
# vocabulary still fit the 64-bit sizes of tensors.
_MAX_TOKENS = 2**31


def _is_file(model: str) -> bool:
    return model.endswith(".py")


def _is_mhc(model: str) -> bool:
    return model.startswith("mhc") or model.endswith("mhc")


def _unused(model: str) -> list[str]:
    """The shape options that do nothing for `model`: all of them for a model file (make_batch()
    and build_model() decide), --hc for a model that is not an mHC transformer."""
    if _is_file(model):
        return list(_SHAPE)
    return [] if _is_mhc(model) else ["hc"]


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _no_effect(a) -> list[str]:
    """The options given that cannot change this capture, each as one warning (as `mhc` warns:
    `--X has no effect: why`); fills the shape defaults."""
    out = []
    unused = [d for d in _unused(a.model) if getattr(a, d) is not None]
    if unused:
        why = ("builds its own model and batch (build_model(), make_batch())" if _is_file(a.model)
               else "is not an mHC transformer")
        verb = "has" if len(unused) == 1 else "have"
        out.append(f"{', '.join(map(_flag, unused))} {verb} no effect: {a.model} {why}")
    for d, default in _SHAPE.items():
        if getattr(a, d) is None:
            setattr(a, d, default)
    if a.forward_only:
        for d, default in (("zero_grad", "none"), ("optimizer", "adamw")):
            if getattr(a, d) != default:
                out.append(f"{_flag(d)} {getattr(a, d)} has no effect: a --forward-only step has no optimizer")
    if a.autocast == "none" and a.autocast_policy != "cuda":
        out.append(f"--autocast-policy {a.autocast_policy} has no effect with --autocast none")
    return out


def _check_options(a) -> str | None:
    """What is wrong with the (filled) options, as one line, or None."""
    for name, v in (("--steps", a.steps), ("--batch", a.batch), ("--seq", a.seq), ("--hc", a.hc),
                    ("--layers", a.layers if a.layers is not None else 1), ("--micro-batches", a.micro_batches)):
        if v < 1:
            return f"{name} must be at least 1 (got {v})"
    # --seq and --hc as `mhc generate` bounds them
    for name, v, hi in (("--steps", a.steps, 10**6), ("--micro-batches", a.micro_batches, 10**6), ("--hc", a.hc, 16),
                        ("--seq", a.seq, 1 << 22)):
        if v > hi:
            return f"{name} must be at most {hi:,} (got {v:,})"
    if not _is_file(a.model):
        from .models import depth

        if a.layers is not None and a.layers > depth(a.model):
            return f"--layers {a.layers}: {a.model} takes at most {depth(a.model)}"
        if a.batch * a.seq > _MAX_TOKENS:
            return f"--batch {a.batch} x --seq {a.seq} is {a.batch * a.seq:,} tokens a step; at most {_MAX_TOKENS:,}"
    return None


# Options that say where the trace goes or what is applied to the step, not what the step is.
_NOT_RECIPE = {"help", "out", "force", "setting", "recipe", "cmd", "kernel_times", "max_input_size"}


def _recipe(a, parser: argparse.ArgumentParser) -> dict:
    """What `mhc-torch capture` needs to run the same capture again: the model (a preset or the
    absolute path of FILE.py) and every option of the step."""
    recipe = {"model": os.path.abspath(a.model) if a.model.endswith(".py") else a.model}
    unused = _unused(a.model)
    for action in parser._actions:
        if action.dest not in _NOT_RECIPE and action.dest != "model" and action.dest not in unused:
            recipe[action.dest] = getattr(a, action.dest)
    return recipe


def _recipe_argv(text: str, parser: argparse.ArgumentParser) -> tuple[list[str], str | None]:
    """The command-line arguments that a recipe (JSON text, a JSON file, or a trace whose meta has
    capture.recipe) stands for, and the file it was read from (None for JSON text)."""
    path = None
    if text.lstrip()[:1] not in ("{", "[", '"'):
        path = text
        special = not_a_regular_file(path)
        if special:
            raise ValueError(f"{path}: {special}")
        head = file_bytes.read(path, 0, 16)   # a trace is read through SQLite, not into memory whole
        if head is None:
            with open(path, "rb"):   # the reason it cannot be read (no such file, a folder), as open() says it
                head = b""
        if head.startswith(b"SQLite format 3\0"):  # a trace: the recipe it was captured with
            from .store import TraceError, read_meta

            try:
                text = read_meta(path).get("capture.recipe")
            except TraceError as e:
                raise ValueError(str(e)) from None
            if text is None:
                raise ValueError(f"{path}: the trace has no capture.recipe (not captured by mhc-torch capture)")
            where = f"{path}: meta capture.recipe"
        elif head.startswith(b"\x1f\x8b"):  # a trace or a JSON file kept gzip-compressed
            how = f"gunzip -k {path}" if path.endswith(".gz") else f"gunzip -c {path} > FILE"
            raise ValueError(f"{path}: gzip-compressed (a JSON file or a trace was expected): "
                             f"decompress it first ({how})")
        else:
            try:
                text = json_input.read_file(path, "recipe file").decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"{path}: not UTF-8 text (a JSON file or a trace was expected)") from None
            except ValueError as e:
                raise ValueError(f"{path}: {e}") from None
            where = path
        try:
            return _recipe_words(text, parser), path
        except ValueError as e:   # what the file holds: said naming it, as a setting file's problems are
            raise ValueError(f"{where}: {e}") from None
    return _recipe_words(text, parser), path


def _recipe_words(text, parser: argparse.ArgumentParser) -> list[str]:
    """The command-line arguments of a recipe's JSON text."""
    import json

    recipe = json_input.loads(text)
    if not isinstance(recipe, dict) or not isinstance(recipe.get("model"), str):
        raise ValueError("expected a JSON object with a \"model\"")
    options = {a.dest: a for a in parser._actions if a.dest not in _NOT_RECIPE and a.dest != "model"}
    argv = [recipe["model"]]
    unused = _unused(recipe["model"])
    for key, value in recipe.items():
        if key == "model" or value is None:
            continue
        action = options.get(key)
        if action is None:
            raise ValueError(f"unknown key '{key}'; valid: model, {', '.join(options)}")
        if key in unused:
            continue  # written by earlier versions for every model (a model file's too); it never did anything
        if isinstance(action, argparse._StoreTrueAction):
            if not isinstance(value, bool):
                raise ValueError(f"{key}: expected true or false, got {json.dumps(value)}")
            argv += [action.option_strings[-1]] if value else []
        else:
            want = int if action.type is whole else str
            if want is int and (isinstance(value, bool) or not isinstance(value, int)) or \
                    want is str and not isinstance(value, str):
                kind = "an integer" if want is int else "a string"
                raise ValueError(f"{key}: expected {kind}, got {json.dumps(value)}")
            argv += [action.option_strings[-1], str(value)]
    return argv


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


def _capture(a, parser: argparse.ArgumentParser) -> int:
    if not a.model.endswith(".py"):
        return _capture_guarded(a, parser)
    with _no_os_exit():
        return _capture_guarded(a, parser)


def _capture_guarded(a, parser: argparse.ArgumentParser) -> int:
    import json

    # The output where it was named: a model file may change the working folder (os.chdir at its
    # top level or in build_model()), and the trace was written there, under the name given.
    out = os.path.abspath(a.out)
    show_as(out, a.out)

    from .allocator_environment import refuse_unreadable_env
    from .settings import SettingError, load_setting

    try:  # before torch is imported: a bad setting is told at once
        setting = load_setting(a.setting) if a.setting is not None else None
        refuse_unreadable_env()   # PyTorch's import ends the process on some
    except SettingError as e:
        _say(f"mhc-torch: {e}")
        return 2

    if a.forward_only and setting is not None and setting.get("optimizer"):
        _say("mhc-torch: warning: the setting's \"optimizer\" has no effect: a --forward-only step has no optimizer")

    import torch

    from .capturing import CaptureError, capture
    from .models import preset
    from .recipes import Recipe

    from .kernel_times import KernelTimes, KernelTimesError

    try:  # before the model is loaded: a profile that cannot give times is told at once
        kernel_times = KernelTimes(a.kernel_times, a.max_input_size) if a.kernel_times is not None else None
    except KernelTimesError as e:
        _say(f"mhc-torch: --kernel-times: {e}")
        return 2

    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "none": None, "as-built": None}
    try:  # before the model is loaded: options that contradict each other
        Recipe(dtypes[a.autocast], a.autocast_policy, dtypes[a.weights], a.forward_only, a.micro_batches,
               a.zero_grad).check()
    except ValueError as e:
        _say(f"mhc-torch: {e}")
        return 2

    if a.model.endswith(".py"):
        try:
            with _forked_children_end(os.getpid()), _streams_kept():
                build, make_batch, loss_fn, step, build_optimizer = _load_model_file(a.model)
        except OSError as e:
            _say(f"mhc-torch: {a.model}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
            return 2
        except (KeyboardInterrupt, _Terminated):
            raise
        except BaseException as e:  # the file's own code failed while loading (GeneratorExit, its own classes)
            _say(_model_failed(a.model, e))
            return 2
        if step is not None and (a.forward_only or a.micro_batches != 1):
            _say(f"mhc-torch: {a.model}: defines step(), which says itself what a step does: drop --forward-only "
                 "and --micro-batches")
            return 2
    else:
        build, make_batch, loss_fn, _ = preset(a.model, batch=a.batch, seq=a.seq, layers=a.layers, hc=a.hc)
        step = build_optimizer = None
    dtype = dtypes[a.autocast]
    meta = {"capture.model": a.model}
    meta.update({f"capture.{d}": str(getattr(a, d)) for d in ("batch", "seq", "hc") if d not in _unused(a.model)})
    meta["capture.optimizer"] = a.optimizer if build_optimizer is None else "build_optimizer"
    if build_optimizer is not None and a.optimizer != "adamw":
        _say(f"mhc-torch: warning: --optimizer {a.optimizer} has no effect: {a.model} builds its own optimizer "
             "(build_optimizer())")
    meta["capture.recipe"] = json.dumps(_recipe(a, parser), sort_keys=True)
    # foreach (PyTorch's default on GPUs) or fused: the fused kernel makes no temporaries.
    fused = a.optimizer == "adamw-fused"
    optimizer = lambda ps: torch.optim.AdamW(ps, lr=1e-4, fused=fused, foreach=None if fused else True)  # noqa: E731
    if build_optimizer is not None:  # the model file's own optimizer (its class, groups, hyperparameters)
        optimizer = None
    t0 = time.perf_counter()
    try:
        with _forked_children_end(os.getpid()), _streams_kept():
            r = capture(build, make_batch, steps=a.steps, gpu=a.gpu, path=out, loss_fn=loss_fn,
                        optimizer=optimizer, autocast_dtype=dtype, meta=meta, replace=a.force,
                        autocast_policy=a.autocast_policy, param_dtype=dtypes[a.weights], forward_only=a.forward_only,
                        micro_batches=a.micro_batches, zero_grad=a.zero_grad, step=step, setting=setting,
                        build_optimizer=build_optimizer, kernel_times=kernel_times)
    except (CaptureError, SettingError) as e:
        _say(f"mhc-torch: {a.model}: {e}")
        return 2
    except KeyboardInterrupt:
        _say(f"mhc-torch: {a.out}: interrupted; no trace written")
        return 130
    except OutputError as e:  # the output, refused or unwritable
        _say(f"mhc-torch: {str(e).replace(out, a.out)}")
        return 2
    except _Terminated:
        raise
    except BaseException as e:  # Exception, SystemExit, GeneratorExit, a model's own BaseException
        if not a.model.endswith(".py"):
            raise  # a preset failing is a bug of this package: keep the traceback
        _say(_model_failed(a.model, e))
        return 2
    wall = time.perf_counter() - t0
    step_times = ", ".join(format_ns(t) for t in r.step_time_ns)
    print(f"{a.out}: {r.kernels} kernels, {r.allocations} allocations, {r.steps} steps; "
          f"peak {format_bytes(r.peak_bytes)}; estimated step time {step_times} on {a.gpu}; "
          f"captured in {format_ns(wall * 1e9)}")
    print(_flops_line(r, a.gpu))
    if r.meta.get("capture.allocator_conf_late") is not None:
        _say(_allocator_late(r.meta))
    if r.meta.get("capture.reserved_asked"):
        _say(_reserved_note(r))
    if r.meta.get("capture.cudnn_rnn"):
        rnns = json.loads(r.meta["capture.cudnn_rnn"])
        _say(f"mhc-torch: note: {_rnn_names(rnns)} captured as cuDNN's RNN kernel (aten::_cudnn_rnn, fp16 under "
             "autocast); its reserve space is estimated (cuDNN sizes it on the GPU) and its workspaces are not "
             "modelled: meta capture.cudnn_rnn.estimated")
    if r.meta.get("capture.batch_on_host"):
        _say(f"mhc-torch: note: make_batch() selects by value ({r.meta['capture.batch_on_host']}), which fake "
             "tensors cannot: it ran on the host's real tensors, as a DataLoader's collate function does, and its "
             "tensors went to the device as fakes (meta capture.batch_on_host)")
    if r.meta.get("capture.hf_checkpointing_on") == "true" and setting is None and not a.forward_only:
        off = _without_hf_checkpointing(r, build, make_batch, a, capture_kwargs=dict(
            steps=a.steps, gpu=a.gpu, loss_fn=loss_fn, optimizer=optimizer, autocast_dtype=dtype,
            autocast_policy=a.autocast_policy, param_dtype=dtypes[a.weights], micro_batches=a.micro_batches,
            zero_grad=a.zero_grad, step=step, build_optimizer=build_optimizer))
        if off is not None:
            print(off)
    if kernel_times is not None:
        m = kernel_times.meta()
        print(f"kernel times: {m['capture.kernel_times.matched']} measured in {a.kernel_times} "
              f"({m['capture.kernel_times.device']}); the roofline for the rest: {m['capture.kernel_times.unmatched']}")
    return 0


def _allocator_late(meta: dict) -> str:
    """The warning for allocator settings the script set after CUDA would have initialised."""
    late = meta["capture.allocator_conf_late"]
    used = meta.get("allocator.conf", "")
    when = ("after build_model() had initialised CUDA (its first CUDA tensor or torch.cuda call)"
            if meta.get("capture.cuda_init") == "build_model" else "after build_model() had returned")
    return (f"mhc-torch: warning: PYTORCH_CUDA_ALLOC_CONF was set to '{late}' {when}: "
            "PyTorch reads it once, when CUDA initialises (the model's first CUDA tensor), so the step runs and was "
            f"captured with {repr(used) if used else 'the default settings'}; set it at the top of the script, "
            "before the model is built")


def _rnn_names(names: list[str]) -> str:
    """'LstmLm.rnns.0, LstmLm.rnns.1 and 2 more (nn.RNNBase modules)'-style: the first two named."""
    more = f" and {len(names) - 2} more" if len(names) > 2 else ""
    return ", ".join(names[:2]) + more + (" (recurrent layers)" if len(names) > 1 else " (a recurrent layer)")


def _without_hf_checkpointing(r, build, make_batch, a, capture_kwargs) -> str | None:
    """A Hugging Face model whose own gradient checkpointing the user turned on recomputes every
    layer, and `mhc advise` only adds settings to a step: a user with memory to spare is never told
    that turning it off is faster. The same step is captured again with the model's checkpointing
    turned off (its own disable call), and its peak and estimated step time are said and kept in
    the trace (meta capture.without_hf_checkpointing: peak_bytes, host_peak_bytes, step_time_ns)."""
    import json
    import sqlite3
    import tempfile

    from .capturing import capture

    def build_off():
        model = build()
        disable = getattr(model, "activation_checkpointing_disable", None) or model.gradient_checkpointing_disable
        disable()
        return model

    folder = tempfile.mkdtemp(prefix="mhc-hf-off-")
    try:
        with _forked_children_end(os.getpid()), _streams_kept():
            off = capture(build_off, make_batch, path=os.path.join(folder, "off.db"), **capture_kwargs)
        reserved = _reserved_bytes(os.path.join(folder, "off.db"))
    except Exception as e:  # noqa: BLE001 - the trace is written; this is a note beside it
        return f"note: the step without Hugging Face checkpointing could not be captured: {type(e).__name__}: {e}"
    except KeyboardInterrupt:
        return "note: interrupted while capturing the step without Hugging Face checkpointing (the trace is written)"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    # with the reserved bytes (the caching allocator's, as mhc simulates them) `mhc advise` ranks
    # turning it off among its answers where that fits
    figures = {"peak_bytes": off.peak_bytes, "host_peak_bytes": int(off.meta.get("capture.host_peak_bytes", 0)),
               "step_time_ns": off.step_time_ns[-1], "with_step_time_ns": r.step_time_ns[-1]}
    if reserved is not None:
        figures["reserved_bytes"] = reserved
    with sqlite3.connect(r.path) as db:
        db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                   ("capture.without_hf_checkpointing", json.dumps(figures, sort_keys=True)))
    db.close()
    faster = 1 - off.step_time_ns[-1] / r.step_time_ns[-1] if r.step_time_ns[-1] else 0.0
    return ("note: the model's own gradient checkpointing is on (its gradient_checkpointing_enable() or "
            f"activation_checkpointing_enable() call); without it the step peaks at "
            f"{format_bytes(off.peak_bytes)} (captured again without it; {format_bytes(r.peak_bytes)} with it) "
            f"and takes {format_ns(off.step_time_ns[-1])} (estimated; {faster:.1%} faster): where that fits, "
            f"leave the call out")


def _reserved_note(r) -> str:
    """What the step's torch.cuda.memory_reserved() calls answered (0: a capture runs no caching
    allocator; a training loop that logs or checks it read 0) and the reserved peak `mhc advise`
    simulates for the step instead."""
    calls = ", ".join(f"torch.cuda.{n}()" for n in r.meta["capture.reserved_asked"].split(", "))
    reserved = _reserved_bytes(r.path)
    figure = (f"the caching allocator's reserved peak for this step is {format_bytes(reserved)} (as `mhc advise "
              f"{r.path}` simulates it)" if reserved is not None else
              f"`mhc advise {r.path}` simulates the caching allocator's reserved peak")
    return (f"mhc-torch: note: the step's {calls} answered 0: a capture runs no caching allocator; {figure}")


def _reserved_bytes(trace: str) -> int | None:
    """The caching allocator's reserved peak of a captured step, as `mhc advise` simulates it (the
    mhc binary: $MHC_EXE, else `mhc` on the PATH); None without it or when it fails."""
    import json
    import subprocess

    exe = os.environ.get("MHC_EXE") or shutil.which("mhc")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "advise", trace, "--setting", "{}", "--json"], capture_output=True, text=True,
                             timeout=600)
        return int(json.loads(out.stdout)["baseline"]["reserved_bytes"]) if out.returncode == 0 else None
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired):
        return None


def _si(v: float, unit: str) -> str:
    """3 significant digits with an SI prefix: 45.1 MFLOP (a time is said as mhc says one: format_ns)."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, ""),
                          (1e-3, "m"), (1e-6, "u"), (1e-9, "n")):
        if abs(v) >= scale or scale == 1e-9:
            return f"{v / scale:.3g} {prefix}{unit}"
    return f"0 {unit}"


def _flops_line(r, gpu_name: str) -> str:
    """The last step's FLOPs by phase and what they take at the GPU's bf16 peak: MFU is that time
    over a measured step time (the capture's own step time is a roofline estimate). MFU counts the
    model's FLOPs only: a checkpointed step's recomputation is work the hardware does, not the
    model (PaLM's MFU against HFU), so it is left out of MFU and said as HFU beside it."""
    from .gpus import gpu

    f = r.flops_per_step[-1]
    total = sum(f.values())
    recompute = f.get("recompute", 0)
    peak = gpu(gpu_name).bf16_flops
    at_peak = (total - recompute) / peak
    est = r.step_time_ns[-1] / 1e9
    parts = ", ".join(f"{phase} {_si(v, 'FLOP')}" for phase, v in f.items() if v)
    seconds = lambda s: format_ns(s * 1e9)  # noqa: E731
    estimated = f" ({100 * at_peak / est:.1f}% at the estimated {seconds(est)})" if est > 0 else ""
    line = (f"FLOPs per step {_si(total, 'FLOP')} ({parts or 'none counted'}); {seconds(at_peak)} at "
            f"{gpu_name}'s bf16 peak, so MFU = {seconds(at_peak)} / a measured step time{estimated}")
    if recompute:
        line += f"; with the recompute (HFU) {seconds(total / peak)}"
    return line


def _runs(a) -> int:
    from .runs_text import runs_fields, runs_table
    from .store import TraceError, read_runs

    if a.trace == "":  # was "mhc-torch: : no such file"; said as mhc says an empty value
        _say("mhc-torch: runs: the TRACE argument is empty (mhc-torch runs --help)")
        return 2
    try:
        df = read_runs(a.trace)
    except TraceError as e:
        _say(f"mhc-torch: {e}")
        return 2
    if df.attrs.get("stale_note"):   # runs computed from other data: not shown
        _say(f"mhc-torch: warning: {df.attrs['stale_note']}")
    if not len(df):
        print(f"{printable(a.trace)}: no runs")
    elif a.all:
        # the fields down the page, the runs across, wrapped at the terminal's width (COLUMNS, else 100)
        print(runs_fields(df, shutil.get_terminal_size((100, 24)).columns))
    else:
        print(runs_table(df))
    return 0


class _Counted:
    """An option's action that counts how often it is given (argparse keeps the last silently)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string is not None:
            given = namespace.__dict__.setdefault("_given", {})
            given[self.dest] = given.get(self.dest, 0) + 1
        super().__call__(parser, namespace, values, option_string)


class _Store(_Counted, argparse._StoreAction):
    pass


class _StoreTrue(_Counted, argparse._StoreTrueAction):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse, its errors in one line (with where to find the usage) and exit status 2, and
    mhc's rules for the command line (docs/cli.md): an option given twice is refused (argparse
    kept the last), a number follows mhc's grammar (number_grammar.whole), and an option is named
    whole (argparse took --step for --steps)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.register("action", None, _Store)
        self.register("action", "store", _Store)
        self.register("action", "store_true", _StoreTrue)

    def format_help(self):
        """mhc's layout (help_format.py): --out, the old name of --output, still read, not shown."""
        return format_help(self, hidden={"--out"})

    def parse_known_args(self, args=None, namespace=None):
        a, rest = super().parse_known_args(args, namespace)
        given = a.__dict__.pop("_given", {})
        for action in self._actions:
            n = given.get(action.dest, 0)
            if n > 1 and action.option_strings:
                self.error(f"{action.option_strings[-1]} given {n} times; give it once")
        return a, rest

    def _print_message(self, message, file=None):
        """argparse let a failed write go without a word (the help cut short on a full disk, exit 0):
        kept for _finish_stdout to say, the standard output's error only."""
        if not message:
            return
        file = file or sys.stderr
        try:
            file.write(message)
            if file is sys.stdout:
                file.flush()
        except BrokenPipeError:
            if file is sys.stdout:
                raise
        except OSError as e:
            if file is sys.stdout:
                global _stdout_error
                _stdout_error = e

    def error(self, message):
        message = printable(re.sub(r"^argument (-[^ :]*): ", r"\1: ", message))   # as mhc names an option
        # a required argument or option left out, in mhc's words: "the TRACE argument is required",
        # "--output is required" (argparse: "the following arguments are required: -o/--out/--output")
        missing = re.match(r"the following arguments are required: (.*)$", message)
        choice = re.match(r"argument COMMAND: invalid choice: '(.*)' \(choose from (.*)\)$", message)
        if missing and missing.group(1) == "COMMAND" or choice:   # as mhc says a command missing or mistyped
            import difflib

            names = [a for a in self._actions if isinstance(a, argparse._SubParsersAction)][0].choices
            near = difflib.get_close_matches(choice.group(1), names, n=1) if choice else []
            message = (f"'{choice.group(1)}' is not a command" if choice else "a command is required") + \
                (f"; did you mean {near[0]}?" if near else f"; commands: {', '.join(names)}")
        elif re.match(r"(-[^ :]*): invalid choice: '(.*)' \(choose from (.*)\)$", message):
            # an option's name refused as mhc's one_of refuses one: "--gpu: 'h300': use one of ...; did you mean h200?"
            import difflib

            option, value, listed = re.match(r"(-[^ :]*): invalid choice: '(.*)' \(choose from (.*)\)$", message).groups()
            names = [n.strip().strip("'") for n in listed.split(", ")]
            near = difflib.get_close_matches(value, names, n=1)
            message = f"{option}: '{value}': use one of {', '.join(names)}" + (f"; did you mean {near[0]}?" if near else "")
        elif missing:
            message = "; ".join(f"{name.split('/')[-1]} is required" if name.startswith("-")
                                else f"the {name} argument is required" for name in missing.group(1).split(", "))
        self.exit(2, f"{self.prog}: {capped_words(message)} (see {self.prog} --help)\n")


def _stdout_to_devnull() -> None:
    """Nothing more reaches the standard output (Python's own flush at exit would fail again)."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


_stdout_error: OSError | None = None   # a write to the standard output that failed (argparse's help)


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


def main(argv=None) -> int:
    """mhc-torch's command line (`argv` None: this process is mhc-torch, run as a program)."""
    global _stdout_error
    _stdout_error = None
    try:
        code = _main(argv)
    except KeyboardInterrupt:  # before or after the capture's own handling: nothing was written
        _say("mhc-torch: interrupted; no trace written")
        code = 130
    except BrokenPipeError:  # printing the summary, after the trace was written whole
        _stdout_to_devnull()
        code = 141
    except SystemExit as e:  # argparse: --help (0) or a refusal (2, said on stderr)
        code = _finish_stdout(e.code)
    else:
        code = _finish_stdout(code)
    if argv is None:
        _end_threads_left(code)
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


def parsers() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """mhc-torch's parser and its capture subcommand's."""
    from .gpus import GPUS
    from .models import PRESETS

    p = _Parser(prog="mhc-torch", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    what = "capture training steps of a preset or FILE.py on fake tensors"
    c = sub.add_parser("capture", help=what, description=what[:1].upper() + what[1:])
    c.add_argument("model", nargs="?", metavar="MODEL",
                   help=f"a preset ({', '.join(PRESETS)}) or FILE.py defining build_model(), make_batch() and "
                        "optionally loss_fn(model, batch), step(model, batch, run) and build_optimizer(model)")
    # --output as every mhc command spells it; --out, its first name here, still read
    c.add_argument("-o", "--out", "--output", dest="out", metavar="FILE", required=True,
                   help="trace file to write (.db); an existing file is refused unless --force")
    c.add_argument("--force", action="store_true", help="replace an existing output (and the runs stored in it)")
    c.add_argument("--setting", metavar="JSON_OR_FILE",
                   help="apply a memory setting with mhc_torch.apply before the first step (docs/torch.md)")
    c.add_argument("--recipe", metavar="JSON_OR_FILE",
                   help="the model and options as a trace's meta capture.recipe has them (instead of MODEL and options)")
    c.add_argument("--gpu", default="h100-sxm", choices=list(GPUS), metavar="GPU",
                   help="the GPU whose roofline times the kernels: %(choices)s")
    c.add_argument("--steps", type=whole, metavar="N", default=1, help="training steps captured (at most 1,000,000)")
    c.add_argument("--batch", type=whole, metavar="N", help="sequences a step (presets; default 1)")
    c.add_argument("--seq", type=whole, metavar="N",
                   help="tokens a sequence (presets; default 4096; at most 4,194,304)")
    c.add_argument("--layers", type=whole, metavar="N", default=None,
                   help="the first N transformer layers (presets; default and most: the model's own, 4 of "
                        "80 for llama3-70b-slice; the tiny ones at most 64)")
    c.add_argument("--hc", type=whole, metavar="N",
                   help="mHC residual streams n (mhc-27b, tiny-mhc; 1 = plain; default 4; at most 16)")
    c.add_argument("--autocast", default="bf16", choices=["bf16", "fp16", "none"], metavar="DTYPE",
                   help="autocast of the forward and loss: %(choices)s")
    c.add_argument("--autocast-policy", default="cuda", choices=["cuda", "cpu"], metavar="LISTS",
                   help="whose cast lists autocast follows, CUDA's (the target is a GPU) or torch's CPU ones: "
                        "%(choices)s")
    c.add_argument("--weights", default="as-built", choices=["as-built", "bf16", "fp16", "fp32"], metavar="DTYPE",
                   help="cast the model's parameters and buffers (bf16: bf16 weights, grads and optimizer state; "
                        "as-built: as build_model() made them): %(choices)s")
    c.add_argument("--forward-only", action="store_true", help="forward steps under torch.no_grad() (inference)")
    c.add_argument("--micro-batches", type=whole, metavar="N", default=1,
                   help="forward+backward passes per optimizer step, gradients accumulated")
    c.add_argument("--zero-grad", default="none", choices=["none", "zeros", "never"], metavar="MODE",
                   help="after the optimizer step the grads are set to None, zeroed and kept, or kept: %(choices)s")
    c.add_argument("--optimizer", default="adamw", choices=["adamw", "adamw-fused"], metavar="NAME",
                   help="AdamW with foreach kernels or the fused kernel: %(choices)s")
    c.add_argument("--kernel-times", metavar="PROFILE",
                   help="a PyTorch profiler trace (.json, .json.gz) of the same step on the GPU, recorded with "
                        "record_shapes=True: each kernel takes the time measured there instead of the roofline")
    c.add_argument("--max-input-size", type=size, metavar="SIZE", default=256 << 20,
                   help="the most bytes of the --kernel-times profile read, decompressed")
    what = "print a trace's simulated and replayed runs: peak, loss, stalls, swaps"
    r = sub.add_parser("runs", help=what, description=what[:1].upper() + what[1:])
    r.add_argument("trace", metavar="TRACE", help="a trace file (.db)")
    r.add_argument("--all", action="store_true",
                   help="every stored field of each run (config.* and metrics, as mhc_torch.read_runs reads them)")
    return p, c


def _main(argv=None) -> int:
    from .models import PRESETS

    p, c = parsers()
    a = p.parse_args(argv)
    recipe = getattr(a, "recipe", None)
    if a.cmd == "capture" and a.recipe is not None:
        # MODEL beside --recipe only as the model file to run in place of the one the recipe names
        if a.model is not None and not a.model.endswith(".py"):
            _say("mhc-torch: give either MODEL with its options or --recipe")
            return 2
        # An option of the step beside --recipe, which holds them all, was dropped without a word
        # (--recipe T.db --steps 5 captured the recipe's one step).
        words = [w.split("=", 1)[0] for w in (sys.argv[1:] if argv is None else argv)]
        for action in c._actions:
            if action.dest in _NOT_RECIPE or action.dest == "model" or not action.option_strings:
                continue
            if getattr(a, action.dest) != action.default or any(o in words for o in action.option_strings):
                _say(f"mhc-torch: {action.option_strings[-1]} and --recipe: the recipe holds the step's options; "
                     "give one (or edit the recipe's JSON)")
                return 2
        try:
            rest, source = _recipe_argv(a.recipe, c)
        except OSError as e:
            _say(f"mhc-torch: recipe: {a.recipe}: {e.strerror or e}")
            return 2
        except ValueError as e:
            _say(f"mhc-torch: recipe: {e}")
            return 2
        named = rest[0]
        if a.model is not None:
            if not named.endswith(".py"):
                _say(f"mhc-torch: MODEL {a.model} and --recipe: the recipe captures the preset '{named}', "
                     "not a model file; give either MODEL with its options or --recipe")
                return 2
            rest[0] = a.model
        elif named.endswith(".py") and source is not None:
            # A model file runs as Python: a trace or JSON file (anyone's) names it, so it runs only
            # when the user names the file to run, as mhc advise --verify runs it only as --model.
            _say(f"mhc-torch: recipe: {source}: names the model file {named}, which runs as Python: a model "
                 f"file a trace or recipe file names runs only when you name it: mhc-torch capture "
                 f"{named} --recipe {source} ...")
            return 2
        a = p.parse_args(["capture", *rest, "-o", a.out] + (["--setting", a.setting] if a.setting is not None else [])
                         + (["--force"] if a.force else [])
                         + (["--kernel-times", a.kernel_times] if a.kernel_times is not None else [])
                         + (["--max-input-size", str(a.max_input_size)] if a.max_input_size != c.get_default(
                             "max_input_size") else []))
    if a.cmd == "capture":
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
        return _capture(a, c)
    return _runs(a)


if __name__ == "__main__":
    sys.exit(main())
