#!/usr/bin/env bash
# No program or library the build makes searches a folder named relative to where it is run: an
# empty entry in RUNPATH/RPATH (CMake ended the build tree's in one, as room for an install's edit)
# is read by the loader as the current folder, so a libz.so.1 in any folder mhc was run from would
# be loaded into it. Entries must be absolute or start with $ORIGIN.
# Usage: runpath_test.sh BUILD_DIR
build=$1
command -v readelf >/dev/null || { echo "SKIP: no readelf"; exit 77; }
checked=0
bad=0
while IFS= read -r -d '' f; do
    head -c 4 "$f" 2>/dev/null | grep -q $'^\x7fELF' || continue
    checked=$((checked + 1))
    while IFS= read -r paths; do
        IFS=: read -r -a entries <<<"$paths"   # a last empty entry is dropped by read: added below
        [ "${paths: -1}" = ":" ] && entries+=("")
        for e in "${entries[@]}"; do
            case "$e" in
                /* | '$ORIGIN'*) ;;
                *) echo "FAIL: ${f#"$build"/}: RUNPATH/RPATH [$paths] holds '$e', a folder relative to where it runs"; bad=1 ;;
            esac
        done
    done < <(readelf -d "$f" 2>/dev/null | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]$/\2/p')
done < <(find "$build" -path "$build/CMakeFiles" -prune -o -type f \( -perm -u+x -o -name '*.so*' \) -print0)
[ "$checked" -gt 0 ] || { echo "FAIL: no program found under $build"; exit 1; }
[ "$bad" = 0 ] && echo "all $checked programs and libraries search only absolute folders"
exit "$bad"
