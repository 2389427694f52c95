"""Roofline figures of target GPUs: dense peak FLOP/s per dtype, HBM bandwidth, memory.

Figures are the vendors' public datasheet numbers, dense (no 2:4 sparsity):
- A100: NVIDIA A100 Tensor Core GPU datasheet (2021): BF16/FP16 tensor 312 TFLOP/s, TF32 156,
  FP32 19.5; 80 GB HBM2e at 2,039 GB/s (SXM), 40 GB HBM2 at 1,555 GB/s.
- H100 SXM / PCIe: NVIDIA H100 Tensor Core GPU datasheet (2023): SXM BF16 989.4 TFLOP/s (1,979
  with sparsity), TF32 494.7, FP32 66.9, 80 GB HBM3 at 3.35 TB/s; PCIe BF16 756, TF32 378,
  FP32 51.2, 80 GB HBM2e at 2.0 TB/s.
- H200: NVIDIA H200 Tensor Core GPU datasheet (2024): same compute as H100 SXM, 141 GB HBM3e at
  4.8 TB/s.
- L40S: NVIDIA L40S datasheet (2023): BF16 362.05 TFLOP/s, TF32 183, FP32 91.6, 48 GB GDDR6 at
  864 GB/s.

The host link is the GPU's PCIe generation, one direction, pinned memory, as measured (the
toolkit's link presets, docs/simulator.md): PCIe 4 (A100, L40S) 25 GB/s, PCIe 5 (H100, H200)
55 GB/s. A capture times the copies of host-memory settings with it.

Streaming multiprocessors: A100 108 (NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020),
H100 SXM5 132 and H100 PCIe 114 (NVIDIA H100 Tensor Core GPU Architecture whitepaper, 2022), H200
132 (the H100 SXM's GH100 configuration), L40S 142 (NVIDIA L40S datasheet, 2023). Resident threads
per SM by compute capability (CUDA C++ Programming Guide, "Technical Specifications per Compute
Capability"): 2048 on 8.0 and 9.0, 1536 on 8.9.

The launch overhead is the gap a back-to-back kernel costs on one stream (a few microseconds on
these GPUs with a busy CPU; the same 2 us for all, an assumption, not a datasheet figure).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSpec:
    name: str
    device_name: str
    memory_bytes: int
    bf16_flops: float  # tensor-core peak for bf16/fp16 inputs
    tf32_flops: float
    fp32_flops: float  # non-tensor-core fp32 (the default for fp32 matmuls in PyTorch)
    hbm_bw: float  # bytes/s
    host_link_bw: float = 25e9  # bytes/s, one direction, pinned host memory
    launch_overhead_s: float = 2e-6
    # What the GPU's own buffers depend on (workspaces.py); None: not modelled for this GPU.
    compute_capability: tuple[int, int] | None = None
    sm_count: int | None = None
    max_threads_per_sm: int | None = None

    def peak_flops(self, dtype) -> float:
        """Peak FLOP/s for a matmul-like op whose inputs have this torch dtype."""
        import torch

        if dtype in (torch.bfloat16, torch.float16):
            return self.bf16_flops
        if dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32:
            return self.tf32_flops
        return self.fp32_flops


GPUS: dict[str, GpuSpec] = {
    "a100-40g": GpuSpec("a100-40g", "NVIDIA A100-SXM4-40GB", 40 << 30, 312e12, 156e12, 19.5e12, 1.555e12,
                        compute_capability=(8, 0), sm_count=108, max_threads_per_sm=2048),
    "a100-80g": GpuSpec("a100-80g", "NVIDIA A100-SXM4-80GB", 80 << 30, 312e12, 156e12, 19.5e12, 2.039e12,
                        compute_capability=(8, 0), sm_count=108, max_threads_per_sm=2048),
    "h100-pcie": GpuSpec("h100-pcie", "NVIDIA H100 PCIe", 80 << 30, 756e12, 378e12, 51.2e12, 2.0e12, 55e9,
                         compute_capability=(9, 0), sm_count=114, max_threads_per_sm=2048),
    "h100-sxm": GpuSpec("h100-sxm", "NVIDIA H100 80GB HBM3", 80 << 30, 989.4e12, 494.7e12, 66.9e12, 3.35e12, 55e9,
                        compute_capability=(9, 0), sm_count=132, max_threads_per_sm=2048),
    "h200": GpuSpec("h200", "NVIDIA H200", 141_000_000_000, 989.4e12, 494.7e12, 66.9e12, 4.8e12, 55e9,
                    compute_capability=(9, 0), sm_count=132, max_threads_per_sm=2048),
    "l40s": GpuSpec("l40s", "NVIDIA L40S", 48 << 30, 362.05e12, 183e12, 91.6e12, 0.864e12,
                    compute_capability=(8, 9), sm_count=142, max_threads_per_sm=1536),
}


def gpu(name: str) -> GpuSpec:
    try:
        return GPUS[name]
    except KeyError:
        raise ValueError(f"unknown GPU '{name}'; valid: {', '.join(GPUS)}") from None
