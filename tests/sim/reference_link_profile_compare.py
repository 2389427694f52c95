#!/usr/bin/env python3
"""Runs `mhc simulate --link FILE` on random link profiles beside reference_link_profile.py (docs/simulator.md
"Link models", read alone): a valid profile changed in one to three ways, most at a bound of the
document's table and a step either side (bandwidths 1e3 and 1e15 B/s, latency 0 and 10 s, copy
engines 1, 64, 0, 65, 2^32+1, 2.0, true, a string; the duplex factor 0 and 1; the shares 0 and 1;
by_chunk rows of 1 and 2^56 bytes, a fraction, out of order, a rate of 0), a field left out or of
another type, optional fields present or not, a name with a control, separator or format character,
text that is not JSON, a file over 16 MiB. Compared: accepted (exit 0 or 3) or refused (exit 2, one
line naming the file and the field the document names), and, when accepted, the link the run's
config holds (each direction's bandwidth and latency, copy engines, duplex factor, the two shares,
0.5 when absent). Then the options that override a preset's figures (--h2d-bandwidth, --d2h-bandwidth,
--latency, --copy-engines, --duplex-factor, --nccl-share, --memcpy-share) at the same bounds and at
the values meaning the link's own figure (0, -1): accepted or refused naming the field, the figures,
and the run's link name (`pcie4-custom` where a figure was overridden).

Usage: reference_link_profile_compare.py MHC WORKDIR [--runs=N] [--seed=S] [--verbose]
Exit 0 when all agree, 1 otherwise."""
import json
import random
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import reference_link_profile as ref  # noqa: E402

EDGES = {
    "bandwidth": [1e3, 1e15, 999.0, 1.0000001e15, 0, -1, 2.5e10, "25e9", None, 1e16, 1000.0001],
    "latency": [0, 0.0, 10, 10.000001, -1e-9, 6e-6, 1e-12, "6us", 9.999999],
    "copy_engines": [1, 2, 64, 0, 65, -1, 2 ** 32 + 1, 2 ** 63, 2.0, 1.5, True, "2", None],
    "duplex": [1, 1.0, 0, 0.0, 1e-9, 0.5, 1.0000001, -0.5, "0.5", None],
    "share": [0, 0.0, 0.999999, 1, 1.0, -0.01, 0.5, "0.5", None],
    "chunk_bytes": [1, 4096, 2 ** 56, 2 ** 56 + 1, 0, 1.5, -4, 4096.0, "4096"],
    "chunk_rate": [0, 1e3, 1e15, 999, 1e16, 2e10, -5, "1e9"],
}
NAMES = ["a100-node", "h100 pcie5", "été", "tab\there", "nl\nhere", "bell\x07", "rev\u202ename", "ls\u2028x",
         "zw\u200bj", "del\x7f", "ok-name_2", "emoji\U0001F600"]


def base(rng):
    p = {"name": "prof", "h2d": {"bandwidth_Bps": rng.choice([2.45e10, 1.2e10, 5.5e10]), "latency_s": 6e-6},
         "d2h": {"bandwidth_Bps": rng.choice([2.5e10, 1.1e10]), "latency_s": rng.choice([5e-6, 0.0])},
         "copy_engines": rng.choice([1, 2, 4]), "duplex_factor": rng.choice([0.5, 1.0, 0.9])}
    if rng.random() < 0.4:
        p["nccl_share"] = rng.choice([0.0, 0.3])
    if rng.random() < 0.4:
        p["memcpy_share"] = rng.choice([0.0, 0.7])
    if rng.random() < 0.3:
        p["source"] = "mhc calibrate on test"
    if rng.random() < 0.3:
        p["notes"] = ["one", "two"]
    if rng.random() < 0.2:
        p["measured_load_average"] = 1.5
    if rng.random() < 0.5:
        sizes = sorted(rng.sample([4096, 65536, 1 << 20, 8 << 20, 64 << 20, 256 << 20], rng.randint(1, 4)))
        p["by_chunk"] = [{"bytes": b, "h2d_Bps": 1e10, "d2h_Bps": 1.2e10} for b in sizes]
    return p


def _put(obj, key, value):
    """Sets a field; None (an edge case of its own) leaves the field out."""
    if value is None:
        obj.pop(key, None)
    else:
        obj[key] = value


def perturb(p, rng):
    r = rng.randrange(13)
    if r == 0 and not (isinstance(p.get("h2d"), dict) and isinstance(p.get("d2h"), dict)):
        return "unchanged"
    if r in (4, 5) and not isinstance(p.get("by_chunk", []), list):
        return "unchanged"
    if r == 0:
        d, k = rng.choice(["h2d", "d2h"]), rng.choice(["bandwidth_Bps", "latency_s"])
        v = rng.choice(EDGES["bandwidth" if k == "bandwidth_Bps" else "latency"])
        _put(p[d], k, v)
        return f"{d}.{k}={v!r}"
    if r == 1:
        v = rng.choice(EDGES["copy_engines"])
        _put(p, "copy_engines", v)
        return f"copy_engines={v!r}"
    if r == 2:
        v = rng.choice(EDGES["duplex"])
        _put(p, "duplex_factor", v)
        return f"duplex_factor={v!r}"
    if r == 3:
        k, v = rng.choice(["nccl_share", "memcpy_share"]), rng.choice(EDGES["share"])
        _put(p, k, v)
        return f"{k}={v!r}"
    if r in (4, 5):
        rows = p.setdefault("by_chunk", [{"bytes": 4096}, {"bytes": 1 << 20}])
        if not rows or not all(isinstance(x, dict) for x in rows):
            rows[:] = [{"bytes": 4096}]
        i = rng.randrange(len(rows))
        if r == 4:
            rows[i]["bytes"] = v = rng.choice(EDGES["chunk_bytes"] + [rows[i - 1]["bytes"] if i else 1])
            return f"by_chunk[{i}].bytes={v!r}"
        k = rng.choice(["h2d_Bps", "d2h_Bps", "both_h2d_Bps", "both_d2h_Bps"])
        rows[i][k] = v = rng.choice(EDGES["chunk_rate"])
        return f"by_chunk[{i}].{k}={v!r}"
    if r == 6:
        p["name"] = v = rng.choice(NAMES)
        return f"name={v!r}"
    if r == 7:
        k = rng.choice(["name", "h2d", "d2h"])
        p.pop(k, None)
        return f"no {k}"
    if r == 8:
        k, v = rng.choice([("source", 3), ("notes", "x"), ("notes", [1]), ("name", 5), ("h2d", 1),
                           ("by_chunk", {}), ("measured_load_average", "high"), ("by_chunk", [{"h2d_Bps": 1e9}])])
        p[k] = v
        return f"{k}={v!r}"
    if r == 9:
        p["by_chunk"] = []
        return "by_chunk=[]"
    if r == 10:
        p["measured_load_average"] = v = rng.choice([0, 3.25, -1])
        return f"measured_load_average={v!r}"
    if r == 11:
        p["notes"] = ["n"] * rng.randint(0, 3)
        return "notes"
    return "unchanged"


def text_of(p, rng):
    """The profile's text; 1 in 40 not JSON, 1 in 80 over 16 MiB (valid JSON padded with notes)."""
    r = rng.random()
    if r < 0.025:
        return json.dumps(p)[:-1], "truncated"
    if r < 0.0375:
        q = dict(p, notes=["x" * 1024] * (16 * 1024 + rng.choice([0, 16])))
        return json.dumps(q), "over 16 MiB"
    return json.dumps(p, ensure_ascii=rng.random() < 0.5), ""


# The options that override a link's figures (docs/simulator.md "Link models"), with the value each
# text means (None: refused by the bounds table; the sentinels --help names: the link's own figure).
OVERRIDES = {
    "--h2d-bandwidth": [("1kB/s", 1e3), ("999B/s", None), ("1000TB/s", 1e15), ("1000.001TB/s", None),
                        ("25GB/s", 25e9), ("12.5GiB/s", 12.5 * 2 ** 30)],
    "--d2h-bandwidth": [("1000B/s", 1e3), ("0.5kB/s", None), ("55GB/s", 55e9)],
    "--latency": [("0ns", 0.0), ("10s", 10.0), ("10.001s", None), ("6us", 6e-6), ("2.5ms", 2.5e-3)],
    "--copy-engines": [("1", 1), ("64", 64), ("65", None), ("0", "own"), ("4294967297", None)],
    "--duplex-factor": [("1", 1.0), ("0.5", 0.5), ("1.01", None), ("0", "own"), ("-0.5", None), ("1e-9", 1e-9)],
    "--nccl-share": [("0", 0.0), ("0.999", 0.999), ("1", None), ("-1", "own"), ("-0.5", None)],
    "--memcpy-share": [("0", 0.0), ("0.25", 0.25), ("1.5", None), ("-1", "own")],
}
PCIE4 = {"h2d.bandwidth_Bps": 25e9, "d2h.bandwidth_Bps": 25e9, "h2d.latency_s": 6e-6, "d2h.latency_s": 6e-6,
         "copy_engines": 2, "duplex_factor": 0.5, "nccl_share": 0.5, "memcpy_share": 0.5}
FIELD = {"--h2d-bandwidth": ["h2d.bandwidth_Bps"], "--d2h-bandwidth": ["d2h.bandwidth_Bps"],
         "--latency": ["h2d.latency_s", "d2h.latency_s"], "--copy-engines": ["copy_engines"],
         "--duplex-factor": ["duplex_factor"], "--nccl-share": ["nccl_share"], "--memcpy-share": ["memcpy_share"]}


def overrides(rng):
    """pcie4 with one to three options: the expected link, or the options the document refuses."""
    link, args, refused, custom = dict(PCIE4), [], [], False
    for opt in rng.sample(sorted(OVERRIDES), rng.randint(1, 3)):
        text, value = rng.choice(OVERRIDES[opt])
        args += [opt, text]
        if value is None:
            refused += FIELD[opt]   # "exits 2 naming the field", the profile's field
        elif value != "own":   # a sentinel (0, -1) keeps the link's figure, and its name
            custom = True
            for f in FIELD[opt]:
                link[f] = value
    return args, link, refused, custom


def config_key(field):
    """The run's config key (`--json`'s config) of a profile field."""
    return {"h2d.bandwidth_Bps": "link.h2d_Bps", "d2h.bandwidth_Bps": "link.d2h_Bps",
            "h2d.latency_s": "link.h2d_latency_s", "d2h.latency_s": "link.d2h_latency_s"}.get(field, "link." + field)


def close(a, b):
    return abs(a - b) <= 1e-5 * max(abs(a), abs(b))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "1") for a in sys.argv[1:] if a.startswith("--"))
    mhc, work = args[0], Path(args[1])
    work.mkdir(parents=True, exist_ok=True)
    trace = work / "t.db"
    if not trace.exists():
        subprocess.run([mhc, "generate", "--layers", "1", "--steps", "1", "--seq", "64", "-o", str(trace)],
                       check=True, capture_output=True)
    rng = random.Random(int(opts.get("seed", 1)))
    runs, bad, tally = int(opts.get("runs", 200)), 0, {"ok": 0, "refused": 0}
    for i in range(runs):
        p = base(rng)
        notes = [perturb(p, rng) for _ in range(rng.randint(1, 3))]
        text, how = text_of(p, rng)
        if how:
            notes.append(how)
        f = work / "link.json"
        f.write_text(text, encoding="utf-8")
        verdict, fact = ref.judge(text)
        tally[verdict] += 1
        run = subprocess.run([mhc, "simulate", str(trace), "--link", str(f), "--capacity", "90%", "--allocator",
                              "ideal", "--no-store", "--json"], capture_output=True, text=True, errors="replace")
        problems = []
        if verdict == "refused":
            lines = run.stderr.strip().splitlines()
            if run.returncode != 2:
                problems.append(f"exit {run.returncode}, the document refuses it ({fact})")
            elif len(lines) != 1 or "link.json" not in lines[0] or \
                    (None not in fact and not any(f"'{x}" in lines[0] or f".{x}'" in lines[0] for x in fact)):
                problems.append(f"refusal not one line naming the file and one of {fact}: {run.stderr.strip()[:300]}")
        elif run.returncode not in (0, 3):
            problems.append(f"exit {run.returncode}, the document accepts it: {run.stderr.strip()[:300]}")
        else:
            conf = json.loads(run.stdout)["config"]
            for key, want in fact.items():
                mine = config_key(key)
                have = float(conf.get(mine, "nan"))
                if not close(have, float(want)):
                    problems.append(f"config {mine} {conf.get(mine)}, the profile's {want}")
        if problems or "verbose" in opts:
            print(f"{'DIFFER' if problems else 'same  '} {i}: {'; '.join(notes)} (the document: {verdict}"
                  f"{' ' + str(fact) if verdict == 'refused' else ''})")
            for q in problems:
                print(f"  {q}")
        bad += bool(problems)
    for i in range(runs // 4):   # the overriding options on a preset
        args, link, refused, custom = overrides(rng)
        named = [f"'{o}'" for o in refused] + [a + ":" for a in args[::2]]   # the field, or the option's own range
        run = subprocess.run([mhc, "simulate", str(trace), "--link", "pcie4", "--capacity", "90%", "--allocator",
                              "ideal", "--no-store", "--json"] + args, capture_output=True, text=True)
        problems = []
        if refused:
            if run.returncode != 2 or len(run.stderr.strip().splitlines()) != 1 or \
                    not any(x in run.stderr for x in named):
                problems.append(f"exit {run.returncode}, the document refuses {refused}: {run.stderr.strip()[:200]}")
        elif run.returncode not in (0, 3):
            problems.append(f"exit {run.returncode}, the document accepts it: {run.stderr.strip()[:200]}")
        else:
            out = json.loads(run.stdout)
            conf = out["config"]
            for key, want in link.items():
                mine = config_key(key)
                if not close(float(conf.get(mine, "nan")), float(want)):
                    problems.append(f"config {mine} {conf.get(mine)}, the options' {want}")
            name = out.get("run", {}).get("name", "") if isinstance(out.get("run"), dict) else str(out.get("run"))
            if ("/pcie4-custom" in name) != custom:   # any figure changed, whatever its value
                problems.append(f"run name {name!r}, the document's link {'pcie4-custom' if custom else 'pcie4'}")
        if problems or "verbose" in opts:
            print(f"{'DIFFER' if problems else 'same  '} options {' '.join(args)}")
            for q in problems:
                print(f"  {q}")
        bad += bool(problems)
        runs += 1
    print(f"{runs - bad} of {runs} profiles and option sets agree ({tally['ok']} accepted, "
          f"{tally['refused']} refused by the document)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
