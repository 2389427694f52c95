"""CPU seconds of `mhc-torch capture` with mhc_torch as it was at a git revision (--before REV,
default HEAD) and as this checkout has it, each capture in a process of its own, and whether the
two traces are the same: their `sqlite3 .dump` texts equal (same rows in the same order), or else
the same rows table by table (a DIFFERENT either way is printed as such).
  PYTHONPATH=python .venv/bin/python bench/ci/frame_holds_cpu.py --before cc03126c \
      bench/advise/new_user/ddpm_ema.py bench/advise/new_user/dcgan.py
A MODEL is a preset or a FILE.py, with capture options after it in the same argument
('tiny-gpt2 --seq 64 --layers 2 --steps 2'); with none, the set in DEFAULT (a GPT-2, an mHC model
checkpointed, a conv net). The CPU seconds are those of the capture, imports of torch, mhc_torch
and transformers excluded (they cost the same before and after); with --warm, of a second capture
in the same process (as a test file's captures after its first: torch's lazy imports and caches
made). --repeat N captures each N times a tree, alternately, and keeps the least (a shared
machine's load only adds). --without also
captures with no frame-holds hook at all (its frame holds are missing: the floor the hook's cost
is measured from, not a result). --keep DIR keeps the traces there. PYTHONHASHSEED is fixed for
every capture (in trees before 6350e978, which layer a backward op was put in followed a set's
order). A line per model:
  MODEL  before CPU s  now CPU s  [without CPU s]  now/before  same|same rows|DIFFERENT
and a line of the totals. Exit status 1 when any pair of traces differs."""
import argparse
import hashlib
import os
import shlex
import sqlite3
import subprocess
import sys
import tempfile
import time

MODES = ("before", "now", "without")
DEFAULT = ("tiny-gpt2 --seq 64 --layers 2 --steps 2",
           """tiny-mhc --seq 32 --layers 2 --setting '{"checkpoint":{"modules":["MhcTransformer"],"policy":"mhc"}}'""",
           "bench/advise/new_user/dcgan.py")


def _child(mode: str, model: str, out: str, warm: str) -> None:
    """One capture; prints its CPU seconds (this process, from the CLI's start, imports of the
    model file included, torch's, mhc_torch's and transformers' not)."""
    import importlib.util

    import torch  # noqa: F401
    from mhc_torch import capturing, frame_holds  # noqa: F401
    from mhc_torch.cli import main

    if importlib.util.find_spec("transformers") is not None:
        import transformers  # noqa: F401
    if mode == "without":
        frame_holds.FrameHolds.__enter__ = lambda self: self
        frame_holds.FrameHolds.__exit__ = lambda self, *exc: False
    model, *options = shlex.split(model)
    if warm == "warm" and main(["capture", model, *options, "-o", out, "--force"]) != 0:
        sys.exit(1)
    t0 = time.process_time()
    rc = main(["capture", model, *options, "-o", out, "--force"])
    print(f"{time.process_time() - t0:.2f}", flush=True)
    sys.exit(rc)


def dump(path: str) -> str:
    """The trace as `sqlite3 FILE .dump` writes it (the schema, then each table's rows in order)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return "\n".join(db.iterdump())
    finally:
        db.close()


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


def _capture(mode: str, model: str, out: str, python_dir: str, warm: bool) -> float:
    env = dict(os.environ, PYTHONPATH=python_dir, PYTHONHASHSEED="0")
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", mode, model, out,
                        "warm" if warm else "cold"],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"{model} ({mode}): the capture failed (exit {r.returncode}): {r.stderr.strip()[-2000:]}")
    return float(r.stdout.strip().splitlines()[-1])


def main() -> int:
    if len(sys.argv) == 6 and sys.argv[1] == "--child":
        _child(*sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", metavar="MODEL", default=list(DEFAULT))
    ap.add_argument("--before", metavar="REV", default="HEAD")
    ap.add_argument("--without", action="store_true")
    ap.add_argument("--repeat", metavar="N", type=int, default=1)
    ap.add_argument("--warm", action="store_true")
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
        print("model\t" + "\t".join(f"{m} CPU s" for m in modes) + "\tnow/before\ttraces", flush=True)
        total = dict.fromkeys(modes, 0.0)
        for model in args.models:
            name = os.path.splitext(os.path.basename(shlex.split(model)[0]))[0]
            paths = {m: os.path.join(where, f"{name}.{m}.db") for m in modes}
            cpu = _alternated(modes, model, paths, dirs, args)
            if dump(paths["before"]) == dump(paths["now"]):
                same = "same"
            else:
                same = "same rows" if rows_digest(paths["before"]) == rows_digest(paths["now"]) else "DIFFERENT"
            differ |= same != "same"
            for m in modes:
                total[m] += cpu[m]
            print(f"{model}\t" + "\t".join(f"{cpu[m]:.2f}" for m in modes) +
                  f"\t{cpu['now'] / cpu['before']:.2f}\t{same}", flush=True)
        print("total\t" + "\t".join(f"{total[m]:.2f}" for m in modes) + f"\t{total['now'] / total['before']:.2f}",
              flush=True)
    return 1 if differ else 0


def _alternated(modes, model, paths, dirs, args) -> dict:
    """Each mode's least CPU seconds over --repeat captures, the modes taken in turn."""
    runs = {m: [] for m in modes}
    for _ in range(args.repeat):
        for m in modes:
            runs[m].append(_capture(m, model, paths[m], dirs[m], args.warm))
    return {m: min(v) for m, v in runs.items()}


if __name__ == "__main__":
    sys.exit(main())
