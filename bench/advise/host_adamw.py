#!/usr/bin/env python3
"""Measures the two figures `mhc advise` assumes for an optimizer step on the host
(docs/advise.md, "The host step"): the bandwidth the step streams at and its fixed cost per
parameter tensor, with torch's CPU AdamW on this machine.

    python3 bench/advise/host_adamw.py [--threads N] [--foreach | --no-foreach]

Prints each measurement and the two options to pass: --host-bandwidth and --host-tensor-cost.
CPU time is not the figure here (threads run in parallel): wall time of the best of the repeats.
"""
import argparse
import sys
import time

import torch


def step_seconds(tensors, numel, foreach, repeats):
    params = [torch.nn.Parameter(torch.zeros(numel)) for _ in range(tensors)]
    for p in params:
        p.grad = torch.ones(numel)
    opt = torch.optim.AdamW(params, lr=1e-3, foreach=foreach)
    opt.step()   # the state (exp_avg, exp_avg_sq) is made on the first step
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        opt.step()
        best = min(best, time.perf_counter() - t)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch CPU threads")
    ap.add_argument("--foreach", action=argparse.BooleanOptionalAction, default=True,
                    help="AdamW(foreach=...): the multi-tensor path (default) or one tensor at a time")
    ap.add_argument("--numel", type=int, default=1 << 24, help="elements of the large tensor (bandwidth)")
    a = ap.parse_args()
    if a.threads < 1 or a.numel < 1 << 16:
        sys.exit("host_adamw: --threads must be >= 1 and --numel >= 65536")
    torch.set_num_threads(a.threads)
    # Per tensor: many tiny tensors, whose bytes cost nothing; the slope between 100 and 1000.
    small = {n: step_seconds(n, 16, a.foreach, 20) for n in (100, 1000)}
    per_tensor = (small[1000] - small[100]) / 900
    # Bandwidth: one large tensor; bytes as mhc advise counts them (the gradient once, the
    # parameter and the two moments read and written: 7 fp32 arrays).
    big = step_seconds(1, a.numel, a.foreach, 5)
    moved = 7 * 4 * a.numel
    rate = moved / max(big - per_tensor, 1e-9)
    print(f"torch {torch.__version__}, {a.threads} threads, AdamW(foreach={a.foreach})")
    for n, s in small.items():
        print(f"  {n:5d} tensors of 16 floats: {s * 1e3:8.3f} ms a step")
    print(f"  1 tensor of {a.numel} floats: {big * 1e3:8.3f} ms a step ({moved / 1e6:.0f} MB streamed)")
    print(f"per tensor {per_tensor * 1e6:.1f} us, bandwidth {rate / 1e9:.2f} GB/s")
    print(f"mhc advise ... --host-bandwidth {rate / 1e9:.1f}GB/s --host-tensor-cost {per_tensor * 1e6:.1f}us")


if __name__ == "__main__":
    main()
