#!/usr/bin/env python3
"""Measures the two figures `mhc advise` assumes for an optimizer step on the host
(docs/simulator.md "Settings"; docs/results.md "The host optimizer step's fixed cost"): the
bandwidth the step streams at and its fixed cost per parameter tensor, with torch's CPU AdamW
on this machine: its for-loop (foreach=False), what the host optimizer runs for torch.optim's
classes and what `--host-bandwidth` describes (a fused host step takes its measured share of that
time: docs/advise.md "Host step implementations").

    python3 bench/advise/host_adamw.py [--threads N] [--foreach] [--json]

Prints each measurement and the two options to pass: --host-bandwidth and --host-tensor-cost
(with --json: one object with per_tensor_s and bandwidth_Bps). Threads run in parallel, so the
figure is wall time: the best of the repeats. The release's GPU check imports measure().
"""
import argparse
import json
import time

import torch

BYTES_PER_ELEMENT = 7 * 4   # as mhc advise counts a step: the gradient once, the parameter and two moments twice (fp32)


def step_seconds(tensors, numel, foreach, repeats):
    params = [torch.nn.Parameter(torch.zeros(numel)) for _ in range(tensors)]
    for p in params:
        p.grad = torch.ones(numel)
    opt = torch.optim.AdamW(params, lr=1e-3, foreach=foreach)
    opt.step()   # the state (exp_avg, exp_avg_sq) is made on the first step
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        opt.step()
        best = min(best, time.perf_counter() - start)
    return best


def measure(threads=None, foreach=False, numel=1 << 24):
    """The host step's figures: {"per_tensor_s", "bandwidth_Bps", and the raw step times}."""
    if threads is not None:
        torch.set_num_threads(threads)
    # Per tensor: many tiny tensors, whose bytes cost nothing; the slope between 100 and 1000.
    small = {n: step_seconds(n, 16, foreach, 20) for n in (100, 1000)}
    per_tensor = max((small[1000] - small[100]) / 900, 0.0)
    big = step_seconds(1, numel, foreach, 5)
    moved = BYTES_PER_ELEMENT * numel
    return {"per_tensor_s": per_tensor, "bandwidth_Bps": moved / max(big - per_tensor, 1e-9),
            "threads": torch.get_num_threads(), "foreach": foreach, "torch": torch.__version__,
            "step_s": {"100 tiny": small[100], "1000 tiny": small[1000], f"1 of {numel}": big}}


def options(m):
    """The mhc advise options for a measurement."""
    return ["--host-bandwidth", f"{m['bandwidth_Bps'] / 1e9:.2f}GB/s",
            "--host-tensor-cost", f"{m['per_tensor_s'] * 1e6:.2f}us"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch CPU threads")
    ap.add_argument("--foreach", action=argparse.BooleanOptionalAction, default=False,
                    help="AdamW(foreach=...): the multi-tensor path, or one tensor at a time (default)")
    ap.add_argument("--numel", type=int, default=1 << 24, help="elements of the large tensor (bandwidth)")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of text")
    a = ap.parse_args()
    if a.threads < 1 or a.numel < 1 << 16:
        ap.error("--threads must be >= 1 and --numel >= 65536")
    m = measure(a.threads, a.foreach, a.numel)
    if a.json:
        print(json.dumps(m))
        return
    print(f"torch {m['torch']}, {m['threads']} threads, AdamW(foreach={m['foreach']})")
    for what, s in m["step_s"].items():
        print(f"  {what:>16} floats: {s * 1e3:8.3f} ms a step")
    print(f"per tensor {m['per_tensor_s'] * 1e6:.1f} us, bandwidth {m['bandwidth_Bps'] / 1e9:.2f} GB/s")
    print("mhc advise ... " + " ".join(options(m)))


if __name__ == "__main__":
    main()
