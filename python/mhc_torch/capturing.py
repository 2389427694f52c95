"""Captures training steps of a PyTorch model on fake tensors as an mhc-toolkit trace.

The model runs under FakeTensorMode (shapes, dtypes and storages, no memory and no GPU). A dispatch
mode below it sees every aten op after autograd and autocast:
- an op is a kernel on stream 0 unless it only makes a view or an uninitialised tensor;
- every storage is an allocation, from the op that made it until its last reference dies (a weak
  finalizer on the untyped storage, the way MemTracker tracks storages under fake tensors);
- accesses come from the op schema's alias information: inputs are read, mutated arguments are
  read-write, new outputs are written;
- durations come from a roofline of the target GPU (gpus.py) and torch.utils.flop_counter.
"""
from __future__ import annotations

import contextlib
import logging
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.utils._pytree import tree_flatten
from torch.utils._python_dispatch import TorchDispatchMode
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from . import store
from .capture_tables import HOST, SettingsRecording

# flop_counter warns that triton kernels cannot be counted; capture runs none.
logging.getLogger("torch.utils.flop_counter").setLevel(logging.ERROR)
from .gpus import GpuSpec, gpu as gpu_by_name

# Ops that allocate without launching a kernel.
_ALLOCATE_ONLY = {
    "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty",
    "aten::new_empty_strided", "aten::_empty_affine_quantized",
}


# Factories that take a tensor for its shape, dtype and device only: they do not read it.
_SHAPE_ONLY_INPUT = {
    "aten::zeros_like", "aten::ones_like", "aten::full_like", "aten::empty_like", "aten::rand_like",
    "aten::randn_like", "aten::randint_like", "aten::new_zeros", "aten::new_ones", "aten::new_full",
}


class CaptureError(Exception):
    """The model cannot be captured: the message names the op and the reason (one line)."""


@dataclass
class _Storage:
    alloc: store.Allocation
    phase: str  # forward, backward, optimizer, setup
    step: int
    alive_at_backward: bool = False


@dataclass
class CaptureResult:
    path: str
    kernels: int
    allocations: int
    steps: int
    peak_bytes: int
    step_time_ns: list[int] = field(default_factory=list)
    meta: dict[str, str] = field(default_factory=dict)


def _flops_of(func, args, kwargs, out) -> int:
    from torch.utils.flop_counter import flop_registry  # warns once when triton is absent: harmless

    f = flop_registry.get(func._overloadpacket)
    if f is None:
        return 0
    try:
        return int(f(*args, **kwargs, out_val=out))
    except Exception:  # a formula that does not accept this overload's arguments: count none
        return 0


def _tensors(value) -> list[torch.Tensor]:
    """The fake tensors in an argument. Real tensors (constants made by torch.tensor(), which
    lift_fresh copies onto the device) live in host memory, not on the device."""
    if isinstance(value, FakeTensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, FakeTensor)]
    return []


class _Recorder(TorchDispatchMode):
    def __init__(self, rec: "Recording"):
        super().__init__()
        self.rec = rec

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.rec.on_op(func, args, kwargs, out)
        return out


class Recording(SettingsRecording):
    """The trace being built: allocations, kernels and markers on one clock (ns)."""

    def __init__(self, spec: GpuSpec):
        self.spec = spec
        self.t = 0
        self.allocs: list[store.Allocation] = []
        self.kernels: list[store.Kernel] = []
        self.markers: list[store.Marker] = []
        self.storages: dict[int, _Storage] = {}  # id(untyped storage) -> record, while alive
        self.records: list[_Storage] = []
        self.phase = "setup"
        self.step = -1
        self.layer_of: Callable[[], int | None] = lambda: None
        self.kernel_layer: list[tuple[int | None, str]] = []
        self.live_bytes = 0
        self.peak_bytes = 0
        self.init_tables()

    # Storages -------------------------------------------------------------------------------
    def track(self, t: torch.Tensor, category: int | None, label: str) -> _Storage | None:
        """The record of t's storage, created (allocated now) if new; None for empty storages."""
        st = t.untyped_storage()
        key = id(st)
        s = self.storages.get(key)
        if s is not None:
            return s
        nbytes = int(st.nbytes())
        if nbytes <= 0:
            return None
        a = store.Allocation(id=len(self.allocs) + 1, bytes=nbytes, t_alloc=self.t, t_free=None,
                             category=store.WORKSPACE if category is None else category, label=label)
        self.allocs.append(a)
        s = _Storage(a, self.phase, self.step)
        if category is not None:
            s.phase = "fixed"
        self.storages[key] = s
        self.records.append(s)
        host = self.host_category(t, new=category is None)
        if host is not None:
            self.to_host(a, host)
            s.phase = "fixed"
        else:
            self.live_bytes += nbytes
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        weakref.finalize(st, self._freed, key, s)
        return s

    def _freed(self, key: int, s: _Storage) -> None:
        s.alloc.t_free = self.t
        if s.alloc.device == HOST:
            self.host_live -= s.alloc.bytes
        else:
            self.live_bytes -= s.alloc.bytes
        if self.storages.get(key) is s:
            del self.storages[key]

    def set_category(self, t: torch.Tensor, category: int, label: str) -> None:
        s = self.track(t, category, label)
        if s is not None:
            s.alloc.category = category
            s.alloc.label = label
            s.phase = "fixed"

    def begin_backward(self) -> None:
        # Forward storages still alive when the backward starts are saved for it: activations.
        for s in self.storages.values():
            if s.phase == "forward" and s.step == self.step:
                s.alive_at_backward = True
        self.phase = "backward"

    # Ops --------------------------------------------------------------------------------------
    def on_op(self, func, args, kwargs, out) -> None:
        schema = func._schema
        name = schema.name
        reads: list[torch.Tensor] = []
        mutated: list[torch.Tensor] = []
        for i, arg in enumerate(schema.arguments):
            if i < len(args) and not arg.kwarg_only:
                value = args[i]
            elif arg.name in kwargs:
                value = kwargs[arg.name]
            else:
                continue
            ts = _tensors(value)
            if not ts:
                continue
            if arg.alias_info is not None and arg.alias_info.is_write:
                mutated.extend(ts)
            else:
                reads.extend(ts)
        if name in _SHAPE_ONLY_INPUT:
            reads = []
        outs = [o for o in tree_flatten(out)[0] if isinstance(o, FakeTensor)]
        new_outs = [o for o in outs if id(o.untyped_storage()) not in self.storages]
        if not new_outs and not mutated:
            return  # a view, an alias or a metadata query: no kernel
        start = self.t
        where = self.module_of()
        label = f"{where}:{name}" if where else name
        if name in _ALLOCATE_ONLY:
            for o in new_outs:
                self.track(o, None, label)
            return
        if self.route_host_op(name, label, reads, mutated, new_outs):
            return
        accesses: dict[int, int] = {}
        for t in reads:
            s = self.track(t, store.OTHER, f"untracked input of {name}")
            if s is not None:
                accesses[s.alloc.id] = accesses.get(s.alloc.id, 0) | store.READ
        for t in mutated:
            s = self.track(t, store.OTHER, f"untracked input of {name}")
            if s is not None:
                accesses[s.alloc.id] = accesses.get(s.alloc.id, 0) | store.READ_WRITE
        for o in new_outs:
            s = self.track(o, None, label)
            if s is not None:
                accesses[s.alloc.id] = accesses.get(s.alloc.id, 0) | store.WRITE
        if not accesses:
            return
        # Roofline: bytes moved are the tensors' own extents (views, not whole storages); a
        # mutated argument is read and written.
        moved = sum(t.numel() * t.element_size() for t in reads)
        moved += 2 * sum(t.numel() * t.element_size() for t in mutated)
        moved += sum(t.numel() * t.element_size() for t in new_outs)
        flops = _flops_of(func, args, kwargs, out)
        dtype = (reads or mutated or new_outs)[0].dtype
        seconds = max(flops / self.spec.peak_flops(dtype) if flops else 0.0,
                      moved / self.spec.hbm_bw) + self.spec.launch_overhead_s
        dur = max(1, int(round(seconds * 1e9)))
        k = store.Kernel(id=len(self.kernels) + 1, name=name, t_start=start, t_end=start + dur,
                         step=self.step, accesses=accesses, phase=self.phase_code(),
                         flops=flops, moved_bytes=moved, module=where)
        self.kernels.append(k)
        self.kernel_layer.append((self.layer_of(), self.phase))
        self.t = start + dur

    # Markers ----------------------------------------------------------------------------------
    def layer_markers(self) -> None:
        """One layer marker per run of consecutive kernels of one layer in one phase."""
        run_start = None
        for i, (layer, phase) in enumerate(self.kernel_layer + [(None, "")]):
            key = (layer, phase)
            if run_start is not None and key != prev:
                first, last = self.kernels[run_start], self.kernels[i - 1]
                self.markers.append(store.Marker(f"layer {prev[0]} {prev[1]}", first.t_start,
                                                 last.t_end, store.MARKER_LAYER, prev[0]))
                run_start = None
            if run_start is None and layer is not None and phase in ("forward", "backward"):
                run_start = i
            prev = key

    def finish_categories(self) -> None:
        for s in self.records:
            if s.phase == "forward":
                s.alloc.category = store.ACTIVATION if s.alive_at_backward else store.WORKSPACE
            elif s.phase in ("backward", "optimizer", "setup"):
                s.alloc.category = store.WORKSPACE


def _layer_lists(model: torch.nn.Module) -> dict[str, int]:
    """Fully qualified names (as ModTracker spells them) of the blocks of the model's largest
    ModuleList (its transformer layers), mapped to their index."""
    best, best_params = None, 0
    for path, m in model.named_modules():
        if isinstance(m, torch.nn.ModuleList) and len(m) > 0:
            n = sum(p.numel() for p in m.parameters())
            if n > best_params:
                best, best_params = path, n
    if best is None:
        return {}
    root = type(model).__name__
    return {f"{root}.{best}.{i}": i for i in range(len(model.get_submodule(best)))}


def _fake_error(e: BaseException) -> CaptureError | None:
    """A one-line CaptureError for the exceptions that fake tensors raise on data-dependent ops."""
    from torch._subclasses import fake_tensor as ft

    kinds = tuple(getattr(ft, n) for n in ("DynamicOutputShapeException", "DataDependentOutputException",
                                           "UnsupportedOperatorException") if hasattr(ft, n))
    try:
        from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode
        kinds += (GuardOnDataDependentSymNode,)
    except ImportError:
        pass
    if not isinstance(e, kinds):
        return None
    func = getattr(e, "func", None)
    op = str(func) if func is not None else str(e).splitlines()[0] if str(e) else type(e).__name__
    why = {"DynamicOutputShapeException": "its output shape depends on tensor values",
           "DataDependentOutputException": "its result depends on tensor values",
           "UnsupportedOperatorException": "it has no fake-tensor implementation"}.get(
        type(e).__name__, "it depends on tensor values")
    return CaptureError(f"op {op} cannot run on fake tensors: {why}")


def capture(build_model: Callable[[], torch.nn.Module],
            make_batch: Callable[[], Any],
            steps: int = 1,
            gpu: str | GpuSpec = "h100-sxm",
            path: str = "trace.db",
            loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor] | None = None,
            optimizer: Callable[[list], torch.optim.Optimizer] | None = None,
            autocast_dtype: torch.dtype | None = torch.bfloat16,
            device: str = "cpu",
            meta: dict[str, str] | None = None,
            setting=None) -> CaptureResult:
    """Runs `steps` training steps (forward, backward, optimizer step, zero_grad) of the model
    that `build_model()` returns, on fake tensors, and writes the trace to `path`.

    `make_batch()` returns the inputs (called under fake tensors, so tensors cost nothing);
    `loss_fn(model, batch)` returns the scalar loss (default: `model(**batch).loss` for a dict,
    `model(*batch).loss` or the output itself for a tuple); `optimizer(params)` builds the
    optimizer (default AdamW, foreach). `setting` (a dict, JSON text or file: mhc_torch.settings)
    is applied to the model and optimizer with mhc_torch.apply before the first step and recorded
    in meta `capture.setting`. Raises CaptureError when an op cannot run on fake tensors.
    """
    spec = gpu if isinstance(gpu, GpuSpec) else gpu_by_name(gpu)
    if steps < 1:
        raise ValueError("steps must be at least 1")
    if setting is not None:
        from .settings import check_setting, dumps, read_setting

        setting_given = read_setting(setting)
        setting = check_setting(setting_given)
    rec = Recording(spec)
    fake = FakeTensorMode(allow_non_fake_inputs=False)
    try:
        result = _run(rec, fake, build_model, make_batch, steps, loss_fn, optimizer, autocast_dtype, device, setting)
    except CaptureError:
        raise
    except Exception as e:
        err = _fake_error(e)
        if err is None:
            cause = e.__cause__ or e.__context__
            err = _fake_error(cause) if cause is not None else None
        if err is not None:
            raise err from None
        raise
    layer_names, step_times, modules = result
    rec.layer_markers()
    rec.finish_categories()
    full_meta = {
        "source": "captured",
        "generator": f"mhc-torch 0.1 (torch {torch.__version__})",
        "accesses": "exact",
        "timing": "estimated",
        "timing_model": "roofline: max(flops / peak, bytes / hbm_bw) + launch overhead",
        "device_name": spec.device_name,
        "device_memory": str(spec.memory_bytes),
        "capture.gpu": spec.name,
        "capture.gpu.bf16_flops": repr(spec.bf16_flops),
        "capture.gpu.hbm_bw": repr(spec.hbm_bw),
        "capture.launch_overhead_ns": str(int(spec.launch_overhead_s * 1e9)),
        "capture.steps": str(steps),
        "capture.layers": str(len(layer_names)),
        "capture.autocast": str(autocast_dtype).replace("torch.", "") if autocast_dtype else "none",
        "capture.peak_bytes": str(rec.peak_bytes),
        "capture.host_peak_bytes": str(rec.host_peak),
    }
    if setting is not None:
        full_meta["capture.setting"] = dumps(setting_given)
    full_meta.update(meta or {})
    store.write_trace(path, rec.allocs, rec.kernels, rec.markers, full_meta, modules=modules,
                      saved=rec.saved_pairs(), copies=rec.copies)
    return CaptureResult(path=path, kernels=len(rec.kernels), allocations=len(rec.allocs), steps=steps,
                         peak_bytes=rec.peak_bytes, step_time_ns=step_times, meta=full_meta)


def _default_loss(model, batch):
    out = model(**batch) if isinstance(batch, dict) else model(*batch) if isinstance(batch, (tuple, list)) else model(batch)
    if hasattr(out, "loss") and out.loss is not None:
        return out.loss
    if isinstance(out, torch.Tensor):
        return out if out.dim() == 0 else out.float().mean()
    raise TypeError("the model's output has no .loss and is not a tensor; pass loss_fn")


@contextlib.contextmanager
def _autocast(device: str, dtype):
    if dtype is None:
        yield
        return
    dev = torch.device(device).type
    # torch.autocast refuses device 'cuda' without a GPU; fake CUDA tensors carry the CUDA
    # dispatch key, so switching the autocast state directly applies CUDA's cast policy to them.
    prev_enabled = torch.is_autocast_enabled(dev)
    prev_dtype = torch.get_autocast_dtype(dev)
    torch.set_autocast_enabled(dev, True)
    torch.set_autocast_dtype(dev, dtype)
    torch.autocast_increment_nesting()
    try:
        yield
    finally:
        if torch.autocast_decrement_nesting() == 0:
            torch.clear_autocast_cache()
        torch.set_autocast_enabled(dev, prev_enabled)
        torch.set_autocast_dtype(dev, prev_dtype)


def _run(rec, fake, build_model, make_batch, steps, loss_fn, optimizer, autocast_dtype, device, setting):
    from torch.distributed._tools.mod_tracker import ModTracker

    from . import placement

    loss_fn = loss_fn or _default_loss
    with fake:
        with torch.device(device):
            model = build_model()
        if any(t.device.type != torch.device(device).type for t in list(model.parameters()) + list(model.buffers())):
            model = model.to(device)
        params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        opt = (optimizer or (lambda ps: torch.optim.AdamW(ps, lr=1e-4, foreach=True)))([p for _, p in params])
        if setting is not None:
            from .applying import apply

            model, opt = apply(model, opt, setting)
        for n, p in model.named_parameters():
            rec.set_category(p, store.PARAM, n)
        for n, b in model.named_buffers():
            rec.set_category(b, store.OTHER, f"buffer {n}")
        param_name = {id(p): n for n, p in params}
        param_name.update({id(h): param_name.get(id(p), "?") for p, h in getattr(opt, "offloaded_params", ())})
        layers = _layer_lists(model)
        tracker = ModTracker()

        def layer_of():
            for p in tracker.parents:
                i = layers.get(p)
                if i is not None:
                    return i
            return None

        rec.layer_of = layer_of
        rec.track_modules(tracker)
        step_times = []
        with torch.device(device):
            batch = make_batch()
        for t in tree_flatten(batch)[0]:
            if isinstance(t, torch.Tensor):
                rec.set_category(t, store.OTHER, "batch")
        with tracker, _Recorder(rec), placement.listening(rec):
            for s in range(steps):
                rec.step, rec.phase = s, "forward"
                t0 = rec.t
                with _autocast(device, autocast_dtype), rec.saved_hooks():
                    loss = loss_fn(model, batch)
                rec.begin_backward()
                loss.backward()
                del loss
                for p in model.parameters():
                    if p.grad is not None:
                        rec.set_category(p.grad, store.GRAD, param_name.get(id(p), "?") + ".grad")
                rec.phase = "optimizer"
                t_opt = rec.t
                opt.step()
                for p, state in opt.state.items():
                    for key, v in state.items():
                        if isinstance(v, torch.Tensor):
                            rec.set_category(v, store.OPTIMIZER, f"{param_name.get(id(p), '?')}.{key}")
                opt.zero_grad(set_to_none=True)
                rec.markers.append(store.Marker("optimizer", t_opt, rec.t, store.MARKER_RANGE, -1))
                rec.markers.append(store.Marker("step", t0, rec.t, store.MARKER_STEP, s))
                step_times.append(rec.t - t0)
        rec.phase = "end"
        modules = rec.module_records(model)
        del opt, model, batch
    return list(layers), step_times, modules
