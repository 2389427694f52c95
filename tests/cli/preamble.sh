# What the shell tests here share, sourced after they have read their arguments:
#   . "$(dirname "$0")/preamble.sh"
# $tmp: a scratch folder of this test alone, removed on exit (read-only parts included); and
# fail MESSAGE: prints "FAIL: MESSAGE" and exits 1. A test with more to clean sets its own trap
# after sourcing this (it replaces this one, so it removes $tmp too).
tmp=$(mktemp -d) || { echo "FAIL: no temporary folder"; exit 1; }
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# "$python" -c "$find_modules" MODULE...: exits 0 where that Python finds every MODULE (a top-level
# name) installed, without importing it: a probe `-c "import torch"` took 2.5 to 4 s of CPU and
# pandas about 0.8 s, for a yes or no (2026-12-07). A module found that then fails to import fails
# the test that uses it instead of skipping it.
# shellcheck disable=SC2034  # read by the tests that source this file
find_modules='import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))'
# slurp FILE: the file's bytes in $slurped (a NUL byte as \001), and in $slurped_lines how many lines end
# in it (as `wc -l` counts), read by the shell itself: a `wc` and a `grep` for each refusal were
# two processes more than the mhc under test, most of a refusal's CPU (tests/cli, 2026-12-07).
slurp() {
    local part=""
    slurped=""
    while IFS= read -r -d '' part; do slurped+=$part$'\001'; done <"$1"
    slurped+=$part
    slurped_lines=${slurped//[!$'\n']/}
    slurped_lines=${#slurped_lines}
}
# says TEXT: whether $slurped (slurp's) holds TEXT, as `grep -qF -- TEXT FILE` of a TEXT without a newline.
says() { [[ $slurped == *"$1"* ]]; }
# refused WANT ARGS...: `$mhc ARGS...` (in the current folder) exits 2 with one line on stderr
# containing WANT. A test that refuses otherwise defines its own after sourcing this.
refused() {
    local want=$1; shift
    "$mhc" "$@" >out 2>err; local rc=$?
    [ $rc = 2 ] || fail "$* exited $rc, wanted 2: $(cat err)"
    slurp err
    [ "$slurped_lines" = 1 ] || fail "$*: wanted one line: $(cat err)"
    says "$want" || fail "$*: does not say '$want': $(cat err)"
}
