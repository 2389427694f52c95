"""The optimizer's implementation (foreach, fused, for-loop) and optimizer state on the host.

State on the host is ZeRO-Offload's placement (Ren et al. 2021; DeepSpeed's offload_optimizer
with device "cpu"), for one process: the optimizer holds host copies of the parameters (pinned
when the model is on a GPU) and keeps its state beside them; each gradient is copied to a host
buffer as soon as the backward has accumulated it, and the device gradient is dropped at once (a
post-accumulate-grad hook), so no full set of device gradients ever exists; step() runs the same
optimizer on the CPU and copies the updated parameters back to the device. The math is the
optimizer's own on the host copies (same dtype as the parameters): the results are bitwise the
ones the device would give with the same implementation, on a CPU.
"""
from __future__ import annotations

import functools
import inspect

import torch

from . import placement
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


class _HostStep:
    """Mixed into the optimizer's class: step() on the host copies, then parameters to the device."""

    offloaded_params: list[tuple[torch.Tensor, torch.Tensor]]  # (device parameter, host copy)

    def step(self, closure=None):
        if closure is not None:
            raise ValueError("optimizer state on the host: step(closure) is not supported")
        for d in {p.device for p, _ in self.offloaded_params if p.is_cuda}:
            torch.cuda.synchronize(d)  # the gradients' device-to-host copies are complete
        with placement.on_host(placement.WORKSPACE):  # its new tensors: temporaries, and the state
            super().step()
        with torch.no_grad():
            for p, h in self.offloaded_params:
                p.copy_(h, non_blocking=h.is_pinned())


_HOST_CLASSES: dict[type, type] = {}


def _host_class(cls: type) -> type:
    if cls not in _HOST_CLASSES:
        _HOST_CLASSES[cls] = type(f"Host{cls.__name__}", (_HostStep, cls), {})
    return _HOST_CLASSES[cls]


def _host_copy(t: torch.Tensor, what: str) -> torch.Tensor:
    h = placement.host_empty_like(t, what)
    with torch.no_grad():
        h.copy_(t, non_blocking=t.is_cuda)
    return h


def _grad_to_host(host: torch.Tensor, param: torch.Tensor) -> None:
    with placement.side_stream():
        g = _host_copy(param.grad, placement.GRAD)
    if host.grad is None:
        host.grad = g
    else:  # gradients accumulated over several backward passes
        with placement.on_host(placement.WORKSPACE):
            host.grad.add_(g)
    param.grad = None


def state_on_host(optimizer: torch.optim.Optimizer, options: dict) -> torch.optim.Optimizer:
    """The optimizer rebuilt over host copies of its parameters (see the module's docstring)."""
    if optimizer.state:
        raise SettingError("setting: optimizer.state: the optimizer has taken steps already; "
                           "apply the setting before the first step")
    pairs, groups = [], []
    for g in optimizer.param_groups:
        hosts = [_host_copy(p, placement.PARAM) for p in g["params"]]
        pairs += zip(g["params"], hosts)
        groups.append({**g, **options, "params": hosts})
    new = _host_class(type(optimizer))(groups, **_constructor_args(optimizer, options))
    new.offloaded_params = pairs
    for p, h in pairs:
        if p.requires_grad:
            p.register_post_accumulate_grad_hook(functools.partial(_grad_to_host, h))
    return new
