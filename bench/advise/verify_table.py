#!/usr/bin/env python3
"""The advise verification table (docs/results.md, "Settings: predicted vs captured").

For each model: capture the baseline step (2 steps), then for each setting ask `mhc advise
--setting S --verify --json`, which predicts the setting from the baseline (the simulator's
transformation of the trace) and captures the step again with the setting applied
(mhc-torch capture --recipe --setting, through mhc_torch.apply), and compare peak and reserved.

    MHC_TORCH=... python3 bench/advise/verify_table.py [--out docs/results.md] [--only gpt2]
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
            r = subprocess.run([MHC, "advise", trace, "--setting", json.dumps(s), "--verify", "--json"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                rows.append((title, name, None, r.stderr.strip()))
                continue
            rows.append((title, name, json.loads(r.stdout)["rows"][0], ""))
            print(title, name, "ok", file=sys.stderr)
    lines = ["| model | setting | peak predicted | peak captured | error | reserved predicted | reserved captured | error |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    worst = 0.0
    for title, name, row, err in rows:
        if row is None:
            lines.append(f"| {title} | {name} | failed: {err} | | | | | |")
            continue
        v = row["verify"]
        worst = max(worst, v["peak_error"], v["reserved_error"])
        lines.append(f"| {title} | {name} | {gib(row['peak_bytes'])} | {gib(v['peak_bytes'])} | {100 * v['peak_error']:.2f}% | "
                     f"{gib(row['reserved_bytes'])} | {gib(v['reserved_bytes'])} | {100 * v['reserved_error']:.2f}% |")
    stamp = time.strftime("%Y-%m-%d")
    block = "\n".join([
        "<!-- advise-verify-table: written by bench/advise/verify_table.py -->",
        f"Command: `python3 bench/advise/verify_table.py` ({stamp}, {time.time() - t0:.0f} s on this machine). "
        "Sizes in GiB; errors are |predicted - captured| / captured. Every capture is 2 training steps on fake "
        f"tensors (mhc-torch capture, bf16 autocast, AdamW). Largest error: {100 * worst:.2f}%.",
        "",
        *lines,
        "<!-- /advise-verify-table -->",
    ])
    text = open(a.out).read() if os.path.exists(a.out) else ""
    pattern = re.compile(r"<!-- advise-verify-table.*?<!-- /advise-verify-table -->", re.S)
    if pattern.search(text):
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
