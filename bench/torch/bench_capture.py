#!/usr/bin/env python3
"""Benchmark: capture one training step of a named model on fake tensors (default: Llama-2-7B,
batch 1, seq 4096, H100 roofline) and print wall time, CPU time and peak RSS of this process.

    .venv/bin/python bench/torch/bench_capture.py [--model llama2-7b] [--batch 1] [--seq 4096]

Targets (docs/results.md, "Capture of PyTorch models on fake tensors"): <= 60 s wall and <= 2 GiB peak RSS for Llama-2-7B, batch 1, seq 4096.
The trace goes to a temporary folder and is removed. Import time (torch, transformers) is
reported apart from the capture itself.
"""
import argparse
import os
import resource
import sys
import tempfile
import time


def cpu():
    t = os.times()
    return t.user + t.system


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="llama2-7b")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--layers", type=int, default=None)
    p.add_argument("--gpu", default="h100-sxm")
    a = p.parse_args()
    w0, c0 = time.perf_counter(), cpu()
    import torch
    import transformers  # noqa: F401

    import mhc_torch
    from mhc_torch.models import preset

    w1, c1 = time.perf_counter(), cpu()
    build, make_batch, loss_fn, _ = preset(a.model, batch=a.batch, seq=a.seq, layers=a.layers)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "capture.db")
        r = mhc_torch.capture(build, make_batch, steps=a.steps, gpu=a.gpu, path=path, loss_fn=loss_fn)
        w2, c2 = time.perf_counter(), cpu()
        size = os.path.getsize(path)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    load = os.getloadavg()[0]
    print(f"model {a.model} batch {a.batch} seq {a.seq} steps {a.steps} gpu {a.gpu} (torch {torch.__version__})")
    print(f"trace: {r.kernels} kernels, {r.allocations} allocations, {size / 1e6:.1f} MB; "
          f"peak {r.peak_bytes / 2**30:.2f} GiB; est. step {r.step_time_ns[0] / 1e6:.1f} ms")
    print(f"import   wall {w1 - w0:6.2f} s  cpu {c1 - c0:6.2f} s")
    print(f"capture  wall {w2 - w1:6.2f} s  cpu {c2 - c1:6.2f} s  (build, {a.steps} step(s), write)")
    print(f"total    wall {w2 - w0:6.2f} s  cpu {c2 - c0:6.2f} s")
    print(f"peak RSS {rss / 2**30:.2f} GiB   load average {load:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
