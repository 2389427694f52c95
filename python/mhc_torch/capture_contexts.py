"""The contexts a capture runs inside: each changes one behaviour of torch or Python for the
capture's duration (so that the step runs on fake tensors as it would on a GPU, or records the same
trace every time) and restores it after."""
from __future__ import annotations

import contextlib
import functools
import gc
import os
import warnings

import torch
from torch._subclasses.fake_tensor import FakeTensor

from .op_schema import _dense_parts


@contextlib.contextmanager
def _older_objects_frozen():
    """The objects that exist before a capture starts left out of the collections it runs
    (gc.freeze): a full collection walks every object of the process, hundreds of thousands once
    torch and transformers are imported (about 0.3 s each), while the capture needs only its own
    reference cycles collected: an object older than the capture can hold the capture's tensors
    only while it is alive. Nothing is frozen when something else froze objects already (unfreeze
    would thaw them too)."""
    if gc.get_freeze_count() != 0:
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextlib.contextmanager
def _module_conversion_in_place():
    """`Module.to(...)`, `.half()`, `.float()` on a model built under fake tensors: torch (2.15)
    swaps every fake parameter with its converted copy (`torch.utils.swap_tensors`), which refuses
    a tensor that fake-tensor bookkeeping holds a weak reference to (either one), so conversions failed
    (`_apply(): Couldn't swap Linear.weight`: peft's `get_peft_model`, `model.to(torch.bfloat16)`
    in a build_model). Inside the capture a fake parameter takes the converted data in place
    (`param.data = new`, what Module.to does for ordinary tensors): the same object, the new
    dtype and storage."""
    swap = torch.utils.swap_tensors

    def swap_fake(t1, t2):
        if isinstance(t1, FakeTensor) and isinstance(t2, FakeTensor):
            t1.data = t2.data
            return
        swap(t1, t2)

    torch.utils.swap_tensors = swap_fake
    try:
        yield
    finally:
        torch.utils.swap_tensors = swap


@contextlib.contextmanager
def _fake_constants_deep_copied():
    """copy.deepcopy of a model built under fake tensors that holds a tensor made by torch.tensor()
    (BatchNorm's num_batches_tracked): such a fake tensor keeps its value in a real CPU tensor
    (its `constant`), and torch (2.15) deep-copies it while the fake mode is on, which stops at
    the copy ('Attempted to set the storage of a tensor on device "meta" to a storage on different
    device "cpu"': MoCo's and BYOL's momentum encoders, timm's ModelEmaV3, a teacher copied from a
    ResNet). Inside the capture the constant is copied outside the fake mode first, and the copy
    then takes that copy."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    own = FakeTensor.__dict__.get("__deepcopy__")

    def deepcopy(self, memo):
        c = self.__dict__.get("constant")
        if isinstance(c, torch.Tensor) and id(c) not in memo:
            with unset_fake_temporarily():
                memo[id(c)] = c.clone()
        with warnings.catch_warnings():   # torch's deepcopy asks a fake tensor's data_ptr(), then warns the user
            warnings.filterwarnings("ignore", message="Accessing the data pointer of FakeTensor")
            return (own or torch.Tensor.__deepcopy__)(self, memo)

    FakeTensor.__deepcopy__ = deepcopy
    try:
        yield
    finally:
        if own is None:
            del FakeTensor.__deepcopy__
        else:
            FakeTensor.__deepcopy__ = own


@contextlib.contextmanager
def _trunc_normal_without_values():
    """`torch.nn.init.trunc_normal_` (ViT's and timm's initialisation) samples by rejection in
    torch 2.15, looping until no value lies outside [a, b]: it asks fake tensors for values
    (`.item()`, `mask.any()`), so building such a model failed. A fake tensor's values are never
    read, so inside the capture it is filled by one normal_ and clamp_ (same shape, dtype and
    storage); real tensors keep torch's sampling."""
    init = torch.nn.init
    sample = getattr(init, "_no_grad_trunc_normal_", None)
    if sample is None:
        yield
        return

    def trunc_normal(tensor, mean, std, a, b, generator=None):
        if not isinstance(tensor, FakeTensor):
            return sample(tensor, mean, std, a, b, generator=generator)
        with torch.no_grad():
            return tensor.normal_(mean, std, generator=generator).clamp_(a, b)

    init._no_grad_trunc_normal_ = trunc_normal
    try:
        yield
    finally:
        init._no_grad_trunc_normal_ = sample


@contextlib.contextmanager
def _value_checks_passed():
    """`torch._check_tensor_all_with(ValueError, cond, msg)` (and `torch._check_tensor_all`) assert
    that every value of a boolean tensor is true: transformers' `torch_compilable_check` calls it
    in 164 models (LLaVA's image tokens against its image features, ...), and it reads the answer
    with `.item()`, a value fake tensors do not hold, so every such model stopped the capture. A
    check changes no shape and no memory but its one-byte answer: inside the capture the answer
    is computed (`cond._is_all_true()`, the kernel the GPU runs) and the check taken as passed,
    as the step that runs on the GPU would pass it; real tensors are checked as torch does.
    torch.distributions validates its parameters and samples the same way (`Normal(mean,
    sd).log_prob(z)` checks `sd > 0` with `bool(torch._is_all_true(valid))`, by default): a
    normalising flow's, a VAE's or a policy's loss stopped there; its check passes likewise, and
    its shape checks run as they do. `torch.istft` checks that the window's overlap-add envelope
    is nowhere below 1e-11 (the NOLA condition) by comparing a value in its C++ kernel, which
    fake tensors cannot answer: a speech model that goes back to the waveform stopped there; the
    check passes as it does on the GPU for the window and hop the model gave its stft.
    `torch.nn.utils.parametrizations.orthogonal` asks whether the square weight it is given is
    orthogonal already (`torch.allclose(Q.mH @ Q, I)`): a model that registers it when it is built
    stopped there, its weight's values a draw the GPU makes. The product is computed as the GPU
    computes it and the answer is the one a drawn weight gets, no (the weight is factored by QR
    into its orthogonal base); a weight made orthogonal first (`nn.init.orthogonal_`) is copied
    instead on the GPU, the same base's bytes by another path while the model is built."""
    from torch.distributions import distribution
    from torch.nn.utils import parametrizations

    check_with, check_all = torch._check_tensor_all_with, torch._check_tensor_all
    dist_check = distribution._all_true_or_runtime_assert

    def passed(cond) -> bool:
        if isinstance(cond, FakeTensor):
            cond._is_all_true()
            return True
        return False

    def tensor_all_with(error_type, cond, message=None):
        if not passed(cond):
            check_with(error_type, cond, message)

    def tensor_all(cond, message=None):
        if not passed(cond):
            check_all(cond, message)

    def dist_all_true(valid, error_message):
        return passed(valid) or dist_check(valid, error_message)

    istft = torch.istft
    is_orthogonal = parametrizations._is_orthogonal

    def orthogonal_drawn(Q, eps=None):
        if not isinstance(Q, FakeTensor):
            return is_orthogonal(Q, eps)
        Q.mH @ Q
        return False

    def istft_checked(input, *args, **kwargs):
        mode = getattr(input, "fake_mode", None) if isinstance(input, FakeTensor) else None
        if mode is None or not hasattr(mode, "value_checks_pass"):
            return istft(input, *args, **kwargs)
        mode.value_checks_pass += 1
        try:
            return istft(input, *args, **kwargs)
        finally:
            mode.value_checks_pass -= 1

    torch._check_tensor_all_with, torch._check_tensor_all = tensor_all_with, tensor_all
    distribution._all_true_or_runtime_assert = dist_all_true
    torch.istft = istft_checked
    parametrizations._is_orthogonal = orthogonal_drawn
    try:
        yield
    finally:
        parametrizations._is_orthogonal = is_orthogonal
        torch._check_tensor_all_with, torch._check_tensor_all = check_with, check_all
        distribution._all_true_or_runtime_assert = dist_check
        torch.istft = istft


def gpu_attention_op(func, args, kwargs):
    """The attention kernel a GPU runs where the capture runs the CPU flash kernel
    (gpu_paths.py): flash attention for fp16 and bf16 without a mask (head dim at most 256, as
    the capture's workspaces model it), memory-efficient attention otherwise; any other op is
    itself."""
    if func is not torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default:
        return func
    query = args[0] if args else kwargs.get("query")
    mask = kwargs.get("attn_mask")
    flash = (isinstance(query, torch.Tensor) and query.dtype in (torch.float16, torch.bfloat16) and mask is None
             and query.shape[-1] <= 256)
    aten = torch.ops.aten
    return (aten._scaled_dot_product_flash_attention if flash else aten._scaled_dot_product_efficient_attention).default


@contextlib.contextmanager
def _sac_policies_see_gpu_attention():
    """A selective checkpointing policy of the model's own (torchtitan's op-level policy:
    `create_selective_checkpoint_contexts(policy)`, saving `aten._scaled_dot_product_flash_attention`
    and `_efficient_attention` with the matmuls) is asked about every op of a checkpointed region.
    The capture runs attention as the CPU flash kernel (the GPU kernel's tensors, gpu_paths.py),
    which such a policy does not name: it recomputed the attention a GPU keeps (a Llama-shaped
    decoder of 16 blocks: 32 attention forwards where a GPU runs 16, and the kept outputs missing
    from the forward's memory). Inside the capture the policy is asked about the GPU's kernel;
    what is kept or recomputed is the op that ran. torch warns of a future change when saved-tensor
    hooks are active around such a region; the only ones there are the capture's own (it records
    the saves through them), which a GPU run does not have, so that warning is not the user's."""
    from torch.utils import checkpoint as ckpt

    cls = ckpt._CachingTorchDispatchMode
    init = cls.__init__

    def caching_init(self, policy_fn, *args, **kwargs):
        def asked_as_on_gpu(ctx, func, *a, **kw):
            return policy_fn(ctx, gpu_attention_op(func, a, kw), *a, **kw)
        init(self, asked_as_on_gpu, *args, **kwargs)

    cls.__init__ = caching_init
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning,
                                    message="A saved_tensors_hooks context .* selective activation checkpoint")
            yield
    finally:
        cls.__init__ = init


@contextlib.contextmanager
def _grad_scaler_on_fake_tensors(device: str):
    """fp16 training's `torch.amp.GradScaler("cuda")` inside the capture: without a GPU it
    disabled itself ("CUDA is not available. Disabling."), so the step captured had no loss
    scaling, unscaling or infinity checks; and on the capture's device its `step` asks whether an
    infinity was found (`found_inf.item()`), a value fake tensors do not hold. Here a scaler made
    for CUDA runs on the capture's device, and its step goes ahead as in a step whose gradients
    are finite (the GPU's answer costs no memory: a 4-byte tensor read by the host)."""
    from torch.amp import grad_scaler

    cls = grad_scaler.GradScaler
    init, maybe_step = cls.__init__, cls._maybe_opt_step

    def scaler_init(self, device_name="cuda", *args, **kwargs):
        init(self, device if device_name == "cuda" else device_name, *args, **kwargs)

    def opt_step(self, optimizer, optimizer_state, *args, **kwargs):
        if all(isinstance(v, FakeTensor) for v in optimizer_state["found_inf_per_device"].values()):
            return optimizer.step(*args, **kwargs)
        return maybe_step(self, optimizer, optimizer_state, *args, **kwargs)

    cls.__init__, cls._maybe_opt_step = scaler_init, opt_step
    try:
        yield
    finally:
        cls.__init__, cls._maybe_opt_step = init, maybe_step


@contextlib.contextmanager
def _collector_at_step_ends():
    """Python's cyclic garbage collector off during the capture (collected at each step's end
    instead): a storage kept only by a reference cycle would otherwise be freed after whichever
    op happened to trigger a collection, and two captures of one step would differ."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextlib.contextmanager
def _environment_kept(names):
    """The environment variables `names` as they were before, whatever the code inside sets."""
    before = {n: os.environ.get(n) for n in names}
    try:
        yield
    finally:
        for n, v in before.items():
            if v is None:
                os.environ.pop(n, None)
            else:
                os.environ[n] = v


@contextlib.contextmanager
def _together(*contexts):
    """The contexts entered in order as one."""
    with contextlib.ExitStack() as stack:
        for c in contexts:
            stack.enter_context(c)
        yield


@contextlib.contextmanager
def _functorch_beside_capture(rec):
    """While the steps run: torch.func's grad, vjp, jacrev and hessian (per-sample gradients,
    vmap(grad(loss)), as Opacus and DP-SGD compute them) refuse to run under any saved-tensor hooks
    ("torch.func.{grad, vjp, jacrev, hessian} don't yet support saved tensor hooks"), and the
    capture records saves through hooks of its own around the whole step: a step that ran on the GPU
    stopped in the capture. Inside such a transform the capture's own hooks are set aside (what it
    saves is not recorded as saves: nothing there can be checkpointed or offloaded either, since
    both are saved-tensor hooks, which the transform refuses as it would on the GPU: meta
    capture.torch_func_modules names the modules that ran there) and put back after it; a user's own hooks still stop it, as in PyTorch."""
    graph = torch.autograd.graph
    disable = graph.disable_saved_tensors_hooks
    C = torch._C._autograd

    @contextlib.contextmanager
    def beside_capture(message: str):
        own = []
        while (top := C._top_saved_tensors_default_hooks(False)) is not None \
                and getattr(top[0], "mhc_capture_hook", False):
            own.append(top)
            C._pop_saved_tensors_default_hooks()
        rec.torch_func_depth += bool(own)
        try:
            with disable(message):
                yield
        finally:
            rec.torch_func_depth -= bool(own)
            for pack, unpack in reversed(own):
                C._push_saved_tensors_default_hooks(pack, unpack)

    # torch.func's jvp and jacfwd (forward-mode AD: MeanFlow's and consistency models' du/dt) run
    # under saved-tensor hooks, and the capture records their saves; but a module checkpointed
    # there is recomputed without its tangents ("A different number of tensors was saved during
    # the original forward and recomputation") and an offload's hooks meet functorch's wrapped
    # tensors ("Cannot access storage of TensorWrapper"): the modules that ran inside are named
    # (meta capture.jvp_modules), the capture's hooks kept
    from torch._functorch import eager_transforms
    jvp = eager_transforms._jvp_with_argnums

    @functools.wraps(jvp)
    def jvp_named(*args, **kwargs):
        rec.jvp_depth += 1
        try:
            return jvp(*args, **kwargs)
        finally:
            rec.jvp_depth -= 1

    graph.disable_saved_tensors_hooks = beside_capture
    eager_transforms._jvp_with_argnums = jvp_named
    try:
        yield
    finally:
        graph.disable_saved_tensors_hooks = disable
        eager_transforms._jvp_with_argnums = jvp


@contextlib.contextmanager
def _save_on_cpu_as_offload(model: torch.nn.Module, rec):
    """While the steps run: a step's own `torch.autograd.graph.save_on_cpu(pin_memory=...)` (every
    saved tensor copied to pinned host memory in the forward and back in the backward, PyTorch's
    tutorial "Hooks for saved tensors") is the capture's synchronous offload of the whole forward
    (offload.py, the setting {"offload": {"mode": "sync", "min_bytes": 0}}), whose host copies
    and copies back the capture records. On fake tensors of the capture's CPU device, PyTorch's
    own hooks made their "host" copies on the device (the step's peak rose where it falls on a GPU)
    and hid every save from the capture (mhc advise: "no saved tensors recorded"). Unlike
    PyTorch's hooks, the model's parameters and buffers stay where they are when saved (as
    torchtune's offload does): PyTorch copies a saved fp32 weight to the host and back too (a copy
    of the weight on the device in the backward), which is not captured."""
    from .offload import SavedTensorOffload

    cls = torch.autograd.graph.save_on_cpu
    init = cls.__init__

    def offloading(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        off = SavedTensorOffload(model, "sync", 0, 5, 0)
        rec.user_save_on_cpu = True
        torch.autograd.graph.saved_tensors_hooks.__init__(self, off._pack, off._unpack)

    cls.__init__ = offloading
    try:
        yield
    finally:
        cls.__init__ = init


def _outside_torch(hook) -> bool:
    """Whether a saved-tensor hook is code of the model's (or a library's), not torch's own
    (checkpoint's, save_on_cpu's) nor the capture's (its recording, offload and checkpoint hooks)."""
    module = getattr(hook, "__module__", None) or ""
    # mhc-torch loads a model file as the module "mhc_torch_user_model": the user's, not the capture's
    return not (module in ("torch", "mhc_torch") or module.startswith(("torch.", "mhc_torch.")))


def _tensor_leaves(packed):
    from torch.utils._pytree import tree_flatten
    return [x for x in tree_flatten(packed)[0] if isinstance(x, torch.Tensor)]


def _recorded_hooks(rec, pack, unpack):
    """The user's pack and unpack, the tensors the pack returns recorded as the saves (what
    autograd holds for the backward) and their unpacking noted, as the capture's own hooks do:
    each save's own unpack too (capture.save_unpacks), which a streamed offload's prefetch from an
    earlier save of a storage waits for; without it such saves took their storage's first unpack."""
    def pack_recorded(t):
        packed = pack(t)
        own = {id(p.untyped_storage()) for p in _dense_parts(t)}
        for leaf in _tensor_leaves(packed):
            made = any(id(p.untyped_storage()) not in own for p in _dense_parts(leaf))
            first = len(rec.saves)
            rec.on_saved(t if not made else leaf, made_by_last_op=True if made else None)
            rec.note_packed(leaf, range(first, len(rec.saves)))
        return packed

    def unpack_noted(packed):
        for leaf in _tensor_leaves(packed):
            rec.on_unpacked(leaf, rec.packed_saves(leaf))
        return unpack(packed)
    return pack_recorded, unpack_noted


@contextlib.contextmanager
def _user_saved_hooks_recorded(rec):
    """While the steps run: saved-tensor hooks of the model's own (`with
    torch.autograd.graph.saved_tensors_hooks(pack, unpack):` around its forward, to keep saved
    activations compressed, in fp8 or bf16, as COAT and activation-compression code do) take the
    place of the capture's, since autograd calls only the innermost pair: no save made inside
    was recorded (meta capture.pack_order empty for every block, `mhc advise`: no saved tensors).
    The tensors such a pack hook returns are the saves now (a new tensor, the fp8 copy, saved by
    the op that made it; a tensor it passes on, as the capture's hook would record it), and its
    unpacks are noted."""
    cls = torch.autograd.graph.saved_tensors_hooks
    init = cls.__init__

    @functools.wraps(init)
    def recording(self, pack_hook, unpack_hook):
        if _outside_torch(pack_hook):
            pack_hook, unpack_hook = _recorded_hooks(rec, pack_hook, unpack_hook)
        init(self, pack_hook, unpack_hook)

    cls.__init__ = recording
    try:
        yield
    finally:
        cls.__init__ = init


def _leaf_safe_mod_tracker():
    """PyTorch's ModTracker, whose module hooks stop torch.autograd.grad(out, x) when x is a leaf
    passed to a module (a WGAN-GP's gradient penalty: the critic's gradient at interpolates made
    with requires_grad_(True)): ModTracker waits for the gradients of all of a module's inputs
    with register_multi_grad_hook, which asks the engine whether it will run each input's node,
    and for a leaf under autograd.grad the engine refuses ("A leaf node was passed to
    _will_engine_execute_node but we are currently running autograd.grad()"). On a GPU the step
    runs (no tracker). While this tracker is entered, a module's inputs that are leaves are left
    out of that wait (the module's backward ends with its other inputs' gradients), and a module
    whose inputs are all leaves ends its backward at the first of their gradients.

    A wait on one tensor is registered as mode "any" (the same for one tensor): mode "all" keeps
    the tensors' nodes in the hook it puts on those nodes, a reference cycle, so a graph dropped
    without a backward (a GAN's `fake = G(z).detach()`) lived, with what it saved, until the
    collection at the step's end, where PyTorch without the tracker frees it at the drop. A module
    with several inputs that need a gradient keeps that cycle (docs/advise.md, Limits)."""
    from torch.autograd.graph import register_multi_grad_hook
    from torch.distributed._tools import mod_tracker

    def past_leaves(tensors, fn, *, mode="all"):
        if mode == "all" and any(t.grad_fn is None for t in tensors):
            inner = [t for t in tensors if t.grad_fn is not None]
            if len(inner) > 1:
                return register_multi_grad_hook(inner, fn, mode="all")
            return register_multi_grad_hook(inner or tensors, fn, mode="any")
        if mode == "all" and len(tensors) == 1:
            mode = "any"
        return register_multi_grad_hook(tensors, fn, mode=mode)

    class Tracker(mod_tracker.ModTracker):
        def __enter__(self):
            self._mhc_kept = mod_tracker.register_multi_grad_hook
            mod_tracker.register_multi_grad_hook = past_leaves
            try:
                return super().__enter__()
            except BaseException:
                mod_tracker.register_multi_grad_hook = self._mhc_kept
                raise

        def __exit__(self, *args):
            try:
                return super().__exit__(*args)
            finally:
                mod_tracker.register_multi_grad_hook = self._mhc_kept

    return Tracker()
