#!/bin/sh
# Every ctest entry whose name starts with a folder prefix ("trace:", "cli:") has a space after
# the colon, as tests/CMakeLists.txt's mhc_catch_tests and the add_test names give it, so that the
# documented `ctest -R '^trace: '` finds all of a folder's entries (Catch2's discovery once dropped
# the space: "trace:a column projection ...").
#   ctest_prefixes.sh CTEST BUILD_DIR
ctest=$1
build=$2
list=$("$ctest" --test-dir "$build" -N) || { echo "cannot list the entries of $build"; exit 1; }
bad=$(printf '%s\n' "$list" | sed -n 's/^ *Test *#[0-9]*: //p' | grep -E '^[a-z][a-z0-9-]*:[^ ]')
total=$(printf '%s\n' "$list" | grep -cE '^ *Test *#[0-9]+: ')
if [ -n "$bad" ]; then
    printf '%s\n' "$bad" | head -5
    echo "$(printf '%s\n' "$bad" | wc -l) of $total entries have no space after their folder prefix"
    exit 1
fi
echo "$total entries, every folder prefix followed by its space"
