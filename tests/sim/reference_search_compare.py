#!/usr/bin/env python3
"""Runs `mhc advise TRACE --capacity C [--budget B] --json` and the document's second reading of
docs/advise.md "Search" (reference_search.py) on captured steps and compares the ranked answers
(each row's setting, peak_bytes, reserved_bytes, host_peak_bytes, step_time_ns, loss, and the run at the
capacity: reserved_at_capacity_bytes, alloc_retries, retry_cost_ns, steady_retry_cost_ns; whether the baseline runs there), the
number of DP runs and the max_split_size_mb setting searched, or that both find nothing that fits.

Usage: reference_search_compare.py MHC WORKDIR TRACE.db... [--sample=N] [--filter=TEXT] [--verbose]
       reference_search_compare.py MHC WORKDIR --capture=auto|PYTHON [--seq=N] [--quick]
--capture, --seq, --quick: the captures reference_settings_compare.py takes (and keeps in WORKDIR).
The capacities run from below the least reserved peak of a few settings to the baseline's (9
steps), each with no budget, 2% and 25%; --sample=N: one configuration in N, chosen by its label's CRC-32, and
every one at the least reserved peak tried without a budget (where the planner found nothing
although a combination fitted).
Exit 0 when every configuration agrees, 1 otherwise (each difference printed), 77 when --capture
finds no usable environment and no TRACE is given.
"""
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference_search as rs  # noqa: E402
import reference_settings as ref  # noqa: E402
import reference_settings_compare as rsc  # noqa: E402

STEPS = 8
BUDGETS = [None, 0.02, 0.25]
FIELDS = [("peak_bytes", "peak"), ("reserved_bytes", "reserved"), ("host_peak_bytes", "host"),
          ("step_time_ns", "step"), ("reserved_at_capacity_bytes", "reserved_at"), ("alloc_retries", "retries"),
          ("retry_cost_ns", "cost"), ("steady_retry_cost_ns", "steady_cost")]


def run_mhc(mhc, trace, capacity, budget):
    cmd = [mhc, "advise", str(trace), "--capacity", f"{capacity}B", "--json"]
    if budget is not None:
        cmd += ["--budget", f"{budget * 100:g}%"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip()
    return json.loads(p.stdout), None


def compare(mhc, trace, capacity, budget):
    out, err = run_mhc(mhc, trace, capacity, budget)
    try:
        mine, merr = rs.search(str(trace), capacity, budget), None
    except rs.NothingFits as e:
        mine, merr = None, f"nothing fits: {e}"
    if err or merr:
        if err and merr and "nothing fits" in err:
            return []
        return [f"mhc: {err or 'answers'}", f"reading: {merr or 'answers'}"]
    lines = []
    theirs = out["rows"]
    if len(theirs) != len(mine["ranked"]):
        lines.append(f"rows: {len(theirs)} in mhc, {len(mine['ranked'])} in the reading")
    for n, (t, m) in enumerate(zip(theirs, mine["ranked"])):
        tk = rs.setting_json(t["setting"])
        if tk != m["key"]:
            lines.append(f"row {n + 1}: mhc {tk} reading {m['key']}")
            continue
        for f, g in FIELDS:
            if t.get(f) is None or int(t[f]) != int(m[g]):
                lines.append(f"row {n + 1} {tk}: {f} mhc {t.get(f)} reading {m[g]}")
        if abs(t["loss"] - m["loss"]) > 1e-9:
            lines.append(f"row {n + 1} {tk}: loss mhc {t['loss']} reading {m['loss']}")
    for t in theirs[len(mine["ranked"]):]:
        lines.append(f"  only in mhc: {rs.setting_json(t['setting'])}")
    for m in mine["ranked"][len(theirs):]:
        lines.append(f"  only in the reading: {m['key']}")
    if out["baseline"].get("fits") != mine["baseline_fits"]:
        lines.append(f"baseline runs at the capacity: mhc {out['baseline'].get('fits')} reading {mine['baseline_fits']}")
    if out["search"]["dp_runs"] != mine["dp_runs"]:
        lines.append(f"DP runs: mhc {out['search']['dp_runs']} reading {mine['dp_runs']}")
    if out["search"].get("split_conf") != mine["split_conf"]:
        lines.append(f"max_split_size_mb searched: mhc {out['search'].get('split_conf')!r} reading {mine['split_conf']!r}")
    return lines


def capacities(trace):
    """From below the least reserved peak of a few settings (nothing fits) to the baseline's: the
    range where the search has something to choose, in STEPS steps."""
    # the search's own capture and predictions (cached): the searches after this one reuse them
    cap = rs.cached("capture", str(trace), {}, None, 0, 0, lambda: ref.Captured(str(trace)))
    names = [cap.modules[b]["name"] for b in rs.blocks(cap)]

    def predict(t):
        return rs.cached("predict", str(trace), t, ref.LINKS["pcie5"], 100e9, 15000, lambda: rs.predict_exactly(
            str(trace), cap, t, ref.LINKS["pcie5"], 100e9, 15000))

    tries = [{"allocator": conf} if conf else {} for conf in rs.allocator_settings(cap, predict)[0]]
    if ref.optimizer_steps(cap) and not rs.grads_read_on_gpu(cap):
        tries.append({"optimizer": {"state": "host"}})
    if names:
        tries += [dict(t, checkpoint={"modules": names, "policy": "full"}) for t in tries]
        tries.append({"offload": dict(rs.BLOCK_OFFLOADS[0], modules=names)})
    got = []
    for t in tries:
        try:
            got.append(predict(t)["reserved_bytes"])
        except ValueError:
            pass
    lo, hi = min(got), max(got)
    out = [("1 byte below the least tried", lo - 1)]
    out += [(f"{j} of {STEPS} from the least to the baseline's reserved peak", lo + (hi - lo) * j // STEPS)
            for j in range(STEPS + 1)]
    return out


def main(argv):
    args, opts = rsc.parse_argv(argv)
    if len(args) < 2:
        print(__doc__)
        return 2
    mhc, workdir, traces = args[0], Path(args[1]), [Path(t) for t in args[2:]]
    workdir.mkdir(parents=True, exist_ok=True)
    if "capture" in opts:
        got = rsc.capture_all(rsc.venv_python(opts["capture"]), workdir, "quick" in opts, int(opts.get("seq", "512")))
        if got is None and not traces:
            print("no Python environment with torch, transformers and mhc_torch: skipped")
            return 77
        if got is None:
            print("no Python environment with torch, transformers and mhc_torch: the captures skipped")
        traces += got or []
    n = bad = 0
    for trace in traces:
        for what, capacity in capacities(trace):
            for budget in BUDGETS:
                label = f"{trace.name} --capacity {capacity}B ({what})" + (
                    f" --budget {budget * 100:g}%" if budget is not None else "")
                if opts.get("filter") and opts["filter"] not in label:
                    continue
                # at the least reserved peak tried the planner once found nothing (its margin): run always
                kept = what.startswith("0 of") and budget is None
                if rsc.sampled_out(label, opts, kept):
                    continue
                n += 1
                bad += rsc.report(label, compare(mhc, trace, capacity, budget), opts)
    print(f"{n - bad} of {n} searches agree")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
