#!/usr/bin/env python3
"""Checks `mhc advise --verify`'s comparison against docs/advise.md "Verification", read alone:
for every printed row, the step captured again with `mhc-torch capture --recipe R --setting S`
(R: the trace's meta capture.recipe), its live-bytes peak and its reserved peak under the caching
allocator model with the setting's allocator settings (over the capture's own), measured exactly as
a prediction is (reference_settings.py's live_peak and reserved_peak, reference_caching.py), and
its host bytes; the errors |predicted - captured| / captured. This script captures each printed
setting itself, measures it, and compares with what `mhc advise --verify --json` reports. A trace
without capture.recipe must be refused in one line (exit 2).

Usage: reference_verify_compare.py MHC PYTHON WORKDIR TRACE.db [--capacity=BYTES] [--top=N]
PYTHON: a Python with torch and this tree's mhc_torch (auto: $MHC_VENV, else .venv at the root).
--capacity: default, the least reserved peak of the answers found at the baseline's reserved peak
less a quarter of the way to the host optimizer's (so that block settings are printed).
Exit 0 when everything agrees, 1 otherwise, 77 without a usable Python.
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference_settings as ref  # noqa: E402
import reference_settings_compare as rsc  # noqa: E402


def measure(path, allocator):
    """The capture's peaks as docs/advise.md says: live bytes, the caching allocator model with the
    capture's allocator settings and the setting's, and the host's live bytes."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    rows = db.execute("SELECT t_alloc, id, device, bytes, t_free, stream FROM allocations ORDER BY t_alloc, id").fetchall()
    db.close()
    dev = [(i, r) for i, r in enumerate(rows) if r[2] >= 0]
    host = [(i, r) for i, r in enumerate(rows) if r[2] < 0]
    conf = ",".join(x for x in (meta.get("allocator.conf", ""), allocator) if x)
    return dict(peak_bytes=ref.live_peak(dev), reserved_bytes=ref.reserved_peak(dev, conf),
                host_peak_bytes=ref.live_peak(host))


def relative_error(pred, capt):
    if capt == 0:
        return 0.0 if pred == 0 else 1.0
    return abs(pred - capt) / capt


def main(argv):
    args, opts = rsc.parse_argv(argv)
    if len(args) != 4:
        print(__doc__)
        return 2
    mhc, python, workdir, trace = args[0], rsc.venv_python(args[1]), Path(args[2]), Path(args[3])
    workdir.mkdir(parents=True, exist_ok=True)
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""),
               MHC_TORCH=f"{python} -m mhc_torch.cli")
    if not Path(python).exists() or subprocess.run([python, "-c", "import mhc_torch, torch"], capture_output=True,
                                                   env=env).returncode != 0:
        print("no Python environment with torch and mhc_torch: skipped")
        return 77
    problems = []
    # without a recipe: refused in one line
    bare = workdir / "no-recipe.db"
    shutil.copy(trace, bare)
    db = sqlite3.connect(bare)
    db.execute("DELETE FROM meta WHERE key = 'capture.recipe'")
    db.commit()
    db.close()
    p = subprocess.run([mhc, "advise", str(bare), "--capacity", "1TiB", "--verify"], capture_output=True, text=True,
                       env=env)
    if p.returncode != 2 or len(p.stderr.strip().splitlines()) != 1 or "capture.recipe" not in p.stderr:
        problems.append(f"a trace without capture.recipe: exit {p.returncode}, {p.stderr.strip()!r}")
    capacity = opts.get("capacity")
    if capacity is None:
        base = ref.predict(str(trace), {})["reserved_bytes"]
        host = ref.predict(str(trace), {"optimizer": {"state": "host"}})["reserved_bytes"]
        capacity = str(base - (base - host) // 4)
    cmd = [mhc, "advise", str(trace), "--capacity", f"{capacity}B", "--top", opts.get("top", "2"), "--verify",
           "--json"]
    recipe_model = json.loads(dict(sqlite3.connect(f"file:{trace}?mode=ro", uri=True).execute(
        "SELECT key, value FROM meta").fetchall()).get("capture.recipe", "{}")).get("model", "")
    if recipe_model.endswith(".py"):   # --verify runs a model file only when it is named (docs/advise.md)
        cmd += ["--model", recipe_model]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        problems.append(f"mhc advise --verify: exit {p.returncode}: {p.stderr.strip()[-400:]}")
        rows = []
    else:
        rows = json.loads(p.stdout)["rows"]
    meta = dict(sqlite3.connect(f"file:{trace}?mode=ro", uri=True).execute("SELECT key, value FROM meta").fetchall())
    for n, row in enumerate(rows):
        setting = row["setting"]
        out = workdir / f"verify-{n}.db"
        c = subprocess.run([python, "-m", "mhc_torch.cli", "capture", "--recipe", meta["capture.recipe"], "--setting",
                            json.dumps(setting, separators=(",", ":")), "-o", str(out), "--force"],
                           capture_output=True, text=True, env=env)
        label = json.dumps(setting, separators=(",", ":"), sort_keys=True)
        if c.returncode != 0:
            problems.append(f"{label}: capture failed: {c.stderr.strip()[-300:]}")
            continue
        mine = measure(out, setting.get("allocator", ""))
        v = row.get("verify", {})
        for k in ("peak_bytes", "reserved_bytes", "host_peak_bytes"):
            if v.get(k) != mine[k]:
                problems.append(f"{label}: captured {k}: mhc {v.get(k)} reading {mine[k]}")
        for k, f in (("peak_error", "peak_bytes"), ("reserved_error", "reserved_bytes")):
            want = relative_error(row[f], mine[f])
            if v.get(k) is None or abs(v[k] - want) > 1e-12:
                problems.append(f"{label}: {k}: mhc {v.get(k)} reading {want}")
        print(f"{'ok  ' if not problems else '    '} {label}: predicted peak {row['peak_bytes']}, captured "
              f"{mine['peak_bytes']}; reserved {row['reserved_bytes']} / {mine['reserved_bytes']}")
    for line in problems:
        print(f"DIFF {line}")
    print(f"{len(rows)} verified rows, {len(problems)} differences")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
