#!/usr/bin/env python3
"""The same Sinkhorn math as straightforward PyTorch operations on the GPU, for comparison
with mhc's CUDA kernel (bench_sinkhorn_cuda). bf16 in/out, fp32 arithmetic, n x n per token.

    python3 sinkhorn_torch.py [--tokens 16777216] [--n 4] [--iters 20] [--compile]
"""
import argparse
import statistics

import torch


def sinkhorn(h, iters, eps):
    m = torch.exp(h.float() - h.float().amax(-1, keepdim=True))
    for _ in range(iters):
        m = m / (m.sum(-1, keepdim=True) + eps)
        m = m / (m.sum(-2, keepdim=True) + eps)
    return m.to(torch.bfloat16)


def timed(fn, reps):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop) * 1e-3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=16 << 20)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--eps", type=float, default=1e-6)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--compile", action="store_true", help="also time torch.compile of the same function")
    a = ap.parse_args()
    torch.manual_seed(1)
    h = torch.randn(a.tokens, a.n, a.n, device="cuda", dtype=torch.bfloat16)
    g = torch.randn_like(h)
    io_fwd = 4 * a.n * a.n * a.tokens  # bf16 in + out
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}: T={a.tokens}, n={a.n}, {a.iters} iterations")
    variants = [("eager", sinkhorn)]
    if a.compile:
        variants.append(("torch.compile", torch.compile(sinkhorn)))
    for name, fn in variants:
        t = timed(lambda: fn(h, a.iters, a.eps), a.reps)
        print(f"{name:14s} forward  {t * 1e3:9.3f} ms  {io_fwd / t / 1e9:8.1f} GB/s of bf16 in/out")
        hr = h.detach().requires_grad_(True)

        def fwd_bwd():
            hr.grad = None
            fn(hr, a.iters, a.eps).backward(g)

        t2 = timed(fwd_bwd, a.reps)
        print(f"{name:14s} fwd+bwd  {t2 * 1e3:9.3f} ms")


if __name__ == "__main__":
    main()
