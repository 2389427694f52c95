#!/bin/bash
# What a new user reads in the first hour, compared with golden files (tests/cli/golden/first-hour;
# regenerate with --update and review the diff): generate's summary, simulate's result (GPU memory
# limit, the OOM), a small sweep, export's line and info's runs, import's summary of each format. Each output says what its figures are: a peak of
# the caching allocator model is reserved bytes (mhc info's peak is live bytes), simulated times are
# estimates, a generated trace's times a roofline; a run's device and its OOM in one pair of
# brackets. Then mhc-view without a display (one line that says what to do instead) and a --run it
# does not hold (refused before any window). Wall times are masked ("in 0.02 s" -> "in T").
# Usage: first_hour_outputs_test.sh MHC [MHC_VIEW] [--update]
mhc=$(realpath "$1")
view=${2:-}
update=${3:-}
[ "$view" = --update ] && { update=--update; view=; }
[ -n "$view" ] && view=$(realpath "$view")
. "$(dirname "$0")/preamble.sh"
here=$(realpath "$(dirname "$0")")
golden="$here/golden/first-hour"
cd "$tmp" || fail "no folder"
mask() { sed -E 's/ in [0-9.]+ s/ in T/; s/^(simulated in   ).*/\1T/'; }
# out NAME CMD...: runs mhc, its stdout (masked) kept as NAME.txt beside the golden one.
out() {
    local name=$1; shift
    "$mhc" "$@" >raw 2>err; local rc=$?
    [ $rc = 0 ] || [ $rc = 3 ] || fail "mhc $* exited $rc: $(cat err)"
    mask <raw >"$name.txt"
}
out generate generate --preset gpt2-small --layers 2 --steps 2 -o t.db
out simulate simulate t.db --capacity 70% --policy lru
out simulate-ideal simulate t.db --capacity 70% --allocator ideal --no-store
out simulate-oom simulate t.db --capacity 2MiB
out sweep sweep t.db --policies lru,dtr,belady --capacities 90%,50% --no-store -j 1
out export export t.db -o t.json --run 1
out export-norun export t.db -o t0.json
"$mhc" info t.db >raw 2>err || fail "info: $(cat err)"
sed -n '/^runs /,$p' raw >info-runs.txt
sed -n '1,/^peak /p' raw >info-head.txt
# import of each format: what the trace is and lacks under its counts, in words (rebuilt, frees,
# join), not the meta keys that store them; then info's notes on the imported traces.
fixtures="$here/../import/fixtures" public="$here/../data/public"
out import-kineto import "$fixtures/cpu_mlp_kineto.json.gz" -o k.db
out import-et import "$fixtures/cpu_mlp_et.json.gz" --kineto "$fixtures/cpu_mlp_kineto.json.gz" -o e.db
out import-snapshot import "$public/torch-snapshot/flexgen-oom-snapshot.pickle" -o s.db
out import-nsys import "$public/nsys/fuser-h200-nsys-2024.6.sqlite" -o n.db
out info-kineto info k.db --top 2
out info-snapshot info s.db --top 2
names="generate simulate simulate-ideal simulate-oom sweep export export-norun info-runs info-head import-kineto
       import-et import-snapshot import-nsys info-kineto info-snapshot"
if [ "$update" = --update ]; then
    for n in $names; do cp "$n.txt" "$golden/$n.txt"; done
    [ -n "$view" ] && "$view" --help >"$golden/view-help.txt"
    echo "updated $golden"
    exit 0
fi
for n in $names; do diff -u "$golden/$n.txt" "$n.txt" || fail "$n differs from $golden/$n.txt"; done
# Every line of sweep, info and generate within 100 columns (simulate's OOM sentence is one line).
for n in generate sweep info-runs info-head import-kineto import-et import-snapshot import-nsys info-kineto info-snapshot; do
    awk -v f="$n" 'length($0) > 100 { print "FAIL: " f ": a line of " length($0) " columns: " $0; bad = 1 } END { exit bad }' \
        "$n.txt" || exit 1
done

if [ -n "$view" ] && [ -x "$view" ]; then
    # No display: one line (GLFW's reason, then the way without a screen), exit 1.
    DISPLAY='' WAYLAND_DISPLAY='' timeout 20 "$view" t.db >vout 2>verr </dev/null; rc=$?
    [ $rc = 1 ] || fail "mhc-view without a display exited $rc: $(cat verr)"
    [ "$(wc -l <verr)" = 1 ] || fail "mhc-view without a display said $(wc -l <verr) lines: $(cat verr)"
    for want in "mhc-view: cannot open a window: " "xvfb-run -a mhc-view t.db --screenshot out.png" "mhc info t.db"; do
        grep -qF -- "$want" verr || fail "mhc-view without a display does not say '$want': $(cat verr)"
    done
    # A --run the trace does not hold: refused before any window (it was said after "no display").
    DISPLAY='' WAYLAND_DISPLAY='' timeout 20 "$view" t.db --run 9 >vout 2>verr </dev/null; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <verr)" = 1 ] &&
        grep -qxF "mhc-view: t.db: run 9 does not exist (2 runs in the file: mhc info t.db lists them)" verr ||
        fail "mhc-view --run 9 exited $rc: $(cat verr)"
    # --view opens that view with or without --screenshot: its help says so.
    "$view" --help >vhelp 2>&1 || fail "mhc-view --help exited $?"
    grep -qF "The view to open" vhelp || fail "mhc-view --help: --view: $(grep -F -- --view vhelp)"
    # The keys, Esc and the zoom's reset among them (its help named no key).
    tr '\n' ' ' <vhelp | grep -qF "Esc closes the innermost thing open, one a press" ||
        fail "mhc-view --help does not say what Esc does"
    tr '\n' ' ' <vhelp | grep -qF "0 shows the whole trace" || fail "mhc-view --help does not name the zoom's reset key"
    # Its help as mhc's (docs/cli.md, "Help"): within 80 columns, values named as users write
    # them, not CLI11's TEXT, INT:NONNEGATIVE or REQUIRED; pinned as a golden file.
    awk 'length($0) > 80 { print "FAIL: mhc-view --help: a line of " length($0) " columns: " $0; bad = 1 } END { exit bad }' \
        vhelp || exit 1
    grep -nE '^  (-[a-z], )?--[a-z-]+ ([A-Z]+:|INT|UINT|FLOAT)|REQUIRED|^Positionals:' vhelp &&
        fail "mhc-view --help names a value as CLI11 does"
    diff -u "$golden/view-help.txt" vhelp || fail "mhc-view --help differs from $golden/view-help.txt"
else
    echo "SKIP the viewer's part: no mhc-view"
fi
echo PASS
