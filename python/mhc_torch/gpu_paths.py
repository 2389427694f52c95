"""The paths a GPU takes, taken by the capture's fake CPU tensors.

A capture runs the model on fake CPU tensors, and aten picks some kernels by device: where a CUDA
tensor takes a fused kernel that keeps less for the backward, the CPU path would make the capture
hold more than the GPU does. While a capture runs, these choices are made as on a GPU.

Dropout and attention are replaced in the dispatcher (kernels for aten::dropout and
aten::scaled_dot_product_attention under the CPU's autograd and backend keys), not in
torch.nn.functional: every way of reaching the op takes them (`F.dropout`, `torch.dropout`,
`nn.Dropout`, a name bound by `from torch.nn.functional import dropout` before the capture), and
so does a checkpoint's recompute in the backward, which a TorchFunctionMode does not see. The
kernels act on fake tensors only; real CPU tensors elsewhere in the process keep CPU's path.
"""
from __future__ import annotations

import contextlib
import functools
import sys
import warnings

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

_aten = torch.ops.aten
_COMPOSITE = torch._C.DispatchKey.CompositeImplicitAutograd
# torch's warning when a kernel replaces one registered for the same operator and key.
_OVERRIDE_WARNING = r"(?s).*Overriding a previously registered kernel"
# Autograd's key, where grad mode tensors arrive, and the backend's, where inference tensors do.
_KEYS = ("AutogradCPU", "CPU")


def _composite(op, *args, **kwargs):
    """The op's own CompositeImplicitAutograd kernel (C++), not torch's Python decomposition of it,
    which for dropout takes native_dropout on every device."""
    return op._op_dk(_COMPOSITE, *args, **kwargs)


def _dropout(input, p, train):
    """at::dropout as on a CUDA tensor: its fused kernel, native_dropout, whose mask is bool (1 byte
    an element) and is what the backward keeps, where a CPU tensor takes the composite path, a
    noise tensor of the input's dtype (empty_like, bernoulli_, div_, mul) kept by the backward
    instead: 2 bytes an element under bf16 autocast, 4 in fp32. GPT-2 small (batch 8 x 1024) keeps
    25 such masks: the capture held 169,869,312 B more than an H200 did at the step's peak
    (datasets/recorded/README.md). The fused kernel is taken where aten's
    is_fused_kernel_acceptable takes it on a GPU (training, 0 < p < 1, not empty); feature and
    alpha dropout and in-place dropout are other ops, composite on a GPU too."""
    if train and 0.0 < p < 1.0 and isinstance(input, FakeTensor) and input.numel() > 0:
        return _aten.native_dropout.default(input, p, True)[0]
    return _composite(_aten.dropout.default, input, p, train)


def _attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """Scaled dot product attention with dropout as a GPU runs it. CPU dispatch sends a call with
    dropout_p > 0 to the math path, which saves the attention probabilities (batch x heads x seq x
    seq), the dropout mask and the dropped probabilities; a GPU's flash and memory-efficient
    kernels apply the dropout inside the kernel and save only the output and the log-sum-exp (and
    the generator's seed and offset). On fake tensors the call runs with dropout 0, which takes the
    CPU flash kernel: the same tensors as the GPU's. Fake tensors compute no values, so the
    probabilities being dropped or not changes nothing else."""
    if isinstance(query, FakeTensor):
        dropout_p = 0.0
    return _composite(_aten.scaled_dot_product_attention.default, query, key, value, attn_mask, dropout_p,
                      is_causal, scale=scale, enable_gqa=enable_gqa)


def _one_hot(self, num_classes=-1):
    """F.one_hot as on a CUDA tensor: an int64 tensor of zeros and one scatter_ into it
    (aten/src/ATen/native/Onehot.cpp). On fake tensors aten takes its functional version instead
    (arange, eq, then .to(long)), whose bool comparison, one byte per output element, is alive
    beside the int64 result: a VQ-VAE's one-hot codes of 131,072 latents x 512 codes held
    67,108,864 B at the step's peak that a GPU never allocates. With num_classes -1 the classes
    come from the values (self.max()), which fake tensors do not have: aten's own path says so."""
    if isinstance(self, FakeTensor) and num_classes >= 0:
        out = torch.zeros((*self.shape, num_classes), dtype=torch.long, device=self.device)
        return out.scatter_(-1, self.unsqueeze(-1), 1)
    return _composite(_aten.one_hot.default, self, num_classes)


def _embedding_bag_meta(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                        per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    """nn.EmbeddingBag's kernel as on a CUDA tensor (`_embedding_bag_cuda`, EmbeddingBag.cu): the
    output, offset2bag (an int64 bag number for every index), bag_size (one per offset) and, for
    mode max only, max_indices (bags x dim; empty otherwise); the backward keeps all but the
    output. torch's meta kernel takes the CPU kernel's tensors for a CPU device, where the sum's
    fast path makes no offset2bag and max_indices is one per bag: a DLRM's tables of 8,192 bags of
    20 ids kept 1,245,184 B less each from the forward to the backward than a GPU does (it grows
    with the ids a step: about 52 MB a table at 65,536 bags of 100)."""
    num_bags = offsets.size(0) - (1 if include_last_offset else 0)
    output = weight.new_empty(num_bags, weight.size(1))
    offset2bag = indices.new_empty(indices.size(0))
    bag_size = indices.new_empty(offsets.size())
    max_indices = indices.new_empty(num_bags, weight.size(1)) if mode == 2 else indices.new_empty(0)
    return output, offset2bag, bag_size, max_indices


# torch.fft's functions that take a real input (a real input of fft_fft is made complex first).
_FFT_OPS = ("fft_fft", "fft_ifft", "fft_fft2", "fft_ifft2", "fft_fftn", "fft_ifftn", "fft_rfft", "fft_rfft2",
            "fft_rfftn", "fft_ihfft", "fft_ihfft2", "fft_ihfftn")


def _fft_bf16(name):
    """A torch.fft function of a bf16 tensor as on a GPU. torch's FFTs check the dtype by device:
    on a CPU they take float32 and float64 only ("Unsupported dtype BFloat16"), on CUDA bf16 too
    (torch/_refs/fft.py `_promote_type_fft`; `_fft_r2c_cufft` runs cuFFT's bf16 transform for
    power-of-two sizes and converts its output to complex64, else it transforms `self.to(Float)`).
    So under bf16 autocast a Fourier neural operator's `torch.fft.rfft2` of a Linear's output ran
    on the GPU and stopped the capture. On a fake bf16 tensor the function runs on its float32
    copy: the complex64 result and its backward are the GPU's; the float32 copy is the fallback's
    transient, where cuFFT's power-of-two path holds a complex-half buffer of the one-sided output
    instead (about half as many bytes, for the duration of the transform)."""
    op = getattr(_aten, name).default

    def kernel(self, *args, **kwargs):
        if isinstance(self, FakeTensor) and self.dtype == torch.bfloat16:
            self = self.float()
        elif isinstance(self, FakeTensor) and self.dtype == torch.float16:
            # cuFFT's fp16 transforms give complex32, which no float32 copy stands for
            raise NotImplementedError(
                f"torch.fft.{name[4:]} of a float16 tensor runs on a GPU (cuFFT, power-of-two sizes) but not on "
                "the capture's CPU tensors; capture with --autocast bf16 or none, or cast to float32 before the FFT")
        return _composite(op, self, *args, **kwargs)
    return kernel


@contextlib.contextmanager
def kernels_as_on_gpu():
    """Registers the GPU's choices of dropout, attention and one-hot kernels, and its dtypes of
    FFTs, for the capture's duration."""
    import torch._meta_registrations as meta

    lib = torch.library.Library("aten", "IMPL")
    bag_meta = getattr(meta, "meta_embedding_bag", None)
    try:
        # Replacing aten's composite kernels is the point; torch says so in an 8-line warning.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_OVERRIDE_WARNING, category=UserWarning)
            for key in _KEYS:
                lib.impl("dropout", _dropout, key)
                lib.impl("scaled_dot_product_attention", _attention, key)
                lib.impl("one_hot", _one_hot, key)
                for name in _FFT_OPS:
                    lib.impl(name, _fft_bf16(name), key)
        # fake tensors run _embedding_bag through torch's fake implementation, which looks the meta
        # kernel up in torch._meta_registrations when it runs; fake tensors' dispatch cache, shared
        # by every FakeTensorMode, must not hand either kernel's tensors to the other
        if bag_meta is not None:
            meta.meta_embedding_bag = _embedding_bag_meta
            FakeTensorMode.cache_clear()
        yield
    finally:
        if bag_meta is not None:
            meta.meta_embedding_bag = bag_meta
            FakeTensorMode.cache_clear()
        lib._destroy()


@contextlib.contextmanager
def transformers_masks_as_on_gpu():
    """transformers' check for packed sequences as it comes out on a GPU. With no attention mask,
    a causal model of transformers (masking_utils.find_packed_sequence_indices) looks at the
    position ids' values to see whether a row packs several sequences; on fake tensors it cannot
    (`is_tracing` counts a fake tensor as tracing) and answers "packed", so the model builds a
    batch x 1 x seq x seq mask and SDPA turns it into an additive one per layer (GPT-2 small at
    8 x 1024: 16,777,216 B more per layer, and CPU attention with a mask), where the GPU, seeing
    position ids that count up in each row (what the model makes when the batch gives none), skips
    the mask and runs SDPA with is_causal. While the capture runs the check still runs its ops, and
    answers "not packed" for fake position ids. A batch that does pack sequences (position ids
    restarting within a row) gets on the GPU the mask that the capture leaves out."""
    masking = sys.modules.get("transformers.masking_utils")
    original = getattr(masking, "find_packed_sequence_indices", None)
    if original is None:
        yield
        return

    @functools.wraps(original)
    def find_packed_sequence_indices(position_ids, *args, **kwargs):
        found = original(position_ids, *args, **kwargs)
        return None if isinstance(position_ids, FakeTensor) else found

    masking.find_packed_sequence_indices = find_packed_sequence_indices
    try:
        yield
    finally:
        masking.find_packed_sequence_indices = original


@contextlib.contextmanager
def foreach_as_on_gpu():
    """The implementation an optimizer or `clip_grad_norm_` picks when the user leaves it to torch
    (`foreach=None`, the default: `torch.optim.AdamW(model.parameters(), lr=...)`), picked as on a
    GPU. On CUDA tensors torch runs the foreach kernels (`_default_to_fused_or_foreach`:
    every parameter a plain tensor on a device with foreach kernels), which make the temporaries of
    whole lists at once (AdamW's `_foreach_sqrt` of all the second moments); on fake CPU tensors
    it would find neither the type nor the device and run the per-parameter loop, which holds one
    parameter's temporaries at a time: the capture of a user's own optimizer was then low by the
    foreach temporaries and ran other kernels than the GPU. While a capture runs, fake tensors
    count as foreach-supported and the CPU as a device with foreach kernels (the capture's own
    optimizer passes foreach=True and is unchanged)."""
    from torch.optim import optimizer as opt_module
    from torch.utils import _foreach_utils

    lists = [lst for lst in {id(x): x for x in (getattr(opt_module, "_foreach_supported_types", None),
                                                 getattr(_foreach_utils, "_foreach_supported_types", None))}.values()
             if isinstance(lst, list) and FakeTensor not in lst]
    devices = getattr(opt_module, "_get_foreach_kernels_supported_devices", None)
    for lst in lists:
        lst.append(FakeTensor)
    if devices is not None:
        opt_module._get_foreach_kernels_supported_devices = lambda: [*devices(), "cpu"]
    try:
        yield
    finally:
        for lst in lists:
            if FakeTensor in lst:
                lst.remove(FakeTensor)
        if devices is not None:
            opt_module._get_foreach_kernels_supported_devices = devices


@contextlib.contextmanager
def grouped_mm_as_on_gpu():
    """aten._grouped_mm on float32 or float16 inputs, as CUDA runs it. torch 2.11's meta kernel
    keeps the fast path's check ("Expected inputs of BF16 type"), while its CUDA kernel runs other
    dtypes through its fallback (a grouped matmul per group, GroupedBlas.cpp `_grouped_mm_fallback`)
    and later torch's meta kernel accepts them: a mixture-of-experts layer with fp32 experts
    stopped the capture under torch 2.11 only. The output is the one the meta kernel makes for
    bf16 (shape from the layouts and offsets; dtype out_dtype, else the inputs')."""
    import torch._meta_registrations as meta

    common = getattr(meta, "_meta_grouped_mm_common", None)
    make = getattr(meta, "_create_grouped_mm_output_tensor", None)
    if common is None or make is None:
        yield
        return

    def lenient(mat_a, mat_b, scale_a=None, scale_b=None, offs=None, bias=None, scale_result=None, out_dtype=None,
                use_fast_accum=False):
        other = (torch.float32, torch.float16)
        if scale_a is None and scale_b is None and bias is None and mat_a.dtype == mat_b.dtype and \
                mat_a.dtype in other and (out_dtype is None or out_dtype == mat_a.dtype):
            torch._check(mat_a.dim() in (2, 3) and mat_b.dim() in (2, 3),
                         lambda: f"Multiplicands must be 2D or 3D but got mat_a.dim()={mat_a.dim()} and "
                                 f"mat_b.dim()={mat_b.dim()}")
            torch._check((offs is not None) == (mat_a.dim() == 2 or mat_b.dim() == 2),
                         lambda: "Offsets tensor needed exactly for 2D multiplicand layouts")
            return make(mat_a, mat_b, offs, out_dtype)
        return common(mat_a, mat_b, scale_a, scale_b, offs, bias, scale_result, out_dtype, use_fast_accum)

    meta._meta_grouped_mm_common = lenient
    try:
        yield
    finally:
        meta._meta_grouped_mm_common = common
