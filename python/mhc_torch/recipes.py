"""What one captured step does: the training recipe (autocast and its policy, weight dtype,
forward-only, micro-batches with gradient accumulation, where gradients are cleared) or a step
function of the user's own.

A step function is called as `step(model, batch, run)` once per captured step, under fake
tensors. `run` is a StepRun: `run.autocast()` is the capture's autocast (CUDA's policy by
default), `run.backward(loss)` runs the backward (phases and activations are then exact; a plain
`loss.backward()` also works, its gradient seed then counts as forward), `run.optimizer_step()`
and `run.zero_grad()` act on the capture's optimizer, `run.loss(model, batch)` is the capture's
loss, and `run.state` is a dict that lives across steps: what a training loop keeps in variables
from one iteration to the next (the last logits, the loss) stays alive until the step that
replaces it, exactly as a reassigned Python variable would.
"""
from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import torch

from . import store
from .errors import a_kind
from .optimizers import closure_refused, step_values_kept

ZERO_GRAD = ("none", "zeros", "never")


@dataclass
class Recipe:
    """How each captured step runs (see the module's docstring and docs/torch.md)."""
    autocast_dtype: torch.dtype | None = torch.bfloat16
    autocast_policy: str = "cuda"  # "cuda": CUDA autocast's lists (the target is a GPU); "cpu": torch's CPU lists
    param_dtype: torch.dtype | None = None  # e.g. torch.bfloat16: weights (and so grads, optimizer state) in bf16
    forward_only: bool = False  # forward under torch.no_grad(): no backward, no optimizer
    micro_batches: int = 1  # forward + backward per micro-batch (the loss divided by their number), one optimizer step
    zero_grad: str = "none"  # after the optimizer step: "none" (set_to_none=True), "zeros" (kept, zeroed), "never"
    step: Callable[[torch.nn.Module, Any, "StepRun"], Any] | None = None  # a step function of one's own

    def check(self) -> None:
        if self.autocast_policy not in ("cuda", "cpu"):
            raise ValueError(f"autocast_policy must be 'cuda' or 'cpu' (got {self.autocast_policy!r})")
        if self.micro_batches < 1:
            raise ValueError(f"micro_batches must be at least 1 (got {self.micro_batches})")
        if self.zero_grad not in ZERO_GRAD:
            raise ValueError(f"zero_grad must be one of {', '.join(ZERO_GRAD)} (got {self.zero_grad!r})")
        if self.forward_only and self.micro_batches != 1:
            raise ValueError("a forward-only step has no micro-batches (nothing accumulates)")
        if self.step is not None and (self.forward_only or self.micro_batches != 1):
            raise ValueError("a step function says itself what a step does: forward_only and micro_batches "
                             "apply to the standard step only")

    def meta(self) -> dict[str, str]:
        dt = lambda d: str(d).replace("torch.", "") if d is not None else "none"  # noqa: E731
        return {"capture.autocast": dt(self.autocast_dtype),
                "capture.autocast_policy": self.autocast_policy if self.autocast_dtype is not None else "none",
                "capture.param_dtype": dt(self.param_dtype) if self.param_dtype is not None else "as built",
                "capture.step": ("custom" if self.step is not None else "forward" if self.forward_only
                                 else "train"),
                "capture.micro_batches": str(self.micro_batches),
                "capture.zero_grad": self.zero_grad}


@contextlib.contextmanager
def autocast_kernels(device: str, recipe: Recipe):
    """For a whole capture: the cast rules that the recipe's autocast follows wherever autocast
    is switched on, also where the capture's own autocast() is not the one switching it (a
    checkpoint's recompute in the backward restores the forward's CPU autocast state). Only CUDA's
    emulated lists need registering; torch's own are always there."""
    if recipe.autocast_dtype is None or recipe.autocast_policy != "cuda" or torch.device(device).type != "cpu":
        yield
        return
    from .autocast_cuda import cuda_autocast_kernels

    with cuda_autocast_kernels(recipe.autocast_dtype, torch.device(device).type):
        yield


@contextlib.contextmanager
def autocast(device: str, dtype: torch.dtype | None, policy: str = "cuda"):
    """Autocast to `dtype` on the capture's device with CUDA's lists ("cuda", emulated on fake CPU
    tensors) or the device's own ("cpu"); nothing when `dtype` is None."""
    if dtype is None:
        yield
        return
    dev = torch.device(device).type
    if policy == "cuda" and dev == "cpu":
        from .autocast_cuda import cuda_autocast

        with cuda_autocast(dtype, dev):
            yield
        return
    # torch.autocast refuses device 'cuda' without a GPU; fake CUDA tensors carry the CUDA
    # dispatch key, so switching the autocast state directly applies CUDA's cast policy to them.
    prev_enabled = torch.is_autocast_enabled(dev)
    prev_dtype = torch.get_autocast_dtype(dev)
    torch.set_autocast_enabled(dev, True)
    torch.set_autocast_dtype(dev, dtype)
    torch.autocast_increment_nesting()
    from .autocast_cuda import regions

    regions.append(dtype)
    try:
        yield
    finally:
        regions.pop()
        if torch.autocast_decrement_nesting() == 0:
            torch.clear_autocast_cache()
        torch.set_autocast_enabled(dev, prev_enabled)
        torch.set_autocast_dtype(dev, prev_dtype)


def cast_model(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """model.to(dtype) for floating parameters and buffers: the one cast of `--weights` and of a
    setting's "weights" (mhc_torch.apply). Each tensor's `.data` is replaced, as Module.to does
    unless it swaps tensors, which fails on fake tensors that fake-tensor bookkeeping holds weak
    references to; so every Parameter object stays (an optimizer built over them still holds
    them) and tied parameters stay tied."""
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            if t.is_floating_point() and t.dtype != dtype:
                t.data = t.data.to(dtype)
    return model


class StepRun:
    """The handle a step function gets: the capture's autocast, backward, optimizer and state."""

    def __init__(self, rec, model, optimizer, loss_fn, recipe: Recipe, device: str, param_name: dict[int, str],
                 optimizer_setting: dict | None = None):
        self._rec = rec
        self.model = model
        self.optimizer = optimizer
        self._loss_fn = loss_fn
        self.recipe = recipe
        self.device = device
        self.state: dict[str, Any] = {}
        self.step = -1
        self._param_name = param_name
        self._grad_names: dict[int, list[str]] = {}   # a gradient storage's record -> its parameters
        self._param_order: dict[str, int] = {}
        self._handles = []
        self._t_opt = None
        self._opt_depth = 0
        self._values_end = None   # ends the step's values kept (optimizers.step_values_kept)
        self.optimizer_steps: dict[int, int] = {}  # step -> steps of the capture's optimizer in it
        # The optimizer a step function builds itself (see _settle): adopted as the capture's.
        self.optimizer_setting = optimizer_setting   # a setting's "optimizer" part, not yet applied
        self.adopted_facts: dict[str, str] = {}
        self._built: list = []                      # optimizers constructed while the steps run
        self.built_classes: list[str] = []          # their classes, over the model's parameters
        self.built_qualnames: list[str] = []        # every one's module.class (over copies too)
        self._building = True
        self._settled = False
        self._given_to_captures = False             # optimizer_setting applied to the capture's own

    # What a step function calls --------------------------------------------------------------
    def autocast(self):
        return autocast(self.device, self.recipe.autocast_dtype, self.recipe.autocast_policy)

    def loss(self, model, batch):
        return self._loss_fn(model, batch)

    def backward(self, loss: torch.Tensor, **kwargs) -> None:
        if not isinstance(loss, torch.Tensor):
            raise TypeError(f"the loss is {a_kind(loss)}, not a tensor; "
                            "loss_fn(model, batch) returns the loss")
        if loss.numel() != 1 and "gradient" not in kwargs:
            raise TypeError(f"the loss has shape {list(loss.shape)}, not one value; reduce it in "
                            "loss_fn(model, batch) (its .sum() or .mean())")
        self._rec.begin_backward()
        loss.backward(**kwargs)
        self._rec.end_backward()

    def optimizer_step(self) -> None:
        closure_refused(self.optimizer)
        self.optimizer.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        phase, self._rec.phase = self._rec.phase, "optimizer"
        self.optimizer.zero_grad(set_to_none=set_to_none)
        self._rec.phase = phase

    # The capture's side ----------------------------------------------------------------------
    def __enter__(self):
        """Hooks that categorise gradients when autograd accumulates them and optimizer state
        when the optimizer has stepped, whoever calls backward() and step()."""
        for p in self.model.parameters():
            if p.requires_grad:
                self._handles.append(p.register_post_accumulate_grad_hook(self._grad_ready))
        self._handles.append(self.optimizer.register_step_pre_hook(self._optimizer_begins))
        self._handles.append(self.optimizer.register_step_post_hook(self._optimizer_ends))
        from torch.optim.optimizer import register_optimizer_step_post_hook

        # Optimizers of the step's own (a step function's, built in run.state): their state is
        # optimizer state too, not the workspace of the op that made it.
        self._handles.append(register_optimizer_step_post_hook(self._own_optimizer_ends))
        if self.recipe.step is not None:
            from torch.nn.modules.module import register_module_forward_pre_hook
            from torch.optim.optimizer import register_optimizer_step_pre_hook

            self._handles.append(register_optimizer_step_pre_hook(self._any_optimizer_begins))
            self._handles.append(register_module_forward_pre_hook(self._settle_at_forward))
            self._handles.append(_on_optimizer_init(self._built_one))
        elif self.optimizer_setting:
            self._give_to_captures()
        return self

    def __exit__(self, *exc):
        for h in self._handles:
            h.remove()
        self._handles = []
        self._built = []
        self.state.clear()

    # The optimizer a step function builds itself -----------------------------------------------
    def _built_one(self, opt) -> None:
        if self._building and not self._settled:
            self._built.append(weakref.ref(opt))   # not kept alive by the capture
            self.built_qualnames.append(f"{type(opt).__module__}.{type(opt).__qualname__}")
            if self._over_the_model(opt):
                self.built_classes.append(type(opt).__name__)

    def _over_the_model(self, opt) -> bool:
        params = [p for g in opt.param_groups for p in g["params"]]
        return bool(params) and all(id(p) in self._param_name for p in params)

    def _give_to_captures(self) -> None:
        if self.optimizer_setting and not self._given_to_captures:
            from .applying import apply_to_optimizer

            self._building = False
            apply_to_optimizer(self.optimizer, {"optimizer": self.optimizer_setting})
            self._building = True
            self._given_to_captures = True
            for p, h in getattr(self.optimizer, "offloaded_params", ()):
                self._param_name[id(h)] = self._param_name.get(id(p), "?")

    def _settle_at_forward(self, module, args) -> None:
        # The first forward may run inside torch.func's grad (DP-SGD's functional_call): what the
        # adoption makes for the optimizer (a host setting's copies) is the optimizer's, outside the
        # transform, not functorch's wrappers of it ("Cannot access storage of TensorWrapper").
        with torch._C._DisableFuncTorch():
            self._settle(None)

    def _settle(self, stepping) -> None:
        """Which optimizer is the capture's: a step function that builds one optimizer over the
        model's parameters and steps it (a training script's loop, nanoGPT's configure_optimizers,
        transformers' Trainer-like groups) trains with that one, not with run.optimizer. It is
        adopted at the model's first forward after it was built, or at its first step: its steps
        are the optimizer phase (markers, gradient accumulation), its class and hyperparameters the
        capture's (meta capture.optimizer_*), and a setting's optimizer part is applied to it (in
        place: the step's code holds it). Two or more built (a GAN's, master weights' copies), or
        run.optimizer stepped: nothing is adopted, as before."""
        if self._settled:
            return
        if self.optimizer_steps:
            self._settled = True
            return
        built = [o for o in (ref() for ref in self._built)
                 if o is not None and o is not self.optimizer and self._over_the_model(o)]
        if len(built) > 1:
            self._settled = True
        elif len(built) == 1:
            self._adopt(built[0], stepping is built[0])
        elif stepping is None:
            # The first forward and no optimizer of its own yet: a setting's host state must be in
            # place before the backward; the step may use run.optimizer.
            self._give_to_captures()

    def _adopt(self, opt, at_its_step: bool) -> None:
        from .errors import CaptureError
        from .step_facts import model_facts

        self._settled = True
        self.adopted_facts = model_facts(self.model, opt)
        if self.optimizer_setting:
            if self.optimizer_setting.get("state") == "host" and (self._given_to_captures or at_its_step):
                raise CaptureError("setting: optimizer.state host: the step function builds its optimizer after the "
                                   "model's first forward; build it before (as a training loop does, before its "
                                   "first step) to capture it with its state on the host")
            from .applying import apply_to_optimizer

            self._building = False
            apply_to_optimizer(opt, {"optimizer": self.optimizer_setting})
        for p, h in getattr(opt, "offloaded_params", ()):
            self._param_name[id(h)] = self._param_name.get(id(p), "?")
        self.optimizer = opt
        self._adopted = True

    def _any_optimizer_begins(self, opt, args, kwargs) -> None:
        self._settle(opt)
        if opt is self.optimizer and getattr(self, "_adopted", False):
            self._optimizer_begins(opt, args, kwargs)

    def _grad_ready(self, p) -> None:
        if p.grad is None:  # None: a hook registered before this one took it (optimizer state on the host)
            return
        name = self._param_name.get(id(p), "?")
        local = getattr(p.grad, "_local_tensor", None)   # a DTensor (FSDP2): its shard is the memory
        s = self._rec.track(local if isinstance(local, torch.Tensor) else p.grad, store.GRAD, name + ".grad")
        # Gradients that are views of one storage (cuDNN's RNN: one flat weight gradient whose
        # slices are the module's parameters' .grad) are labelled by all of them, not the last.
        names = self._grad_names.setdefault(id(s), []) if s is not None else [name]
        if name not in names:
            names.append(name)
            if len(names) > 1:   # in the model's order
                if len(self._param_order) != len(self._param_name):
                    self._param_order = {n: i for i, n in enumerate(self._param_name.values())}
                names.sort(key=lambda n: self._param_order.get(n, len(self._param_order)))
        self._rec.set_category(p.grad, store.GRAD, grads_label(names))

    def _optimizer_begins(self, opt, args, kwargs) -> None:
        # An optimizer class whose step() calls its base class's (mhc_torch.optimizers' host step)
        # runs the hooks once per level: the outermost call is the optimizer phase.
        self._opt_depth += 1
        if self._opt_depth == 1:
            self._rec.phase = "optimizer"
            self._t_opt = self._rec.t
            self._values_end = step_values_kept(opt)   # ASGD's mu and step read into Python

    def _optimizer_ends(self, opt, args, kwargs) -> None:
        self._opt_depth -= 1
        if self._opt_depth > 0:
            return
        if self._values_end is not None:
            self._values_end()
            self._values_end = None
        self.optimizer_steps[self.step] = self.optimizer_steps.get(self.step, 0) + 1
        for p, state in opt.state.items():
            for key, v in state.items():
                if isinstance(v, torch.Tensor):
                    self._rec.set_category(v, store.OPTIMIZER, f"{self._param_name.get(id(p), '?')}.{key}")
        self._rec.markers.append(store.Marker("optimizer", self._t_opt, self._rec.t, store.MARKER_RANGE, -1))
        self._rec.phase = "forward"

    def _state_label(self, p, key: str) -> str:
        name = self._param_name.get(id(p))
        return f"{name}.{key}" if name is not None else f"optimizer state {key} ({list(p.shape)})"

    def _own_optimizer_ends(self, opt, args, kwargs) -> None:
        """Any other optimizer stepped in the step (a step function's own, over the model's
        parameters or copies of them): its state is categorised as optimizer state; its kernels
        keep the phase they ran in (mhc_torch.apply, and so `mhc advise`'s optimizer settings,
        reach only the capture's optimizer)."""
        if opt is self.optimizer:
            if getattr(self, "_adopted", False):
                self._optimizer_ends(opt, args, kwargs)
            return
        for p, state in opt.state.items():
            for key, v in state.items():
                if isinstance(v, torch.Tensor):
                    self._rec.set_category(v, store.OPTIMIZER, self._state_label(p, key))

    def run_step(self, index: int, batch) -> None:
        self.step = index
        if self.recipe.step is not None:
            self.recipe.step(self.model, batch, self)
        elif self.recipe.forward_only:
            # The output is held past the autocast's exit (which clears its cast cache), as a
            # user's `out = model(batch)` is; `_`: held, never read.
            with torch.no_grad(), self.autocast():
                _ = self.loss(self.model, batch)
            del _
        else:
            self._train_step(batch)

    def _train_step(self, batch) -> None:
        n = self.recipe.micro_batches
        for _ in range(n):
            with self.autocast():
                loss = self.loss(self.model, batch)
                if n > 1:
                    loss = loss / n  # gradient accumulation: the mean over micro-batches
            self.backward(loss)
            del loss
        self.optimizer_step()
        if self.recipe.zero_grad != "never":
            self.zero_grad(set_to_none=self.recipe.zero_grad == "none")


def _on_optimizer_init(callback):
    """Calls callback(optimizer) for each torch.optim.Optimizer constructed until the returned
    handle's remove(); the callback sees the object after Optimizer.__init__ (its groups are set)."""
    original = torch.optim.Optimizer.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        callback(self)

    torch.optim.Optimizer.__init__ = init

    class Handle:
        @staticmethod
        def remove():
            torch.optim.Optimizer.__init__ = original

    return Handle()


def grads_label(names: list[str]) -> str:
    """The label of a gradient storage: "<parameter>.grad", or for the views of one storage
    (cuDNN's flat RNN weight gradient) "<module>.(<first> … <last>: N parameters).grad"."""
    if len(names) == 1:
        return names[0] + ".grad"
    parents = {n.rpartition(".")[0] for n in names}
    if len(parents) == 1:
        parent = parents.pop()
        leaf = [n.rpartition(".")[2] for n in names]
        return f"{parent + '.' if parent else ''}({leaf[0]} … {leaf[-1]}: {len(names)} parameters).grad"
    return f"({names[0]} … {names[-1]}: {len(names)} parameters).grad"
