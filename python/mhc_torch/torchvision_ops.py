"""torchvision's deformable convolution and RoI ops as a GPU runs them (read, not copied, from
pytorch/vision: torchvision/csrc/ops/autocast/cuda/*.cpp and ops/cuda/deform_conv2d_kernel.cu).

- CUDA autocast. torchvision registers autocast kernels for `deform_conv2d`, `roi_pool`,
  `ps_roi_align` and `ps_roi_pool` on CUDA only (on the CPU it has `roi_align` and `nms`): each
  casts its floating tensor arguments to fp32 (`cached_cast(kFloat, x)`), runs the op with
  autocast off and casts every output back to the first argument's dtype. A capture runs CPU
  autocast with CUDA's policy, so these ops ran uncast there: a DCNv2 layer under bf16 took a bf16
  input and bf16 offsets, where the GPU saves fp32 copies of them for the backward and runs both
  passes in fp32. While a capture runs with CUDA's policy, those ops get CUDA's rule.
- Buffers of deform_conv2d's CUDA kernels, taken from the caching allocator for the kernel's
  length (workspaces.py): the forward's `columns` (input channels x kernel height x width by
  n_parallel_imgs x output height x width, n_parallel_imgs the largest divisor of the batch up to
  32), its zeroed output and output buffer (each as large as the output; the op returns
  `out + bias`, a third); the backward's `columns` of the same size (one at a time: the inputs'
  gradient frees its own before the weights' gradient takes another) and the weights' gradient's
  contiguous copy of the incoming gradient. A `.contiguous()` copy of each argument that is not
  contiguous (the offsets split from one convolution's output with the mask) in both.
- FLOPs, which torch's counter does not count: the GEMMs over the columns, 2 x output channels x
  input channels / groups x kernel area x batch x output area in the forward, twice that in the
  backward (the columns' gradient and the weights' gradient).
"""
from __future__ import annotations

import contextlib
import warnings

import torch
from torch.utils._pytree import tree_map

FORWARD, BACKWARD = "torchvision::deform_conv2d", "torchvision::_deform_conv2d_backward"
_CUDA_ONLY_AUTOCAST = ("deform_conv2d", "roi_pool", "ps_roi_align", "ps_roi_pool")
_MAX_PARALLEL_IMGS = 32   # kMaxParallelImgs
_OVERRIDE_WARNING = r"(?s).*Overriding a previously registered kernel"


def _registered(key: str) -> set[str]:
    return {n.removeprefix("torchvision::") for n in torch._C._dispatch_get_registrations_for_dispatch_key(key)
            if n.startswith("torchvision::")}


def _as_fp32(value):
    """cached_cast(kFloat, value): fp16 and bf16 tensors to fp32, anything else as it is."""
    if isinstance(value, torch.Tensor) and value.dtype in (torch.float16, torch.bfloat16):
        return value.to(torch.float32)
    return value


def _kernel(op):
    def fp32_then_back(*args, **kwargs):
        keys = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)
        with torch._C._ExcludeDispatchKeyGuard(keys):
            out = op(*tree_map(_as_fp32, args), **tree_map(_as_fp32, kwargs))
        dtype = args[0].dtype
        return tree_map(lambda o: o.to(dtype) if isinstance(o, torch.Tensor) else o, out)
    return fp32_then_back


@contextlib.contextmanager
def autocast_as_on_cuda(cuda_policy: bool):
    """For a capture's duration, with CUDA's autocast policy: the torchvision ops CUDA autocasts
    and CPU autocast does not get CUDA's rule (the module's docstring). Nothing without
    torchvision, or when its CPU autocast has them already."""
    ops = getattr(torch.ops, "torchvision", None)
    if not cuda_policy or ops is None:
        yield
        return
    names = [n for n in _CUDA_ONLY_AUTOCAST
             if n in _registered("AutocastCUDA") and n not in _registered("AutocastCPU") and hasattr(ops, n)]
    lib = torch.library.Library("torchvision", "IMPL")
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_OVERRIDE_WARNING, category=UserWarning)
            for n in names:
                lib.impl(n, _kernel(getattr(ops, n).default), "AutocastCPU")
        yield
    finally:
        lib._destroy()


def _parallel_imgs(batch: int) -> int:
    """get_greatest_divisor_below_bound(batch, kMaxParallelImgs)."""
    for k in range(_MAX_PARALLEL_IMGS, 1, -1):
        if batch % k == 0:
            return k
    return 1


def _bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _copies(tensors) -> list[tuple[int, str]]:
    return [(_bytes(t), f"deform_conv2d contiguous copy ({name})") for name, t in tensors
            if isinstance(t, torch.Tensor) and not t.is_contiguous()]


def transient_buffers(args, name: str) -> list[tuple[int, str]]:
    """The CUDA kernels' own buffers (the module's docstring); args as the op's schema orders them:
    the forward's input, weight, offset, mask and bias first, the backward's the incoming gradient
    and then those."""
    if name == FORWARD and len(args) >= 5:
        x, weight, offset, mask = args[:4]
        grad = None
    elif name == BACKWARD and len(args) >= 6:
        grad, x, weight, offset, mask = args[:5]
    else:
        return []
    if x.dim() != 4 or weight.dim() != 4 or offset.dim() != 4:
        return []
    batch, out_area = x.shape[0], offset.shape[2] * offset.shape[3]
    cols = x.shape[1] * weight.shape[2] * weight.shape[3] * _parallel_imgs(batch) * out_area * x.element_size()
    out = batch * weight.shape[0] * out_area * x.element_size()
    copies = _copies([("input", x), ("weight", weight), ("offset", offset), ("mask", mask), ("grad", grad)])
    if grad is None:
        return [(cols, "deform_conv2d columns"), (out, "deform_conv2d zeroed output"),
                (out, "deform_conv2d output buffer")] + copies
    return [(cols, "deform_conv2d backward columns"), (out, "deform_conv2d backward grad_out copy")] + copies


def flops(func, args) -> int | None:
    """The columns' GEMMs (the module's docstring); None for any other op."""
    name = func._overloadpacket.__name__
    if name not in ("deform_conv2d", "_deform_conv2d_backward") or getattr(func, "namespace", "") != "torchvision":
        return None
    x, weight, offset = (args[0], args[1], args[2]) if name == "deform_conv2d" else (args[1], args[2], args[3])
    if x.dim() != 4 or weight.dim() != 4 or offset.dim() != 4:
        return 0
    gemm = 2 * weight.shape[0] * weight.shape[1] * weight.shape[2] * weight.shape[3] * x.shape[0] \
        * offset.shape[2] * offset.shape[3]
    return gemm if name == "deform_conv2d" else 2 * gemm
