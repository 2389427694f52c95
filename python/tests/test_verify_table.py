"""The table `mhc advise --verify` prints, pinned: its lines with every number read N compared with
python/tests/data/verify_table.txt (MHC_UPDATE_GOLDEN=1 rewrites it; review the diff), one row per
answer in the answers' order, its cells right-aligned under their headings, and its figures those
of `--json` (verify.peak_bytes, reserved, host peak, their errors, whether the step runs at the
capacity). The captured host peak and its error are columns where an answer moves memory to the
host (an offload, the optimizer): an offload's host bytes were predicted 2.00 MiB where the capture
held 28.00 MiB (docs/advise.md, Limits) and the table did not show it.

Each question is asked twice, for the text and for `--json`; the second asking's captures are the
first's, copied (REUSE below: same recipe and setting, so the same step), so that the two outputs
are compared on one capture per answer, and the suite pays for three captures, not six."""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

GOLDEN = os.path.join(os.path.dirname(__file__), "data", "verify_table.txt")

MODEL = textwrap.dedent("""
    import torch
    from torch import nn


    class Block(nn.Module):
        def __init__(self, d=256):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            return x + self.fc2(torch.relu(self.fc1(x)))


    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(4))

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return x


    def build_model():
        return Mlp()


    def make_batch():
        return (torch.randn(4096, 256),)


    def loss_fn(model, batch):
        return model(*batch).square().mean()
""")

RUNS = [
    ("search", ["--capacity", "180MiB", "--top", "2"]),
    ("setting", ["--setting", json.dumps({"checkpoint": {"modules": ["blocks.0"]},
                                          "offload": {"mode": "sync", "modules": ["blocks.2", "blocks.3"]}})]),
]


# MHC_TORCH for `mhc advise --verify`: the capture a recipe and setting asked before (every argument
# but -o's), copied to -o; otherwise mhc-torch run as it is (a process of its own) and its trace kept.
REUSE = textwrap.dedent("""
    import hashlib, os, shutil, subprocess, sys
    kept, args = sys.argv[1], sys.argv[2:]
    at = args.index("-o") + 1
    key = hashlib.sha256("\\0".join(args[:at] + args[at + 1:]).encode()).hexdigest()
    trace = os.path.join(kept, key + ".db")
    if not os.path.exists(trace):
        r = subprocess.run([sys.executable, "-m", "mhc_torch.cli", *args])
        if r.returncode:
            sys.exit(r.returncode)
        shutil.copyfile(args[at], trace)
    shutil.copyfile(trace, args[at])
""")


def _bytes(n):   # mhc::format_bytes
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    v, u = float(n), 0
    while abs(v) >= 1024 and u < len(units) - 1:
        v, u = v / 1024, u + 1
    return f"{n} B" if u == 0 else f"{v:.2f} {units[u]}"


def _masked(line):
    return re.sub(r" +", " ", re.sub(r"(^|[^A-Za-z0-9.])[0-9]+(\.[0-9]+)?", r"\1N", line)).strip()


@pytest.fixture(scope="module")
def outputs(tmp_path_factory, mhc_exe):
    folder = tmp_path_factory.mktemp("verify_table")
    model = folder / "mlp.py"
    model.write_text(MODEL)
    (folder / "reuse.py").write_text(REUSE)
    (folder / "kept").mkdir()
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), "..") + os.pathsep +
               os.environ.get("PYTHONPATH", ""), MHC_TORCH=f"{sys.executable} {folder / 'reuse.py'} {folder / 'kept'}")
    trace = str(folder / "mlp.db")
    r = subprocess.run([sys.executable, "-m", "mhc_torch.cli", "capture", str(model), "-o", trace, "--autocast", "none"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    out = {}
    for name, args in RUNS:
        runs = []
        for extra in ([], ["--json"]):
            r = subprocess.run([mhc_exe, "advise", trace, *args, "--verify", "--model", str(model), *extra],
                               capture_output=True, text=True, env=env)
            assert r.returncode == 0, r.stderr
            runs.append(r.stdout)
        out[name] = (runs[0], json.loads(runs[1]))
    return out


def _tables(text):
    """The answers' rank lines and the verify table's lines (its heading, header and rows)."""
    lines = text.splitlines()
    start = lines.index("verified: each setting applied and the step captured again")
    answers = [ln for ln in lines[:start] if re.match(r"^\d+ ", ln)]
    table = [lines[start], lines[start + 1]]
    for ln in lines[start + 2:]:
        if not re.match(r"^\d+ ", ln):
            break
        table.append(ln)
    return answers, table


def test_verify_table_matches_the_golden_file(outputs):
    got = []
    for name, _ in RUNS:
        got.append(f"## {name}")
        got += [_masked(ln) for ln in _tables(outputs[name][0])[1]]
    if os.environ.get("MHC_UPDATE_GOLDEN"):
        with open(GOLDEN, "w") as f:
            f.write("\n".join(got) + "\n")
    with open(GOLDEN) as f:
        assert got == f.read().splitlines()


@pytest.mark.parametrize("name", [n for n, _ in RUNS])
def test_verify_table_rows_are_the_answers_figures(outputs, name):
    text, doc = outputs[name]
    answers, table = _tables(text)
    header, rows = table[1], table[2:]
    assert len(rows) == len(answers) == len(doc["rows"]) > 0
    # the headings' right ends are the cells' (rank: left-aligned)
    names = re.findall(r"\S+(?: \S+)?", header)
    ends = [m.end() for m in re.finditer(r"\S+(?: \S+)?", header)]
    assert names[0] == "rank"
    for row, answer in zip(rows, doc["rows"]):
        cells = re.findall(r"\S+(?: (?:B|KiB|MiB|GiB))?", row)
        assert len(cells) == len(names), (header, row)
        assert [m.end() for m in re.finditer(r"\S+(?: (?:B|KiB|MiB|GiB))?", row)][1:] == ends[1:], (header, row)
        v = answer["verify"]
        at = "_at_capacity" if doc.get("capacity_bytes") else ""   # the reserved bytes at the capacity
        want = {"captured peak": _bytes(v["peak_bytes"]), "captured reserved": _bytes(v[f"reserved{at}_bytes"]),
                "peak err": f"{100 * v['peak_error']:.2f}%", "reserved err": f"{100 * v[f'reserved{at}_error']:.2f}%"}
        if "captured host" in names:
            want["captured host"] = _bytes(v["host_peak_bytes"])
            want["host err"] = f"{100 * v['host_peak_error']:.2f}%"
        if "runs" in names:
            want["runs"] = "yes" if v["fits"] else "NO"
        got = dict(zip(names, cells))
        assert {k: got[k] for k in want} == want
    assert ("captured host" in names) == any(r["host_peak_bytes"] or r["verify"]["host_peak_bytes"]
                                             for r in doc["rows"])
    assert ("runs" in names) == (name == "search")
