"""Kernel times measured on the user's GPU instead of the roofline (`mhc-torch capture
--kernel-times PROFILE`): a PyTorch profiler trace (Kineto's Chrome JSON, `.json` or `.json.gz`,
recorded with `ProfilerActivity.CUDA` and `record_shapes=True`) of the same model's step.

Each GPU kernel, memset and copy in the profile names the op that launched it (`args.External id`,
the innermost `cpu_op` running then). Its time counts for that op and for every op enclosing it on
the same thread (aten::linear holds aten::addmm; aten::_scaled_dot_product_flash_attention holds
aten::_flash_attention_forward), so a captured op is found at whatever level the capture's
dispatch sees it. An op is keyed by its name and the shapes of its tensor inputs in schema order
(0-dim tensors and non-tensors left out on both sides), then by the first input's dtype where the
profile says it; its time is the median over the op's occurrences. Ops a GPU names otherwise
(cuDNN's batch norm and convolution backward) are found under the capture's name. A captured
kernel whose key the profile lacks keeps the roofline: meta `capture.kernel_times.*` says how many and which.
"""
from __future__ import annotations

import gzip
import os
import statistics
from collections import Counter

from . import json_input
from .json_input import not_a_regular_file
from .formatting import format_bytes

# The device work Kineto attributes to an op, and the ops (the capitalised names are those of
# PyTorch 1.8-1.9's profiler, which also wrote `external id` on kernels).
_DEVICE_CATS = {"kernel", "gpu_memset", "gpu_memcpy", "Kernel", "Memset", "Memcpy"}
_OP_CATS = {"cpu_op", "Operator"}

# torch dtypes by the names caffe2's TypeMeta gives them (Kineto's `Input type`).
_TYPE_NAMES = {"float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16",
               "long int": "int64", "int": "int32", "short int": "int16", "signed char": "int8",
               "unsigned char": "uint8", "bool": "bool", "c10::complex<float>": "complex64",
               "c10::complex<double>": "complex128", "c10::Float8_e4m3fn": "float8_e4m3fn",
               "c10::Float8_e5m2": "float8_e5m2"}


# Ops that a GPU's dispatch names otherwise than the capture's (fake CPU tensors): the GPU's name ->
# the capture's. Found by the last lookup, on the shapes in any order less empty ones (cuDNN's
# batch-norm backward takes input before grad_output, and a reserve buffer of 0 elements).
_CAPTURE_NAME = {
    "aten::cudnn_batch_norm": "aten::native_batch_norm",
    "aten::miopen_batch_norm": "aten::native_batch_norm",
    "aten::_batch_norm_with_update": "aten::native_batch_norm",
    "aten::_native_batch_norm_legit": "aten::native_batch_norm",
    "aten::cudnn_batch_norm_backward": "aten::native_batch_norm_backward",
    "aten::miopen_batch_norm_backward": "aten::native_batch_norm_backward",
    "aten::batch_norm_backward": "aten::native_batch_norm_backward",
    "aten::cudnn_convolution_backward": "aten::convolution_backward",  # PyTorch up to 1.10
    "aten::miopen_convolution_backward": "aten::convolution_backward",
    "aten::cudnn_convolution": "aten::convolution",
    "aten::miopen_convolution": "aten::convolution",
}


def _unordered(shapes: tuple) -> tuple:
    """The shapes as a sorted multiset, those of no element left out."""
    return tuple(sorted(s for s in shapes if all(s)))


class KernelTimesError(ValueError):
    """A profile that cannot give kernel times: one line naming the file."""


def _is_shape(d) -> bool:
    """One tensor's entry of `Input Dims` (a 0-dim tensor's and a non-tensor's are empty)."""
    return isinstance(d, list) and bool(d) and all(isinstance(x, int) for x in d)


def _shapes(dims) -> tuple:
    """Kineto's `Input Dims` as the key's shapes: a tensor's dims, each tensor of a list's."""
    out = []
    for d in dims if isinstance(dims, list) else ():
        if _is_shape(d):
            out.append(tuple(d))
        elif isinstance(d, list):
            out.extend(tuple(x) for x in d if _is_shape(x))
    return tuple(out)


def _first_dtype(types, dims) -> str | None:
    """The dtype of the first tensor input (the entry of `Input type` whose dims are a shape)."""
    if not isinstance(types, list) or not isinstance(dims, list):
        return None
    for t, d in zip(types, dims):
        if _is_shape(d):
            return _TYPE_NAMES.get(t)
    return None


# The most bytes of a profile read, decompressed (`mhc-torch capture --max-input-size`), as `mhc
# import --max-input-size` bounds its inputs: a small gzip file can expand to any size.
MAX_INPUT_BYTES = 256 << 20


def _events(path: str, max_bytes: int = MAX_INPUT_BYTES) -> tuple[list, dict]:
    special = not_a_regular_file(path)
    if special:
        raise KernelTimesError(f"{path}: {special}")
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise KernelTimesError(f"{path}: {e.strerror or e}") from None
    except (ValueError, EOFError) as e:
        raise KernelTimesError(f"{path}: not JSON: {str(e).splitlines()[0]}") from None
    if len(data) > max_bytes:
        raise KernelTimesError(f"{path}: {'expands' if path.endswith('.gz') else 'is'} past "
                               f"{format_bytes(max_bytes)}; raise with --max-input-size")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise KernelTimesError(f"{path}: not JSON: {str(e).splitlines()[0]}") from None
    try:  # no profiler repeats a key in an object (none of 40 public Kineto traces, PyTorch 1.8 to 2.x)
        doc = json_input.loads(text)
    except ValueError as e:
        raise KernelTimesError(f"{path}: {e}") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        raise KernelTimesError(f"{path}: not a PyTorch profiler trace (no traceEvents list)")
    return [e for e in events if isinstance(e, dict)], doc


class KernelTimes:
    """Measured device time of ops, by (name, shapes[, dtype]), in ns."""

    def __init__(self, path: str, max_bytes: int = MAX_INPUT_BYTES):
        self.path = path
        events, doc = _events(path, max_bytes)
        ops = []
        for e in events:
            if e.get("cat") not in _OP_CATS or e.get("ph") != "X":
                continue
            a = e.get("args") if isinstance(e.get("args"), dict) else {}
            ts, dur = e.get("ts"), e.get("dur")
            if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)):
                continue
            ops.append({"name": e.get("name"), "ts": ts, "end": ts + dur, "thread": (e.get("pid"), e.get("tid")),
                        "ext": a.get("External id"), "dims": a.get("Input Dims"), "types": a.get("Input type"),
                        "parent": None, "ns": 0.0})
        if not ops:
            raise KernelTimesError(f"{path}: holds no cpu_op events (profile with ProfilerActivity.CPU too)")
        if not any(o["dims"] is not None for o in ops):
            raise KernelTimesError(f"{path}: recorded without shapes (profile with record_shapes=True)")
        by_ext = {o["ext"]: i for i, o in enumerate(ops) if o["ext"] is not None}
        device_ns, self.device_events, self.unattributed = 0.0, 0, 0
        for e in events:
            if e.get("cat") not in _DEVICE_CATS or not isinstance(e.get("dur"), (int, float)):
                continue
            self.device_events += 1
            ns = e["dur"] * 1000.0
            device_ns += ns
            a = e.get("args") if isinstance(e.get("args"), dict) else {}
            i = by_ext.get(a.get("External id", a.get("external id")))
            if i is None:
                self.unattributed += 1
                continue
            ops[i]["ns"] += ns
        if self.device_events == 0:
            raise KernelTimesError(f"{path}: holds no GPU kernels (profile with ProfilerActivity.CUDA on the GPU)")
        self._nest(ops)
        self.device_ns = device_ns
        exact: dict[tuple, list[float]] = {}
        loose: dict[tuple, list[float]] = {}
        renamed: dict[tuple, list[float]] = {}
        for o in ops:
            if o["ns"] <= 0 or not isinstance(o["name"], str):
                continue
            shapes = _shapes(o["dims"])
            exact.setdefault((o["name"], shapes, _first_dtype(o["types"], o["dims"])), []).append(o["ns"])
            loose.setdefault((o["name"], shapes), []).append(o["ns"])
            if o["name"] in _CAPTURE_NAME:
                renamed.setdefault((_CAPTURE_NAME[o["name"]], _unordered(shapes)), []).append(o["ns"])
        self._exact = {k: statistics.median(v) for k, v in exact.items()}
        self._loose = {k: statistics.median(v) for k, v in loose.items()}
        self._renamed = {k: statistics.median(v) for k, v in renamed.items()}
        props = doc.get("deviceProperties") if isinstance(doc, dict) else None
        self.device_name = props[0].get("name") if isinstance(props, list) and props and isinstance(props[0], dict) \
            else None
        self.matched = 0
        self.unmatched: Counter[str] = Counter()

    @staticmethod
    def _nest(ops: list[dict]) -> None:
        """Adds each op's device time to the ops enclosing it on its thread."""
        by_thread: dict[tuple, list[int]] = {}
        for i, o in enumerate(ops):
            by_thread.setdefault(o["thread"], []).append(i)
        for idx in by_thread.values():
            idx.sort(key=lambda i: (ops[i]["ts"], -ops[i]["end"]))
            stack: list[int] = []
            for i in idx:
                while stack and ops[stack[-1]]["end"] <= ops[i]["ts"]:
                    stack.pop()
                if stack and ops[i]["end"] <= ops[stack[-1]]["end"]:
                    ops[i]["parent"] = stack[-1]
                stack.append(i)
        own = [o["ns"] for o in ops]
        for i, ns in enumerate(own):
            p = ops[i]["parent"]
            while ns > 0 and p is not None:
                ops[p]["ns"] += ns
                p = ops[p]["parent"]

    def duration(self, name: str, shapes: tuple, dtype: str | None, roofline_ns: int) -> int:
        """The op's measured time in ns, or `roofline_ns` (counted as unmatched) when the profile
        has no op of this name and shapes."""
        ns = self._exact.get((name, shapes, dtype))
        if ns is None:
            ns = self._loose.get((name, shapes))
        if ns is None:
            ns = self._renamed.get((name, _unordered(shapes)))
        if ns is None:
            self.unmatched[name] += 1
            return roofline_ns
        self.matched += 1
        return max(1, int(round(ns)))

    def meta(self) -> dict[str, str]:
        total = self.matched + sum(self.unmatched.values())
        top = ", ".join(f"{n} {c}" for n, c in self.unmatched.most_common(8)) or "none"
        return {
            # "timing" stays "estimated": the kernels' durations are measured, the step's
            # timeline (back to back on one stream) is still a model.
            "timing_model": "kernel times measured by the PyTorch profiler (capture.kernel_times); "
                            "roofline: max(flops / peak, bytes / hbm_bw) + launch overhead for the kernels it lacks",
            "capture.kernel_times": os.path.basename(self.path),
            "capture.kernel_times.device": self.device_name or "unknown",
            "capture.kernel_times.matched": f"{self.matched} of {total} kernels",
            "capture.kernel_times.unmatched": top,
            "capture.kernel_times.profile_device_ns": str(int(round(self.device_ns))),
            "capture.kernel_times.profile_unattributed": str(self.unattributed),
        }


def torch_dtype_name(dtype) -> str:
    """`torch.bfloat16` -> 'bfloat16', as _TYPE_NAMES's values."""
    return str(dtype).removeprefix("torch.")


def op_key(params, args, kwargs) -> tuple[tuple, str | None]:
    """The captured op's shapes (as _shapes reads the profile's) and its first tensor's dtype, from
    its schema's parameters (position, name, keyword only, written) and its arguments."""
    import torch

    shapes, dtype = [], None
    for pos, pname, kwarg_only, _ in params:
        v = kwargs.get(pname) if kwarg_only or pos >= len(args) else args[pos]
        items = v if isinstance(v, (list, tuple)) else (v,)
        for t in items:
            if isinstance(t, torch.Tensor) and t.dim() > 0:
                shapes.append(tuple(t.shape))
                if dtype is None and t is v:
                    dtype = torch_dtype_name(t.dtype)
    return tuple(shapes), dtype
