"""The lines `mhc-torch capture` prints or notes beside a captured step's summary: its FLOPs, the
allocator settings set too late, cuDNN's RNN kernel, a batch made on the host, the reserved peak,
and the step without a Hugging Face model's own gradient checkpointing."""
from __future__ import annotations

import os
import shutil

from .cli_io import _say
from .cli_model_file import _forked_children_end, _streams_kept
from .formatting import format_bytes, format_ns


def _say_notes(r) -> None:
    """The notes and warnings a captured step's meta calls for, on stderr, each in one line."""
    import json

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
