"""The FLOPs of an op, by torch's flop counter and the formulas it lacks or gets wrong for the
kernels a capture records (the roofline's compute term)."""
from __future__ import annotations

import logging

import torch

from . import cudnn_rnn, linalg_flops, torchvision_ops


# flop_counter warns that triton kernels cannot be counted; capture runs none.
logging.getLogger("torch.utils.flop_counter").setLevel(logging.ERROR)


_flop_registry: dict | None = None
# Ops that fake tensors on the CPU dispatch to in place of the kernel a GPU runs, counted by the
# GPU kernel's formula when torch has none for them: torch 2.11's flop counter has no entry for
# the CPU flash attention, so every attention of a capture counted 0 FLOPs there (GPT-2 small:
# 6.07 TFLOP a step against 7.15 with torch 2.15). Each formula reads the same leading arguments
# (query, key, value; the backward's grad_out first), so the GPU op's formula fits.
_FLOPS_AS = {
    "_scaled_dot_product_flash_attention_for_cpu": torch.ops.aten._scaled_dot_product_flash_attention,
    "_scaled_dot_product_flash_attention_for_cpu_backward": torch.ops.aten._scaled_dot_product_flash_attention_backward,
}


def _grouped_mm_flops(out, mat_a, mat_b, *args, **kwargs) -> int:
    """aten._grouped_mm (mixture-of-experts layers: transformers' default "grouped_mm" experts),
    which torch's flop counter does not count: each row of a ragged operand belongs to one group,
    so the FLOPs are one matmul's over all rows whatever the offsets say. 2-D x 2-D, ragged along
    the contraction (the weights' gradient: (M, S) by (S, N) into (G, M, N)): 2 x M x S x N;
    otherwise (2-D x 3-D, the forward and the input's gradient: (S, K) by (G, K, N) into (S, N);
    3-D x 2-D; 3-D x 3-D, G matmuls): 2 x out.numel() x K."""
    if mat_a.dim() == 2 and mat_b.dim() == 2:
        return 2 * mat_a.shape[0] * mat_a.shape[1] * mat_b.shape[1]
    return 2 * out.numel() * mat_a.shape[-1]


def _conv_backward_flops(args, out, counted: int) -> int:
    """torch's formula for aten.convolution_backward (torch/utils/flop_counter.py,
    conv_backward_flop, torch 2.15) counts the weights' gradient as conv(input, grad_out) and leaves
    out `groups` (its argument `_groups` is unused): a grouped convolution's weight gradient was
    counted `groups` times over. A depthwise convolution (groups = channels: EfficientNet's,
    MobileNet's, ConvNeXt's 7 x 7) of C channels counted C times its FLOPs: EfficientNet-B0's
    backward came to 3.02 TFLOP against a forward of 74 GFLOP. Each group's weights see only its
    own C_in / groups inputs, so that term is divided by `groups`; the input's gradient (a
    transposed convolution with the grouped weight) is counted right."""
    if len(args) < 11 or not isinstance(args[9], int) or args[9] <= 1 or not args[10][1] or out[1] is None:
        return counted
    from torch.utils.flop_counter import conv_flop_count

    def t(shape):
        return [shape[1], shape[0]] + list(shape[2:])

    grad_out, x, transposed, groups = args[0].shape, args[1].shape, args[7], args[9]
    gw = t(out[1].shape)
    term = conv_flop_count(t(grad_out), t(x), gw) if transposed else conv_flop_count(t(x), t(grad_out), gw)
    return counted - term + term // groups


# Matmuls that take a sparse COO operand (torch.sparse.mm's forward, _sparse_addmm, and its
# backward's mm of the transposed sparse matrix with the gradient): (mat1, mat2) at these positions.
_MATMUL_OPERANDS = {"mm": (0, 1), "_sparse_mm": (0, 1), "addmm": (1, 2), "_sparse_addmm": (1, 2)}


def _sparse_matmul_flops(func, args, out) -> int | None:
    """2 x nnz x the dense operand's other dimension for a matmul with a sparse COO operand, where
    torch's flop counter counts the dense product: a graph's normalised adjacency (100,000 nodes,
    1.1 million nonzeros) times 256 features counted 5.12 TFLOP a backward mm instead of 0.56
    GFLOP, and its forward (_sparse_addmm, not in the counter) 0. None for any other op."""
    where = _MATMUL_OPERANDS.get(func._overloadpacket.__name__)
    if where is None or len(args) <= where[1] or not isinstance(out, torch.Tensor):
        return None
    a, b = args[where[0]], args[where[1]]
    sparse = [(i, m) for i, m in enumerate((a, b)) if isinstance(m, torch.Tensor) and m.layout == torch.sparse_coo]
    if not sparse or out.dim() != 2:
        return None
    i, m = sparse[0]
    other = out.shape[1] if i == 0 else out.shape[0]   # sparse @ dense: N columns; dense @ sparse: M rows
    return 2 * m._nnz() * other


def _flops_of(func, args, kwargs, out) -> int:
    global _flop_registry
    sparse = _sparse_matmul_flops(func, args, out)
    if sparse is not None:
        return sparse
    deform = torchvision_ops.flops(func, args)
    if deform is not None:
        return deform
    if _flop_registry is None:
        from torch.utils.flop_counter import flop_registry  # warns once when triton is absent: harmless

        _flop_registry = flop_registry
    f = _flop_registry.get(func._overloadpacket)
    if f is None:
        f = _flop_registry.get(_FLOPS_AS.get(func._overloadpacket.__name__))
    if f is None and func._overloadpacket.__name__ == "_grouped_mm":
        return _grouped_mm_flops(out, *args)
    if f is None and func._overloadpacket.__name__.startswith("_cudnn_rnn"):
        return cudnn_rnn.flops(func, args, kwargs) or 0
    if f is None:
        return linalg_flops.flops(func, args, kwargs) or 0
    try:
        counted = int(f(*args, **kwargs, out_val=out))
    except Exception:  # a formula that does not accept this overload's arguments: count none
        return 0
    if func._overloadpacket is torch.ops.aten.convolution_backward:
        return _conv_backward_flops(args, out, counted)
    return counted
