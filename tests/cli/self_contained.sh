#!/usr/bin/env bash
# The clone stands alone: no file refers to a folder beside the repository,
# the public fixtures are in tests/data/public with each licence notice SOURCES.md names, and
# the design guide the code cites is in docs/.
# Usage: self_contained.sh SOURCE_DIR
set -uo pipefail
root=$1
cd "$root" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
files=$(find . -path ./build -prune -o -path './build*' -prune -o -path ./.git -prune -o -type f -print \
        | grep -E '\.(cpp|hpp|h|c|cu|cmake|txt|sh|py|md)$|/scripts/|/\.ci/')
# shellcheck disable=SC2086
hits=$(grep -nE '\.\./shared|/work/shared|shared/datasets|\.\./shared/DESIGN|(^|[^/])DESIGN\.md' $files \
       | grep -v '^./tests/cli/self_contained.sh:')
[[ -z $hits ]] || fail "references outside the clone: $hits"
pub=tests/data/public
[[ -f $pub/SOURCES.md ]] || fail "$pub/SOURCES.md missing"
n=0
while IFS= read -r f; do
    [[ -f $pub/$f ]] || fail "SOURCES.md lists $f, not in $pub"
    n=$((n + 1))
done < <(grep -oE '^\| [a-z-]+/[^ |]+' $pub/SOURCES.md | sed 's/^| //')
(( n >= 7 )) || fail "SOURCES.md lists $n fixtures, want the 7 public traces"
for lic in $(grep -oE 'LICENSES/[A-Za-z0-9.-]+\.txt' $pub/SOURCES.md | sort -u); do
    [[ -s $pub/$lic ]] || fail "$pub/$lic (named in SOURCES.md) missing"
done
# Each fixture's row names a licence file.
grep -E '^\| [a-z-]+/' $pub/SOURCES.md | grep -v 'LICENSES/' && fail "a fixture without its licence notice"
# Every "docs/design.md §N" cited has its section.
for sec in $(grep -rhoE 'docs/design\.md` ?§[0-9]+|docs/design\.md §[0-9]+' --include='*.cpp' --include='*.hpp' \
             --include='*.md' --include='CMakeLists.txt' . | grep -oE '[0-9]+$' | sort -u); do
    grep -q "^## $sec\. " docs/design.md || fail "docs/design.md has no section $sec"
done
# The README says plainly what has run on a GPU, where its logs are, and what has not run yet.
gpu_paragraph=$(sed -n '/What has run on a GPU/,/^$/p' README.md | tr '\n' ' ')
for part in "mhc record" "CUDA kernels" "validate --backend cuda" "calibrate --backend cuda" "docs/logs/" \
            "Not yet measured on a GPU"; do
    grep -q -- "$part" <<<"$gpu_paragraph" || fail "README's GPU paragraph does not name $part"
done
for log in $(grep -oE 'docs/logs/[A-Za-z0-9._/-]+' <<<"$gpu_paragraph"); do
    [ -e "$log" ] || fail "README's GPU paragraph names $log, which is not in the repository"
done
echo ok
