#!/usr/bin/env python3
"""gpu-check's summary.json, rewritten whole (temp file + rename) after every section, so that a
run cut short keeps every finished section's status and figures (standard library only).

    summary.py SUMMARY.json start SECONDS_BUDGET DRY_RUN HOST
    summary.py SUMMARY.json section NAME STATUS SECONDS LIMIT ESTIMATE [FIGURES.json]
    summary.py SUMMARY.json verdict TEXT
"""
import json
import os
import sys
import time


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"sections": []}


def save(path, summary):
    with open(path + ".part", "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    os.replace(path + ".part", path)


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    path, what, args = argv[0], argv[1], argv[2:]
    if what == "start" and len(args) == 3:
        summary = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "budget_s": int(args[0]),
                   "dry_run": args[1] == "1", "host": args[2], "sections": []}
    elif what == "section" and len(args) in (5, 6):
        summary = load(path)
        entry = {"name": args[0], "status": args[1], "seconds": int(args[2]), "limit_s": int(args[3]),
                 "estimate_s": int(args[4])}
        if len(args) == 6 and os.path.exists(args[5]):
            try:
                with open(args[5]) as f:
                    entry["figures"] = json.load(f)
            except ValueError as e:
                entry["figures_error"] = f"{args[5]}: {e}"
        summary["sections"] = [s for s in summary["sections"] if s["name"] != args[0]] + [entry]
    elif what == "verdict" and len(args) == 1:
        summary = load(path)
        summary["verdict"] = args[0]
    else:
        sys.exit(__doc__)
    save(path, summary)


if __name__ == "__main__":
    main(sys.argv[1:])
