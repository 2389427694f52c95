"""build_model() and make_batch() written for the GPU, captured on the CPU's fake tensors.

A training script's model code does CUDA work of its own while it builds: `model.cuda()`,
`torch.zeros(..., device="cuda")` kept in a plain attribute or a global cache,
`torch.cuda.set_device(0)`, `torch.cuda.get_rng_state()` / `torch.random.fork_rng()`. The capture
runs on fake tensors of its own device (the CPU), so while build_model() and make_batch() run:

- every tensor asked for on a CUDA device is made on the capture's device instead (the `device`
  argument of factories, `Tensor.to`, `Tensor.cuda`, `Module.cuda`/`Module.to` through them): a
  tensor the model keeps outside its parameters and buffers is then on the device its forward
  runs on (it was left on `cuda` and the forward failed with a device mismatch);
- the point where CUDA initialises is the first such request, or the first torch.cuda call that
  initialises CUDA (`set_device`, `current_device`, `get_rng_state`, `synchronize`): PyTorch reads
  the allocator's settings (PYTORCH_CUDA_ALLOC_CONF) there, so the capture takes the environment
  as it is then, not when build_model() returns;
- on a machine without CUDA those torch.cuda calls act on the fake device (one device, 0; the RNG
  state is the CPU generator's) instead of raising "Found no NVIDIA driver";
- the storages made on "cuda" (or computed from such) are remembered (weak references), so that
  those still alive after build_model() returned (a scratch tensor the model holds in a plain
  attribute) are recorded as device memory held from the step's start, as a GPU holds them; a
  tensor made on the CPU and kept outside the parameters and buffers stays host memory there
  (Module.cuda() does not move it) and is not recorded.
"""
from __future__ import annotations

import contextlib
import weakref

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map_only


def _is_cuda(d) -> bool:
    if isinstance(d, torch.device):
        return d.type == "cuda"
    if isinstance(d, str):
        return d == "cuda" or d.startswith("cuda:")
    return False


class BuiltForGpu(TorchFunctionMode):
    """The mode of the module docstring; `on_cuda_init()` is called once, at the CUDA init point."""

    def __init__(self, device: str, on_cuda_init):
        super().__init__()
        self.device = torch.device(device)
        self._on_cuda_init = on_cuda_init
        self.cuda_initialised = False
        self.made: dict[int, weakref.ref] = {}   # id -> the GPU's untyped storages made inside, weakly
        self.values = _Values()
        self._asked_cuda = False

    def cuda_init(self) -> None:
        if not self.cuda_initialised:
            self.cuda_initialised = True
            self._on_cuda_init()

    def _mapped(self, d):
        if _is_cuda(d):
            self.cuda_init()
            self._asked_cuda = True
            return self.device
        return d

    def _on_gpu(self, t) -> bool:
        """Whether tensor t is one of the GPU's: made on "cuda" here, or computed from one."""
        try:
            st = t.untyped_storage()
        except (RuntimeError, TypeError):   # a tensor without storage (sparse, nested)
            return False
        ref = self.made.get(id(st))
        return ref is not None and ref() is st

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        self._asked_cuda = False
        if "device" in kwargs:
            kwargs["device"] = self._mapped(kwargs["device"])
        if func is torch.Tensor.cuda:
            self.cuda_init()
            self._asked_cuda = True
            func, args = torch.Tensor.to, (args[0], self.device)
            kwargs = {k: v for k, v in kwargs.items() if k in ("non_blocking", "memory_format")}
        elif func is torch.Tensor.to and len(args) > 1:
            args = (args[0], self._mapped(args[1]), *args[2:])
        on_gpu = self._asked_cuda or any(isinstance(t, torch.Tensor) and self._on_gpu(t)
                                         for t in tree_flatten((args, kwargs))[0])
        if func in _READS and self.values.known(args[0]):
            from torch._subclasses.fake_tensor import unset_fake_temporarily

            with unset_fake_temporarily():
                return func(self.values.real(args[0]), *args[1:], **kwargs)
        out = func(*args, **kwargs)
        out = self.values.follow(func, args, kwargs, out)
        if on_gpu:
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor) and t.device == self.device:
                    try:
                        st = t.untyped_storage()
                    except (RuntimeError, TypeError):
                        continue
                    self.made[id(st)] = weakref.ref(st)
        return out

    def alive(self) -> list:
        """The GPU's storages made inside (on "cuda", or computed from such) still alive."""
        return [st for st in (ref() for ref in self.made.values()) if st is not None]


# Factories whose values do not depend on any tensor's, and what reads a tensor's values into Python.
_VALUE_FACTORIES = (torch.linspace, torch.arange, torch.logspace)
_READS = (torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.__float__, torch.Tensor.__int__,
          torch.Tensor.__index__, torch.Tensor.__bool__)
_SMALL = 1 << 16   # elements: a schedule of rates, not a model's weights


class _Values:
    """The values of small tensors a model's build computes from factories alone, kept beside
    their fake tensors, so that the build can read them into Python numbers. timm computes each
    block's stochastic-depth rate as `[x.item() for x in torch.linspace(0, rate, depth,
    device="cpu")]` (every ViT, Swin, ConvNeXt, EfficientNet of timm's), which fake tensors refuse
    ('op aten._local_scalar_dense.default cannot run on fake tensors ... its result depends on
    tensor values'). A linspace, arange or logspace of at most 65,536 elements gets a real twin on
    the CPU; an op all of whose tensor arguments have twins (a product, an index, an iteration)
    runs on the twins too; item(), tolist(), float() and int() of such a tensor read its twin. The
    fake tensors stay what the capture records; the twins are host values the build reads."""

    def __init__(self):
        self._twins: dict[int, tuple] = {}   # id(fake) -> (weakref to it, real twin)

    def known(self, t) -> bool:
        entry = self._twins.get(id(t)) if isinstance(t, torch.Tensor) else None
        return entry is not None and entry[0]() is t

    def real(self, t):
        return self._twins[id(t)][1]

    def _keep(self, fake, real) -> None:
        if isinstance(fake, torch.Tensor) and isinstance(real, torch.Tensor) and real.numel() <= _SMALL:
            try:
                self._twins[id(fake)] = (weakref.ref(fake, lambda _, k=id(fake): self._twins.pop(k, None)), real)
            except TypeError:
                pass

    def follow(self, func, args, kwargs, out):
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        if func in _VALUE_FACTORIES:
            if not isinstance(out, torch.Tensor) or out.numel() > _SMALL:
                return out
            with unset_fake_temporarily():
                real = func(*args, **{**kwargs, "device": "cpu"})
            self._keep(out, real)
            return out
        if not tensors or not any(self.known(t) for t in tensors):
            return out
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        if not all(self.known(t) for t in tensors) or func is torch.Tensor.__setitem__:
            for t in outs + tensors[:1]:   # written from values not known: no twin any more
                self._twins.pop(id(t), None)
            return out
        swap = lambda x: self.real(x) if isinstance(x, torch.Tensor) else x   # noqa: E731
        r_args, r_kwargs = (tree_map_only(torch.Tensor, swap, args), tree_map_only(torch.Tensor, swap, kwargs))
        try:
            with unset_fake_temporarily():
                real = func(*r_args, **r_kwargs)
                if func is torch.Tensor.__iter__:
                    real = list(real)
        except Exception:   # noqa: BLE001 - a twin is a convenience: without it the build goes on as before
            return out
        if func is torch.Tensor.__iter__:
            out = list(out)
            for f, r in zip(out, real):
                self._keep(f, r)
            return iter(out)
        fakes, reals = tree_flatten(out)[0], tree_flatten(real)[0]
        if len(fakes) == len(reals):
            for f, r in zip(fakes, reals):
                self._keep(f, r)
        return out


# The torch.cuda calls that need a device and answer nothing about memory, as they act on the
# capture's fake device: one device (number 0), no work to wait for, the CPU generator's state.
_DEVICE_CALLS = {
    "set_device": lambda *a, **k: None,
    "current_device": lambda *a, **k: 0,
    "synchronize": lambda *a, **k: None,
    "get_rng_state": lambda *a, **k: torch.get_rng_state(),
    "get_rng_state_all": lambda *a, **k: [torch.get_rng_state()],
    "set_rng_state": lambda *a, **k: None,
    "set_rng_state_all": lambda *a, **k: None,
}


@contextlib.contextmanager
def _torch_cuda_patched(patched: dict):
    """torch.cuda's functions named in `patched` replaced while inside, put back on the way out."""
    cuda = torch.cuda
    saved = {name: getattr(cuda, name) for name in patched}
    for name, fn in patched.items():
        setattr(cuda, name, fn)
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(cuda, name, fn)


@contextlib.contextmanager
def cuda_calls_on_fake_device(mode: BuiltForGpu):
    """The torch.cuda calls a model's build makes, acting on the capture's fake device when this
    machine has no CUDA (each initialises CUDA, as on a GPU: mode.cuda_init())."""
    if torch.cuda.is_available():
        yield
        return

    def initialising(result):
        def call(*args, **kwargs):
            mode.cuda_init()
            return result(*args, **kwargs)
        return call

    with _torch_cuda_patched({name: initialising(fn) for name, fn in _DEVICE_CALLS.items()}):
        yield


@contextlib.contextmanager
def cuda_calls_in_step(rec, device_name: str):
    """The torch.cuda calls a training loop makes around its step, acting on the capture's fake
    device when this machine has no CUDA: where torch raises ('Found no NVIDIA driver', 'invalid
    argument to reset_peak_memory_stats') or answers for a machine without a GPU. The memory
    figures are the capture's device memory at the call (`rec.live_bytes`, and the most of it
    since the last reset of the peak): the tensors and modelled buffers, not the caching
    allocator's reserve: memory_reserved() and max_memory_reserved() stay torch's 0, and the
    capture remembers that the step asked (meta capture.reserved_asked; mhc-torch capture then
    says the reserved peak `mhc advise` simulates). is_bf16_supported() is the modelled
    GPU's answer (every GPU the capture models has bf16)."""
    if torch.cuda.is_available():
        yield
        return

    def reset_peak(*args, **kwargs):
        rec.window_peak = rec.live_bytes

    def reserved(name):   # no caching allocator runs: 0, as torch answers, and the call remembered
        def call(*args, **kwargs):
            if name not in rec.reserved_asked:
                rec.reserved_asked.append(name)
            return 0
        return call

    with _torch_cuda_patched({
        **_DEVICE_CALLS,
        "reset_peak_memory_stats": reset_peak,
        "reset_max_memory_allocated": reset_peak,
        "memory_allocated": lambda *a, **k: rec.live_bytes,
        "max_memory_allocated": lambda *a, **k: rec.window_peak,
        "is_bf16_supported": lambda *a, **k: True,
        "get_device_name": lambda *a, **k: device_name,
        "memory_reserved": reserved("memory_reserved"),
        "max_memory_reserved": reserved("max_memory_reserved"),
    }):
        yield


_DATA_SET = torch.Tensor.data.__set__   # `t.data = u`, as a function mode sees it
_METHOD_WRAPPER = type(_DATA_SET)


class CudaInStep(TorchFunctionMode):
    """While the steps run: a tensor asked for on a CUDA device (`batch.to("cuda",
    non_blocking=True)`, `.cuda()`, `torch.ones(..., device="cuda")` in a step or forward) is
    made on the capture's device, as BuiltForGpu does while the model is built; without it a
    training loop that moves each batch to the GPU stopped the capture ('Expected all tensors to
    be on the same device, but found at least two devices, cuda:0 and cpu'). Only the mapping:
    what the steps make is recorded by the capture itself. A `.data =` (a storage swapped under a
    tensor, which no op tells) is run as the recording's storage_swap."""

    def __init__(self, device: str, rec=None):
        super().__init__()
        self.device = torch.device(device)
        self.rec = rec

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if type(func) is _METHOD_WRAPPER and func == _DATA_SET and self.rec is not None:
            with self.rec.storage_swap():
                return func(*args, **kwargs)
        if "device" in kwargs and _is_cuda(kwargs["device"]):
            kwargs = {**kwargs, "device": self.device}
        if func is torch.Tensor.cuda:
            func, args = torch.Tensor.to, (args[0], self.device)
            kwargs = {k: v for k, v in kwargs.items() if k in ("non_blocking", "memory_format")}
        elif func is torch.Tensor.to and len(args) > 1 and _is_cuda(args[1]):
            args = (args[0], self.device, *args[2:])
        return func(*args, **kwargs)
