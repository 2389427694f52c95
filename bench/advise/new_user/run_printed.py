"""Runs the code `mhc advise` prints on a small real (CPU) copy of a captured model and compares
the step with the plain one: the same weights, batch and random seed; loss, gradients, parameters
after one optimizer step and buffers (BatchNorm's running statistics) after it.

    python3 bench/advise/new_user/run_printed.py MODEL.py TRACE.db --capacity 4GiB [--top 3] [--micro-batches N]

MODEL.py is the file the trace was captured from; its build_model(small=True) and
make_batch(small=True) give the small copy (every block kept, so the printed module names exist).
The printed PyTorch lines are run as printed; lines that need CUDA or packages not installed
(DeepSpeed) are compiled only, and the one-line `mhc_torch.apply` form is run instead.
--micro-batches N runs each step as N forward and backward passes (the loss divided by N,
gradients accumulated), as a capture with --micro-batches N does. Prints one line per answer and
autocast mode. Needs torch (and the model's own packages)."""
import argparse
import copy
import importlib.util
import json
import os
import subprocess
import sys
import warnings

import torch

WRAP = "_checkpoint_wrapped_module."


def _load(path):
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location("user_model", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _loss(mod, model, batch):
    if hasattr(mod, "loss_fn"):
        return mod.loss_fn(model, batch)
    out = model(**batch) if isinstance(batch, dict) else model(*batch)
    return out.loss


def _step(mod, model, optimizer, batch, autocast, micro_batches=1):
    model.train()
    torch.manual_seed(1)
    for _ in range(micro_batches):  # gradient accumulation: the mean over micro-batches
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = _loss(mod, model, batch) / micro_batches
        loss.backward()
    grads = {n.replace(WRAP, ""): p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    params = {n.replace(WRAP, ""): p.detach().clone() for n, p in model.named_parameters()}
    bufs = {n.replace(WRAP, ""): b.clone() for n, b in model.named_buffers() if b.is_floating_point()}
    return loss.item(), grads, params, bufs


def _diff(a, b):
    if b == {} and a:  # an optimizer on the host takes the gradients off the parameters (.grad is None)
        return None
    if a.keys() != b.keys():
        return float("inf")
    # a sparse buffer (a graph's adjacency) has no max: its values are compared
    dense = lambda t: t.coalesce().values() if t.is_sparse else t   # noqa: E731
    return max([(dense(a[k]).float() - dense(b[k]).float()).abs().max().item() for k in a] or [0.0])


def _fmt(d):
    return "n/a (on the host optimizer, not .grad)" if d is None else f"{d:.3g}"


def _optimizer(mod, model):  # what the capture's optimizer was: the file's build_optimizer(model), else
    if hasattr(mod, "build_optimizer"):  # AdamW, lr 1e-4 (mhc-torch capture's default)
        return mod.build_optimizer(model)
    return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4, foreach=True)


def run_one(mod, code, autocast, micro_batches=1):
    torch.manual_seed(0)
    plain = mod.build_model(small=True)
    mine = copy.deepcopy(plain)
    batch = mod.make_batch(small=True)
    opt0, opt1 = _optimizer(mod, plain), _optimizer(mod, mine)
    env = dict(os.environ)
    ns = {"model": mine, "optimizer": opt1, "torch": torch}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(code, ns)  # noqa: S102 - the code under test
    os.environ.clear()
    os.environ.update(env)
    r0 = _step(mod, plain, opt0, batch, autocast, micro_batches)
    r1 = _step(mod, ns["model"], ns["optimizer"], batch, autocast, micro_batches)
    return {"loss_equal": r0[0] == r1[0], "loss": (r0[0], r1[0]), "grad_diff": _diff(r0[1], r1[1]),
            "param_diff": _diff(r0[2], r1[2]), "buffer_diff": _diff(r0[3], r1[3])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("trace")
    ap.add_argument("--capacity", required=True)
    ap.add_argument("--top", default="3")
    ap.add_argument("--mhc", default=os.environ.get("MHC_EXE", "build/cli/mhc"))
    ap.add_argument("--micro-batches", type=int, default=1)
    a = ap.parse_args()
    out = subprocess.run([a.mhc, "advise", a.trace, "--capacity", a.capacity, "--top", a.top, "--json"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stderr.strip())
        return out.returncode
    mod = _load(a.model)
    for i, row in enumerate(json.loads(out.stdout)["rows"], 1):
        printed, rest = row["code"].split("# or, the same in one line")
        one_line = rest.split("\n", 1)[1]
        compile(row["code"], "<printed>", "exec")
        runnable = "deepspeed" not in printed
        for form, code in (("printed", printed), ("apply", one_line)):
            if form == "printed" and not runnable:
                print(f"{i}. {row['description']} [printed]: compiled only (needs DeepSpeed and CUDA)")
                continue
            for autocast in (False, True):
                try:
                    r = run_one(mod, code, autocast, a.micro_batches)
                except Exception as e:  # noqa: BLE001 - reported, not raised: the table says what failed
                    print(f"{i}. {row['description']} [{form}, {'bf16' if autocast else 'fp32'}]: FAILED "
                          f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
                    continue
                print(f"{i}. {row['description']} [{form}, {'bf16' if autocast else 'fp32'}]: "
                      f"loss equal {r['loss_equal']} ({r['loss'][0]:.6f} vs {r['loss'][1]:.6f}), "
                      f"grads max diff {_fmt(r['grad_diff'])}, params after step {r['param_diff']:.3g}, "
                      f"buffers {r['buffer_diff']:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
