# What the shell tests here share, sourced after they have read their arguments:
#   . "$(dirname "$0")/preamble.sh"
# $tmp: a scratch folder of this test alone, removed on exit (read-only parts included); and
# fail MESSAGE: prints "FAIL: MESSAGE" and exits 1. A test with more to clean sets its own trap
# after sourcing this (it replaces this one, so it removes $tmp too).
tmp=$(mktemp -d) || { echo "FAIL: no temporary folder"; exit 1; }
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
