#!/usr/bin/env python3
"""The advise verification table (docs/results.md, "Settings: predicted vs captured").

For each model: capture the baseline step (2 steps), then for each setting ask `mhc advise
--setting S --verify --json`, which predicts the setting from the baseline (the simulator's
transformation of the trace) and captures the step again with the setting applied
(mhc-torch capture --recipe --setting, through mhc_torch.apply), and compare peak and reserved.

    MHC_TORCH=... python3 bench/advise/verify_table.py [--out docs/results.md] [--only gpt2]

--only KEY runs one model (gpt2, llama7b, mhc, user) and rewrites only its rows; the others keep
theirs, each row with the date it was run.
"""
import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MHC = os.environ.get("MHC_EXE", os.path.join(ROOT, "build", "cli", "mhc"))

OLD_TABLE_DATE = "2026-12-02"  # the rows written before the table had a date per row

MODELS = [
    ("GPT-2 small, 8 x 1024", "gpt2", ["gpt2-small", "--batch", "8", "--seq", "1024"]),
    ("Llama-2-7B, 1 x 4096", "llama7b", ["llama2-7b", "--batch", "1", "--seq", "4096"]),
    ("mHC-27B shape, n = 4, 4 layers, 1 x 4096", "mhc", ["mhc-27b", "--layers", "4", "--batch", "1", "--seq", "4096",
                                                       "--hc", "4", "--gpu", "h200"]),
    ("user model (bench/advise/user_model.py)", "user", [os.path.join(HERE, "user_model.py")]),
]


def mhc_torch():
    env = os.environ.get("MHC_TORCH")
    return env.split() if env else [os.path.join(ROOT, ".venv", "bin", "mhc-torch")]


def blocks(trace):
    """The model's blocks: the numbered children of the prefix with the most of them."""
    db = sqlite3.connect(trace)
    names = [r[0] for r in db.execute("SELECT s.text FROM modules m JOIN strings s ON s.id = m.name")]
    groups = {}
    for n in names:
        m = re.match(r"(.*)\.(\d+)$", n)
        if m:
            groups.setdefault(m.group(1), []).append((int(m.group(2)), n))
    prefix = max(groups, key=lambda p: len(groups[p]))
    return [n for _, n in sorted(groups[prefix])]


def settings(bl, mhc_model):
    half = bl[len(bl) // 2:]
    out = [
        ("checkpoint every block", {"checkpoint": {"modules": bl, "policy": "full"}}),
        ("checkpoint half the blocks", {"checkpoint": {"modules": half, "policy": "full"}}),
        ("selective checkpoint (keep matmuls), every block", {"checkpoint": {"modules": bl, "policy": "save_matmuls"}}),
        ("offload half the blocks, sync", {"offload": {"mode": "sync", "modules": half}}),
        ("offload half the blocks, streamed", {"offload": {"mode": "streamed", "modules": half}}),
        ("fused AdamW", {"optimizer": {"impl": "fused"}}),
        ("optimizer on the host", {"optimizer": {"state": "host"}}),
        ("checkpoint half + fused AdamW + expandable segments",
         {"checkpoint": {"modules": half, "policy": "full"}, "optimizer": {"impl": "fused"},
          "allocator": "expandable_segments:True"}),
    ]
    if mhc_model:
        out.append(("mHC maps recomputed, every block", {"checkpoint": {"modules": bl, "policy": "mhc"}}))
    return out


def gib(b):
    return f"{b / 2**30:.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "results.md"))
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    rows = []
    work = tempfile.mkdtemp(prefix="mhc-advise-table-")
    t0 = time.time()
    for title, key, args in MODELS:
        if a.only and a.only != key:
            continue
        trace = os.path.join(work, key + ".db")
        subprocess.run(mhc_torch() + ["capture"] + args + ["--steps", "2", "-o", trace], check=True,
                       stdout=subprocess.DEVNULL)
        for name, s in settings(blocks(trace), key == "mhc"):
            model = ["--model", args[0]] if args[0].endswith(".py") else []   # a model file runs only when named
            r = subprocess.run([MHC, "advise", trace, "--setting", json.dumps(s), "--verify", "--json", *model],
                               capture_output=True, text=True)
            if r.returncode != 0:
                rows.append((title, name, None, r.stderr.strip()))
                continue
            rows.append((title, name, json.loads(r.stdout)["rows"][0], ""))
            print(title, name, "ok", file=sys.stderr)
    stamp = time.strftime("%Y-%m-%d")
    text = open(a.out).read() if os.path.exists(a.out) else ""
    pattern = re.compile(r"<!-- advise-verify-table.*?<!-- /advise-verify-table -->", re.S)
    found = pattern.search(text)
    # Rows of models not run this time are kept with their own date (a run with --only updates
    # only its model's rows).
    table = {}
    for line in (found.group(0).splitlines() if found else []):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 8 and cells[0] not in ("model", "---"):
            if len(cells) == 8:
                cells.append(OLD_TABLE_DATE)
            table[(cells[0], cells[1])] = cells[2:9]
    order = [(title, name) for title, key, _ in MODELS for name, _ in settings(["b0", "b1"], key == "mhc")]
    for title, name, row, err in rows:
        if row is None:
            table[(title, name)] = [f"failed: {err}", "", "", "", "", "", stamp]
            continue
        v = row["verify"]
        table[(title, name)] = [gib(row["peak_bytes"]), gib(v["peak_bytes"]), f"{100 * v['peak_error']:.2f}%",
                                gib(row["reserved_bytes"]), gib(v["reserved_bytes"]), f"{100 * v['reserved_error']:.2f}%", stamp]
    lines = ["| model | setting | peak predicted | peak captured | error | reserved predicted | reserved captured | error | run |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    worst = 0.0
    for key in order + [k for k in table if k not in order]:
        if key not in table:
            continue
        cells = table[key]
        for c in (cells[2], cells[5]):
            if c.endswith("%"):
                worst = max(worst, float(c[:-1]) / 100)
        lines.append("| " + " | ".join(list(key) + cells) + " |")
    block = "\n".join([
        "<!-- advise-verify-table: written by bench/advise/verify_table.py -->",
        f"Command: `python3 bench/advise/verify_table.py [--only KEY]` (last run {stamp}"
        f"{', --only ' + a.only if a.only else ''}, {time.time() - t0:.0f} s on this machine; each row's date in its "
        "last column). Sizes in GiB; errors are |predicted - captured| / captured. Every capture is 2 training steps "
        f"on fake tensors (mhc-torch capture, bf16 autocast, AdamW). Largest error: {100 * worst:.2f}%.",
        "",
        *lines,
        "<!-- /advise-verify-table -->",
    ])
    if found:
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip() + "\n\n## Settings: predicted vs captured (mhc advise --verify)\n\n" + block + "\n"
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, a.out)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
