#!/usr/bin/env python3
"""gpu-check's sections that compare the toolkit's predictions with a PyTorch training loop on
the device (README "Release", docs/validation.md "The release's GPU check"):

    gpu_sections.py captured_vs_real   the small GPT's step captured on fake tensors against the
                                       same loop on the device: peak live and reserved bytes
                                       (default allocator and expandable_segments:True, whose
                                       allocator snapshot is kept), target within 0.5%
    gpu_sections.py advise             `mhc advise` on that capture under a capacity that forces
                                       a setting; the top answer applied with mhc_torch.apply on
                                       the device: peak, reserved and step time against the
                                       prediction
    gpu_sections.py mhc_overhead       the mHC model with n = 4 against n = 1 on the device:
                                       measured step times beside the captures' roofline estimates

This program needs only the standard library: PyTorch runs in the programs it starts
(train_loop.py, `python3 -m mhc_torch.cli capture`). Environment, set by gpu-check: MHC (bin/mhc),
MHC_PYTHON (the python3 with torch), SHARE (this folder), WORK (scratch), OUT (results), the model
sizes MHC_CHECK_GPT and MHC_CHECK_MHC (train_loop.py options), MHC_CHECK_STEPS and
MHC_CHECK_MHC_STEPS, and MHC_CHECK_DRY=1 for the dry run (the same plumbing on the CPU: the loop
on torch's CPU device, no allocator figures). The figures go to $WORK/figures-SECTION.json after
every step (gpu-check puts them into summary.json), so a section stopped by its time limit keeps
what it had measured.
"""
import gzip
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

TARGET = 0.005  # captured against real: within 0.5%
CAPTURE_STEPS = 2  # steps each capture holds; `mhc advise` times all of them together
MAX_RESULT_BYTES = int(os.environ.get("MAX_RESULT_BYTES", 16 << 20))


class Section:
    """Where a section's figures go, written again after every change."""

    def __init__(self, name):
        self.name = name
        self.work = os.environ["WORK"]
        self.dry = os.environ.get("MHC_CHECK_DRY") == "1"
        self.device = "cpu" if self.dry else "cuda"
        self.figures = {"dry_run": self.dry}
        self.path = os.path.join(self.work, f"figures-{name}.json")

    def put(self, key, value):
        self.figures[key] = value
        tmp = self.path + ".part"
        with open(tmp, "w") as f:
            json.dump(self.figures, f, indent=1)
        os.replace(tmp, self.path)


def say(text=""):
    print(text, flush=True)


def run(cmd, env=None, quiet_stderr_lines=25, echo=True):
    """Runs a command, printing it, its stdout (unless echo is False) and the end of its stderr;
    returns (status, stdout)."""
    say("$ " + " ".join(shlex.quote(c) for c in cmd))
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=dict(os.environ, **(env or {})))
    for line in p.stdout.splitlines() if echo else ():
        say("  " + line[:400])
    err = [line for line in p.stderr.splitlines() if line.strip()]
    for line in err[-quiet_stderr_lines:]:
        say("  ! " + line[:400])
    say(f"  (exit {p.returncode}, {time.perf_counter() - t0:.1f} s)")
    return p.returncode, p.stdout


def model_options(var):
    """train_loop.py's options from an environment variable, as a dict ('--model' -> 'gpt2-small')."""
    words = shlex.split(os.environ[var])
    return dict(zip(words[::2], words[1::2]))


def as_argv(options):
    return [w for k, v in options.items() for w in (k, str(v))]


def loop(sec, name, options, extra=(), env=None):
    """train_loop.py on the device (the CPU in the dry run); its JSON line, also kept as
    $WORK/NAME.json (the record section's baselines are read the same way)."""
    py = os.environ.get("MHC_PYTHON", "python3")
    cmd = [py, os.path.join(os.environ["SHARE"], "train_loop.py"), *as_argv(options), "--device", sec.device, *extra]
    status, out = run(cmd, env)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"{name}: the training loop printed no result (exit {status})")
    result = json.loads(lines[-1])
    with open(os.path.join(sec.work, name + ".json"), "w") as f:
        f.write(lines[-1] + "\n")
    if status != 0:
        raise RuntimeError(f"{name}: exit {status}: {result.get('error', 'see above')}")
    return result


def reuse_or_loop(sec, name, options, steps):
    """The default-allocator loop: the record section's unrecorded baseline when it ran with the
    same model and steps, else run now."""
    path = os.path.join(sec.work, "base_native.json")
    try:
        with open(path) as f:
            r = json.loads([line for line in f if line.startswith("{")][-1])
        same = {k: str(v) for k, v in r["model"].items() if v is not None}
        want = {k.lstrip("-"): str(v) for k, v in options.items()}
        want["name"] = want.pop("model")
        if (r.get("steps") == steps and all(same.get(k) == v for k, v in want.items()) and "error" not in r
                and (sec.dry or r.get("peak_allocated") is not None)):
            say(f"(the default-allocator loop: the record section's {path}, {steps} steps)")
            return r
    except (OSError, IndexError, KeyError, ValueError):
        pass
    return loop(sec, name, options, ["--steps", str(steps)])


def gpu_for(device_name):
    """The mhc_torch GPU whose name the device has (its cuBLAS workspace and SM count matter to
    the capture); the dry run and an unknown device take h200, and say so."""
    from mhc_torch.gpus import GPUS

    for key, spec in GPUS.items():
        if spec.device_name == device_name:
            return key, ""
    for key, spec in GPUS.items():
        if key.split("-")[0].upper() in device_name.upper():
            return key, f" (nearest to {device_name})"
    return "h200", f" ({device_name} is not among mhc_torch's GPUs: h200 assumed)"


def run_capture(sec, name, options, gpu, extra=()):
    """`mhc-torch capture` of the same model and step on fake tensors (2 steps, EXTRA options):
    (the trace's path, the exit status)."""
    o = dict(options)
    model = o.pop("--model")
    path = os.path.join(sec.work, name + ".db")
    py = os.environ.get("MHC_PYTHON", "python3")
    status, _ = run([py, "-m", "mhc_torch.cli", "capture", model, *as_argv(o), "--steps", str(CAPTURE_STEPS), "--gpu", gpu,
                     *extra, "-o", path, "--force"])
    return path, status


def capture(sec, name, options, gpu):
    """run_capture, which must succeed; the trace's path."""
    path, status = run_capture(sec, name, options, gpu)
    if status != 0:
        raise RuntimeError(f"{name}: the capture failed (exit {status})")
    return path


def advise(trace, *args):
    """`mhc advise TRACE ARGS --json`: the parsed JSON, or None (and the reason printed) on exit 2."""
    status, out = run([os.environ["MHC"], "advise", trace, *args, "--json"], quiet_stderr_lines=5, echo=False)
    if status == 2:
        return None
    if status != 0:
        raise RuntimeError(f"mhc advise exited {status}")
    j = json.loads(out)
    b = j["baseline"]
    say(f"  baseline: peak {b['peak_bytes']} B, reserved {b['reserved_bytes']} B, step {b['step_time_ns']} ns (est.)")
    for i, r in enumerate(j["rows"]):
        say(f"  {i + 1}. {r['description']}: peak {r['peak_bytes']} B, reserved {r['reserved_bytes']} B, "
            f"step {r['step_time_ns']} ns (est.), loss {pct(r['loss'])}, fits {r['fits']}")
    return j


def predicted(trace, setting):
    """The peak, reserved peak and time of one step that the simulator predicts for the captured
    steps under a setting (`mhc advise` times the capture's steps together: step_time_ns is that
    over their number)."""
    j = advise(trace, "--setting", json.dumps(setting))
    row = j["rows"][0] if setting else j["baseline"]
    return {"peak_bytes": row["peak_bytes"], "reserved_bytes": row["reserved_bytes"],
            "step_time_ns": row["step_time_ns"] / CAPTURE_STEPS}


def error(pred, meas):
    return None if pred is None or meas in (None, 0) else pred / meas - 1


def gib(b):
    return "n/a" if b is None else f"{b / 2**30:.3f} GiB"


def pct(x):
    return "n/a" if x is None else f"{100 * x:+.2f}%"


def ms(x):
    return "n/a" if x is None else f"{x:.1f} ms"


def table(rows, header):
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        say("  " + "  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


def keep_gzipped(src, name):
    """gzip SRC into $OUT/NAME.gz when small enough to come back (written as .part, then renamed)."""
    dst = os.path.join(os.environ["OUT"], name + ".gz")
    with open(src, "rb") as f, gzip.open(dst + ".part", "wb") as g:
        shutil.copyfileobj(f, g)
    size = os.path.getsize(dst + ".part")
    if size > MAX_RESULT_BYTES:
        os.remove(dst + ".part")
        say(f"not kept: {name}.gz is {size} bytes, over {MAX_RESULT_BYTES}")
        return None
    os.replace(dst + ".part", dst)
    say(f"kept {dst} ({size} bytes)")
    return {"file": os.path.basename(dst), "bytes": size}


def kept_profile(sec, path):
    """The profiled step's Chrome trace (one step after the loop, torch.profiler): kept gzipped,
    and read by `mhc import` and `mhc info` as a user's Kineto trace would be (reported, not
    counted against the section)."""
    kept = keep_gzipped(path, "profile-step.json")
    db = os.path.join(sec.work, "profile-step.db")
    status, _ = run([os.environ["MHC"], "import", path, "-o", db, "--force"], quiet_stderr_lines=10)
    if status == 0:
        run([os.environ["MHC"], "info", db], quiet_stderr_lines=10)
    return {"kept": kept, "import_exit": status}


def device_name():
    """The GPU's name: from a loop of an earlier section, else asked of torch."""
    try:
        with open(os.path.join(os.environ["WORK"], "base_native.json")) as f:
            return json.loads([line for line in f if line.startswith("{")][-1])["device"]
    except (OSError, IndexError, KeyError, ValueError):
        pass
    py = os.environ.get("MHC_PYTHON", "python3")
    out = subprocess.run([py, "-c", "import torch; print(torch.cuda.get_device_name(0))"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True).stdout.strip()
    return out or "unknown"


def gpt_capture(sec, options, device):
    """The small GPT's captured step: the captured_vs_real section's when it ran, else captured now."""
    gpu, note = gpu_for("NVIDIA H200" if sec.dry else device)
    path = os.path.join(sec.work, "gpt-capture.db")
    if os.path.exists(path):
        say(f"(the captured step: {path}, from the captured_vs_real section)")
        return path, gpu
    say(f"capturing for {gpu}{note}")
    return capture(sec, "gpt-capture", options, gpu), gpu


def captured_vs_real():
    sec = Section("captured_vs_real")
    gpt = model_options("MHC_CHECK_GPT")
    steps = int(os.environ.get("MHC_CHECK_STEPS", "20"))
    sec.put("model", gpt)
    # The capture first: the advise section reuses it, also when this section's loops are cut
    # short by its time limit (on the H200 the loops took 44 s and the capture 17-22 s).
    gpu, note = gpu_for("NVIDIA H200" if sec.dry else device_name())
    say(f"capturing for {gpu}{note}")
    t0 = time.perf_counter()
    trace = capture(sec, "gpt-capture", gpt, gpu)
    sec.put("capture", {"gpu": gpu, "seconds": round(time.perf_counter() - t0, 1)})
    real = {"default": reuse_or_loop(sec, "base_native", gpt, steps)}
    sec.put("measured_default", real["default"])
    snapshot = os.path.join(sec.work, "snapshot-expandable.pickle")
    profile = os.path.join(sec.work, "profile-step.json")
    real["expandable_segments:True"] = loop(sec, "gpt_expandable", gpt,
                                            ["--steps", str(steps), "--snapshot", snapshot, "--profile", profile],
                                            env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    sec.put("measured_expandable", real["expandable_segments:True"])
    if os.path.exists(snapshot):
        sec.put("snapshot", keep_gzipped(snapshot, "snapshot-expandable.pickle"))
    if os.path.exists(profile):
        sec.put("profile", kept_profile(sec, profile))
    rows, out = [], []
    for conf, setting in (("default", {}), ("expandable_segments:True", {"allocator": "expandable_segments:True"})):
        p = predicted(trace, setting)
        m = real[conf]
        for what, pk, mk in (("peak live", "peak_bytes", "peak_allocated"), ("reserved", "reserved_bytes", "peak_reserved")):
            e = error(p[pk], m.get(mk))
            out.append({"allocator": conf, "what": what, "captured": p[pk], "measured": m.get(mk), "error": e,
                        "within_target": None if e is None else abs(e) <= TARGET})
            rows.append([conf, what, gib(p[pk]), gib(m.get(mk)), pct(e),
                         "n/a" if e is None else ("ok" if abs(e) <= TARGET else "MISSED")])
        out.append({"allocator": conf, "what": "step time", "captured_estimate_ms": p["step_time_ns"] / 1e6,
                    "measured_median_ms": m.get("median_ms")})
        rows.append([conf, "step time", ms(p["step_time_ns"] / 1e6) + " (est.)", ms(m.get("median_ms")),
                     pct(error(p["step_time_ns"] / 1e6, m.get("median_ms"))), ""])
        sec.put("comparison", out)
    say(f"\ncaptured (mhc-torch capture, {gpu}, {CAPTURE_STEPS} steps) against measured ({steps} steps, "
        f"{real['default']['device']}); target within {100 * TARGET:.1f}%:")
    table(rows, ["allocator", "", "captured", "measured", "error", "target"])
    return 0


def advise_section():
    sec = Section("advise")
    gpt = model_options("MHC_CHECK_GPT")
    steps = int(os.environ.get("MHC_CHECK_STEPS", "20"))
    device = "cpu" if sec.dry else device_name()
    trace, gpu = gpt_capture(sec, gpt, device)
    base = predicted(trace, {})
    link = os.path.join(os.environ["OUT"], "link-cuda.json")
    link_args = ["--link", link] if os.path.exists(link) else []
    # The host optimizer step's two figures measured on this machine's CPU, not assumed
    # (host_adamw.py lies beside this file in the release, in bench/advise/ in the source tree).
    here = os.path.dirname(os.path.realpath(__file__))
    sys.path[:0] = [here, os.path.join(here, "..", "..", "bench", "advise")]
    import host_adamw
    host = host_adamw.measure(numel=1 << 20 if sec.dry else 1 << 24)
    sec.put("host_step", host)
    say(f"host optimizer step: {host['per_tensor_s'] * 1e6:.1f} us per tensor, {host['bandwidth_Bps'] / 1e9:.2f} GB/s "
        f"({host['threads']} threads, torch {host['torch']})")
    link_args += host_adamw.options(host)
    answer = None
    # A capacity the captured step does not fit, so that the advice has to change something: a
    # quarter less first; a tiny model (the dry run) has less that any setting can save.
    for share in (0.75, 0.9, 0.99):
        capacity = int(base["reserved_bytes"] * share)
        answer = advise(trace, "--capacity", f"{capacity}B", "--top", "3", *link_args)
        if answer is not None:
            break
    if answer is None:
        raise RuntimeError("mhc advise found nothing that fits 99% of the captured reserved peak")
    top = answer["rows"][0]
    sec.put("advice", {"capacity_bytes": capacity, "share_of_captured_reserved": share, "link": answer["link"],
                       "baseline": answer["baseline"], "rows": answer["rows"]})
    say(f"\nthe top answer under {gib(capacity)} ({100 * share:.0f}% of the captured reserved peak): "
        f"{top['description']}\n{top['code']}")
    base_real = reuse_or_loop(sec, "base_native", gpt, steps)
    sec.put("measured_baseline", base_real)
    applied = loop(sec, "advised", gpt, ["--steps", str(steps), "--setting", json.dumps(top["setting"])])
    sec.put("measured_applied", applied)
    # The answer fits when it runs under the capacity (the caching allocator's free-and-retry
    # included), which only a run under that limit shows: the same loop with the process held to
    # the capacity (not in the dry run: the CPU has no such limit).
    limited = None
    if not sec.dry:
        try:
            limited = loop(sec, "advised_at_capacity", gpt, ["--steps", str(steps), "--setting", json.dumps(top["setting"]),
                                                             "--memory-limit", str(capacity)])
        except RuntimeError as e:
            limited = {"error": str(e)}
        sec.put("measured_at_capacity", limited)
    at_capacity = top.get("reserved_at_capacity_bytes", top["reserved_bytes"])
    runs = None if limited is None else "error" not in limited
    loss_real = error(applied.get("median_ms"), base_real.get("median_ms"))
    held_ns = (top["step_time_ns"] + top.get("steady_retry_cost_ns", top.get("retry_cost_ns", 0))) / CAPTURE_STEPS
    held_real = None if limited is None else limited.get("median_ms")
    rows = [["peak live", gib(top["peak_bytes"]), gib(applied.get("peak_allocated")),
             pct(error(top["peak_bytes"], applied.get("peak_allocated")))],
            ["reserved", gib(top["reserved_bytes"]), gib(applied.get("peak_reserved")),
             pct(error(top["reserved_bytes"], applied.get("peak_reserved")))],
            ["step time", ms(top["step_time_ns"] / CAPTURE_STEPS / 1e6) + " (est.)", ms(applied.get("median_ms")),
             pct(error(top["step_time_ns"] / CAPTURE_STEPS / 1e6, applied.get("median_ms")))],
            ["loss vs baseline", pct(top["loss"]), pct(loss_real), ""],
            ["reserved at the capacity", gib(at_capacity), gib(None if limited is None else limited.get("peak_reserved")),
             pct(error(at_capacity, None if limited is None else limited.get("peak_reserved")))],
            ["runs at the capacity", "yes" if top["fits"] else "no",
             "n/a (no limit here)" if runs is None else ("yes" if runs else "NO"), ""],
            # What giving cached memory back costs a steady step there (advise's
            # steady_retry_cost_ns, assumed constants: docs/advise.md) against the loop held to
            # the capacity.
            ["step time at the capacity", ms(held_ns / 1e6) + " (est.)", ms(held_real),
             pct(error(held_ns / 1e6, held_real))],
            ["cudaMalloc retries at the capacity", str(top.get("alloc_retries", 0)) + f" in {CAPTURE_STEPS} steps",
             "n/a" if limited is None or "error" in limited else f"{limited.get('alloc_retries')} in {steps} steps", ""]]
    sec.put("comparison", {"peak_error": error(top["peak_bytes"], applied.get("peak_allocated")),
                           "reserved_error": error(top["reserved_bytes"], applied.get("peak_reserved")),
                           "predicted_loss": top["loss"], "measured_loss": loss_real,
                           "reserved_at_capacity_error": None if limited is None
                           else error(at_capacity, limited.get("peak_reserved")),
                           "fits_measured": runs,
                           "step_at_capacity_error": error(held_ns / 1e6, held_real)})
    say(f"\n{top['description']} applied with mhc_torch.apply ({steps} steps on {applied['device']}):")
    table(rows, ["", "predicted", "measured", "error"])
    with_measured_kernels(sec, gpt, gpu, top, base_real, loss_real, link_args)
    return 0


def with_measured_kernels(sec, gpt, gpu, top, base_real, loss_real, link_args):
    """The top answer's loss predicted again from a capture timed by the profiled step
    (captured_vs_real's torch.profiler trace: `mhc-torch capture --kernel-times`), alone and with
    the measured step time (`mhc advise --step-time`), against the loss measured above. Reported,
    not counted: a profile that is missing (the dry run's holds no kernels) leaves it out."""
    profile = os.path.join(sec.work, "profile-step.json")
    if not os.path.exists(profile) or not base_real.get("median_ms"):
        say("\n(no profiled step or no measured step time: the prediction from measured kernel times is left out)")
        return
    path, status = run_capture(sec, "gpt-capture-measured", gpt, gpu, ["--kernel-times", profile])
    if status != 0:  # the dry run's CPU profile holds no kernels: refused, as it should be
        say("(the capture with --kernel-times was refused: left out)")
        sec.put("measured_kernels", {"capture_exit": status})
        return
    rows, out = [], {}
    for name, extra in (("measured kernels", []),
                        ("measured kernels + --step-time", ["--step-time", f"{base_real['median_ms']:.3f}ms"])):
        j = advise(path, "--setting", json.dumps(top["setting"]), *extra, *link_args)
        if j is None or not j["rows"]:
            continue
        r = j["rows"][0]
        out[name] = {"loss": r["loss"], "step_time_ns": r["step_time_ns"] / CAPTURE_STEPS,
                     "baseline_step_ns": j["baseline"]["step_time_ns"] / CAPTURE_STEPS}
        rows.append([name, pct(r["loss"]), pct(loss_real), ms(j["baseline"]["step_time_ns"] / CAPTURE_STEPS / 1e6),
                     ms(base_real.get("median_ms"))])
    sec.put("measured_kernels", out)
    say(f"\n{top['description']}: the loss predicted from the profiled step's kernel times:")
    table([["roofline", pct(top["loss"]), pct(loss_real), "", ms(base_real.get("median_ms"))], *rows],
          ["timing", "predicted loss", "measured loss", "baseline step (est.)", "measured step"])


def mhc_overhead():
    sec = Section("mhc_overhead")
    m = model_options("MHC_CHECK_MHC")
    steps = os.environ.get("MHC_CHECK_MHC_STEPS", "10")
    sec.put("model", m)
    real, est = {}, {}
    for n in (1, 4):  # the measurements first: they are what the check is for
        real[n] = loop(sec, f"mhc_n{n}", {**m, "--hc": n}, ["--steps", steps, "--warmup", "3", "--build-on-device"])
        sec.put(f"measured_n{n}", real[n])
    gpu, note = gpu_for("NVIDIA H200" if sec.dry else real[1]["device"])
    say(f"capturing for {gpu}{note}")
    for n in (1, 4):
        est[n] = predicted(capture(sec, f"mhc-n{n}", {**m, "--hc": n}, gpu), {})
        sec.put(f"estimated_n{n}", est[n])
    rows = []
    for n in (1, 4):
        rows.append([f"n = {n}", ms(real[n].get("median_ms")), ms(est[n]["step_time_ns"] / 1e6),
                     gib(real[n].get("peak_allocated")), gib(est[n]["peak_bytes"])])
    measured = error(real[4].get("median_ms"), real[1].get("median_ms"))
    estimated = error(est[4]["step_time_ns"], est[1]["step_time_ns"])
    rows.append(["n = 4 over n = 1", pct(measured), pct(estimated),
                 pct(error(real[4].get("peak_allocated"), real[1].get("peak_allocated"))),
                 pct(error(est[4]["peak_bytes"], est[1]["peak_bytes"]))])
    sec.put("overhead", {"measured": measured, "estimated": estimated})
    say(f"\nmHC overhead ({os.environ['MHC_CHECK_MHC']}, {steps} steps, median after 3; {real[1]['device']}):")
    table(rows, ["", "step (measured)", "step (roofline est.)", "peak (measured)", "peak (captured)"])
    return 0


SECTIONS = {"captured_vs_real": captured_vs_real, "advise": advise_section, "mhc_overhead": mhc_overhead}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in SECTIONS:
        sys.exit(__doc__)
    try:
        sys.exit(SECTIONS[sys.argv[1]]())
    except RuntimeError as e:
        say(f"{sys.argv[1]}: {e}")
        sys.exit(1)
