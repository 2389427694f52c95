#!/usr/bin/env bash
# scripts/check-code against two fixture trees laid out like the repository: fixtures/good keeps
# every rule (exit 0; its build-nompi/ folder, generated code, is not checked); fixtures/bad
# breaks each rule once (a lower library including a higher one, a private header, CUDA outside
# its layers, one front-end including another, a folder in no layer, a function one line past the limit, an
# exception grown past its limit, plain enums, test case names that CTest's discovery breaks) and
# must be reported line for line as expected_bad.txt says, with exit 1.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
check="$here/../../scripts/check-code"
command -v ctags >/dev/null || { echo "skipped: no ctags (Debian: universal-ctags)"; exit 77; }
out=$("$check" --root "$here/fixtures/good"); rc=$?
[ "$rc" = 0 ] || { echo "good tree: exit $rc, expected 0:"; echo "$out"; exit 1; }
out=$("$check" --root "$here/fixtures/bad"); rc=$?
[ "$rc" = 1 ] || { echo "bad tree: exit $rc, expected 1:"; echo "$out"; exit 1; }
diff -u "$here/expected_bad.txt" <(echo "$out") || { echo "bad tree: the report differs from expected_bad.txt"; exit 1; }
# Each rule on its own reports only its own findings.
for rule in layers functions enums test-names; do
  "$check" --root "$here/fixtures/bad" --$rule > /dev/null; rc=$?
  [ "$rc" = 1 ] || { echo "--$rule on the bad tree: exit $rc, expected 1"; exit 1; }
done
layers=$("$check" --root "$here/fixtures/bad" --layers | grep -vc '^check-code:')
[ "$layers" = 6 ] || { echo "--layers: $layers findings, expected 6"; exit 1; }
names=$("$check" --root "$here/fixtures/bad" --test-names | grep -vc '^check-code:')
[ "$names" = 9 ] || { echo "--test-names: $names findings, expected 9"; exit 1; }
echo "check-code: good tree clean, bad tree reported as expected"
