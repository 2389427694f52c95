#!/usr/bin/env bash
# scripts/check-code against two fixture trees laid out like the repository: fixtures/good keeps
# every rule (exit 0; its build-nompi/ folder, generated code, is not checked); fixtures/bad
# breaks each rule once (a lower library including a higher one, a private header, CUDA outside
# its layers, one front-end including another, a folder in no layer, a function one line past the limit, an
# exception grown past its limit, plain enums, test case names that CTest's discovery breaks, Python
# that pyflakes flags) and
# must be reported line for line as expected_bad.txt says, with exit 1. A rule whose tool is missing
# says skipped and exits 77, never passes.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
check="$here/../../scripts/check-code"
# Without pyflakes (no pyflakes3 on PATH, no module: python -S leaves site-packages out) the rule
# says it was skipped, runs the other rules, and the status is 77 where nothing else is broken.
python=$(python3 -c 'import sys; print(sys.executable)')
out=$(PATH=/nonexistent "$python" -S "$check" --root "$here/fixtures/bad" --pyflakes --enums); rc=$?
[ "$rc" = 1 ] && grep -q '^check-code: pyflakes skipped: no pyflakes' <<<"$out" ||
  { echo "no pyflakes, enums broken: exit $rc, expected 1 and 'pyflakes skipped':"; echo "$out"; exit 1; }
out=$(PATH=/nonexistent "$python" -S "$check" --root "$here/fixtures/good" --pyflakes); rc=$?
[ "$rc" = 77 ] && [ "$out" = "check-code: pyflakes skipped: no pyflakes (Debian: pyflakes3); scripts/setup installs it
check-code: nothing checked, 1 skipped" ] || { echo "no pyflakes: exit $rc, expected 77 and 'skipped':"; echo "$out"; exit 1; }
command -v ctags >/dev/null || { echo "skipped: no ctags (Debian: universal-ctags)"; exit 77; }
python3 "$check" --root "$here/fixtures/good" --pyflakes >/dev/null
[ $? = 77 ] && { echo "skipped: no pyflakes (Debian: pyflakes3)"; exit 77; }
out=$("$check" --root "$here/fixtures/good"); rc=$?
[ "$rc" = 0 ] || { echo "good tree: exit $rc, expected 0:"; echo "$out"; exit 1; }
out=$("$check" --root "$here/fixtures/bad"); rc=$?
[ "$rc" = 1 ] || { echo "bad tree: exit $rc, expected 1:"; echo "$out"; exit 1; }
diff -u "$here/expected_bad.txt" <(echo "$out") || { echo "bad tree: the report differs from expected_bad.txt"; exit 1; }
# Each rule on its own reports only its own findings.
for rule in layers functions enums test-names pyflakes; do
  "$check" --root "$here/fixtures/bad" --$rule > /dev/null; rc=$?
  [ "$rc" = 1 ] || { echo "--$rule on the bad tree: exit $rc, expected 1"; exit 1; }
done
layers=$("$check" --root "$here/fixtures/bad" --layers | grep -vc '^check-code:')
[ "$layers" = 6 ] || { echo "--layers: $layers findings, expected 6"; exit 1; }
names=$("$check" --root "$here/fixtures/bad" --test-names | grep -vc '^check-code:')
[ "$names" = 9 ] || { echo "--test-names: $names findings, expected 9"; exit 1; }
flakes=$("$check" --root "$here/fixtures/bad" --pyflakes | grep -vc '^check-code:')
[ "$flakes" = 3 ] || { echo "--pyflakes: $flakes findings, expected 3"; exit 1; }
echo "check-code: good tree clean, bad tree reported as expected"
