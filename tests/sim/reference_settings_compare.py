#!/usr/bin/env python3
"""Runs `mhc advise --setting S --json --trace-out F` and the document's second reading of
docs/simulator.md "Settings" (reference_settings.py) on captured steps and compares the metrics
(peak_bytes, reserved_bytes, host_peak_bytes, step_time_ns) and, through the written trace, every
allocation (device, bytes, t_alloc, t_free), kernel (name, t_start, t_end) and copy (kind, bytes,
t_start, t_end).

Usage: reference_settings_compare.py MHC WORKDIR TRACE.db... [--quick] [--filter=TEXT] [--sample=N] [--verbose]
       reference_settings_compare.py MHC WORKDIR --capture=auto|PYTHON [--seq=N] [--quick]
--capture: capture the small steps first (tiny-llama, tiny-gpt2, tiny-mhc; tiny-llama with 2
micro-batches, tiny-gpt2 with the fused optimizer, settings_model.py alone and with 2
micro-batches, settings_model_scaler.py (GradScaler, fp16), settings_conv.py (convolutions
and BatchNorm) and settings_bert.py (a tiny BERT: the early trigger); --quick: tiny-llama with 2
micro-batches, tiny-mhc, the GradScaler step, the conv net and the BERT) with PYTHON's torch and this tree's mhc_torch (auto: $MHC_VENV, else .venv at the
repository's root), 2 steps of --seq tokens (512), into WORKDIR (kept there for the next run).
--quick: a smaller grid (one setting of each kind per block, fewer offload parameters).
--sample=N: one configuration in N, chosen by its label's CRC-32 (the same ones every time; the
label holds the trace's file name), and every one that offloads with min_bytes 0 (where two
differences were found and fixed in advise/: GradScaler's scale, a recomputation's input).
Exit 0 when every configuration agrees, 1 otherwise (each difference printed), 77 when
--capture finds no usable environment.
"""
import json
import os
import sqlite3
import subprocess
import sys
import zlib
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference_search  # noqa: E402
import reference_settings as ref  # noqa: E402

METRICS = ["peak_bytes", "reserved_bytes", "host_peak_bytes", "step_time_ns"]
CAPTURES = [("tl", ["tiny-llama"]), ("tg", ["tiny-gpt2"]), ("tm", ["tiny-mhc"]),
            ("tl_mb", ["tiny-llama", "--micro-batches", "2"]), ("tg_fused", ["tiny-gpt2", "--optimizer", "adamw-fused"]),
            ("own", [str(Path(__file__).resolve().parent / "settings_model.py")]),
            ("own_mb", [str(Path(__file__).resolve().parent / "settings_model.py"), "--micro-batches", "2"]),
            ("own_scaler", [str(Path(__file__).resolve().parent / "settings_model_scaler.py"), "--autocast", "fp16"]),
            ("conv", [str(Path(__file__).resolve().parent / "settings_conv.py")]),
            ("bert", [str(Path(__file__).resolve().parent / "settings_bert.py")])]
QUICK_CAPTURES = ["tl_mb", "tm", "own_scaler", "conv", "bert"]


def blocks(path):
    """The numbered children of the module path with the most forward kernels (docs/advise.md)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    names = [r[0] for r in db.execute("SELECT s.text FROM modules m JOIN strings s ON s.id = m.name")]
    types = {r[0]: r[1] for r in db.execute(
        "SELECT s.text, t.text FROM modules m JOIN strings s ON s.id = m.name JOIN strings t ON t.id = m.type")}
    db.close()
    by_parent = {}
    for n in names:
        head, _, tail = n.rpartition(".")
        if tail.isdigit():
            by_parent.setdefault(head, []).append(n)
    best = max(by_parent.values(), key=len) if by_parent else []
    if not best:   # blocks kept in an nn.ModuleDict: the largest group of one parent's children of one type
        groups = {}
        for n in names:
            groups.setdefault((n.rpartition(".")[0], types.get(n)), []).append(n)
        best = max((g for g in groups.values() if len(g) > 1), key=len, default=[])
        return best, any(types.get(n) == "HcMaps" for n in names)
    hc = [n for n in names if types.get(n) == "HcMaps"]
    return sorted(best, key=lambda n: int(n.rpartition(".")[2])), bool(hc)


def has_foreach_adamw(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    n = db.execute("SELECT count(*) FROM kernels k JOIN strings s ON s.id = k.name "
                   "WHERE s.text LIKE 'aten::_foreach_%'").fetchone()[0]
    db.close()
    return n > 0


ONE_ENGINE = {"name": "one-engine", "h2d": {"bandwidth_Bps": 2e10, "latency_s": 5e-6},
              "d2h": {"bandwidth_Bps": 1.5e10, "latency_s": 7e-6}, "copy_engines": 1, "duplex_factor": 0.6}


def runs(path, quick, workdir):
    """(setting, link, host bandwidth B/s, host cost per tensor ns): the grid, each on pcie5 with
    the default host figures, and the copying ones on other links and host figures too."""
    profile = Path(workdir) / "one-engine.json"
    profile.write_text(json.dumps(ONE_ENGINE))
    out = [(s, "pcie5", 100e9, 15000) for s in grid(path, quick)]
    moving = [{"offload": {"mode": "streamed", "modules": None, "min_bytes": 1024, "max_fwd_stash": 3, "prefetch": 2}},
              {"offload": {"mode": "sync", "modules": None, "min_bytes": 4096}},
              {"optimizer": {"state": "host"}}]
    for link in (["nvlink-c2c", str(profile)] if quick else ["pcie4", "nvlink-c2c", "pcie3", str(profile)]):
        out += [(s, link, 100e9, 15000) for s in moving]
    out.append(({"optimizer": {"state": "host"}}, "pcie4", 50e9, 3000))
    return out


def called_often(path):
    """Children of the root module called more than once in the first pass (a shared block)."""
    cap = ref.Captured(str(path))
    if not cap.passes:
        return []
    out = []
    for mid, m in cap.modules.items():
        if m["parent"] in cap.modules and cap.modules[m["parent"]]["parent"] == 0 and \
                len(ref.calls_of(cap, cap.passes[0], mid)) > 1:
            out.append(m["name"])
    return out


def grid(path, quick):
    bl, hc = blocks(path)
    out = [{}]
    targets = [[b] for b in bl] + ([bl] if len(bl) > 1 else []) + [[m] for m in called_often(path)]
    policies = ["full", "save_matmuls"] + (["mhc"] if hc else [])
    for t in targets:
        for p in policies:
            out.append({"checkpoint": {"modules": t, "policy": p}})
    if len(bl) > 1:
        out.append({"checkpoint": [{"modules": bl[:1], "policy": "full"},
                                   {"modules": bl[1:], "policy": "save_matmuls"}]})
    offl = [("sync", None, 1024, None, None), ("streamed", None, 1024, None, None), ("streamed", None, 1024, 2, 1),
            ("sync", None, 0, None, None)]
    if not quick:
        offl += [("streamed", None, 0, 4, 1), ("sync", None, 1 << 20, None, None),
                 ("streamed", None, 1024, 5, 0), ("streamed", None, 1024, 8, 1), ("streamed", None, 1024, 5, 4),
                 ("streamed", None, 1 << 20, 6, 2), ("streamed", None, 1024, 16, 2), ("streamed", None, 1024, 1, 0),
                 ("streamed", None, 1024, 3, 3)]
    for b in bl[:1 if quick else None]:
        offl += [("sync", [b], 1024, None, None), ("streamed", [b], 1024, None, None)]
    for mode, mods, mb, k, p in offl:
        o = {"mode": mode, "modules": mods, "min_bytes": mb}
        if k is not None:
            o["max_fwd_stash"] = k
        if p is not None:
            o["prefetch"] = p
        out.append({"offload": o})
    if has_foreach_adamw(path):
        out.append({"optimizer": {"impl": "fused"}})
    out.append({"optimizer": {"state": "host"}})
    for conf in ["expandable_segments:True", "max_split_size_mb:64", "roundup_power2_divisions:4",
                 "garbage_collection_threshold:0.8"][:2 if quick else None]:
        out.append({"allocator": conf})
    # the largest value of max_split_size_mb the search tries on this step (docs/advise.md "Search",
    # allocator settings), alone and with expandable segments
    for v in reference_search.split_size_values(ref.Captured(str(path)), 1):
        out += [{"allocator": f"max_split_size_mb:{v}"}, {"allocator": f"expandable_segments:True,max_split_size_mb:{v}"}]
    # combinations
    if bl:
        out.append({"checkpoint": {"modules": bl[:1], "policy": "full"},
                    "offload": {"mode": "streamed", "modules": None, "min_bytes": 1024}})
        out.append({"checkpoint": {"modules": bl, "policy": "full"}, "optimizer": {"state": "host"},
                    "allocator": "expandable_segments:True"})
        # a recomputation reading what the offload hook packs (the checkpoint's frame holds it)
        out.append({"checkpoint": {"modules": bl[:1], "policy": "mhc" if hc else "full"},
                    "offload": {"mode": "sync", "modules": None, "min_bytes": 0}})
        if not quick:
            out.append({"checkpoint": {"modules": bl[-1:], "policy": "full"},
                        "offload": {"mode": "streamed", "modules": None, "min_bytes": 0, "max_fwd_stash": 2,
                                    "prefetch": 3}, "allocator": "expandable_segments:True"})
        # the next block offloaded after a checkpointed one: the checkpoint's saves of its output
        # (a ReLU's, in place in ResNet's blocks) are its holders, not saves that keep it
        if len(bl) > 1:
            for mode in ("sync", "streamed"):
                out.append({"checkpoint": {"modules": bl[:1], "policy": "full"},
                            "offload": {"mode": mode, "modules": bl[1:2], "min_bytes": 0}})
        # checkpointed blocks with their inputs offloaded (the search's choice: the hook around the
        # checkpoint packs the call's inputs), beside a block offloaded without checkpointing
        for mode in ("sync", "streamed"):
            out.append({"checkpoint": {"modules": bl, "policy": "full"},
                        "offload": {"mode": mode, "modules": bl, "min_bytes": 1024}})
            if len(bl) > 1:
                out.append({"checkpoint": {"modules": bl[-1:], "policy": "full"},
                            "offload": {"mode": mode, "modules": bl, "min_bytes": 1024}})
        # a selective checkpoint of a block's convolution or linear layer, the norm after it
        # offloaded: an output the policy keeps that the hook saves too (the DCGAN's BatchNorm)
        pair = kept_then_norm(path, bl[0])
        if pair:
            for mode in ("sync", "streamed"):
                out.append({"checkpoint": {"modules": pair[:1], "policy": "save_matmuls"},
                            "offload": {"mode": mode, "modules": pair[1:], "min_bytes": 1024}})
        if has_foreach_adamw(path):
            out.append({"checkpoint": {"modules": bl[-1:], "policy": "save_matmuls"},
                        "offload": {"mode": "sync", "modules": bl[:1], "min_bytes": 1024},
                        "optimizer": {"impl": "fused"}})
    return out


def kept_then_norm(path, block):
    """The first two children of `block`, one after the other, a convolution or linear layer then
    a norm; None if it has none."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute("SELECT s.text, t.text FROM modules m JOIN strings s ON s.id = m.name "
                      "JOIN strings t ON t.id = m.type ORDER BY m.id").fetchall()
    db.close()
    kids = [(n, t) for n, t in rows if n.rpartition(".")[0] == block]
    for (n1, t1), (n2, t2) in zip(kids, kids[1:]):
        if (t1.startswith("Conv") or t1 == "Linear") and "Norm" in t2:
            return [n1, n2]
    return None


def written(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    allocs = db.execute("SELECT device, bytes, t_alloc, t_free FROM allocations ORDER BY id").fetchall()
    kernels = db.execute("SELECT s.text, k.t_start, k.t_end FROM kernels k JOIN strings s ON s.id = k.name "
                         "ORDER BY k.t_start, k.id").fetchall()
    copies = db.execute("SELECT kind, bytes, t_start, t_end, stream FROM copies ORDER BY t_start, id").fetchall()
    accesses = db.execute("SELECT s.text, k.t_start, a.device, a.bytes, a.t_alloc, a.t_free, x.mode FROM accesses x "
                          "JOIN kernels k ON k.id = x.kernel JOIN strings s ON s.id = k.name "
                          "JOIN allocations a ON a.id = x.allocation").fetchall()
    db.close()
    return allocs, kernels, copies, accesses


def run_mhc(mhc, trace, setting, out, link, host_bw, cost):
    cmd = [mhc, "advise", str(trace), "--setting", json.dumps(setting, separators=(",", ":")), "--json",
           "--trace-out", str(out), "--force", "--link", link, "--host-bandwidth", f"{host_bw / 1e9:g}GB/s",
           "--host-tensor-cost", f"{cost / 1000:g}us"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip()
    return json.loads(p.stdout)["rows"][0], None


def diff_lists(what, mine, theirs, limit=4):
    lines = []
    if len(mine) != len(theirs):
        lines.append(f"{what}: {len(theirs)} in mhc, {len(mine)} in the reading")
    if Counter(mine) == Counter(theirs):   # the same rows, as many times each
        return lines
    sm, st = sorted(mine, key=repr), sorted(theirs, key=repr)
    in_m, in_t = set(sm), set(st)
    only_t = [x for x in st if x not in in_m]
    only_m = [x for x in sm if x not in in_t]
    lines.append(f"{what}: {len(only_t)} only in mhc, {len(only_m)} only in the reading")
    for x in only_t[:limit]:
        lines.append(f"  mhc     {x}")
    for x in only_m[:limit]:
        lines.append(f"  reading {x}")
    return lines


def compare(mhc, trace, setting, workdir, link="pcie5", host_bw=100e9, cost=15000, cap=None):
    """`cap`: the trace's ref.Captured, read once for all of its settings (the reading does not
    change it), else read here."""
    out = Path(workdir) / "advise-out.db"
    row, err = run_mhc(mhc, trace, setting, out, link, host_bw, cost)
    try:
        lk = ref.LINKS[link] if link in ref.LINKS else ref.link_profile(link)
        mine = ref.predict(str(trace), setting, lk, host_bw, cost, cap=cap)
        merr = None
    except Exception as e:   # noqa: BLE001 - a difference to report
        mine, merr = None, f"{type(e).__name__}: {e}"
    if err or merr:
        if err and merr:
            print(f"refused by both: {trace.name} {json.dumps(setting)}: mhc: {err}; reading: {merr}")
            return []
        return [f"mhc: {err}" if err else "mhc: ok", f"reading: {merr}" if merr else "reading: ok"]
    lines = []
    for m in METRICS:
        if int(row.get(m, 0)) != int(mine[m]):
            lines.append(f"{m}: mhc {row.get(m)} reading {mine[m]}")
    allocs, kernels, copies, accesses = written(out)
    lines += diff_lists("allocations (device, bytes, t_alloc, t_free)", [tuple(a) for a in mine["allocations"]],
                        [tuple(a) for a in allocs])
    lines += diff_lists("kernels (name, t_start, t_end)", [tuple(k) for k in mine["kernels"]],
                        [tuple(k) for k in kernels])
    for n, (a, b) in enumerate(zip(sorted(mine["kernels"], key=lambda k: k[1]), kernels)):
        if tuple(a) != tuple(b):
            lines.append(f"  first kernel that differs: #{n} mhc {tuple(b)} reading {tuple(a)}")
            break
    lines += diff_lists("copies (kind, bytes, t_start, t_end, stream)", [tuple(c) for c in mine["copies"]],
                        [tuple(c) for c in copies])
    lines += diff_lists("accesses (kernel name, t_start, device, bytes, t_alloc, t_free, mode)",
                        [tuple(x) for x in mine["accesses"]], [tuple(x) for x in accesses])
    return lines


def venv_python(spec):
    """--capture=auto: $MHC_VENV, else .venv at the repository's root (as tests/python/pytest.sh)."""
    if spec != "auto":
        return spec
    root = Path(__file__).resolve().parents[2]
    venv = Path(os.environ.get("MHC_VENV", root / ".venv"))
    if not venv.is_absolute():
        venv = root / venv
    return str(venv / "bin" / "python")


def capture_all(python, workdir, quick, seq):
    """Captures the small steps in one Python process (torch is imported once)."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if not Path(python).exists() or subprocess.run(
            [python, "-c", "import mhc_torch, torch, transformers"], capture_output=True, env=env).returncode != 0:
        return None
    # A capture made by an earlier version of the bridge is taken again: the files are kept between
    # runs, and a capture records what the bridge's code knew (capture.frame_holds, for one).
    stamp = Path(workdir) / "bridge.crc"
    crc = 0
    for f in sorted((root / "python" / "mhc_torch").rglob("*.py")):
        crc = zlib.crc32(f.read_bytes(), zlib.crc32(str(f.relative_to(root)).encode(), crc))
    if not stamp.exists() or stamp.read_text() != str(crc):
        for name, _args in CAPTURES:
            (Path(workdir) / f"{name}.db").unlink(missing_ok=True)
    to_capture, traces = [], []
    for name, args in CAPTURES:
        if quick and name not in QUICK_CAPTURES:
            continue
        out = Path(workdir) / f"{name}.db"
        traces.append(out)
        if not out.exists():
            shape = [] if args[0].endswith(".py") else ["--seq", str(seq)]  # a model file makes its own batch
            to_capture.append(["capture"] + args + ["--steps", "2", *shape, "-o", str(out), "--force"])
    if to_capture:
        script = ("import sys, json\nfrom mhc_torch.cli import main\n"
                  "for a in json.loads(sys.argv[1]):\n    rc = main(a)\n    if rc: sys.exit(rc)\n")
        p = subprocess.run([python, "-c", script, json.dumps(to_capture)], capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise SystemExit(f"capture: {p.stderr.strip()[-600:]}")
    stamp.write_text(str(crc))
    return traces



def sampled_out(label, opts, kept=False):
    """--sample=K keeps one run in K, the same ones every time (by CRC-32 of the label); `kept`
    runs always."""
    sample = int(opts.get("sample", "1"))
    return sample > 1 and zlib.crc32(label.encode()) % sample != 0 and not kept


def report(label, lines, opts):
    """Prints one run's differences (or "ok" under --verbose); 1 when it differs, else 0."""
    if lines:
        print(f"DIFF {label}")
        for line in lines:
            print(f"    {line}")
        return 1
    if "verbose" in opts:
        print(f"ok   {label}")
    return 0


def parse_argv(argv):
    """(positional arguments, {option: value}); a bare --flag has the value "1"."""
    args = [a for a in argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "1") for a in argv[1:] if a.startswith("--"))
    return args, opts


def main(argv):
    args, opts = parse_argv(argv)
    if len(args) < 2:
        print(__doc__)
        return 2
    mhc, workdir = args[0], Path(args[1])
    workdir.mkdir(parents=True, exist_ok=True)
    quick = "quick" in opts
    traces = [Path(t) for t in args[2:]]
    if "capture" in opts:
        got = capture_all(venv_python(opts["capture"]), workdir, quick, int(opts.get("seq", "512")))
        if got is None:
            print("no Python environment with torch, transformers and mhc_torch: skipped")
            return 77
        traces += got
    n = bad = unread = 0
    for trace in traces:
        try:
            cap = ref.Captured(str(trace))
        except Exception:   # noqa: BLE001 - each run reads it again and reports the error
            cap = None
        for setting, link, host_bw, cost in runs(trace, quick, workdir):
            label = f"{trace.name} {json.dumps(setting, separators=(',', ':'))}"
            if (link, host_bw, cost) != ("pcie5", 100e9, 15000):
                label += f" --link {Path(link).name} --host-bandwidth {host_bw:g} --host-tensor-cost {cost}ns"
            if opts.get("filter") and opts["filter"] not in label:
                continue
            kept = (setting.get("offload") or {}).get("min_bytes") == 0   # the cases fixed in advise/ run always
            if sampled_out(label, opts, kept):
                continue
            if hook_around_selective(cap, setting):
                unread += 1
                continue
            n += 1
            bad += report(label, compare(mhc, trace, setting, workdir, link, host_bw, cost, cap), opts)
    print(f"{n - bad} of {n} configurations agree")
    if unread:
        print(f"{unread} with an offload's hook around a selectively checkpointed module left out: the reading "
              "does not yet follow the cached outputs selective checkpointing hands to the hook (docs/simulator.md, "
              "offload; checked against captures by python/tests/test_printed_code_as_verified.py)")
    return 0 if bad == 0 else 1


def hook_around_selective(cap, setting):
    """Whether the setting offloads with a hook around a module it checkpoints selectively (the whole
    forward, or a named module at or around it): selective checkpointing's cached outputs then go
    through the hook (docs/simulator.md, offload), which the reading does not model (a checkpoint's
    inputs it does)."""
    off = setting.get("offload")
    groups = setting.get("checkpoint") or []
    groups = [g for g in (groups if isinstance(groups, list) else [groups]) if g.get("policy") == "save_matmuls"]
    if not off or not groups:
        return False
    if off.get("modules") is None:
        return True
    if cap is None:
        return False
    scope = [cap.module_id(n) for n in off["modules"]]
    return any(cap.inside(cap.module_id(m), s) for g in groups for m in g["modules"] for s in scope)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
