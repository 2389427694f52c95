#!/usr/bin/env python3
"""The training loop gpu-check runs on the device: a model of mhc_torch's presets (the same code
`mhc-torch capture` builds on fake tensors), trained for a few steps the way a capture's standard
step runs: forward and loss under bf16 autocast, backward, AdamW(foreach=True).step(),
zero_grad(set_to_none=True). Each step and each layer is an NVTX range ("step N", "layer N"),
the markers `mhc record` turns into steps and layers. Prints one JSON line: the step times, the
allocator's peaks (max_memory_allocated, max_memory_reserved) and what ran.

    python3 train_loop.py [--model gpt2-small] [--layers N] [--batch B] [--seq T] [--hc N]
                          [--steps 20] [--warmup 5] [--device cuda|cpu] [--setting JSON]
                          [--snapshot FILE] [--profile FILE] [--build-on-device]

--setting applies an mhc_torch setting (mhc_torch.apply) before the first step; its allocator
part is put into PYTORCH_CUDA_ALLOC_CONF before CUDA starts. --snapshot records the allocator's
history from before the model reaches the device and dumps it (torch.cuda.memory._dump_snapshot,
no stack traces: the events and segments only). --profile runs one more step after the timed
ones and the allocator's figures, under torch.profiler (CPU and CUDA activities, shapes, memory),
and exports its Chrome trace: each kernel's measured time beside the aten op that launched it,
what a per-kernel-kind calibration of the capture's time estimates needs. --device cpu runs the same loop on the CPU (the
check's dry run): the layer hooks count instead of making NVTX ranges, no allocator figures.
Exit status 3 when the device runs out of memory (the JSON line says so).
"""
import argparse
import json
import os
import statistics
import sys
import time


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="gpt2-small")
    p.add_argument("--layers", type=int, default=None)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--hc", type=int, default=4)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5, help="steps left out of the median")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--setting", default=None, help="an mhc_torch setting (JSON)")
    p.add_argument("--snapshot", default=None, help="dump the allocator's history here (cuda)")
    p.add_argument("--profile", default=None,
                   help="one more step under torch.profiler, its Chrome trace written here")
    p.add_argument("--memory-limit", type=int, default=None,
                   help="bytes this process may hold on the GPU (torch.cuda.set_per_process_memory_fraction): "
                        "the capacity mhc advise judged its answer against, free-and-retry included")
    p.add_argument("--build-on-device", action="store_true",
                   help="build the model on the device (large models: no host copy, no host init)")
    return p.parse_args(argv)


def layer_list(model):
    """The model's blocks: the longest ModuleList (GPT-2's transformer.h, the mHC model's layers)."""
    import torch

    lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList)]
    return max(lists, key=len) if lists else []


def mark_layers(model, push, pop):
    """push("layer N") before each block's forward and pop() after it: on the GPU an NVTX range,
    the recorder's layer markers. The hooks return None whatever push and pop return: a forward
    pre-hook's result replaces the block's arguments (range_push returns the nesting depth, an
    int, which the block then got as its only argument)."""
    def before(module, args, name):
        push(name)

    def after(module, args, output):
        pop()

    blocks = layer_list(model)
    for i, block in enumerate(blocks):
        block.register_forward_pre_hook(lambda m, a, name=f"layer {i}": before(m, a, name))
        block.register_forward_hook(after)
    return len(blocks)


def one_step(model, batch, opt, loss_of, dev):
    """The capture's standard step; its loss."""
    import torch

    with torch.autocast(dev.type, dtype=torch.bfloat16):
        loss = loss_of(model, batch)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def profile_one_step(torch, cuda, step, path):
    """One step under torch.profiler, after the figures the loop reports (the profiler's own
    buffers and its synchronisation leave them untouched); its Chrome trace written to PATH.
    Returns the path and the seconds the profiled step took, or the error in one line."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    try:
        with profile(activities=acts, record_shapes=True, profile_memory=True) as prof:
            t0 = time.perf_counter()
            step()
            if cuda:
                torch.cuda.synchronize()
            took = time.perf_counter() - t0
        prof.export_chrome_trace(path)
        return {"file": path, "step_s": took}
    except Exception as e:  # noqa: BLE001 - a profiler failure must not lose the loop's figures
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}


def main(argv):
    a = parse(argv)
    setting = json.loads(a.setting) if a.setting else None
    if setting and "allocator" in setting and a.device == "cuda":
        # Before CUDA starts: mhc_torch.apply would set it at run time, after the model moved.
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = setting["allocator"]
    import torch

    from mhc_torch.models import preset

    torch.manual_seed(0)
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    if a.memory_limit and cuda:   # before anything is allocated: the allocator's limit, as a GPU of that size
        torch.cuda.set_per_process_memory_fraction(
            min(1.0, a.memory_limit / torch.cuda.get_device_properties(0).total_memory))
    build, make_batch, loss_fn, _ = preset(a.model, batch=a.batch, seq=a.seq, layers=a.layers, hc=a.hc)
    if a.snapshot and cuda:
        torch.cuda.memory._record_memory_history(enabled="all", context=None, max_entries=1_000_000)
    if a.build_on_device:
        with dev:
            model = build()
    else:
        model = build().to(dev)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4, foreach=True)
    if setting:
        import mhc_torch

        model, opt = mhc_torch.apply(model, opt, setting)
    with dev:
        batch = make_batch()
    loss_of = loss_fn or (lambda m, b: m(**b).loss)
    # The CPU (the dry run) runs the same hooks with a stand-in that, like range_push, returns
    # the nesting depth.
    depth = [0]

    def count_push(name):
        depth[0] += 1
        return depth[0] - 1

    def count_pop():
        depth[0] -= 1
        return depth[0]

    if cuda:
        marked = mark_layers(model, torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop)
    else:
        marked = mark_layers(model, count_push, count_pop)
    out = {"model": {"name": a.model, "layers": a.layers, "batch": a.batch, "seq": a.seq, "hc": a.hc},
           "device": torch.cuda.get_device_name(0) if cuda else "cpu", "torch": torch.__version__,
           "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "setting": setting, "steps": a.steps,
           "params": sum(p.numel() for p in model.parameters()), "layers_marked": marked,
           "memory_limit": a.memory_limit if cuda else None}
    times = []
    loss = None
    try:
        for s in range(a.steps):
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_push(f"step {s}")
            t0 = time.perf_counter()
            loss = one_step(model, batch, opt, loss_of, dev)
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_pop()
            times.append(time.perf_counter() - t0)
    except torch.cuda.OutOfMemoryError as e:
        out["error"] = "out of memory: " + str(e).splitlines()[0]
    out["step_s"] = times
    kept = times[a.warmup:] or times
    out["median_ms"] = statistics.median(kept) * 1e3 if kept else None
    out["loss"] = float(loss.detach()) if loss is not None else None
    if cuda:
        stats = torch.cuda.memory_stats()
        out.update(peak_allocated=torch.cuda.max_memory_allocated(), peak_reserved=torch.cuda.max_memory_reserved(),
                   alloc_retries=stats.get("num_alloc_retries", 0), ooms=stats.get("num_ooms", 0))
        if a.snapshot:
            torch.cuda.memory._dump_snapshot(a.snapshot)
            torch.cuda.memory._record_memory_history(enabled=None)
            out["snapshot"] = a.snapshot
    else:
        out.update(peak_allocated=None, peak_reserved=None)
    if a.profile and "error" not in out:
        out["profile"] = profile_one_step(torch, cuda, lambda: one_step(model, batch, opt, loss_of, dev), a.profile)
    print(json.dumps(out), flush=True)
    return 3 if "error" in out else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
