"""Pastes the code `mhc advise` prints for the top answers into a copy of the model file, as a user
would paste it into a training script, captures the step again and compares the captured peak and
reserved bytes with the answer's prediction (what a user checking the answer does; `--verify`
runs the one-line `mhc_torch.apply` form instead).

    python3 bench/advise/new_user/paste_printed.py MODEL.py TRACE.db CAPACITY [capture options...]

TRACE.db is MODEL.py's capture (`mhc-torch capture MODEL.py -o TRACE.db [capture options]`); the
same capture options are passed again. Where the printed code goes: lines that use only `model`
at the end of build_model(); lines that use `optimizer` after build_optimizer(model) builds it
(mhc-torch's default AdamW when the file has none) or, in a file whose step function builds its
optimizer, at the line `# PASTE HERE` right after it (`optimizer` bound to run.state["optimizer"]).
Answers whose printed code needs DeepSpeed (not installed here) get the printed
`mhc_torch.apply` line pasted instead, and say so. The reserved bytes of a capture come from
`mhc advise CAPTURE --setting '{"allocator": ...}'` with the answer's allocator setting (the
printed `os.environ[...]` line acts on the GPU's allocator, which a capture does not run).
MHC_EXE names the mhc binary, MHC_PYTHON the Python with torch (default: this one)."""
import json
import os
import subprocess
import sys
import textwrap

MARKER = "        # PASTE HERE"


def _peak(db):
    out = subprocess.run(["sqlite3", db, "SELECT value FROM meta WHERE key = 'capture.peak_bytes'"],
                         capture_output=True, text=True)
    return int(out.stdout)


def _source(model, base, printed):
    text = open(model).read()
    uses_opt = "optimizer" in printed.replace("build_optimizer", "")
    body = textwrap.indent(printed, "    ")
    head = f"from {base} import *  # noqa: F401,F403\nimport {base} as _orig\nimport torch\n\n"
    marker = next((line for line in text.splitlines() if line.startswith(MARKER)), None)
    if uses_opt and marker is not None:
        code = "optimizer = run.state['optimizer']\n" + printed + "run.state['optimizer'] = optimizer\n"
        return text.replace(marker + "\n", textwrap.indent(code, "        "))
    if uses_opt:
        make = ("_orig.build_optimizer(model)" if "def build_optimizer" in text else
                "torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4, foreach=True)")
        return head + f"def build_optimizer(model):\n    optimizer = {make}\n" + body + "    return optimizer\n"
    return head + "def build_model(small=False):\n    model = _orig.build_model(small)\n" + body + "    return model\n"


def main():
    model, trace, capacity, extra = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    mhc = os.environ.get("MHC_EXE", "build/cli/mhc")
    python = os.environ.get("MHC_PYTHON", sys.executable)
    out = subprocess.run([mhc, "advise", trace, "--capacity", capacity, "--top", os.environ.get("TOP", "3"), "--json"],
                         capture_output=True, text=True)
    if out.returncode:
        print(out.stderr.strip())
        return out.returncode
    doc = json.loads(out.stdout)
    base = os.path.splitext(os.path.basename(model))[0]
    folder = os.path.dirname(os.path.abspath(model))
    b = doc["baseline"]
    print(f"baseline peak {b['peak_bytes'] / 2**30:.3f} GiB, reserved {b['reserved_bytes'] / 2**30:.3f} GiB")
    for i, row in enumerate(doc["rows"], 1):
        printed, rest = row["code"].split("# or, the same in one line")
        note = ""
        if "deepspeed" in printed:
            printed, note = rest.split("\n", 1)[1], " (the printed mhc_torch.apply line: needs DeepSpeed)"
        printed = printed.rstrip("\n") + "\n"
        name = os.path.join(folder, f"{base}_pasted{i}.py")
        db = os.path.join(folder, f"{base}_pasted{i}.db")
        with open(name, "w") as f:
            f.write(_source(model, base, printed))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (folder, os.environ.get("PYTHONPATH")) if p)}
        r = subprocess.run([python, "-m", "mhc_torch.cli", "capture", name, "-o", db, "--force", *extra],
                           capture_output=True, text=True, env=env)
        print(f"{i}. {row['description']}{note}")
        if r.returncode:
            print(f"   the pasted code's capture FAILED: {r.stderr.strip().splitlines()[-1:]}")
            continue
        peak = _peak(db)
        alloc = row["setting"].get("allocator")
        m = subprocess.run([mhc, "advise", db, "--setting", json.dumps({"allocator": alloc} if alloc else {}), "--json"],
                           capture_output=True, text=True)
        reserved = json.loads(m.stdout)["rows"][0]["reserved_bytes"]
        pp, pr = row["peak_bytes"], row["reserved_bytes"]
        print(f"   predicted peak {pp / 2**30:.3f} GiB, reserved {pr / 2**30:.3f} GiB; pasted and captured: peak "
              f"{peak / 2**30:.3f} GiB ({(pp - peak) / peak:+.2%}), reserved {reserved / 2**30:.3f} GiB "
              f"({(pr - reserved) / reserved:+.2%})")
        os.remove(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
