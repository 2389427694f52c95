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
unset COLUMNS   # the golden files are a file's output: every table whole (a terminal's width is tested below)
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
# Names longer than the columns' least width widen them: "lookahead:100000 *" pushed its row's
# figures out from under their headings (2026-12-07).
out sweep-long sweep t.db --policies cost_aware,lru --prefetchers forecast:2000,lookahead:100000 --capacities 3500MiB,60% \
    --budget 50% --no-store -j 1
out export export t.db -o t.json --run 1
out export-norun export t.db -o t0.json
"$mhc" info t.db >raw 2>err || fail "info: $(cat err)"
sed -n '/^runs /,$p' raw >info-runs.txt
sed -n '1,/^peak /p' raw >info-head.txt
# A 60-column terminal: every line of info within it, a kernel's row keeping its figures and its
# name on one line, cut (its time and count stood alone on a line, the name broken at its blanks
# onto three more, and the runs' heading ran to 64 columns until 2026-12-07).
COLUMNS=60 "$mhc" info t.db >narrow 2>err || fail "COLUMNS=60 info: $(cat err)"
awk 'length($0) > 60 { print "FAIL: COLUMNS=60 info: a line of " length($0) " columns: " $0; bad = 1 }
     /^kernels by total time/ { k = 1; next } /^[a-z]/ { k = 0 }
     k && !/^ +[0-9.]+ (ns|us|ms|s) +[0-9]+x  [^ ]/ { print "FAIL: COLUMNS=60 info: a kernel row broken: " $0; bad = 1 }
     END { exit bad }' narrow || exit 1
# import of each format: what the trace is and lacks under its counts, in words (rebuilt, frees,
# join), not the meta keys that store them; then info's notes on the imported traces.
fixtures="$here/../import/fixtures" public="$here/../data/public"
out import-kineto import "$fixtures/cpu_mlp_kineto.json.gz" -o k.db
out import-et import "$fixtures/cpu_mlp_et.json.gz" --kineto "$fixtures/cpu_mlp_kineto.json.gz" -o e.db
out import-snapshot import "$public/torch-snapshot/flexgen-oom-snapshot.pickle" -o s.db
out import-nsys import "$public/nsys/fuser-h200-nsys-2024.6.sqlite" -o n.db
out info-kineto info k.db --top 2
out info-snapshot info s.db --top 2
names="generate simulate simulate-ideal simulate-oom sweep sweep-long export export-norun info-runs info-head import-kineto
       import-et import-snapshot import-nsys info-kineto info-snapshot"
if [ "$update" = --update ]; then
    for n in $names; do cp "$n.txt" "$golden/$n.txt"; done
    [ -n "$view" ] && "$view" --help >"$golden/view-help.txt"
    echo "updated $golden"
    exit 0
fi
for n in $names; do diff -u "$golden/$n.txt" "$n.txt" || fail "$n differs from $golden/$n.txt"; done
# Every row of a sweep's grid has its figures under their headings: each heading ends where each
# row's figure ends (the columns right of the names are right-aligned).
awk '/^policy /{ head = $0; next } head != "" && NF >= 9 && !/^\*/ {
         if (length($0) != length(head)) { print "FAIL: sweep-long: a row of " length($0) " columns under a heading of " length(head) ": " $0; bad = 1 } }
     /^$/{ head = "" } END { exit bad }' sweep-long.txt || exit 1
# A narrower terminal (COLUMNS, docs/cli.md "A narrower terminal"): the grid in blocks, every line
# within the width, and every figure of the whole table's rows whole in them (a 60-column terminal
# cut rows through their figures); the runs' name columns repeated in each block.
for width in 60 72; do
    COLUMNS=$width "$mhc" sweep t.db --policies cost_aware,lru --prefetchers forecast:2000,lookahead:100000 \
        --capacities 3500MiB,60% --budget 50% --no-store -j 1 2>/dev/null | mask >narrow.txt ||
        fail "COLUMNS=$width sweep exited $?"
    awk -v w="$width" 'length($0) > w { print "FAIL: COLUMNS=" w " sweep: a line of " length($0) " columns: " $0; bad = 1 }
        END { exit bad }' narrow.txt || exit 1
    [ "$(grep -c '^policy ' narrow.txt)" -ge 2 ] || fail "COLUMNS=$width sweep: not split into blocks: $(cat narrow.txt)"
    # Each name and figure of the whole grid's rows (a number with its unit) appears in the narrow output.
    awk '/^(cost_aware|lru) / && NF >= 9 { for (i = 1; i <= NF; i++)
             if ($(i + 1) ~ /^(B|KiB|MiB|GiB|TiB|ns|us|ms|s)$/) { print $i " " $(i + 1); i++ } else print $i }' \
        sweep-long.txt | while read -r figure; do
            grep -qF -- "$figure" narrow.txt || { echo "FAIL: COLUMNS=$width sweep: '$figure' cut or lost"; exit 1; }
        done || exit 1
done
# sweep --json (docs/cli.md, "JSON"): stdout is the JSON alone (the counts' line on stderr), the grid
# as mhc simulate --json prints each run, and the answers with their share of the baseline peak.
"$mhc" sweep t.db --policies lru,dtr --capacities 90%,50% --no-store -j 1 --json >sweep.json 2>err ||
    fail "sweep --json exited $?: $(cat err)"
grep -q "^22 simulations in " err || fail "sweep --json: the counts' line not on stderr: $(cat err)"
jq -e '(.grid | length) == 4 and (.grid[0].run == "lru+none@90%/pcie4/caching") and .budget == 0.03
       and (.answers | map(.policy)) == ["lru", "dtr"] and .answers[1].saving and .answers[1].capacity_share < 1
       and .answers[1].run.metrics.simulated_peak_bytes > 0 and (.answers[0].saving | not)
       and .grid[3].oom != null and .grid[3].metrics.throughput_loss == null
       and .baseline_peak_bytes == .grid[0].metrics.baseline_peak_bytes and .simulations == 22' sweep.json >/dev/null ||
    fail "sweep --json: $(head -c 600 sweep.json)"
"$mhc" sweep t.db --policies lru --capacities 50% --no-store -j 1 --no-bisect --json 2>/dev/null |
    jq -e '.budget == null and .answers == []' >/dev/null || fail "sweep --json --no-bisect: the budget is not null"
# No bisection on a trace whose times are event numbers (a memory snapshot): the budget is null
# there too, as docs/cli.md says, and the warning says why.
"$mhc" sweep s.db --policies lru --capacities 70% --no-store -j 1 --json 2>err |
    jq -e '.budget == null and .answers == [] and (.grid | length) == 1' >/dev/null ||
    fail "sweep --json on an order-only trace: the budget is not null"
grep -q '^warning: no bisection: ' err || fail "sweep --json on an order-only trace: no warning: $(cat err)"
# Every line of info and generate within 100 columns (simulate's OOM sentence is one line), and
# sweep's grid of the default names too; into a file or a pipe sweep's answers and notes are whole lines, one fact a line
# for a script (an answer wrapped onto a line indented under its figures until 2026-12-07).
for n in generate info-runs info-head import-kineto import-et import-snapshot import-nsys info-kineto info-snapshot; do
    awk -v f="$n" 'length($0) > 100 { print "FAIL: " f ": a line of " length($0) " columns: " $0; bad = 1 } END { exit bad }' \
        "$n.txt" || exit 1
done
for n in sweep sweep-long; do
    awk -v f="$n" '/^smallest capacity/ { answers = 1 }
        f == "sweep" && !answers && length($0) > 100 { print "FAIL: " f ": a grid line of " length($0) " columns: " $0; bad = 1 }
        answers && /^ / { print "FAIL: " f ": a line continued in a pipe: " $0; bad = 1 } END { exit bad }' "$n.txt" || exit 1
done
grep -q '^dtr  *none  *[0-9.]*% = .*, peak reduction [0-9.]*%, throughput loss [0-9.]*%$' sweep.txt ||
    fail "sweep: dtr's answer is not one whole line in a pipe: $(grep -A1 '^dtr  *none  *[0-9.]*% =' sweep.txt)"

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
    # No trace: said as mhc says a missing argument (it said "trace is required").
    "$view" >vout 2>verr </dev/null; rc=$?
    [ $rc = 2 ] && grep -qxF "mhc-view: the TRACE argument is required (mhc-view --help)" verr ||
        fail "mhc-view without a trace exited $rc: $(cat verr)"
    # A --step the trace lacks: refused before any window as with --screenshot (the window ignored
    # it); one it has passes the check and reaches the window (here: no display).
    DISPLAY='' WAYLAND_DISPLAY='' timeout 20 "$view" t.db --step 9 >vout 2>verr </dev/null; rc=$?
    [ $rc = 2 ] && grep -qxF "mhc-view: --step: '9': not a step of t.db (its steps: 0 to 1)" verr ||
        fail "mhc-view --step 9 without --screenshot exited $rc: $(cat verr)"
    DISPLAY='' WAYLAND_DISPLAY='' timeout 20 "$view" t.db --step 1 >vout 2>verr </dev/null; rc=$?
    [ $rc = 1 ] && grep -qF "cannot open a window" verr || fail "mhc-view --step 1 exited $rc: $(cat verr)"
    # A --device the trace has no allocations on: refused before any window, as with --screenshot
    # (the window said it after opening); the options that script a screenshot, without one, are
    # refused as mhc refuses an option left with nothing to do (the window ignored them).
    DISPLAY='' WAYLAND_DISPLAY='' timeout 20 "$view" t.db --device 7 >vout 2>verr </dev/null; rc=$?
    [ $rc = 2 ] && grep -qxF "mhc-view: t.db: no allocations on GPU 7 (allocations on: GPU 0)" verr ||
        fail "mhc-view --device 7 without --screenshot exited $rc: $(cat verr)"
    for opt in "--click 5,5" "--layout l.json" "--keys q"; do
        # shellcheck disable=SC2086  # the option and its value
        DISPLAY='' WAYLAND_DISPLAY='' timeout 20 "$view" t.db $opt >vout 2>verr </dev/null; rc=$?
        [ $rc = 2 ] && [ "$(wc -l <verr)" = 1 ] && grep -qF "mhc-view: ${opt%% *} without --screenshot: " verr ||
            fail "mhc-view $opt without --screenshot exited $rc: $(cat verr)"
    done
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
