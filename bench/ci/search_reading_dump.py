#!/usr/bin/env python3
"""The search entry's second reading (tests/sim/reference_search_compare.py's configurations,
without running mhc) on captured steps, every answer printed as JSON, and its CPU seconds on
stderr: two versions of a reading module compared by their output.
  bench/ci/search_reading_dump.py [--caching=FILE.py] [--sample=N] TRACE.db... >answers.json
--caching: reference_caching.py taken from FILE.py instead of tests/sim (e.g. an older version,
from `git show REV:tests/sim/reference_caching.py`). --sample: as the CTest entry (4)."""
import importlib.util
import json
import sys
import time
from pathlib import Path

SIM = Path(__file__).resolve().parents[2] / "tests" / "sim"
sys.path.insert(0, str(SIM))


def main(argv):
    opts = dict(a[2:].split("=", 1) for a in argv[1:] if a.startswith("--"))
    traces = [Path(a) for a in argv[1:] if not a.startswith("--")]
    if "caching" in opts:
        spec = importlib.util.spec_from_file_location("reference_caching", opts["caching"])
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        sys.modules["reference_caching"] = mod
    import reference_search as rs  # noqa: E402
    import reference_search_compare as rsc  # noqa: E402
    import reference_settings_compare as sc  # noqa: E402
    sample = {"sample": opts.get("sample", "4")}
    t0 = time.process_time()
    out = []
    for trace in traces:
        for what, capacity in rsc.capacities(trace):
            for budget in rsc.BUDGETS:
                label = f"{trace.name} --capacity {capacity}B ({what})" + (
                    f" --budget {budget * 100:g}%" if budget is not None else "")
                if sc.sampled_out(label, sample, what.startswith("0 of") and budget is None):
                    continue
                try:
                    got = rs.search(str(trace), capacity, budget)
                except rs.NothingFits as e:
                    got = f"nothing fits: {e}"
                out.append([label, got])
    print(json.dumps(out, sort_keys=True, default=repr, indent=0))
    print(f"{len(out)} searches, {time.process_time() - t0:.1f} s of CPU", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
