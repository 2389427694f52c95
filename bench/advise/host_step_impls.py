#!/usr/bin/env python3
"""The host optimizer's step on the CPU with each of torch's implementations: foreach (what a
GPU's default picks, each temporary made for all parameters at once), the for-loop (one
parameter's temporaries at a time: what mhc_torch.apply's host optimizer runs for torch.optim's
classes) and fused (a kernel per parameter, no temporaries; Adam, AdamW, SGD, Adagrad on CPU).

    python3 bench/advise/host_step_impls.py [--layers 12] [--width 768] [--repeats 3] [--threads N]

Parameters shaped as GPT-2 small's (124M, 475 MiB fp32 at the defaults), each with a gradient.
Prints per optimizer and implementation the best step's wall and CPU seconds (this process,
all its threads), and whether the weights after 3 steps equal the foreach ones bitwise (else
their largest difference).
"""
import argparse
import time

import torch

IMPLS = {"foreach": {"foreach": True}, "forloop": {"foreach": False}, "fused": {"fused": True}}
OPTIMIZERS = {
    "Adam": lambda ps, **kw: torch.optim.Adam(ps, lr=1e-3, **kw),
    "AdamW": lambda ps, **kw: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.1, **kw),
    "SGD-momentum": lambda ps, **kw: torch.optim.SGD(ps, lr=1e-3, momentum=0.9, **kw),
    "Adagrad": lambda ps, **kw: torch.optim.Adagrad(ps, lr=1e-3, **kw),
}


def shapes(layers, width, vocab=50257, positions=1024):
    d = width
    out = [(vocab, d), (positions, d)]
    for _ in range(layers):
        out += [(d,), (d,), (3 * d, d), (3 * d,), (d, d), (d,), (d,), (d,), (4 * d, d), (4 * d,), (d, 4 * d), (d,)]
    return out + [(d,), (d,)]


def run(make, impl, sizes, repeats):
    """(best wall s, best CPU s, weights after the steps) of one implementation."""
    gen = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s, generator=gen) * 0.02) for s in sizes]
    grads = [torch.randn(s, generator=gen) * 1e-3 for s in sizes]
    for p, g in zip(params, grads):
        p.grad = g
    opt = make(params, **IMPLS[impl])
    opt.step()   # makes the state
    wall = cpu = float("inf")
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        opt.step()
        wall, cpu = min(wall, time.perf_counter() - w0), min(cpu, time.process_time() - c0)
    return wall, cpu, [p.detach() for p in params]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--repeats", type=int, default=3, help="timed steps after the first (best taken)")
    ap.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch CPU threads")
    a = ap.parse_args()
    if a.layers < 1 or a.width < 1 or a.repeats < 1 or a.threads < 1:
        ap.error("--layers, --width, --repeats and --threads must be >= 1")
    torch.set_num_threads(a.threads)
    sizes = shapes(a.layers, a.width)
    numel = sum(torch.Size(s).numel() for s in sizes)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {len(sizes)} tensors, "
          f"{numel / 1e6:.1f}M parameters ({numel * 4 / 2**20:.0f} MiB fp32); best of {a.repeats} steps")
    print(f"{'optimizer':<13} {'impl':<8} {'wall ms':>9} {'CPU ms':>9}  weights vs foreach")
    for name, make in OPTIMIZERS.items():
        ref = None
        for impl in IMPLS:
            wall, cpu, weights = run(make, impl, sizes, a.repeats)
            if ref is None:
                ref, same = weights, "-"
            elif all(torch.equal(x, y) for x, y in zip(ref, weights)):
                same = "bitwise"
            else:
                same = f"max diff {max((x - y).abs().max().item() for x, y in zip(ref, weights)):.1e}"
            print(f"{name:<13} {impl:<8} {wall * 1e3:9.1f} {cpu * 1e3:9.1f}  {same}", flush=True)


if __name__ == "__main__":
    main()
