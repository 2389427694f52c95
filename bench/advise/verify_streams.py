#!/usr/bin/env python3
"""Each setting of the verify table on one model, predicted and captured, down to the allocation.

    MHC_TORCH=... python3 bench/advise/verify_streams.py WORKDIR CAPTURE-ARGS...
    e.g. python3 bench/advise/verify_streams.py /tmp/w bench/advise/new_user/nanogpt.py

Captures the baseline (2 steps, WORKDIR/base.db), then for each setting of verify_table.py's list
(the allocator combination left out: the captured trace's own reserved peak is read with the
allocator as captured): `mhc advise base.db --setting S --trace-out WORKDIR/N.pred.db`,
`mhc-torch capture --recipe R --setting S -o WORKDIR/N.capt.db`, the captured step's peak and
reserved bytes as `mhc advise N.capt.db --setting {}` reads them, where the two streams of
allocations and frees first differ (bench/advise/stream_diff.py shows the events around it), and
the allocations whose free differs (matched by label, bytes and time made: meaningful where the
setting moves no kernel, as checkpointing; offload and optimizer settings move times). One line per setting; files kept in WORKDIR.
"""
import collections
import json
import os
import sqlite3
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import stream_diff  # noqa: E402
import verify_table as vt  # noqa: E402


def frees(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    s = dict(db.execute("SELECT id, text FROM strings"))
    out = collections.defaultdict(list)
    for b, t0, t1, label in db.execute("SELECT bytes, t_alloc, t_free, label FROM allocations WHERE device >= 0"):
        out[(s.get(label, ""), b, t0)].append(t1)
    return {k: sorted(v, key=lambda t: -1 if t is None else t) for k, v in out.items()}


def metrics(trace, setting, out=None):
    cmd = [vt.MHC, "advise", trace, "--setting", json.dumps(setting), "--json"] + (["--trace-out", out, "--force"] if out else [])
    d = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return (d["rows"][0] if setting else d["baseline"])


def main():
    work, args = sys.argv[1], sys.argv[2:]
    os.makedirs(work, exist_ok=True)
    base = os.path.join(work, "base.db")
    if not os.path.exists(base):
        subprocess.run(vt.mhc_torch() + ["capture"] + args + ["--steps", "2", "-o", base], check=True,
                       stdout=subprocess.DEVNULL)
    db = sqlite3.connect(base)
    recipe = db.execute("SELECT value FROM meta WHERE key = 'capture.recipe'").fetchone()[0]
    hc = db.execute("SELECT COUNT(*) FROM modules m JOIN strings s ON s.id = m.type WHERE s.text = 'HcMaps'").fetchone()[0]
    for n, (name, s) in enumerate(vt.settings(vt.blocks(base), hc > 0)):
        if "allocator" in s:
            continue
        pred, capt = os.path.join(work, f"{n}.pred.db"), os.path.join(work, f"{n}.capt.db")
        try:
            p = metrics(base, s, pred)
        except subprocess.CalledProcessError as e:
            print(f"{name}: predict failed: {e.stderr.strip()}", flush=True)
            continue
        if not os.path.exists(capt):
            r = subprocess.run(vt.mhc_torch() + ["capture", "--recipe", recipe, "--setting", json.dumps(s), "-o", capt],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                print(f"{name}: capture failed: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}",
                      flush=True)
                continue
        c = metrics(capt, {})
        fp, fc = frees(pred), frees(capt)
        only = len(set(fp) ^ set(fc))
        differ = sorted(((k, fp[k], fc[k]) for k in fp if k in fc and fp[k] != fc[k]), key=lambda d: d[0][2])
        sp, sc = stream_diff.load(pred), stream_diff.load(capt)
        same = 0
        while same < min(len(sp), len(sc)) and sp[same][0] == sc[same][0]:
            same += 1
        stream = "equal" if same == len(sp) == len(sc) else f"first differs at event {same} of {len(sc)}: {sp[same][1][1]} {sp[same][0]} vs {sc[same][1][1]} {sc[same][0]}"
        err = lambda a, b: 100 * (a - b) / b  # noqa: E731
        print(f"{name}: peak {vt.gib(p['peak_bytes'])}/{vt.gib(c['peak_bytes'])} {err(p['peak_bytes'], c['peak_bytes']):+.2f}%"
              f" reserved {vt.gib(p['reserved_bytes'])}/{vt.gib(c['reserved_bytes'])} "
              f"{err(p['reserved_bytes'], c['reserved_bytes']):+.2f}%; stream {stream}; allocations unmatched {only}, frees differ {len(differ)}"
              + (f"; first {differ[0][0]} {differ[0][1]} vs {differ[0][2]}" if differ else ""), flush=True)


if __name__ == "__main__":
    main()
