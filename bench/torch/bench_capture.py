#!/usr/bin/env python3
"""Benchmark: one training step of a named model on fake tensors (default: Llama-2-7B, batch 1,
seq 4096, H100 roofline), captured by mhc_torch, beside PyTorch's own MemTracker
(torch.distributed._tools.mem_tracker) on the same model and step, the same step on fake tensors
with nothing watching it (what any tool on fake tensors pays), and optionally the capture of an
earlier commit (--base), all in one run.

    .venv/bin/python bench/torch/bench_capture.py [--model llama2-7b] [--batch 1] [--seq 4096]
        [--layers N] [--steps 1] [--repeat 1] [--base REV] [--no-memtracker]

Each measurement runs in a fresh process (runs alternate when --repeat > 1; the table holds
medians). The figure is CPU time of that process (user + system), which other work on a shared
machine does not inflate the way it inflates wall time. A process first imports torch,
transformers, mhc_torch and torch._dynamo (which FakeTensorMode imports on first use): that import
is reported apart, with the model's module and what ModTracker and MemTracker import. Then:
- capture: mhc_torch.capture(), building the model, running the step and writing the trace;
- memtracker: the model built and the step run under FakeTensorMode with MemTracker tracking it
  (model, optimizer and batch registered with track_external, as its documentation says), the step
  being the capture's: forward under the capture's bf16 autocast (CUDA's cast lists), backward,
  AdamW (foreach) step, zero_grad;
- fake step: the same without MemTracker;
- base capture: the capture of the commit REV, its python/ taken with `git archive`.
CPU per kernel divides by the kernels of the capture (the same ops for every row).

Targets (docs/results.md, "Capture of PyTorch models on fake tensors"): <= 60 s wall and <= 2 GiB
peak RSS for Llama-2-7B, batch 1, seq 4096; <= 0.5 ms CPU per captured kernel.
The trace goes to a temporary folder and is removed.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))


def cpu():
    t = os.times()
    return t.user + t.system


# The module of each preset's model, which transformers imports when the model is first built.
_MODEL_MODULES = {"llama2-7b": "transformers.models.llama.modeling_llama",
                  "llama3-70b-slice": "transformers.models.llama.modeling_llama",
                  "tiny-llama": "transformers.models.llama.modeling_llama",
                  "gpt2-small": "transformers.models.gpt2.modeling_gpt2",
                  "tiny-gpt2": "transformers.models.gpt2.modeling_gpt2",
                  "mhc-27b": "mhc_torch.mhc_model", "tiny-mhc": "mhc_torch.mhc_model"}


def _import(model: str):
    """What every run imports, whatever it measures: torch, transformers and the model's module,
    and the modules fake tensors, ModTracker and MemTracker import on first use."""
    import importlib

    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401
    import torch.distributed._tools.mem_tracker  # noqa: F401  (imports ModTracker's package too)
    import transformers

    import mhc_torch  # noqa: F401
    import mhc_torch.capturing  # noqa: F401

    transformers.AutoModelForCausalLM, transformers.LlamaConfig, transformers.GPT2Config  # noqa: B018
    if model in _MODEL_MODULES:
        importlib.import_module(_MODEL_MODULES[model])


def _step_on_fake(a, tracked: bool):
    """The capture's step on fake tensors, under MemTracker when `tracked`: (kernels unknown, peak)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from mhc_torch.models import preset
    from mhc_torch.recipes import Recipe, autocast, autocast_kernels

    build, make_batch, loss_fn, _ = preset(a.model, batch=a.batch, seq=a.seq, layers=a.layers)
    recipe = Recipe()
    peak = None
    with FakeTensorMode(allow_non_fake_inputs=False):
        with torch.device("cpu"):
            model = build()
            batch = make_batch()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
        tracker = None
        if tracked:
            from torch.distributed._tools.mem_tracker import MemTracker

            tracker = MemTracker()
            tracker.track_external(model, opt, batch)
        with autocast_kernels("cpu", recipe), tracker if tracker is not None else _nothing():
            for _ in range(a.steps):
                with autocast("cpu", recipe.autocast_dtype, recipe.autocast_policy):
                    loss = loss_fn(model, batch) if loss_fn is not None else model(**batch).loss
                loss.backward()
                del loss
                opt.step()
                opt.zero_grad(set_to_none=True)
        if tracker is not None:
            peak = sum(snap["Total"] for snap in tracker.get_tracker_snapshot("peak").values())
    return None, peak


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _capture(a):
    import mhc_torch
    from mhc_torch.models import preset

    build, make_batch, loss_fn, _ = preset(a.model, batch=a.batch, seq=a.seq, layers=a.layers)
    with tempfile.TemporaryDirectory() as d:
        r = mhc_torch.capture(build, make_batch, steps=a.steps, gpu=a.gpu, path=os.path.join(d, "capture.db"),
                              loss_fn=loss_fn)
    return r.kernels, r.peak_bytes


def worker(a):
    """One measurement in this process; prints one JSON line."""
    w0, c0 = time.perf_counter(), cpu()
    _import(a.model)
    w1, c1 = time.perf_counter(), cpu()
    if a.worker == "capture":
        kernels, peak = _capture(a)
    else:
        kernels, peak = _step_on_fake(a, tracked=a.worker == "memtracker")
    w2, c2 = time.perf_counter(), cpu()
    print(json.dumps({"import_cpu": c1 - c0, "import_wall": w1 - w0, "cpu": c2 - c1, "wall": w2 - w1,
                      "kernels": kernels, "peak": peak,
                      "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
    return 0


def _base_tree(rev: str, root: str) -> str:
    """python/ of commit `rev` (and the schema file its package links to), under root."""
    archive = subprocess.run(["git", "-C", REPO, "archive", rev, "python", "trace/schema.sql"],
                             stdout=subprocess.PIPE, check=True).stdout
    subprocess.run(["tar", "-x", "-C", root], input=archive, check=True)
    return os.path.join(root, "python")


def _run(kind: str, a, pythonpath: str) -> dict:
    argv = [sys.executable, os.path.abspath(__file__), "--worker", kind, "--model", a.model, "--batch", str(a.batch),
            "--seq", str(a.seq), "--steps", str(a.steps), "--gpu", a.gpu]
    if a.layers is not None:
        argv += ["--layers", str(a.layers)]
    env = dict(os.environ, PYTHONPATH=pythonpath)
    r = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"bench_capture: the {kind} run failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="llama2-7b")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--layers", type=int, default=None)
    p.add_argument("--gpu", default="h100-sxm")
    p.add_argument("--repeat", type=int, default=1, help="runs of each kind (medians are reported)")
    p.add_argument("--base", metavar="REV", help="also capture with the python/ of this commit")
    p.add_argument("--no-memtracker", action="store_true", help="leave MemTracker out (it takes the longest)")
    p.add_argument("--worker", choices=["capture", "memtracker", "fake"], help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.repeat < 1 or a.batch < 1 or a.seq < 1 or a.steps < 1 or (a.layers is not None and a.layers < 1):
        p.error("--repeat, --batch, --seq, --steps and --layers must be positive")
    if a.worker:
        return worker(a)
    sys.path.insert(0, os.path.join(REPO, "python"))
    from mhc_torch.gpus import GPUS  # neither imports torch
    from mhc_torch.models import PRESETS

    if a.model not in PRESETS:
        p.error(f"unknown model '{a.model}'; valid: {', '.join(PRESETS)}")
    if a.gpu not in GPUS:
        p.error(f"unknown GPU '{a.gpu}'; valid: {', '.join(GPUS)}")
    if a.base and subprocess.run(["git", "-C", REPO, "rev-parse", "--verify", "--quiet", a.base + "^{commit}"],
                                 stdout=subprocess.DEVNULL).returncode != 0:
        p.error(f"--base: '{a.base}' is not a commit of {REPO}")
    with tempfile.TemporaryDirectory() as tmp:
        kinds = [("capture", "capture", os.path.join(REPO, "python"))]
        if a.base:
            kinds.append((f"capture at {a.base}", "capture", _base_tree(a.base, tmp)))
        if not a.no_memtracker:
            kinds.append(("MemTracker", "memtracker", os.path.join(REPO, "python")))
        kinds.append(("fake step alone", "fake", os.path.join(REPO, "python")))
        runs = {label: [] for label, _, _ in kinds}
        for _ in range(a.repeat):
            for label, kind, path in kinds:
                runs[label].append(_run(kind, a, path))
    _report(a, kinds, runs)
    return 0


def _report(a, kinds, runs):
    import torch

    kernels = runs["capture"][0]["kernels"]
    mine = statistics.median(r["cpu"] for r in runs["capture"])
    print(f"model {a.model} batch {a.batch} seq {a.seq} layers {a.layers or 'all'} steps {a.steps} gpu {a.gpu} "
          f"(torch {torch.__version__}); {a.repeat} run(s) of each, medians; {kernels} kernels captured")
    print(f"{'':<22} {'CPU s':>8} {'ms/kernel':>10} {'vs capture':>11} {'wall s':>8} {'import CPU s':>13} "
          f"{'peak RSS GiB':>13} {'peak GiB':>9}")
    for label, _, _ in kinds:
        rs = runs[label]
        c = statistics.median(r["cpu"] for r in rs)
        w = statistics.median(r["wall"] for r in rs)
        imp = statistics.median(r["import_cpu"] for r in rs)
        rss = max(r["rss"] for r in rs) / 2**30
        peak = rs[0]["peak"]
        peak_text = f"{peak / 2**30:9.2f}" if peak is not None else f"{'':>9}"
        print(f"{label:<22} {c:8.2f} {1000 * c / kernels:10.3f} {c / mine:10.2f}x {w:8.2f} {imp:13.2f} {rss:13.2f} "
              f"{peak_text}")
    fake = statistics.median(r["cpu"] for r in runs["fake step alone"])
    print(f"capture above the fake step alone: {1000 * (mine - fake) / kernels:.3f} ms/kernel; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    sys.exit(main())
