"""PyTorch's own FSDP2 memory tracker beside a capture of the same FSDP2 model.

    python3 bench/advise/new_user/fsdp2_memtracker.py MODEL.py TRACE.db [--small]

MODEL.py is a model file as `mhc-torch capture` reads it (build_model() returning a fully_shard
model on a fake process group, make_batch(), loss_fn(model, batch)); TRACE.db its capture with
`--autocast none --steps 2` and the default optimizer (AdamW, foreach). This script runs the same
two steps under FakeTensorMode with torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker
(statistics reset after the first step) and prints, for each FSDP module, its peak in the forward
and in the backward of the second step by the tracker and by the capture (the largest live bytes
at the start of a kernel of that module and phase, without the capture's cuBLAS workspaces, which
the tracker does not see), and both step peaks.
"""
import argparse
import importlib.util
import os
import sqlite3
import sys

import torch


def _load(path):
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location("model_file", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tracker_peaks(mod, small):
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed._tools.fsdp2_mem_tracker import _FSDPModState as S
    from torch.distributed.fsdp import FSDPModule

    with FakeTensorMode():
        model = mod.build_model(small=small) if "small" in mod.build_model.__code__.co_varnames else mod.build_model()
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4, foreach=True)
        batch = mod.make_batch()
        fmt = FSDPMemTracker(model, opt)
        fmt.track_inputs(batch if isinstance(batch, tuple) else (batch,))
        loss_fn = getattr(mod, "loss_fn", None) or (lambda m, b: m(*b))
        with fmt:
            for i in range(2):
                loss = loss_fn(model, batch)
                loss.backward()
                del loss
                opt.step()
                opt.zero_grad(set_to_none=True)
                if i == 0:
                    fmt.reset_mod_stats()
        root = type(model).__name__
        out = {}
        for name, m in model.named_modules():
            if not isinstance(m, FSDPModule) or m not in fmt.memory_tracking:
                continue
            snaps = fmt.memory_tracking[m].snapshots
            fqn = f"{root}.{name}" if name else root
            out[fqn] = tuple(max((s[dev]["Total"] for s in snaps.get(state, []) for dev in s), default=0)
                             for state in (S.PEAK_FW, S.PEAK_BW))
        total = sum(v["Total"] for v in fmt.get_tracker_snapshot("peak").values())
    return out, total


def capture_peaks(path, modules, root):
    db = sqlite3.connect(path)
    rows = db.execute(
        "SELECT k.id, p.name, COALESCE(m.text, ''), k.t_start, n.text FROM kernels k JOIN kernel_info i ON i.kernel = k.id "
        "JOIN strings n ON n.id = k.name "
        "JOIN phases p ON p.id = i.phase LEFT JOIN modules mo ON mo.id = i.module "
        "LEFT JOIN strings m ON m.id = mo.name WHERE k.step = 1 ORDER BY k.id").fetchall()
    # FSDP2's own kernels are recorded outside every module; the tracker counts them in the module
    # whose hooks run them: a reduction (after a group's backward) in the group it reduces, named
    # by the buffer it touches ("FSDP2 reduce-scatter input (blocks.0)"); an all-gather, its
    # copy-in and copy-out in the module that runs next (a group's pre-forward and pre-backward
    # hooks gather it and, in the backward, prefetch the next group's).
    reduced = {}
    for kid, label in db.execute("SELECT x.kernel, s.text FROM accesses x JOIN allocations a ON a.id = x.allocation "
                                 "JOIN strings s ON s.id = a.label WHERE s.text LIKE 'FSDP2 reduce-scatter input%'"):
        group = label[label.index("(") + 1:-1] if label.endswith(")") else ""
        reduced[kid] = f"{root}.{group}" if group else root
    following = ""
    credited = []
    for kid, phase, module, t, name in reversed(rows):
        if module:
            following = module
        fsdp = not module and name.startswith(("fsdp::", "c10d::"))
        credited.append((phase, module or (reduced.get(kid, following) if fsdp else ""), t))
    rows = credited[::-1]
    allocs = db.execute("SELECT a.bytes, a.t_alloc, a.t_free FROM allocations a JOIN strings s ON s.id = a.label "
                        "WHERE a.device = 0 AND s.text NOT LIKE 'cuBLAS workspace%'").fetchall()
    db.close()

    def live(t):
        return sum(b for b, ta, tf in allocs if ta <= t and (tf is None or tf > t))

    at = [(phase, module, live(t)) for phase, module, t in rows]
    out = {}
    for fqn in modules:
        inside = [(p, v) for p, m, v in at if m == fqn or m.startswith(fqn + ".")]
        out[fqn] = tuple(max((v for p, v in inside if p == phase), default=0)
                         for phase in ("forward", "backward"))
    return out, max(v for _, _, v in at)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("trace")
    ap.add_argument("--small", action="store_true", help="build_model(small=True)")
    a = ap.parse_args()
    mod = _load(a.model)
    tracked, tracked_total = tracker_peaks(mod, a.small)
    captured, captured_total = capture_peaks(a.trace, tracked, next(iter(tracked)).split(".")[0])
    print(f"{'module':<28}{'fwd tracker':>14}{'fwd capture':>14}{'bwd tracker':>14}{'bwd capture':>14}")
    for fqn, (f, b) in tracked.items():
        cf, cb = captured[fqn]
        print(f"{fqn:<28}{f:>14,}{cf:>14,}{b:>14,}{cb:>14,}")
    print(f"step peak: tracker {tracked_total:,} B, capture {captured_total:,} B (second step, without cuBLAS workspaces)")


if __name__ == "__main__":
    main()
