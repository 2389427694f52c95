#!/usr/bin/env bash
# Help at 80 columns: every command's --help (nested ones too) and every `mhc help` topic, as
# printed when stdout is not a terminal, equals its golden file in tests/cli/golden/help/; no
# line passes 80 columns; on a terminal, help wraps at the terminal's width.
# Usage: help_golden.sh MHC            compare
#        help_golden.sh MHC --update   rewrite the golden files (review the diff before committing)
set -uo pipefail
mhc=$1
update=${2:-}
golden=$(cd "$(dirname "$0")" && pwd)/golden/help
. "$(dirname "$0")/preamble.sh"

# The names listed under "Commands:" (or "Topics:" of `mhc help`) of a help text.
listed() {  # listed FILE SECTION
    awk -v s="$2:" '$0 == s {on = 1; next} /^[^ ]/ {on = 0} on && /^  [a-z]/ {print $1}' "$1"
}

# Every help text: NAME COMMAND... pairs, written to $tmp/NAME.txt.
"$mhc" --help >"$tmp/mhc.txt" || fail "mhc --help exited $?"
"$mhc" help >"$tmp/help.txt" || fail "mhc help exited $?"
for cmd in $(listed "$tmp/mhc.txt" Commands); do
    "$mhc" "$cmd" --help >"$tmp/mhc-$cmd.txt" || fail "mhc $cmd --help exited $?"
    for sub in $(listed "$tmp/mhc-$cmd.txt" Commands); do
        "$mhc" "$cmd" "$sub" --help >"$tmp/mhc-$cmd-$sub.txt" || fail "mhc $cmd $sub --help exited $?"
    done
done
for topic in $(listed "$tmp/help.txt" Topics); do
    "$mhc" help "$topic" >"$tmp/help-$topic.txt" || fail "mhc help $topic exited $?"
done
[[ $(ls "$tmp" | wc -l) -ge 15 ]] || fail "only $(ls "$tmp" | wc -l) help texts found"
# Every command's help ends with examples of it, whole command lines ("$ mhc CMD ..."); none had one
# before 2026-12-06.
for cmd in $(listed "$tmp/mhc.txt" Commands); do
    sed -n '/^Examples:$/,$p' "$tmp/mhc-$cmd.txt" | grep -q "^\$ mhc $cmd " ||
        fail "mhc $cmd --help has no 'Examples:' with a line '\$ mhc $cmd ...'"
done

if [[ $update == --update ]]; then
    rm -f "$golden"/*.txt
    cp "$tmp"/*.txt "$golden"/
    echo "wrote $(ls "$golden" | wc -l) golden files in $golden"
    exit 0
fi

regen="tests/cli/help_golden.sh build/cli/mhc --update"
for f in "$tmp"/*.txt; do
    name=$(basename "$f")
    awk -v n="$name" 'length($0) > 80 {print n ":" NR ": " length($0) " columns: " $0; bad = 1} END {exit bad}' "$f" \
        || fail "help lines past 80 columns"
    grep -n ' $' "$f" && fail "$name: trailing spaces"
    # Defaults as users write them: no C++ sentinel (-2147483648), no raw byte count
    # (268435456), no CLI11 flag value ({false}), no validator text (INT:INT in [1 - 4096]).
    grep -nE -- '-2147483648|2147483647|\[default: [0-9]{7,}\]|\{(false|true)\}|:INT|in \[[0-9]+ - ' "$f" \
        && fail "$name: a default or type as C++ or CLI11 write it"
    # The words of docs/cli.md, not CLI11's: a command and its arguments, names listed "a, b or c".
    grep -nE -- '^(Subcommands|Positionals):|SUBCOMMAND|^  --[a-z0-9-]+ [a-z0-9-]+\|' "$f" \
        && fail "$name: CLI11's words (Subcommands, Positionals, SUBCOMMAND) or a value list written a|b"
    [[ -f $golden/$name ]] || fail "no golden file for $name (a new command or topic? run $regen)"
    diff -u "$golden/$name" "$f" || fail "$name differs from its golden file (run $regen if the change is meant)"
done
for g in "$golden"/*.txt; do
    [[ -f $tmp/$(basename "$g") ]] || fail "golden $(basename "$g") has no command or topic any more (run $regen)"
done

# On a terminal: the terminal's width, wider and narrower than 80.
if command -v script >/dev/null; then
    for cols in 120 60; do
        script -qec "stty cols $cols; '$mhc' simulate --help" /dev/null | tr -d '\r' >"$tmp/tty"
        widest=$(awk '{ if (length($0) > w) w = length($0) } END {print w + 0}' "$tmp/tty")
        (( widest <= cols )) || fail "at $cols columns a help line has $widest"
        (( widest > cols - 12 )) || fail "at $cols columns the widest help line has $widest: not wrapped at the terminal's width"
    done
fi
echo ok
