# What the shell tests here share, sourced after they have read their arguments:
#   . "$(dirname "$0")/preamble.sh"
# $tmp: a scratch folder of this test alone, removed on exit (read-only parts included); and
# fail MESSAGE: prints "FAIL: MESSAGE" and exits 1. A test with more to clean sets its own trap
# after sourcing this (it replaces this one, so it removes $tmp too).
tmp=$(mktemp -d) || { echo "FAIL: no temporary folder"; exit 1; }
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# refused WANT ARGS...: `$mhc ARGS...` (in the current folder) exits 2 with one line on stderr
# containing WANT. A test that refuses otherwise defines its own after sourcing this.
refused() {
    local want=$1; shift
    "$mhc" "$@" >out 2>err; local rc=$?
    [ $rc = 2 ] || fail "$* exited $rc, wanted 2: $(cat err)"
    [ "$(wc -l <err)" = 1 ] || fail "$*: wanted one line: $(cat err)"
    grep -qF -- "$want" err || fail "$*: does not say '$want': $(cat err)"
}
