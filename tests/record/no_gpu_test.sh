#!/usr/bin/env bash
# The injection library in a process without a GPU (driver stub only): it must not harm the
# program. Skipped (77) where the toolkit's driver stub is missing.
set -uo pipefail
harness=$1 lib=$2 stub=$3
[[ -f $stub ]] || { echo "no driver stub at $stub: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ln -s "$stub" "$tmp/libcuda.so.1"
out=$(cd "$tmp" && MHC_RECORD_OUTPUT="$tmp/run.db" LD_LIBRARY_PATH="$tmp" timeout 60 "$harness" "$lib" 2>"$tmp/err")
rc=$?
cat "$tmp/err"
[[ $rc == 0 ]] || { echo "FAIL: harness exited $rc: $out"; exit 1; }
grep -q "program still running" <<<"$out" || { echo "FAIL: $out"; exit 1; }
(( $(wc -l <"$tmp/err") <= 3 )) || { echo "FAIL: too much on stderr"; exit 1; }
leftover=$(find "$tmp" -name 'run.db*' | head -1)
if [[ -n $leftover && ! -s "$tmp/run.db" ]]; then echo "FAIL: left $leftover"; exit 1; fi
echo ok
