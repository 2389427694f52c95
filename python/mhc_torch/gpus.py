"""Roofline figures of target GPUs: dense peak FLOP/s per dtype, HBM bandwidth, memory.

The figures and their sources are the toolkit's one GPU table, datasets/gpus.tsv (shipped in this
package as gpus.tsv), which `mhc generate` reads too; each of its rows is a GpuSpec here.

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


def _read_table() -> dict[str, GpuSpec]:
    """The rows of gpus.tsv by name; the generator's columns (generate, nvlink_bw, net_bw) are not
    the capture's."""
    from importlib import resources

    text = resources.files(__package__).joinpath("gpus.tsv").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    header = lines[0].split("\t")
    table = {}
    for line in lines[1:]:
        row = dict(zip(header, line.split("\t")))
        major, minor = row["compute_capability"].split(".")
        table[row["name"]] = GpuSpec(
            row["name"], row["device_name"], int(row["memory_bytes"]), float(row["bf16_flops"]),
            float(row["tf32_flops"]), float(row["fp32_flops"]), float(row["hbm_bw"]),
            host_link_bw=float(row["host_link_bw"]), compute_capability=(int(major), int(minor)),
            sm_count=int(row["sm_count"]), max_threads_per_sm=int(row["max_threads_per_sm"]))
    return table


GPUS: dict[str, GpuSpec] = _read_table()


def gpu(name: str) -> GpuSpec:
    try:
        return GPUS[name]
    except KeyError:
        raise ValueError(f"unknown GPU '{name}'; valid: {', '.join(GPUS)}") from None
