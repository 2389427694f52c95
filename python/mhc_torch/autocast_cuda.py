"""CUDA autocast's cast policy applied to fake CPU tensors.

Captures run on fake *CPU* tensors (fake CUDA tensors fail in the backward without a GPU), so
`torch.autocast` would apply the CPU cast lists, which differ from CUDA's: CPU autocast leaves
`einsum` in fp32 and has no fp32 list for `exp`, `sum`, `pow`, `softmax`, `layer_norm`, ..., so an
attention softmax stays bf16 where a GPU computes and saves it in fp32. `cuda_autocast_kernels()`
replaces the kernels of the AutocastCPU dispatch key with kernels that apply CUDA's policy (the
ops CUDA autocasts get CUDA's cast, the ops only CPU autocasts run uncast), and `cuda_autocast()`
switches autocast on. A capture keeps the kernels registered for its whole run, so that code which
switches CPU autocast on by itself (a checkpoint's recompute in the backward) gets the forward's
policy too.

The policy (facts, not code, from PyTorch 2.15):
- the op lists `AT_FORALL_LOWER_PRECISION_FP`, `AT_FORALL_FP32`, `AT_FORALL_FP32_SET_OPT_DTYPE`,
  `AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE` and `AT_FORALL_PROMOTE` in `ATen/autocast_mode.h`
  (shipped with the wheel under `torch/include/`), which `aten/src/ATen/autocast_mode.cpp`
  registers for the CUDA `Autocast` key with the policies lower_precision_fp, fp32,
  fp32_set_opt_dtype, fp32_append_dtype and promote, plus `cudnn_convolution` and
  `cudnn_convolution_transpose` (lower precision) and `binary_cross_entropy` (refused);
- the policies' meaning (`WrapFunction_` in `autocast_mode.h`) and `cached_cast` (in
  `autocast_mode.cpp`): only floating-point tensors other than float64 are cast; a lower-precision
  cast of an fp32 leaf that requires grad (a weight) is cached until the outermost autocast
  region exits; fp32_set_opt_dtype ops get `dtype=float32` unless one is given, when their first
  argument is eligible; promote runs in float32 if any eligible argument is float32;
- `linalg_matrix_sqrth` (registered for CUDA autocast in 2.15 outside these lists) runs in fp32
  under real CUDA autocast: observed on fake CUDA tensors, whose forward does run CUDA autocast.
`_cudnn_rnn` (cuDNN's RNN, cast to fp16 by `aten/src/ATen/cudnn/AutocastRNN.cpp`) is not in the
table: the capture's RNN path (cudnn_rnn.py) applies that cast itself. The table is checked against the installed torch's CUDA registrations by the
tests (python/tests/test_autocast_cuda.py), and ops registered for CUDA autocast but missing from
the table are listed in the capture's meta (`capture.autocast_unmodelled`).
"""
from __future__ import annotations

import contextlib
import warnings
import weakref

import torch

LOWER_PRECISION_FP = """
_convolution.deprecated _convolution conv1d conv2d conv3d conv_tbc conv_transpose1d
conv_transpose2d.input conv_transpose3d.input convolution prelu addmm addmv addr matmul einsum mm
mv linalg_vecdot linear addbmm baddbmm bmm chain_matmul linalg_multi_dot _thnn_fused_lstm_cell
_thnn_fused_gru_cell lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell
_scaled_dot_product_flash_attention scaled_dot_product_attention cudnn_convolution
cudnn_convolution_transpose
""".split()

FP32 = """
acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan pow.Tensor_Scalar
pow.Tensor_Tensor pow.Scalar softplus layer_norm native_layer_norm rms_norm group_norm
frobenius_norm.dim nuclear_norm nuclear_norm.dim cosine_similarity poisson_nll_loss
cosine_embedding_loss nll_loss nll_loss2d hinge_embedding_loss kl_div l1_loss smooth_l1_loss
huber_loss mse_loss margin_ranking_loss multilabel_margin_loss soft_margin_loss
triplet_margin_loss multi_margin_loss binary_cross_entropy_with_logits dist pdist cdist renorm
logsumexp upsample_nearest1d _upsample_nearest_exact1d upsample_nearest2d
_upsample_nearest_exact2d upsample_nearest3d _upsample_nearest_exact3d upsample_linear1d
upsample_bilinear2d _upsample_bilinear2d_aa upsample_trilinear3d upsample_bicubic2d
_upsample_bicubic2d_aa linalg_matrix_sqrth
""".split()

FP32_SET_OPT_DTYPE = """
prod prod.dim_int softmax.int log_softmax.int cumprod cumsum linalg_vector_norm linalg_matrix_norm
linalg_matrix_norm.str_ord sum sum.dim_IntList
prod.dim_Dimname softmax.Dimname log_softmax.Dimname cumprod.dimname cumsum.dimname sum.dim_DimnameList
""".split()

# The overload each one redispatches to, with the output dtype appended.
FP32_APPEND_DTYPE = {"norm.Scalar": "norm.ScalarOpt_dtype", "norm.ScalarOpt_dim": "norm.ScalarOpt_dim_dtype",
                     "norm.names_ScalarOpt_dim": "norm.names_ScalarOpt_dim_dtype"}

PROMOTE = "addcdiv addcmul atan2 bilinear cross dot vdot grid_sampler index_put tensordot scatter_add".split()

REFUSED = {"binary_cross_entropy": "torch.nn.functional.binary_cross_entropy is unsafe to autocast and CUDA "
                                   "autocast refuses it; use binary_cross_entropy_with_logits"}

NOT_EMULATED = {"_cudnn_rnn": "cuDNN's RNN kernel; cast to fp16 by the capture's RNN path (cudnn_rnn.py)"}

_KEY = torch._C.DispatchKey.AutocastCPU


def policy_table() -> dict[str, str]:
    """aten overload name ("softmax.int", "mm") -> CUDA autocast policy name, for the ops the
    installed torch autocasts on CUDA. The lists above are the union over the torch versions
    known; one torch's CUDA autocast leaves some of them alone (torch 2.11 casts no rms_norm,
    which then runs in its input's dtype, where 2.15 runs it in fp32), and such an op falls
    through here as it does there."""
    cuda = _registered("AutocastCUDA")
    table = {}
    for names, policy in ((LOWER_PRECISION_FP, "lower_precision_fp"), (FP32, "fp32"),
                          (FP32_SET_OPT_DTYPE, "fp32_set_opt_dtype"), (list(FP32_APPEND_DTYPE), "fp32_append_dtype"),
                          (PROMOTE, "promote"), (list(REFUSED), "refused"), (list(NOT_EMULATED), "not_emulated")):
        for n in names:
            if n in cuda:
                table[n] = policy
    return table


def _overload(name: str):
    base, _, overload = name.partition(".")
    packet = getattr(torch.ops.aten, base, None)
    if packet is None:
        return None
    return getattr(packet, overload or "default", None)


def _registered(key: str) -> set[str]:
    """Overload names ("mm", "softmax.int") with a kernel for this dispatch key in this torch."""
    return {n.removeprefix("aten::") for n in torch._C._dispatch_get_registrations_for_dispatch_key(key)
            if n.startswith("aten::")}


def unmodelled_ops() -> list[str]:
    """Ops the installed torch autocasts on CUDA that the table does not know (a newer torch)."""
    return sorted(_registered("AutocastCUDA") - set(policy_table()))


class _Policy:
    """Kernels for the AutocastCPU key that apply CUDA's policy to the emulated GPU's tensors."""

    def __init__(self, lower: torch.dtype, device_type: str):
        self.lower = lower
        self.device_type = device_type
        self.cache: dict[int, tuple[weakref.ref, torch.Tensor]] = {}
        # On a GPU the autograd engine runs the backward (and a checkpoint's recompute in it) on a
        # device thread, whose autocast cache and nesting are its own (thread_local in
        # autocast_mode.cpp): a recompute under autocast casts the weights again even where the
        # backward runs inside the forward's autocast region (SAM's second backward), and its casts go
        # when its region exits. The capture runs the backward on the calling thread: this cache
        # stands for the device thread's.
        self.engine_cache: dict[int, tuple[weakref.ref, torch.Tensor]] = {}

    def eligible(self, t) -> bool:
        return (isinstance(t, torch.Tensor) and t.device.type == self.device_type and t.is_floating_point()
                and t.dtype != torch.float64)

    def cast(self, to: torch.dtype, value):
        """cached_cast: tensors and tensor lists; everything else as is."""
        if isinstance(value, (list, tuple)):
            return type(value)(self.cast(to, v) for v in value)
        if not self.eligible(value) or value.dtype == to:
            return value
        cacheable = (to == self.lower and value.dtype == torch.float32 and value.requires_grad and value.is_leaf
                     and not value._is_view() and torch.is_autocast_cache_enabled())
        if not cacheable:
            return value.to(to)
        cache = self.engine_cache if _engine_running() else self.cache
        hit = cache.get(id(value))
        if hit is not None and hit[0]() is value:
            return hit[1]
        casted = value.to(to)
        cache[id(value)] = (weakref.ref(value), casted)
        return casted

    def promote_type(self, values) -> torch.dtype:
        """The widest eligible dtype among the arguments (tensor lists included), float64 ignored."""
        to = self.lower
        for v in values:
            for t in (v if isinstance(v, (list, tuple)) else [v]):
                if self.eligible(t):
                    to = self._prioritize(to, t.dtype)
        return to

    def _prioritize(self, current: torch.dtype, nxt: torch.dtype) -> torch.dtype:
        if current == torch.float32 or nxt == torch.float32:
            return torch.float32
        if current == self.lower and nxt == self.lower:
            return self.lower
        raise RuntimeError(f"CUDA autocast to {self.lower} cannot promote a {nxt} argument")

    def kernel(self, op, policy: str, redispatch=None):
        schema = op._schema
        names = [a.name for a in schema.arguments]

        def bound(args, kwargs) -> dict:
            values = dict(zip(names, args))
            values.update(kwargs)
            return values

        def call(target, values):
            tschema = target._schema
            pos = [values[a.name] for a in tschema.arguments if not a.kwarg_only and a.name in values]
            kw = {a.name: values[a.name] for a in tschema.arguments if a.kwarg_only and a.name in values}
            with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(_KEY)):
                return target(*pos, **kw)

        def cast_all(to, values) -> dict:
            """cached_cast of every argument, the last one first: WrapFunction_ casts them in the
            argument list of one call, `(*F)(cached_cast(..., args, ...)...)`, which GCC (Linux
            wheels) evaluates right to left. The H200's snapshot shows it: Conv1D's
            addmm(bias, x, weight) allocates the weight's cast, then x's, then the bias's."""
            order = [n for n in names if n in values] + [n for n in values if n not in names]
            with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(_KEY)):
                return {k: self.cast(to, values[k]) for k in reversed(order)}

        def lower_precision_fp(*args, **kwargs):
            return call(op, cast_all(self.lower, bound(args, kwargs)))

        def fp32(*args, **kwargs):
            return call(op, cast_all(torch.float32, bound(args, kwargs)))

        def fp32_set_opt_dtype(*args, **kwargs):
            values = bound(args, kwargs)
            if self.eligible(values[names[0]]) and values.get("dtype") is None:
                values["dtype"] = torch.float32
            return call(op, values)

        def fp32_append_dtype(*args, **kwargs):
            values = bound(args, kwargs)
            first = values[names[0]]
            values["dtype"] = torch.float32 if self.eligible(first) else first.dtype
            for a in schema.arguments:  # the new overload requires what this one defaults
                if a.name not in values and a.has_default_value():
                    values[a.name] = a.default_value
            return call(redispatch, values)

        def promote(*args, **kwargs):
            values = bound(args, kwargs)
            with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(_KEY)):
                to = self.promote_type(list(values.values()))
            return call(op, cast_all(to, values))

        def refused(*args, **kwargs):
            raise RuntimeError(REFUSED[_name(op)])

        return {"lower_precision_fp": lower_precision_fp, "fp32": fp32, "fp32_set_opt_dtype": fp32_set_opt_dtype,
                "fp32_append_dtype": fp32_append_dtype, "promote": promote, "refused": refused}[policy]


def _name(op) -> str:
    base = op._schema.name.removeprefix("aten::")
    return base if op._overloadname == "default" else f"{base}.{op._overloadname}"


_active: list[_Policy] = []  # the policies whose kernels are registered now, innermost last
# The dtypes of the autocast regions a capture's code is in now, innermost last (None: a region with
# autocast off): torch.is_autocast_enabled() reads False inside an op's dispatch, where the capture
# records the op (the autocast kernel has excluded its key), so the capture asks here.
regions: list[torch.dtype | None] = []


# The autocast nesting of the autograd engine's device thread (see _Policy.engine_cache).
_engine_nesting = [0]


def _engine_running() -> bool:
    """Whether the autograd engine runs the op now (on a GPU: on its device thread)."""
    return torch._C._current_graph_task_id() != -1


def _enter_nesting() -> bool:
    """One autocast region deeper, on the thread the GPU would run it on; whether it is the engine's."""
    if _engine_running():
        _engine_nesting[0] += 1
        return True
    torch.autocast_increment_nesting()
    return False


def _leave_nesting(engine: bool) -> None:
    """Leaves a region _enter_nesting entered; the outermost one's exit drops that thread's cache."""
    if engine:
        _engine_nesting[0] -= 1
        if _engine_nesting[0] == 0:
            for policy in _active:
                policy.engine_cache.clear()
    elif torch.autocast_decrement_nesting() == 0:
        torch.clear_autocast_cache()  # the policy's cached casts too


def region_dtype() -> torch.dtype | None:
    """The dtype of the innermost autocast region entered through the capture, None outside one."""
    return regions[-1] if regions else None
# torch's warning when a kernel replaces one registered for the same operator and key.
_OVERRIDE_WARNING = r"(?s).*Overriding a previously registered kernel"


@contextlib.contextmanager
def cuda_autocast_kernels(dtype: torch.dtype = torch.bfloat16, device_type: str = "cpu"):
    """Registers CUDA's policy as the AutocastCPU kernels without switching autocast on. They act
    wherever CPU autocast is on while registered: inside cuda_autocast(), and in code that switches
    autocast on by itself, such as torch.utils.checkpoint's recompute in the backward, which
    re-enters CPU autocast with the forward's state (with torch's CPU lists there, a recomputed op
    would get another dtype than in the forward, which checkpoint refuses). A capture registers
    them for its whole run. The policy's cached casts go when torch drops its own cache, as the
    outermost autocast region exits: torch.autocast calls torch.clear_autocast_cache() then,
    wrapped while registered. Yields the policy."""
    policy = _Policy(dtype, device_type)
    lib = torch.library.Library("aten", "IMPL")
    clear = torch.clear_autocast_cache

    def clear_autocast_cache():
        policy.cache.clear()
        clear()

    try:
        table = policy_table()
        # Replacing torch's AutocastCPU kernels is the point; torch 2.11 says so in an 8-line
        # warning ("Overriding a previously registered kernel ...") on every capture's stderr,
        # and refuses to replace the kernels of an enclosing region (the capture's bf16 around a
        # user's fp16 torch.autocast("cuda")) unless asked: allow_override (2.15's default).
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_OVERRIDE_WARNING, category=UserWarning)
            for name, kind in table.items():
                op = _overload(name)
                if op is None or kind == "not_emulated":
                    continue
                redispatch = _overload(FP32_APPEND_DTYPE[name]) if kind == "fp32_append_dtype" else None
                lib.impl(name, policy.kernel(op, kind, redispatch), "AutocastCPU", allow_override=True)
            # What CPU autocast casts and CUDA's does not falls through, as on CUDA: a composite
            # op (cross_entropy_loss) then decomposes with autocast on (log_softmax in fp32).
            for name in _registered("AutocastCPU") - set(table):
                lib.impl(name, torch.library.fallthrough_kernel, "AutocastCPU", allow_override=True)
        torch.clear_autocast_cache = clear_autocast_cache
        _active.append(policy)
        yield policy
    finally:
        if policy in _active:
            _active.remove(policy)
        torch.clear_autocast_cache = clear
        policy.cache.clear()
        policy.engine_cache.clear()
        lib._destroy()


@contextlib.contextmanager
def cuda_autocast(dtype: torch.dtype = torch.bfloat16, device_type: str = "cpu"):
    """Autocast with CUDA's policy on tensors of `device_type` (the capture's fake CPU tensors),
    as `torch.autocast("cuda", dtype)` would on a GPU. While it is active, CPU autocast anywhere
    in the process follows CUDA's lists, and `torch.is_autocast_enabled("cuda")` is true, as user
    code that asks expects on a GPU. Uses the kernels cuda_autocast_kernels() registered for the
    same dtype and device (a capture's), else registers them for its own duration. Yields the
    list of CUDA-autocast ops it does not model."""
    with contextlib.ExitStack() as stack:
        inner = _active[-1] if _active else None
        if inner is None or (inner.lower, inner.device_type) != (dtype, device_type):
            stack.enter_context(cuda_autocast_kernels(dtype, device_type))
        saved = {dev: (torch.is_autocast_enabled(dev), torch.get_autocast_dtype(dev)) for dev in (device_type, "cuda")}
        for dev in saved:
            torch.set_autocast_enabled(dev, True)
            torch.set_autocast_dtype(dev, dtype)
        engine = _enter_nesting()
        regions.append(dtype)
        try:
            yield unmodelled_ops()
        finally:
            regions.pop()
            _leave_nesting(engine)
            for dev, (enabled, dt) in saved.items():
                torch.set_autocast_enabled(dev, enabled)
                torch.set_autocast_dtype(dev, dt)


@contextlib.contextmanager
def _autocast_off(device_type: str):
    """`torch.autocast("cuda", enabled=False)` on the emulated GPU: CUDA autocast is the CPU
    autocast of the capture's tensors there, so both are switched off for the region."""
    saved = {dev: torch.is_autocast_enabled(dev) for dev in (device_type, "cuda")}
    for dev in saved:
        torch.set_autocast_enabled(dev, False)
    engine = _enter_nesting()
    regions.append(None)
    try:
        yield
    finally:
        regions.pop()
        _leave_nesting(engine)
        for dev, enabled in saved.items():
            torch.set_autocast_enabled(dev, enabled)


@contextlib.contextmanager
def user_cuda_autocast(capture_device: str = "cpu"):
    """While a capture runs the model's own code: `torch.autocast("cuda", ...)`,
    `torch.amp.autocast("cuda", ...)` and `torch.cuda.amp.autocast(...)` (with, or as a decorator)
    act as they do on a GPU. Without one, torch disables them ("CUDA is not available ...
    Disabling autocast") and a step that casts by its own `with torch.autocast("cuda",
    dtype=torch.bfloat16)` was captured in fp32. Enabled, the region is cuda_autocast() with
    the user's dtype (CUDA's default, float16, when none is given); disabled
    (`enabled=False`, an fp32 island), both CUDA's and the capture device's autocast are off.
    Autocast on the capture's device is the same region: code that picks its device by
    torch.cuda.is_available() (accelerate's Accelerator(mixed_precision="bf16") wraps the forward
    in torch.autocast("cpu") here, "cuda" on a GPU) autocasts as on the GPU, and the capture
    knows it (meta capture.autocast said "none" for such a step). Other device types keep
    torch's own behaviour."""
    cls = torch.amp.autocast_mode.autocast
    init, enter, leave = cls.__init__, cls.__enter__, cls.__exit__

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if device_type not in ("cuda", capture_device) or torch.cuda.is_available():
            return init(self, device_type, dtype, enabled, cache_enabled)
        self.device = device_type
        self.fast_dtype = torch.get_autocast_dtype(device_type) if dtype is None else dtype
        self._enabled = bool(enabled)
        self._cache_enabled = torch.is_autocast_cache_enabled() if cache_enabled is None else cache_enabled
        self._mhc_regions = []

    def __enter__(self):
        regions = getattr(self, "_mhc_regions", None)
        if regions is None:
            return enter(self)
        region = cuda_autocast(self.fast_dtype, capture_device) if self._enabled else _autocast_off(capture_device)
        region.__enter__()
        regions.append(region)
        return self

    def __exit__(self, *exc):
        regions = getattr(self, "_mhc_regions", None)
        if regions is None:
            return leave(self, *exc)
        return regions.pop().__exit__(*exc)

    cls.__init__, cls.__enter__, cls.__exit__ = __init__, __enter__, __exit__
    try:
        yield
    finally:
        cls.__init__, cls.__enter__, cls.__exit__ = init, enter, leave
