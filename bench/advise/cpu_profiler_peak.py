#!/usr/bin/env python3
"""A model file's training step on real CPU tensors against its capture: PyTorch's own count of
the step's memory beside the capture's.

    PYTHONPATH=python .venv/bin/python bench/advise/cpu_profiler_peak.py bench/advise/new_user/M.py [small|full]

The model file is a bench/advise/new_user file (build_model(small), make_batch(small), loss_fn,
build_optimizer optional). One step (forward, backward, optimizer step, zero_grad) runs on real CPU
tensors in fp32 under torch.profiler (profile_memory, record_shapes, with_stack); the peak of live
tensor bytes comes from the profiler's memory timeline (torch.profiler._memory_profiler: every
tensor's creation and destruction). The same step is then captured in fp32 (mhc_torch.capture) and
its device peak computed from the trace's allocations, with and without the buffers only a GPU
makes (cuBLAS workspaces, reduction staging, index_put's sort buffers, flash attention's backward
accumulators). An optimizer left to pick its implementation (foreach=None) is given foreach=True
on the CPU, the implementation torch picks for CUDA tensors and the capture follows. Where the
GPU's kernels differ from the CPU's (oneDNN's convolution temporaries, the CPU's attention), the
two differ by them.
"""
from __future__ import annotations

import importlib.util
import os
import sqlite3
import sys
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile

import mhc_torch

GPU_ONLY = ("cuBLAS", "reduction staging", "reduction semaphores", "index_put sort", "attention backward", "cuFFT")


def load(path):
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location("model_file", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def optimizer_of(m, model):
    if hasattr(m, "build_optimizer"):
        opt = m.build_optimizer(model)
    else:
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4, foreach=True)
    for g in opt.param_groups:
        if g.get("foreach", False) is None:
            g["foreach"] = True
    return opt


def cpu_peak(m, small: bool) -> int:
    torch.manual_seed(0)
    model, batch = m.build_model(small=small), m.make_batch(small=small)
    opt = optimizer_of(m, model)
    loss_fn = getattr(m, "loss_fn", None)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        loss = loss_fn(model, batch) if loss_fn else model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss
    live: dict = {}
    now = peak = 0
    for _, action, (key, _version), nbytes in prof._memory_profile().timeline:
        name = str(action)
        if ("CREATE" in name or "PREEXISTING" in name) and key not in live:
            live[key] = nbytes
            now += nbytes
        elif "DESTROY" in name:
            now -= live.pop(key, 0)
        peak = max(peak, now)
    return peak


def trace_peak(rows) -> int:
    events = []
    for t_alloc, t_free, nbytes in rows:
        events.append((t_alloc, 1, nbytes))
        if t_free is not None:
            events.append((t_free, 0, -nbytes))
    events.sort()
    now = peak = 0
    for _, _, nbytes in events:
        now += nbytes
        peak = max(peak, now)
    return peak


def main() -> int:
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3 and sys.argv[2] not in ("small", "full")):
        sys.stderr.write("usage: cpu_profiler_peak.py MODEL.py [small|full]\n")
        return 2
    m = load(sys.argv[1])
    small = len(sys.argv) < 3 or sys.argv[2] == "small"
    print(f"CPU step, torch's memory profiler: peak {cpu_peak(m, small):,} B")
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "step.db")
        mhc_torch.capture(lambda: m.build_model(small=small), lambda: m.make_batch(small=small), steps=1, path=db,
                          autocast_dtype=None, loss_fn=getattr(m, "loss_fn", None),
                          build_optimizer=getattr(m, "build_optimizer", None))
        with sqlite3.connect(db) as c:
            rows = c.execute("SELECT a.t_alloc, a.t_free, a.bytes, s.text FROM allocations a "
                             "JOIN strings s ON s.id = a.label WHERE a.device = 0").fetchall()
    own = [r[:3] for r in rows if not any(g in r[3] for g in GPU_ONLY)]
    print(f"capture: peak {trace_peak([r[:3] for r in rows]):,} B; without the GPU's own buffers "
          f"({', '.join(GPU_ONLY)}) {trace_peak(own):,} B")
    return 0


if __name__ == "__main__":
    sys.exit(main())
