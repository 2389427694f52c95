#!/usr/bin/env bash
# A profile written by `mhc calibrate` is always accepted by the commands that load it
# (docs/validation.md): three quick host calibrations in a row (a noisy host measured duplex
# factors above 1 in 3 of 4 runs before), each loaded by simulate and by validate; and
# validate's table stays aligned with the long link name a profile carries.
# Usage: calibrate_profile.sh MHC
set -uo pipefail
mhc=$1
. "$(dirname "$0")/preamble.sh"
cd "$tmp" || exit 1
# Small enough for a quick replay on a shared 2-core machine.
"$mhc" generate --preset gpt2-small --layers 2 --steps 1 --seq 128 --hidden 256 --heads 4 --ffn 1024 -o t.db >/dev/null \
    || fail "generate"
for i in 1 2 3; do
    "$mhc" calibrate --backend host --quick --max-chunk 256KiB -o link$i.json >cal.txt 2>&1 || fail "calibrate $i: $(cat cal.txt)"
    grep -q "median of 3 rounds" cal.txt || fail "calibrate does not say it takes medians: $(cat cal.txt)"
    grep -q "p10-p90" cal.txt || fail "calibrate does not report the latency spread: $(cat cal.txt)"
    python3 - link$i.json <<'PY' || fail "link$i.json: $(cat link$i.json)"
import json, sys
j = json.load(open(sys.argv[1]))
assert 0 < j["duplex_factor"] <= 1, j["duplex_factor"]
for d in ("h2d", "d2h"):
    assert j[d]["bandwidth_Bps"] > 0 and j[d]["latency_s"] >= 0
# A clamped figure carries its note.
for n in j.get("notes", []):
    assert "clamped" in n, n
PY
    "$mhc" simulate t.db --capacity 80% --link link$i.json --no-store >sim.txt 2>&1 \
        || fail "simulate rejected calibrate's profile $i: $(cat sim.txt)"
done
# Replay with the profile, under a name longer than the table's column.
python3 - <<'PY'
import json
j = json.load(open("link1.json"))
j["name"] = "host memcpy calibrated on a machine with a rather long descriptive name"
json.dump(j, open("long.json", "w"))
PY
"$mhc" validate t.db --capacity 80% --link long.json --no-store >val.txt 2>&1 || fail "validate rejected the profile: $(cat val.txt)"
python3 - val.txt <<'PY' || fail "validate's table lost its alignment: $(cat val.txt)"
import re, sys
lines = open(sys.argv[1]).read().split("\n")
at = lines.index("configuration")
head = lines[at + 1]
# each configuration's name (with the link's) on its line, its figures under the header's columns
rows = [lines[k + 1] for k in range(at, len(lines) - 1) if "long descriptive name" in lines[k]
        and lines[k].startswith("lru")]
assert rows, "no table rows name the link"
ends = [m.end() for m in re.finditer(r"\S+(?: \S+)?(?=\s{2,}|$)", head)]
for r in rows:
    for e in ends[:6]:
        assert r[e - 1] != " " and (e == len(r) or r[e] == " "), (head, r, e)
PY
# An existing profile is never replaced silently: refused (exit 2, before measuring, file
# unchanged) unless --force.
cp link1.json keep.json
"$mhc" calibrate --backend host --quick --max-chunk 256KiB -o link1.json >again.txt 2>&1
rc=$?
[ $rc = 2 ] || fail "calibrate over an existing profile must exit 2, got $rc: $(cat again.txt)"
grep -q "link1.json: already exists; pass --force" again.txt || fail "no 'exists; pass --force': $(cat again.txt)"
cmp -s link1.json keep.json || fail "a refused calibrate changed the profile"
"$mhc" calibrate --backend host --quick --max-chunk 256KiB -o link1.json --force >again.txt 2>&1 \
    || fail "calibrate --force: $(cat again.txt)"
echo ok
