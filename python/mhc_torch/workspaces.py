"""Memory a GPU allocates that fake tensors cannot see, modelled (docs/torch.md, "What fake
tensors cannot see").

Fake tensors run each op's meta function: the op's outputs are exact, but the buffers a CUDA
kernel takes from the caching allocator for itself are not there. Three kinds are modelled, each
with the rule of PyTorch's CUDA code (read, not copied; the figures were checked on the real
snapshot tests/data/public/torch-snapshot/stanford-cs336-training-step.pickle):

- cuBLAS workspaces (aten/src/ATen/cuda/CublasHandlePool.cpp): one per thread that runs cuBLAS
  (the workspaces are kept per thread and stream: the main thread, and the autograd engine's
  device thread, which runs the backward), taken at its first matmul and never given back. Size:
  CUBLAS_WORKSPACE_CONFIG's `:SIZE_KIB:COUNT` pairs summed, else 32 MiB on compute capability
  9.x, 10.x and 12.x (Hopper, Blackwell) and 4096 KiB x 2 + 16 KiB x 8 = 8,519,680 B on older
  GPUs. The real snapshot holds two blocks of 8,519,680 B.
- cuBLASLt workspaces (the same file, getCUDABlasLtWorkspace): one per thread that runs a
  cuBLASLt GEMM, taken at its first and never given back, CUBLASLT_WORKSPACE_SIZE KiB (default
  1,024 KiB = 1,048,576 B). `addmm` and `_addmm_activation` with a 1-D bias, beta 1 and a
  floating type take cuBLASLt (the bias fused into the GEMM; aten/src/ATen/native/cuda/Blas.cpp's
  useLtInterface), other matmuls plain cuBLAS. The H200 snapshot of GPT-2 small
  (datasets/recorded/) holds one block of 1,048,576 B, taken at the first addmm right after the
  main thread's cuBLAS workspace; the backward (mm only) takes none.
- Reduction staging (aten/src/ATen/native/cuda/Reduce.cuh: setReduceConfig, ReduceConfig's
  global_memory_size and semaphore_size; gpu_reduce_kernel allocates both): a reduction that
  splits each output's inputs across thread blocks keeps partial results in a global buffer of
  accumulator size x outputs x blocks per output (x block width x output vector size when the
  block does not reduce along x), plus one int per block column as semaphores, for the length of
  the kernel. The rule below follows setReduceConfig with TensorIterator's ordering of a
  reduction (reduced dimensions first, each group by stride, contiguous neighbours merged) and the
  GPU's SM count and threads per SM. The real snapshot: the RMSNorm weight gradient, 8,192 x 768
  summed to 768, takes 50,331,648 B + 24 B, 25 times a step; so does the model here.
- Sort temporaries of `index_put_(..., accumulate=True)` (aten/src/ATen/native/cuda/Indexing.cu:
  index_put_with_sort_kernel; the backward of advanced indexing `w[ids]`): the linear index, the
  sorted keys, the original positions and their range, int64 each, and cub's radix sort buffers
  (alternate keys and values) for the kernel's length. The real snapshot: 4 x 65,536 B and
  138,751 B for 8,192 indices; the model has 4 x 65,536 B and 131,072 B (cub's own few KiB of
  bins and tile state are not modelled).

- Attention backward's accumulators (aten/src/ATen/native/transformers/cuda/flash_attn/
  flash_api.cpp: mha_bwd, which `_flash_attention_backward` runs for fp16 and bf16): dq_accum,
  batch x seq_q rounded up to 128 x heads x head dim rounded up to 32 (64 above 128) in fp32, and
  softmax_d, batch x heads x seq_q rounded in fp32, which `_flash_attention_backward` drops on
  return; with fewer key/value heads than query heads (GQA), dk and dv expanded to the query's
  heads in the input's dtype. The H200 snapshot of GPT-2 small (batch 8 x 1024, 12 heads of 64)
  takes one buffer of 25,559,296 B in each layer's attention backward, the rule's 25,559,040 B +
  256 (one workspace: the kernel the GPU chose is another with the same accumulators). fp32
  attention runs the memory-efficient kernel on a GPU, whose workspace is not modelled.
- The input copy of a complex-to-real FFT (aten/src/ATen/native/cuda/SpectralOps.cpp:
  _fft_c2r_cufft): cuFFT's C2R transform may overwrite its input, so PyTorch clones the input
  (contiguous) for the kernel's length, or for more than one dimension outside cuFFT's optimized
  path takes the C2C transform of all but the last into a tensor of the same size
  (torch.fft.irfft, irfft2, istft's inverse transform). The CPU's kernel makes none.
- torchvision's deformable convolution: its columns, output buffers and the backward's copy of the
  incoming gradient (torchvision_ops.py).
- The matrix exponential's temporaries (aten/src/ATen/native/LinearAlgebra.cpp: mexp_impl, one
  ATen implementation for every device, built of matmuls): a batch of matrices always takes the
  degree-18 Taylor polynomial with scaling and squaring, 10 matrices of temporaries beside its
  output; a single matrix picks its degree by its 1-norm (a value fake tensors do not hold) and
  takes 5, 6, 8 or, above a norm of about 1.1 in fp32, 12 (the degree-18 path, a NaN-filled result
  and its selected input): the most is modelled. Measured with torch's memory profiler on the host
  (2026-12-07, torch 2.15): 64 x 64 fp32 with 1-norm 1,000, 12 x 16,384 B + 24 B beside the
  output; a batch of 3, 10 x 49,152 B + 36 B; its backward runs it on the 2n x 2n block matrix.
  The orthogonal parametrization (torch.nn.utils.parametrizations) runs it at every use.
- A sparse + sparse add's scaled source (aten/src/ATen/native/sparse/cuda/SparseCUDATensorMath.cu:
  add_out_sparse_cuda): with alpha other than 1 (SGD's Nesterov step `grad.add(buf,
  alpha=momentum)` on a sparse gradient) the source's values are multiplied into a new tensor,
  `s_values_.mul(value)`, before both operands' indices and values are concatenated into the
  result's, and it lives to the kernel's return: taken before the result's parts (sparse_add_ahead).
  The CPU's kernel scales as it merges, into the result: none on the host.

Not modelled (stated in docs/torch.md): cuFFT's plan workspaces, cuDNN's convolution workspaces,
embedding_dense_backward's segment buffers (their size depends on how many indices are
distinct), cub temporaries of other sorts (torch.sort, unique), NCCL buffers, and the CUDA
context itself (not allocator memory).
"""
from __future__ import annotations

import math
import os
import re

import torch

from . import ctc_loss, cudnn_rnn, store, torchvision_ops

# ops that run a cuBLAS (or cuBLASLt) GEMM/GEMV on the thread that calls them
CUBLAS_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::addmv", "aten::mv",
              "aten::dot", "aten::vdot", "aten::_addmm_activation", "aten::_scaled_mm", "aten::_int_mm"}

# gpu_reduce_kernel reductions: op -> accumulator ("acc": float for floating inputs below 8
# bytes, else 8; "self": the input's own type; "pair": a value and an int64 index)
REDUCTIONS = {"aten::sum": "acc", "aten::nansum": "acc", "aten::mean": "acc", "aten::prod": "acc",
              "aten::linalg_vector_norm": "acc", "aten::norm": "acc", "aten::amax": "self", "aten::amin": "self",
              "aten::max": "self", "aten::min": "self", "aten::argmax": "pair", "aten::argmin": "pair"}

_MAX_NUM_THREADS = 512  # ReduceConfig's, for every type but complex<double>
_WARP = 32
_VT0 = 4  # values per thread and input vector size of gpu_reduce_kernel's defaults


def cublas_workspace_bytes(compute_capability: tuple[int, int] | None, env=None) -> int:
    """What one cuBLAS workspace takes (see the module's docstring)."""
    env = os.environ if env is None else env
    config = env.get("CUBLAS_WORKSPACE_CONFIG")
    if config:
        pairs = re.findall(r":([0-9]+):([0-9]+)", config)
        if pairs:
            return sum(int(size) * 1024 * int(count) for size, count in pairs)
    major = compute_capability[0] if compute_capability else 0
    return 4096 * 8 * 1024 if major in (9, 10, 12) else 4096 * 1024 * 2 + 16 * 1024 * 8


def cublaslt_workspace_bytes(env=None) -> int:
    """What one cuBLASLt workspace takes: CUBLASLT_WORKSPACE_SIZE (KiB), else 1 MiB."""
    env = os.environ if env is None else env
    size = env.get("CUBLASLT_WORKSPACE_SIZE", "")
    return int(size) * 1024 if size.isdigit() else 1024 * 1024


# ops whose CUDA kernel is a cuBLASLt GEMM with the bias fused, when uses_cublaslt says so
CUBLASLT_OPS = {"aten::addmm", "aten::_addmm_activation"}


def uses_cublaslt(func, args, kwargs) -> bool:
    """An addmm that CUDA runs with cuBLASLt (Blas.cpp's useLtInterface, the conditions fake
    tensors can see): a contiguous 1-D bias as long as the output's rows, beta 1, a floating type,
    both matrices larger than 1 x 1 in each dimension."""
    if not args or len(args) < 3 or not all(isinstance(a, torch.Tensor) for a in args[:3]):
        return False
    bias, mat1, mat2 = args[:3]
    beta = _arg(func, args, kwargs, "beta", 1)
    return (bias.dim() == 1 and mat1.dim() == 2 and mat2.dim() == 2 and bias.is_contiguous() and
            bias.shape[0] == mat2.shape[1] and beta == 1 and
            mat1.dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64) and
            min(mat1.shape[0], mat1.shape[1], mat2.shape[1]) > 1)


def _reduction_geometry(t: torch.Tensor, reduced: set[int]):
    """TensorIterator's view of a reduction over `reduced` of tensor t: (shape, input strides,
    number of reduced dimensions), reduced dimensions first, each group ordered by stride
    (fastest first), size-1 dimensions dropped, contiguous neighbours merged."""
    dims = [(t.stride(d), t.size(d), d in reduced) for d in range(t.dim()) if t.size(d) != 1]
    groups = []
    for is_reduced in (True, False):
        group = sorted((s, n) for s, n, r in dims if r == is_reduced)
        merged: list[list[int]] = []
        for stride, size in group:
            if merged and merged[-1][0] * merged[-1][1] == stride:
                merged[-1][1] *= size
            else:
                merged.append([stride, size])
        groups.append(merged)
    shape = [n for _, n in groups[0] + groups[1]]
    strides = [s * t.element_size() for s, _ in groups[0] + groups[1]]
    return shape, strides, len(groups[0])


def _output_vec_size(t: torch.Tensor, shape, strides, n_reduce: int) -> int:
    vec = 4
    for n in [t.storage_offset(), shape[n_reduce]] + [s // t.element_size() for i, s in enumerate(strides)
                                                      if i != n_reduce]:
        while n % vec:
            vec //= 2
    return vec


def reduction_staging(t: torch.Tensor, reduced: set[int], acc_bytes: int, sm_count: int,
                      max_threads_per_sm: int) -> tuple[int, int]:
    """(global buffer bytes, semaphore bytes) that a CUDA reduction of t over `reduced` allocates
    for its kernel; (0, 0) when each output is reduced inside one thread block."""
    numel = t.numel()
    if numel == 0:
        return 0, 0
    shape, strides, n_reduce = _reduction_geometry(t, reduced)
    inputs_per_output = math.prod(shape[:n_reduce])
    num_outputs = numel // max(inputs_per_output, 1)
    if not shape:
        fastest, moving, dim0, dim1 = True, t.element_size(), 1, 1
    else:
        fastest = n_reduce == len(shape) or strides[0] < strides[n_reduce]
        dim0, dim1 = (inputs_per_output, num_outputs) if fastest else (num_outputs, inputs_per_output)
        moving = strides[0] if fastest else strides[n_reduce]
    out_vec = 1
    if moving == t.element_size():
        if fastest and dim0 >= 128 and n_reduce == 1:
            dim0 //= _VT0  # vectorised along the input
        elif not fastest:
            out_vec = _output_vec_size(t, shape, strides, n_reduce)
            dim0 //= out_vec
    # block dimensions (ReduceConfig::set_block_dimension)
    max_threads = _MAX_NUM_THREADS // out_vec
    pow2 = lambda n: max(1, 1 << (max(int(n), 1).bit_length() - 1))  # noqa: E731
    dim0_pow2 = pow2(dim0) if dim0 < max_threads else max_threads
    dim1_pow2 = pow2(dim1) if dim1 < max_threads else max_threads
    width = min(dim0_pow2, _WARP)
    height = min(dim1_pow2, max_threads // width)
    width = min(dim0_pow2, max_threads // height)
    threads = width * height
    step_input = step_output = 1
    block_x_reduce = not shape or fastest
    if block_x_reduce:
        step_input *= width
    else:
        step_output *= width
    values_per_thread = -(-inputs_per_output // step_input)
    if values_per_thread >= min(height * 16, 256):
        step_input *= height  # split across warps
        split_warps = True
    else:
        step_output *= height
        split_warps = False
    values_per_thread = -(-inputs_per_output // step_input)
    grid_x = -(-(num_outputs // out_vec) // step_output)
    target_grid = sm_count * (max_threads_per_sm // threads)
    if not (split_warps and values_per_thread >= 256 and grid_x <= target_grid):
        return 0, 0
    ctas = max(min(-(-target_grid // grid_x), -(-values_per_thread // 16)), -(-values_per_thread // 256))
    if ctas <= 1:
        return 0, 0
    size = acc_bytes * num_outputs * ctas
    if not block_x_reduce:
        size *= width * out_vec
    return size, 4 * grid_x


def _arg(func, args, kwargs, name, default=None):
    for i, a in enumerate(func._schema.arguments):
        if a.name == name:
            if a.kwarg_only or i >= len(args):
                return kwargs.get(name, default)
            return args[i]
    return default


def _reduced_dims(func, args, kwargs, t: torch.Tensor) -> set[int] | None:
    names = [a.name for a in func._schema.arguments]
    if "dim" not in names:
        return set(range(t.dim()))
    dim = _arg(func, args, kwargs, "dim")
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return set(range(t.dim()))
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    return {d % max(t.dim(), 1) for d in dims}


def _acc_bytes(kind: str, t: torch.Tensor) -> int:
    if kind == "pair":
        return 16
    if kind == "self":
        return t.element_size()
    if t.is_floating_point():
        return 4 if t.element_size() < 8 else 8
    return 8


class Workspaces:
    """The modelled buffers of one capture: what each kernel takes for its length (transient)
    and what stays once taken (persistent: the cuBLAS workspaces)."""

    def __init__(self, spec):
        self.spec = spec
        self.cublas_bytes = cublas_workspace_bytes(getattr(spec, "compute_capability", None))
        self.cublaslt_bytes = cublaslt_workspace_bytes()
        self.taken: dict[str, int] = {}  # label of a thread's workspace -> its allocation id
        self.sm_count = getattr(spec, "sm_count", None)
        self.max_threads_per_sm = getattr(spec, "max_threads_per_sm", None)

    def meta(self) -> dict[str, str]:
        return {"capture.workspaces":
                "cublas cublaslt reduction-staging index_put-sort attention-backward fft-c2r-copy deform-conv2d",
                "capture.cublas_workspace_bytes": str(self.cublas_bytes),
                "capture.cublaslt_workspace_bytes": str(self.cublaslt_bytes)}

    def persistent(self, name: str, in_backward: bool, func=None, args=(), kwargs=None) -> list[tuple[int, str]]:
        """A cuBLAS workspace when this is the first cuBLAS kernel of its thread, and a cuBLASLt
        one when it is the thread's first cuBLASLt GEMM (func, args and kwargs say)."""
        out = []
        for label in self.used(name, in_backward, func, args, kwargs):
            if label not in self.taken:
                self.taken[label] = 0  # its allocation id, once add_persistent has made it
                out.append((self.cublaslt_bytes if label.startswith("cuBLASLt") else self.cublas_bytes, label))
        return out

    def used(self, name: str, in_backward: bool, func=None, args=(), kwargs=None) -> list[str]:
        """The thread's workspaces that this kernel runs in (their labels): a cuBLAS GEMM its
        thread's cuBLAS workspace, a cuBLASLt GEMM the cuBLASLt one too. Every such kernel
        accesses them, so that a setting that reruns the kernel on another thread (a checkpoint's
        recompute, in the backward) knows it needs that thread's."""
        if name not in CUBLAS_OPS:
            return []
        thread = "autograd thread" if in_backward else "main thread"
        out = [f"cuBLAS workspace ({thread})"]
        if name in CUBLASLT_OPS and func is not None and uses_cublaslt(func, args, kwargs or {}):
            out.append(f"cuBLASLt workspace ({thread})")
        return out

    def transient(self, func, args, kwargs, name: str) -> list[tuple[int, str]]:
        """Buffers the kernel of `func` (whose schema's name is `name`) takes from the caching
        allocator and gives back when it ends."""
        kind = REDUCTIONS.get(name)
        if kind is not None and self.sm_count and args and isinstance(args[0], torch.Tensor):
            t = args[0]
            dims = _reduced_dims(func, args, kwargs, t)
            buf, sem = reduction_staging(t, dims, _acc_bytes(kind, t), self.sm_count, self.max_threads_per_sm)
            return [(buf, f"reduction staging ({name})"), (sem, f"reduction semaphores ({name})")] if buf else []
        if name == ATTENTION_BACKWARD:
            return attention_backward_buffers(func, args, kwargs)
        if name in (cudnn_rnn.FORWARD, cudnn_rnn.BACKWARD):
            return cudnn_rnn.transient_buffers(func, args, kwargs, name)
        if name == ctc_loss.BACKWARD:
            return ctc_loss.transient_buffers(func, args, kwargs, name)
        if name in (torchvision_ops.FORWARD, torchvision_ops.BACKWARD):
            return torchvision_ops.transient_buffers(args, name)
        if name == "aten::linalg_matrix_exp" and args and isinstance(args[0], torch.Tensor):
            return matrix_exp_buffers(args[0])
        if name == "aten::_fft_c2r" and args and isinstance(args[0], torch.Tensor):
            return [(args[0].numel() * args[0].element_size(), "cuFFT C2R input copy")]
        if name in ("aten::index_put", "aten::index_put_", "aten::_index_put_impl_") and \
                _arg(func, args, kwargs, "accumulate", False):
            indices = [i for i in _arg(func, args, kwargs, "indices", []) if isinstance(i, torch.Tensor)]
            if not indices:
                return []
            n = math.prod(torch.broadcast_shapes(*(i.shape for i in indices)))
            label = f"index_put sort ({name})"
            return [(n * 8, label + ": linear index"), (n * 8, label + ": sorted"), (n * 8, label + ": positions"),
                    (n * 8, label + ": range"), (n * 16, label + ": radix sort buffers")]
        return []


_SPARSE_ADDS = {"aten::add", "aten::add_", "aten::_foreach_add_"}


def _sparse_pairs(name: str, args) -> list:
    """The sparse + sparse operand pairs of an add (one) or of a foreach add (each sparse pair)."""
    if len(args) < 2:
        return []
    pairs = list(zip(args[0], args[1])) if name == "aten::_foreach_add_" else [(args[0], args[1])]
    return [(a, b) for a, b in pairs if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
            and a.layout == torch.sparse_coo and b.layout == torch.sparse_coo]


def sparse_add_ahead(name: str, args, kwargs, on_host) -> list[tuple[int, str]]:
    """The scaled source values of a sparse + sparse add on the device with alpha other than 1
    (add_out_sparse_cuda), made before the result's parts. A foreach add runs its sparse pairs one
    add_ after another (each temporary gone before the next is made): the largest is taken, for
    the whole kernel. `on_host(t)` says whether a tensor is host memory (the CPU's kernel: none)."""
    alpha = (kwargs or {}).get("alpha", args[2] if len(args) > 2 and name != "aten::_foreach_add_" else 1)
    if name not in _SPARSE_ADDS or isinstance(alpha, torch.Tensor) or alpha == 1:
        return []
    scaled = [b._values().numel() * torch.promote_types(a.dtype, b.dtype).itemsize
              for a, b in _sparse_pairs(name, args) if not (on_host(a._values()) or on_host(b._values()))]
    return [(max(scaled), f"sparse add: source values x alpha ({name})")] if scaled else []


# The capture's attention backward: the CPU flash kernel, standing for the GPU's flash kernel.
ATTENTION_BACKWARD = "aten::_scaled_dot_product_flash_attention_for_cpu_backward"


def _round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def attention_backward_buffers(func, args, kwargs) -> list[tuple[int, str]]:
    """The accumulators of flash attention's backward on a GPU (mha_bwd), for the CPU flash
    kernel's backward, whose query, key and value are batch x heads x seq x head dim."""
    query = _arg(func, args, kwargs, "query")
    key = _arg(func, args, kwargs, "key")
    if not isinstance(query, torch.Tensor) or not isinstance(key, torch.Tensor) or query.dim() != 4 \
            or query.dtype not in (torch.float16, torch.bfloat16) or query.shape[-1] > 256:
        return []
    b, h, s_q, d = query.shape
    s_q_rounded = _round_up(s_q, 128)
    d_rounded = _round_up(_round_up(d, 8), 32 if d <= 128 else 64)
    label = "attention backward"
    out = [(b * s_q_rounded * h * d_rounded * 4, label + ": dq accumulator"),
           (b * h * s_q_rounded * 4, label + ": softmax_d")]
    if key.dim() == 4 and key.shape[1] != h:
        s_k = key.shape[2]
        expanded = b * s_k * h * _round_up(d, 8) * query.element_size()
        out += [(expanded, label + ": dk expanded"), (expanded, label + ": dv expanded")]
    return out


def matrix_exp_buffers(a: torch.Tensor) -> list[tuple[int, str]]:
    """The temporaries of torch.linalg.matrix_exp's kernel over `a` (n x n matrices, batched or
    one): the powers and products of the degree-18 polynomial and its squaring, 10 matrices of
    a's size, and for a single matrix the NaN-filled result and the selected input besides
    (mexp_impl). A 1 x 1 matrix is exp's, which takes none."""
    if a.dim() < 2 or a.shape[-1] <= 1 or a.numel() == 0:
        return []
    size = a.numel() * a.element_size()
    label = "matrix_exp temporaries"
    out = [(5 * size, label + ": degree-18 powers"), (5 * size, label + ": degree-18 products")]
    if a.numel() == a.shape[-1] * a.shape[-2]:
        out += [(size, label + ": NaN-filled result"), (size, label + ": selected input")]
    return out


def add_transient(rec, buffers, start: int, end: int, accesses: dict[int, int]) -> None:
    """Allocations alive from the kernel's start to its end, accessed by it (read-write)."""
    for nbytes, label in buffers:
        if nbytes > 0:
            _add(rec, nbytes, label, start, end, accesses)


def add_ahead(rec, buffers, start: int) -> list:
    """Allocations a kernel takes at its start before its outputs (sparse_add_ahead), freed at
    its end by end_ahead."""
    return [rec.allocs[_add(rec, nbytes, label, start, None, {}) - 1] for nbytes, label in buffers if nbytes > 0]


def end_ahead(made: list, end: int, accesses: dict[int, int]) -> None:
    """The kernel of add_ahead's allocations ends at `end`: they are freed, and it accessed them."""
    for a in made:
        a.t_free = end
        accesses[a.id] = store.READ_WRITE


def add_persistent(rec, buffers, start: int, accesses: dict[int, int]) -> None:
    """Allocations taken at the kernel's start and never given back (cuBLAS workspaces)."""
    for nbytes, label in buffers:
        rec.workspaces.taken[label] = _add(rec, nbytes, label, start, None, accesses)
        rec.live_bytes += nbytes


def add_uses(rec, labels, accesses: dict[int, int]) -> None:
    """The kernel reads and writes the workspaces of these labels (made already)."""
    for label in labels:
        accesses[rec.workspaces.taken[label]] = store.READ_WRITE


def _add(rec, nbytes: int, label: str, t_alloc: int, t_free: int | None, accesses: dict[int, int]) -> int:
    a = store.Allocation(id=len(rec.allocs) + 1, bytes=nbytes, t_alloc=t_alloc, t_free=t_free,
                         category=store.WORKSPACE, label=label)
    rec.allocs.append(a)
    accesses[a.id] = store.READ_WRITE
    return a.id
