"""CPU seconds of `mhc-torch capture` with mhc_torch as it was at a git revision (--before REV,
default HEAD) and as this checkout has it, each capture in a process of its own, and whether the
two traces hold the same rows, table by table.
  PYTHONPATH=python .venv/bin/python bench/ci/frame_holds_cpu.py --before cc03126c \
      bench/advise/new_user/ddpm_ema.py bench/advise/new_user/dcgan.py
--without also captures with no frame-holds hook at all (its frame holds are missing: the floor
the hook's cost is measured from, not a result). --keep DIR keeps the traces there. PYTHONHASHSEED
is fixed for every capture (in trees before 6350e978, which layer a backward op was put in
followed a set's order). A
line per model file:
  FILE  before CPU s  now CPU s  [without CPU s]  same|DIFFERENT
Exit status 1 when any pair of traces differs."""
import argparse
import hashlib
import os
import sqlite3
import subprocess
import sys
import tempfile
import time

MODES = ("before", "now", "without")


def _child(mode: str, model: str, out: str) -> None:
    """One capture; prints its CPU seconds (this process, from the CLI's start, imports of the
    model file included)."""
    from mhc_torch import frame_holds
    from mhc_torch.cli import main

    if mode == "without":
        frame_holds.FrameHolds.__enter__ = lambda self: self
        frame_holds.FrameHolds.__exit__ = lambda self, *exc: False
    t0 = time.process_time()
    rc = main(["capture", model, "-o", out, "--force"])
    print(f"{time.process_time() - t0:.2f}", flush=True)
    sys.exit(rc)


def rows_digest(path: str) -> dict:
    """Per table, a SHA-256 of its rows in key order."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out = {}
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"):
            cols = ", ".join(f'"{r[1]}"' for r in db.execute(f'PRAGMA table_info("{table}")'))
            rows = db.execute(f'SELECT * FROM "{table}" ORDER BY {cols}').fetchall()
            out[table] = hashlib.sha256(repr(rows).encode()).hexdigest()
        return out
    finally:
        db.close()


def _capture(mode: str, model: str, out: str, python_dir: str) -> float:
    env = dict(os.environ, PYTHONPATH=python_dir, PYTHONHASHSEED="0")
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", mode, model, out],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"{model} ({mode}): the capture failed (exit {r.returncode}): {r.stderr.strip()[-2000:]}")
    return float(r.stdout.strip().splitlines()[-1])


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        _child(*sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", metavar="FILE")
    ap.add_argument("--before", metavar="REV", default="HEAD")
    ap.add_argument("--without", action="store_true")
    ap.add_argument("--keep", metavar="DIR")
    args = ap.parse_args()
    modes = MODES if args.without else MODES[:2]
    differ = False
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.abspath(__file__)), check=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        where = args.keep or tmp
        os.makedirs(where, exist_ok=True)
        # the revision's python/ directory, unpacked (its schema.sql links to trace/, and since
        # 2e7e0487 its gpus.tsv to datasets/)
        paths = ["python/mhc_torch", "trace/schema.sql"]
        if subprocess.run(["git", "-C", root, "cat-file", "-e", f"{args.before}:datasets/gpus.tsv"],
                          capture_output=True).returncode == 0:
            paths.append("datasets/gpus.tsv")
        archive = subprocess.run(["git", "-C", root, "archive", args.before, *paths],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        dirs = {"before": os.path.join(tmp, "python"), "now": os.path.join(root, "python")}
        dirs["without"] = dirs["now"]
        print("model\t" + "\t".join(f"{m} CPU s" for m in modes) + "\ttraces", flush=True)
        for model in args.models:
            name = os.path.splitext(os.path.basename(model))[0]
            paths = {m: os.path.join(where, f"{name}.{m}.db") for m in modes}
            cpu = {m: _capture(m, model, paths[m], dirs[m]) for m in modes}
            same = rows_digest(paths["before"]) == rows_digest(paths["now"])
            differ |= not same
            print(f"{model}\t" + "\t".join(f"{cpu[m]:.2f}" for m in modes) + ("\tsame" if same else "\tDIFFERENT"),
                  flush=True)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
