#!/usr/bin/env bash
# `mhc --version` with an empty environment: "mhc VERSION", then one line on CUDA (the runtime
# and the driver's state, or "not in this build"); exit 0, nothing on stderr.
set -euo pipefail
mhc=$1 version=$2
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
env -i "$mhc" --version >"$out" 2>"$err" || { echo "FAIL: exit $?: $(cat "$err")"; exit 1; }
[ ! -s "$err" ] || { echo "FAIL: stderr: $(cat "$err")"; exit 1; }
[ "$(sed -n 1p "$out")" = "mhc $version" ] || { echo "FAIL: first line '$(sed -n 1p "$out")', expected 'mhc $version'"; exit 1; }
[[ $(sed -n 2p "$out") == "CUDA: "?* ]] || { echo "FAIL: second line '$(sed -n 2p "$out")' does not start with 'CUDA: '"; exit 1; }
[ "$(wc -l <"$out")" -eq 2 ] || { echo "FAIL: $(wc -l <"$out") lines, expected 2"; exit 1; }
cat "$out"
