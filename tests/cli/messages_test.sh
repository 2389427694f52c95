#!/usr/bin/env bash
# One wording for the same thing in every command: a missing file, a mistyped command, option
# or name (the nearest one suggested), `mhc check` of a file that is not there (no count of
# problems), an unknown run, and `mhc-view`'s bad options (exit 2, as `mhc`).
# Usage: messages_test.sh MHC [MHC_VIEW]
set -uo pipefail
mhc=$1
view=${2:-}
. "$(dirname "$0")/preamble.sh"
# says STATUS LINE CMD...: exit STATUS, stderr exactly LINE, nothing on stdout for errors
says() {
    local want=$1 line=$2; shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    local got=$?
    [[ $got == "$want" ]] || fail "$* exited $got, wanted $want: $(cat "$tmp/err")"
    [[ $(cat "$tmp/err") == "$line" ]] || fail "$*: said '$(cat "$tmp/err")', wanted '$line'"
    if [[ $want == 2 ]]; then [[ ! -s $tmp/out ]] || fail "$*: printed '$(cat "$tmp/out")' before its error"; fi
}

t=$tmp/t.db
"$mhc" generate --preset gpt2-small --layers 2 --steps 2 -o "$t" >/dev/null || fail "generate"
m=$tmp/missing.db

# ---- a missing input file: the same line in every command ----
for cmd in "check $m" "info $m" "simulate $m --capacity 50%" "sweep $m" "validate $m --no-store" \
           "export $m -o $tmp/x.json" "export $m --format csv -o $tmp/x" "import $m -o $tmp/i.db" \
           "allocator $m" "simulate --ranks $t $m --capacity 50%" "simulate $t --capacity 50% --link $tmp/nope.json" \
           "sweep $t --links pcie4,$tmp/nope.json --no-store" "import $m.json -o $tmp/i.db" \
           "kernels sinkhorn --input $m --output $tmp/o.f32"; do
    missing=$m
    [[ $cmd == *nope.json* ]] && missing=$tmp/nope.json
    [[ $cmd == "import $m.json"* ]] && missing=$m.json
    # shellcheck disable=SC2086
    says 2 "mhc: $missing: no such file" "$mhc" $cmd
done

# ---- a typo gets the nearest name ----
says 2 "mhc: 'simualte' is not a command; did you mean simulate?" "$mhc" simualte "$t"
says 2 "mhc: 'sweeep' is not a command; did you mean sweep?" "$mhc" sweeep
# A word for what another program or another command does: where to go (it listed the commands, none
# of which opens the viewer).
says 2 "mhc: 'view' is not a command; the viewer is a program of its own: mhc-view TRACE" "$mhc" view "$t"
says 2 "mhc: 'capture' is not a command; a PyTorch step is captured by mhc-torch capture (docs/torch.md), then read by mhc advise" "$mhc" capture
says 2 "mhc: 'version' is not a command; the version is mhc --version" "$mhc" version
says 2 "mhc: help: 'replay' is neither a command nor a topic; a simulated plan is replayed by mhc validate" "$mhc" help replay
"$mhc" nosuchthing >"$tmp/out" 2>"$tmp/err"; [[ $? == 2 ]] || fail "unknown command exit"
grep -q "commands: .*simulate" "$tmp/err" || fail "a word near no command lists the commands: $(cat "$tmp/err")"
says 2 "mhc: unknown option --verison; did you mean --version? (mhc --help)" "$mhc" --verison
says 2 "mhc: simulate: unknown option --capasity; did you mean --capacity? (mhc simulate --help)" \
    "$mhc" simulate "$t" --capasity 50%
says 2 "mhc: info: unknown option --jsn; did you mean --json? (mhc info --help)" "$mhc" info "$t" --jsn
says 2 "mhc: --policy: 'lur': not an eviction policy; use one of lru, largest, belady, dtr, cost_aware; did you mean lru?" \
    "$mhc" simulate "$t" --capacity 50% --policy lur
says 2 "mhc: --prefetch: 'lookahaed:8': not a prefetch policy; use one of none, lookahead:K, periodic[:K], capuchin, forecast[:H]; did you mean lookahead?" \
    "$mhc" simulate "$t" --capacity 50% --prefetch lookahaed:8
says 2 "mhc: --link: 'pcie44': not a link; use one of pcie3, pcie4, pcie5, nvlink-c2c, nvlink4-peer or a link profile JSON file; did you mean pcie4?" \
    "$mhc" simulate "$t" --capacity 50% --link pcie44
says 2 "mhc: help: 'sizs' is neither a command nor a topic; did you mean sizes? (mhc help lists them)" "$mhc" help sizs
# a named choice of an option: the names and the nearest (CLI11's own check said "llama-7b not in {...}")
says 2 "mhc: --preset: 'llama-7b': use one of gpt2-small, llama2-7b, llama2-70b-slice, mhc-27b; did you mean llama2-7b?" \
    "$mhc" generate --preset llama-7b -o "$tmp/g.db"
says 2 "mhc: --format: 'kinteo': use one of auto, snapshot, kineto, et, nsys; did you mean kineto?" \
    "$mhc" import "$t" --format kinteo -o "$tmp/i.db"
says 2 "mhc: --backend: 'gpu': use one of host, cuda" "$mhc" validate "$t" --backend gpu --no-store
[[ ! -e $tmp/g.db && ! -e $tmp/i.db ]] || fail "a refused choice wrote its output"

# ---- mhc check of what is not a trace: the message alone, no count of problems ----
says 2 "mhc: $m: no such file" "$mhc" check "$m"
echo "not sqlite" >"$tmp/text.db"
"$mhc" check "$tmp/text.db" >"$tmp/out" 2>"$tmp/err"; [[ $? == 2 ]] || fail "check text.db exit"
[[ $(wc -l <"$tmp/err") == 1 && ! -s $tmp/out ]] || fail "check text.db: $(cat "$tmp/out" "$tmp/err")"
grep -q "problem" "$tmp/err" && fail "check text.db counts problems: $(cat "$tmp/err")"

# ---- a run that does not exist is refused, in both export formats and prune, in one wording ----
# (export said "run 9 does not exist" alone, prune "there is no run 9 of T (...)" until 2026-12-07)
"$mhc" simulate "$t" --capacity 70% >/dev/null || fail "simulate"
no_run="mhc: $t: run 9 does not exist (1 run in the file: mhc info $t lists them)"
says 2 "$no_run" "$mhc" export "$t" --run 9 -o "$tmp/r.json"
says 2 "$no_run" "$mhc" export "$t" --format csv --run 9 -o "$tmp/r"
says 2 "$no_run" "$mhc" prune "$t" --run 9
"$mhc" simulate "$t" --capacity 70% --runs-db "$tmp/runs.db" >/dev/null || fail "simulate --runs-db"
says 2 "mhc: $tmp/runs.db: run 9 does not exist (1 run in the file: mhc info $t --runs-db $tmp/runs.db lists them)" \
    "$mhc" prune "$t" --runs-db "$tmp/runs.db" --run 9
[[ ! -e $tmp/r.json && ! -e $tmp/r/allocations.csv ]] || fail "a refused export wrote files"

# ---- mhc-view: bad options exit 2 with one line ----
if [[ -n $view && -x $view ]]; then
    for args in "--no-such-option $t" "$t --run x" "$t --view nope" ""; do
        # shellcheck disable=SC2086
        "$view" $args >"$tmp/out" 2>"$tmp/err"
        rc=$?
        [[ $rc == 2 ]] || fail "mhc-view $args exited $rc (want 2): $(cat "$tmp/err")"
        [[ $(wc -l <"$tmp/err") == 1 ]] && grep -q "^mhc-view: " "$tmp/err" || fail "mhc-view $args: $(cat "$tmp/err")"
    done
    # Numbers as mhc reads them (docs/cli.md, "Numbers"), each refusal naming the value: --range's
    # nanoseconds past 64 bits (std::stoll threw: "mhc-view: stoll", exit 1), --run 0x10 (was run
    # 16), --device +1 and 99999999999 (GPU 1 and GPU 1215752191), --size with a tail, --click 0x1.
    for args in "--range 99999999999999999999:1" "--range 010:7" "--run 0x10" "--run 99999999999999999999" \
                "--device +1" "--device 99999999999" "--size 1600x900junk" "--click 0x1,5" \
                "--range 0:99999999999s" "--range -5us:1ms"; do
        # shellcheck disable=SC2086
        DISPLAY= "$view" "$t" $args >"$tmp/out" 2>"$tmp/err"
        rc=$?
        [[ $rc == 2 && $(wc -l <"$tmp/err") == 1 ]] || fail "mhc-view $args exited $rc (want 2, one line): $(cat "$tmp/err")"
        value=${args#* }
        grep -qF -- "'${value%%[:,]*}" "$tmp/err" || fail "mhc-view $args: the value is not named: $(cat "$tmp/err")"
        grep -qF -- "${args%% *}" "$tmp/err" || fail "mhc-view $args: the option is not named: $(cat "$tmp/err")"
    done
    "$view" --help >/dev/null 2>&1 || fail "mhc-view --help exited $?"
    # The MHC_* variables it reads are checked as mhc checks them, before any window.
    for assign in MHC_TRACE_CACHE=maybe MHC_BUSY_TIMEOUT_MS=soon MHC_EVICTION_STRATEGY=fifo; do
        DISPLAY= env "$assign" "$view" "$t" >"$tmp/out" 2>"$tmp/err"; rc=$?
        [[ $rc == 2 && $(wc -l <"$tmp/err") == 1 ]] && grep -qF "${assign%%=*}='${assign#*=}'" "$tmp/err" ||
            fail "$assign mhc-view exited $rc: $(cat "$tmp/err")"
    done
fi
echo ok
