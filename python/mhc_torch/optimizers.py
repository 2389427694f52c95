"""The optimizer's implementation (foreach, fused, for-loop) and optimizer state on the host.

State on the host is ZeRO-Offload's placement (Ren et al. 2021; DeepSpeed's offload_optimizer
with device "cpu"), for one process: the optimizer holds fp32 host copies of the parameters (the
master weights; pinned when the model is on a GPU) and keeps its state beside them; each gradient
is copied into a host buffer (fp32, allocated once and kept) as soon as the backward has
accumulated it, and the device gradient is dropped at once (a post-accumulate-grad hook), so no
device gradient outlives its op; step() runs the same optimizer on the CPU and copies the updated
parameters back into the device ones. torch.optim's classes step the host copies with their
for-loop, one parameter's temporaries at a time, whatever the user's foreach (_on_cpu). With fp32
weights the math is the optimizer's own on copies: bitwise what it gives on a CPU (NAdam and
RAdam with foreach=True: equal to a few ulps, their for-loop orders a product otherwise). A sparse gradient (nn.Embedding(sparse=True)'s, for the
optimizers that take one: Adagrad, SGD, SparseAdam) goes to the host as its indices and values,
not into a dense buffer. Limits: step(closure) is refused; gradients are on the
host only, so clip them there (optimizer.offloaded_params pairs each parameter with its copy).
"""
from __future__ import annotations

import functools
import inspect

import torch

from . import batch_values, placement
from .settings import SettingError

_IMPL = {"foreach": {"foreach": True, "fused": False}, "fused": {"fused": True, "foreach": False},
         "forloop": {"foreach": False, "fused": False}}


def impl_options(optimizer: torch.optim.Optimizer, impl: str | None) -> dict:
    """The constructor options that select `impl` for this optimizer's class ({} for None)."""
    if impl is None:
        return {}
    options = _IMPL[impl]
    accepted = inspect.signature(type(optimizer).__init__).parameters
    missing = [k for k, v in options.items() if v and k not in accepted]
    if missing:
        raise SettingError(f"setting: optimizer.impl: {type(optimizer).__name__} has no option '{missing[0]}'")
    return {k: v for k, v in options.items() if k in accepted}


def closure_refused(optimizer: torch.optim.Optimizer) -> None:
    """A CaptureError where the optimizer's step() needs a closure (torch.optim.LBFGS), which the
    capture's step (forward, backward, optimizer.step()) has none to give: said in one line with
    why no closure would do either, instead of Python's `step() missing 1 required positional
    argument: 'closure'`."""
    closure = inspect.signature(type(optimizer).step).parameters.get("closure")
    if closure is None or closure.default is not inspect.Parameter.empty:
        return
    from .errors import CaptureError

    name = type(optimizer).__name__
    raise CaptureError(
        f"{name}.step(closure) needs a closure, which the capture's step (forward, backward, optimizer.step()) "
        f"does not give; nor can it be captured with one (in a step(model, batch, run) of your own): {name} reads "
        "the loss and the gradients into Python to decide how many times it calls the closure (convergence tests, "
        f"a line search), which fake tensors do not hold; capture the step with the optimizer training starts "
        f"with (Adam before {name})")


def _constructor_args(optimizer: torch.optim.Optimizer, options: dict) -> dict:
    accepted = inspect.signature(type(optimizer).__init__).parameters
    args = {k: v for k, v in optimizer.defaults.items() if k in accepted}
    args.update(options)
    return args


def rebuild(optimizer: torch.optim.Optimizer, options: dict) -> torch.optim.Optimizer:
    """The same optimizer (class, parameter groups, hyperparameters, state) built with `options`."""
    if not options:
        return optimizer
    groups = [{**g, **options} for g in optimizer.param_groups]
    new = type(optimizer)(groups, **_constructor_args(optimizer, options))
    if optimizer.state:
        new.load_state_dict(optimizer.state_dict())
    return new


def step_values_kept(optimizer: torch.optim.Optimizer):
    """Under a capture, keeps the values of the small tensors an optimizer's step makes by rule
    and reads into Python (batch_values.py's shadows, and FakeTensorMode's constants of tensors
    made from a Python number): torch.optim.ASGD's `mu` (torch.ones) and `step` (torch.zeros),
    counted up and read with `.item()` to pick a branch and its next `eta` and `mu`, which fake
    tensors do not hold. Returns the function that ends it (None outside a
    capture). The values are those the real step computes: the state's fills and the step's own
    arithmetic on them, never a parameter's or a gradient's."""
    params = [p for g in optimizer.param_groups for p in g["params"]]
    mode = getattr(params[0], "fake_mode", None) if params else None
    if mode is None or not hasattr(mode, "shadows"):
        return None
    before = mode.shadows, batch_values.constants_kept
    mode.shadows, batch_values.constants_kept = True, True

    def end():
        mode.shadows, batch_values.constants_kept = before
    return end


class _HostStep:
    """Mixed into the optimizer's class: the step on the host copies, then parameters to the device."""

    offloaded_params: list[tuple[torch.Tensor, torch.Tensor]]  # (device parameter, host fp32 copy)
    _fresh: set  # ids of the host copies whose gradient buffer holds this step's gradient

    def step(self, closure=None):
        if closure is not None:
            raise ValueError("optimizer state on the host: step(closure) is not supported")
        for d in {p.device for p, _ in self.offloaded_params if p.is_cuda}:
            torch.cuda.synchronize(d)  # the gradients' device-to-host copies are complete
        # A parameter that got no gradient this step has none for the optimizer (as set_to_none).
        stale = [(h, h.grad) for _, h in self.offloaded_params if h.grad is not None and id(h) not in self._fresh]
        for h, _ in stale:
            h.grad = None
        try:
            with placement.on_host(placement.WORKSPACE):  # its new tensors: temporaries, and the state
                super().step()
        finally:
            for h, g in stale:
                h.grad = g
        with torch.no_grad():
            for p, h in self.offloaded_params:
                p.copy_(h, non_blocking=h.is_pinned())

    def zero_grad(self, set_to_none: bool = True):
        """The host gradient buffers are kept (allocated once); the next gradient overwrites them.
        A sparse host gradient has no buffer to keep: it is dropped, as set_to_none drops it."""
        self._fresh.clear()
        for p, h in self.offloaded_params:
            p.grad = None
            if h.grad is not None and h.grad.is_sparse:
                h.grad = None


_HOST_CLASSES: dict[type, type] = {}


def _host_class(cls: type) -> type:
    if cls not in _HOST_CLASSES:
        _HOST_CLASSES[cls] = type(f"Host{cls.__name__}", (_HostStep, cls), {})
    return _HOST_CLASSES[cls]


def _master_copy(p: torch.Tensor) -> torch.Tensor:
    """The host copy of a parameter the optimizer updates: fp32 if the parameter is floating point."""
    h = placement.host_empty_like(p, placement.PARAM, torch.float32 if p.is_floating_point() else p.dtype)
    with torch.no_grad():
        h.copy_(p, non_blocking=p.is_cuda)
    return h


def _sparse_grad_to_host(host: torch.Tensor, param: torch.Tensor, first: bool) -> None:
    """A sparse gradient (nn.Embedding(sparse=True)'s) to the host: its indices and values copied
    (fp32 values, as the host copy), no dense buffer; a later backward's gradient is added as the
    autograd engine accumulates sparse gradients (torch/csrc/autograd/functions/accumulate_grad.h:
    `variable_grad += new_grad`, indices and values concatenated, not coalesced)."""
    with placement.side_stream(), torch.no_grad(), placement.on_host(placement.GRAD if first else placement.WORKSPACE):
        grad = param.grad
        # Its two dense parts copied, not the sparse tensor: fake tensors' _to_copy of a sparse
        # tensor makes one without entries, which a capture would have counted as no memory.
        g = torch.sparse_coo_tensor(grad._indices().to("cpu", non_blocking=param.is_cuda, copy=True),
                                    grad._values().to("cpu", host.dtype, non_blocking=param.is_cuda, copy=True),
                                    grad.shape, is_coalesced=grad.is_coalesced(), check_invariants=False)
    if param.is_cuda:
        torch.cuda.synchronize(param.device)
    if first or host.grad is None or not host.grad.is_sparse:
        host.grad = g
        return
    with torch.no_grad(), placement.on_host(placement.GRAD):
        host.grad.add_(g)


def _grad_to_host(optimizer: "_HostStep", host: torch.Tensor, param: torch.Tensor) -> None:
    """Moves the gradient the backward just accumulated into the host buffer; drops the device one."""
    first = id(host) not in optimizer._fresh
    if param.grad.is_sparse:
        _sparse_grad_to_host(host, param, first)
    else:
        if host.grad is not None and host.grad.is_sparse:
            host.grad = None
        if host.grad is None:
            host.grad = placement.host_empty_like(host, placement.GRAD)
        with placement.side_stream(), torch.no_grad():
            if first:
                host.grad.copy_(param.grad, non_blocking=param.is_cuda)
            else:  # gradients accumulated over several backward passes
                g = placement.host_empty_like(host, placement.WORKSPACE)
                g.copy_(param.grad, non_blocking=param.is_cuda)
        if not first:
            if param.is_cuda:
                torch.cuda.synchronize(param.device)
            with placement.on_host(placement.WORKSPACE):
                host.grad.add_(g)
    optimizer._fresh.add(id(host))
    param.grad = None


# torch.optim's classes whose for-loop step mhc advise models line by line (advise's
# transforms/forloop_steps.cpp and SGD's rule): the host copies of these always step one parameter
# at a time unless the setting names an implementation or the user chose fused.
_LOOPED = {"SGD", "Adam", "AdamW", "NAdam", "RAdam", "Adamax", "RMSprop", "Adadelta", "Adagrad", "Rprop"}


def _loops_on_host(cls: type) -> bool:
    return cls.__name__ in _LOOPED and cls is getattr(torch.optim, cls.__name__, None)


def _on_cpu(options: dict, cls: type, impl_given: bool) -> dict:
    """The implementation the host copies step with, said explicitly. For torch.optim's looped
    classes, the for-loop (foreach=False) whatever the user's foreach: foreach on CPU tensors makes
    each temporary for all parameters at once (`torch._foreach_sqrt` of every second moment: one
    fp32 copy of the parameters on the host), the for-loop one parameter's, with the same result
    (bitwise for all but NAdam and RAdam). The user's fused=True and a setting's impl are kept.
    For another class only foreach=None becomes the for-loop (torch's choice for CPU tensors: a
    capture counts its fake CPU tensors as a GPU, which would have picked foreach); its own
    foreach=True is kept, as its step is its own. capturable=True (CUDA graphs; torch refuses it
    on CPU tensors) is turned off: no graph captures a step on the host."""
    out = dict(options)
    if out.get("capturable") is True:
        out["capturable"] = False
    if impl_given or "foreach" not in out or out.get("fused"):
        return out
    if out["foreach"] is None or _loops_on_host(cls):
        out["foreach"] = False
    return out


def _step_count(value) -> float:
    """A state's "step" as a number; an unreadable one (a fake tensor a captured step wrote) as 1."""
    try:
        return float(value)
    except Exception:  # noqa: BLE001 - torch raises several kinds for data it cannot read
        return 1.0


def has_stepped(optimizer: torch.optim.Optimizer) -> bool:
    """Whether the optimizer's state holds what steps (or a loaded state dict) made, not only what
    its constructor made: torch.optim.Adagrad makes "step" 0 and "sum" for every parameter at
    construction, and each step counts "step" up; a state without "step" (SGD's momentum_buffer)
    is made by a step. The host copy's optimizer makes the constructor's state again itself."""
    return any("step" not in st or _step_count(st["step"]) != 0 for st in optimizer.state.values())


def state_origin(optimizer: torch.optim.Optimizer) -> str:
    """Where a non-empty state came from, said in a refusal."""
    return "made by its steps" if has_stepped(optimizer) else "made by its constructor, as torch.optim.Adagrad's"


def state_on_host(optimizer: torch.optim.Optimizer, options: dict) -> torch.optim.Optimizer:
    """The optimizer rebuilt over host copies of its parameters (see the module's docstring)."""
    if has_stepped(optimizer):
        raise SettingError("setting: optimizer.state: the optimizer has taken steps already; "
                           "apply the setting before the first step")
    pairs, groups = [], []
    impl_given = bool(options)   # options are a setting's impl's (optimizers.impl_options), else empty
    for g in optimizer.param_groups:
        hosts = [_master_copy(p) for p in g["params"]]
        pairs += zip(g["params"], hosts)
        groups.append(_on_cpu({**g, **options, "params": hosts}, type(optimizer), impl_given))
    # What the constructor makes (torch.optim.Adagrad's "sum" and "step" for every parameter) is
    # the host optimizer's state: host memory, as what its steps make is. Made inside the region,
    # so that a capture recording while the step builds its optimizer (a model file's
    # build_optimizer, called in the first step) takes it for host memory when it is made: until
    # 2026-12-07 it recorded Adagrad's sums as device memory there, beside their host copies.
    with placement.on_host(placement.OPTIMIZER):
        new = _host_class(type(optimizer))(groups, **_on_cpu(_constructor_args(optimizer, options),
                                                              type(optimizer), impl_given))
    # (a capture that saw them made before any region, or a state loaded: marked as well)
    for st in new.state.values():
        for v in st.values():
            if isinstance(v, torch.Tensor):
                placement.mark_host(v, placement.OPTIMIZER)
    new.offloaded_params = pairs
    new._fresh = set()
    for p, h in pairs:
        if p.requires_grad:
            p.register_post_accumulate_grad_hook(functools.partial(_grad_to_host, new, h))
    return new
