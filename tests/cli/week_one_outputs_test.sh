#!/bin/bash
# What a user reads in the first week, after the first hour's outputs (first_hour_outputs_test.sh),
# compared with golden files (tests/cli/golden/week-one; regenerate with --update and review the
# diff): a coupled run of 4 ranks (finished, and stopped by a rank out of memory), advise's table
# and notes, check's ok on a generated, an imported and a recorded trace, and, with their measured
# figures masked (every number read N), calibrate's table and validate's report on the host
# backend, and mhc-torch runs (its table and the head of --all). Every line within 100 columns,
# the unmasked ones too, but for the lines that hold a name or a sentence from the file (the OOM's,
# validate's link source, advise's code).
# Usage: week_one_outputs_test.sh MHC ADVISE_TRACE [PYTHON PYTHON_DIR] [--update]
mhc=$(realpath "$1")
advise_trace=$(realpath "$2")
python=${3:-}
pydir=${4:-}
update=${5:-}
for a in "$@"; do [ "$a" = --update ] && update=--update; done
[ "$python" = --update ] && python=
[ -n "$pydir" ] && [ "$pydir" != --update ] && pydir=$(realpath "$pydir")
here=$(realpath "$(dirname "$0")")
. "$here/preamble.sh"
unset COLUMNS   # the golden files are a file's output: every table whole
golden="$here/golden/week-one"
cd "$tmp" || fail "no folder"
# A measured output: each number (not a digit inside a word: h2d, pcie4) read N, and runs of spaces
# one (a figure's width moves its columns); the columns' alignment is checked on the raw output.
numbers() { sed -E 's/(^|[^A-Za-z0-9.])[0-9]+(\.[0-9]+)?/\1N/g; s/(^|[^A-Za-z0-9.])[0-9]+(\.[0-9]+)?/\1N/g; s/  +/ /g'; }
# A sentence wrapped under its label wraps where its measured words fall: its label kept, the rest "..."
measured_text() {
    awk '/^(time:|machine:|verdict |  limited runs predicted|  obtained: |  source: )/ {
             match($0, /^(time:|machine:|verdict [^:]*:|  limited runs predicted|  obtained:|  source:)/)
             print substr($0, 1, RLENGTH) " ..."; wrapped = $0 !~ /^  (obtained|source):/; next }
         wrapped && /^  / { next }
         { wrapped = 0; print }'
}
names=""
# keep NAME FILTER < OUTPUT: the output as NAME.txt (filtered), its lines checked for width first.
keep() {
    local name=$1 filter=$2
    cat >"$name.raw"
    awk -v f="$name" -v skip="${WIDE_OK:-^$}" 'length($0) > 100 && $0 !~ skip {
            print "FAIL: " f ": a line of " length($0) " columns: " $0; bad = 1 } END { exit bad }' "$name.raw" || exit 1
    $filter <"$name.raw" >"$name.txt"
    names="$names $name"
}
run() {   # run RC_OK... -- ARGS: mhc ARGS, its stdout in the file out; a status outside RC_OK fails
    local ok=()
    while [ "$1" != -- ]; do ok+=("$1"); shift; done
    shift
    "$mhc" "$@" >out 2>err; local rc=$?
    [[ " ${ok[*]} " == *" $rc "* ]] || fail "mhc $* exited $rc: $(cat err)"
}
search_time() { sed -E 's/, [0-9.]+ s$/, T s/'; }
# and a measured time's or rate's unit (383 ms on one run, 1.2 s on a loaded one) read T and R; late
# transfers are said only when there are some
validate_mask() {
    measured_text | numbers | sed -E 's/, N late by N (ns|us|ms|s)//; s/N (ns|us|ms|s)([^A-Za-z]|$)/N T\2/g; s/N [KMG]?B\/s/N R/g'
}
# The columns of a table whose figures are measured: in each row the cells' "[" (calibrate's
# spread) or the figures' ends (validate's) at the columns the first row has them.
same_columns() {   # same_columns FILE REGEX: the lines matching REGEX have "[" at the same columns
    awk -v re="$2" '$0 ~ re { p = ""; for (i = 1; i <= length($0); i++) if (substr($0, i, 1) == "[") p = p " " i
        if (seen == "") seen = p; else if (p != seen) { print "FAIL: columns moved: " $0; exit 1 } }' "$1"
}

# A job of 4 ranks (pipeline 2 x data 2): finished at 70%, and at 30% rank 2 out of memory, the
# ranks waiting for it stopped.
"$mhc" -q generate --preset gpt2-small --steps 2 --layers 2 --dp 2 --pp 2 --all-ranks -o j.db >/dev/null ||
    fail "generate --all-ranks"
run 0 -- simulate --ranks j.rank0.db j.rank1.db j.rank2.db j.rank3.db --capacity 70% --no-store
keep ranks cat <out
run 3 -- simulate --ranks j.rank0.db j.rank1.db j.rank2.db j.rank3.db --capacity 30% --no-store
WIDE_OK='^out of memory  ' keep ranks-oom cat <out

# advise: the table, its notes wrapped, the code of each setting (Python lines are not wrapped).
cp "$advise_trace" tiny.db
run 0 -- advise tiny.db --capacity 80MiB
WIDE_OK='^(optimizer = |import |ds_config|  *"|model, |# FSDP2)' keep advise search_time <out
# A terminal of 60 columns: the table in blocks (rank repeated), its setting wrapped under its
# start, the notes within the width; only the code to paste runs past (its lines are not wrapped).
# The table's rows ran to 120 columns and the notes to 100 until 2026-12-07.
COLUMNS=60 "$mhc" advise tiny.db --capacity 80MiB >narrow 2>err || fail "COLUMNS=60 advise: $(cat err)"
sed '/^# 1\. /,$d' narrow | awk 'length($0) > 60 { print "FAIL: COLUMNS=60 advise: a line of " length($0) " columns: " $0
    bad = 1 } END { exit bad }' || exit 1
[ "$(grep -c '^rank ' narrow)" -ge 2 ] || fail "COLUMNS=60 advise: the table not in blocks: $(cat narrow)"
grep -q '^1  *[-+][0-9.]*% fused AdamW$' narrow || fail "COLUMNS=60 advise: no block of loss and setting: $(cat narrow)"

# check: what "ok" vouches for, on a generated trace, an imported one and a recorded one.
"$mhc" -q generate --preset gpt2-small --layers 2 --steps 2 -o t.db >/dev/null || fail "generate"
"$mhc" -q import "$here/../import/fixtures/cpu_mlp_kineto.json.gz" -o k.db >/dev/null || fail "import"
gzip -dc "$here/../../datasets/recorded/h200-gpt2-small-torch-first-step.db.gz" >rec.db || fail "gunzip"
for args in t.db "k.db --full" rec.db; do
    # shellcheck disable=SC2086  # the arguments split as written
    run 0 -- check $args
    cat out
done >checks
keep check cat <checks

# record on a machine without an NVIDIA GPU (a library that is one as far as mhc looks): what to
# do instead. A machine with a GPU says otherwise: not compared there.
if [ ! -e /dev/nvidia0 ] && [ ! -e /dev/nvidiactl ] && [ ! -e /dev/dxg ]; then
    printf '\177ELF' >fake.so
    run 5 -- record --library fake.so -o r.db -- true
    keep record-no-gpu cat <out
fi

# calibrate: measured, so its numbers masked; the table's layout, units and words pinned.
run 0 -- calibrate --backend host --quick --max-chunk 256KiB -o link.json
same_columns out '^ *[0-9.]+ KiB ' || exit 1
# The duplex clamp's note comes only where the host measured both directions together no slower
# than one, which the machine's load decides (its wording is pinned in tests/replay/test_calibrate.cpp).
calibrate_mask() { numbers | sed '/^note: duplex factor measured /d'; }
keep calibrate calibrate_mask <out
# --json, as the other commands that print a table have it: JSON alone on stdout (no table), each
# chunk size's medians and spreads, the latencies, and what the profile holds, equal to the file.
run 0 -- calibrate --backend host --quick --rounds 1 --max-chunk 16KiB -o lj.json --json
python3 - <<'PY' || fail "calibrate --json: $(cat out)"
import json
j, profile = json.load(open("out")), json.load(open("lj.json"))
assert [c["bytes"] for c in j["by_chunk"]] == [c["bytes"] for c in profile["by_chunk"]] == [4096, 16384], j
for c, p in zip(j["by_chunk"], profile["by_chunk"]):
    for way in ("h2d", "d2h", "both_h2d", "both_d2h"):
        assert 0 < c[way + "_min_Bps"] <= c[way + "_Bps"] <= c[way + "_max_Bps"], c
        assert c[way + "_Bps"] == p[way + "_Bps"], (c, p)   # the medians, as the profile holds them
assert j["latency"]["h2d"]["p10_s"] <= j["latency"]["h2d"]["p90_s"], j["latency"]
w = j["written"]
assert w["path"] == "lj.json" and w["name"] == profile["name"], w
assert (w["h2d"], w["d2h"]) == (profile["h2d"], profile["d2h"]), (w, profile)
PY

# validate: a short replay on the host backend; numbers, the load and the verdict's words masked.
run 0 -- validate t.db --backend host --link pcie4 --time-scale 0.2 --repeat 1 --capacity 70% --no-store
WIDE_OK='^(  source: |verdict )' keep validate validate_mask <out

if [ -n "$python" ] && [ -x "$python" ] && "$python" -c "$find_modules" pandas 2>/dev/null; then
    run 0 -- simulate t.db --capacity 70% >/dev/null
    run 3 -- simulate t.db --capacity 2MiB >/dev/null
    PYTHONPATH="$pydir" MHC_EXE="$mhc" "$python" -m mhc_torch.cli runs t.db >out 2>err || fail "mhc-torch runs: $(cat err)"
    keep torch-runs cat <out
    COLUMNS=100 PYTHONPATH="$pydir" MHC_EXE="$mhc" "$python" -m mhc_torch.cli runs --all t.db >out 2>err ||
        fail "mhc-torch runs --all: $(cat err)"
    grep -v '^created ' out | head -12 >all
    keep torch-runs-all cat <all
else
    echo "SKIP mhc-torch runs: no Python with pandas"
fi

if [ "$update" = --update ]; then
    mkdir -p "$golden"
    for n in $names; do cp "$n.txt" "$golden/$n.txt"; done
    echo "updated $golden"
    exit 0
fi
for n in $names; do diff -u "$golden/$n.txt" "$n.txt" || fail "$n differs from $golden/$n.txt"; done
echo PASS
