#!/usr/bin/env bash
# What the compiler cache gives a clone at another path: each revision cloned twice, at two paths
# (as CI clones where it is told), both built through one fresh cache of their own: the first
# clone fills it, the second is measured: its ccache hits and misses, and the CPU seconds of its
# compiles (ninja's log). The test programs' object files by default; OBJECTS, a grep pattern over
# ninja's outputs, picks others.
#   bench/ci/clone_cache.sh OLD_REV NEW_REV [OBJECTS]
# e.g. bench/ci/clone_cache.sh HEAD~1 HEAD 'tests/(trace|advise)/'
# Prints one line per revision; its work folder is $TMPDIR/clone-cache (or /tmp), removed after.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
pattern=${3:-^tests/.*\.o$}
work=${TMPDIR:-/tmp}/clone-cache
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
build() {   # build CLONE CACHE: configure and build the objects; prints "hits misses job-seconds"
  local clone=$1 cache=$2
  export CCACHE_DIR=$cache CCACHE_BASEDIR=$clone
  cmake -S "$clone" -B "$clone/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DMHC_WITH_CUDA=OFF >"$clone/configure.log" 2>&1
  local objects
  objects=$(ninja -C "$clone/build" -t targets all | sed 's/: .*//' | grep -E "$pattern" || true)
  [ -n "$objects" ] || { echo "clone_cache: no output matches '$pattern'" >&2; exit 2; }
  ccache --zero-stats >/dev/null
  # shellcheck disable=SC2086   # one argument per object
  nice ninja -C "$clone/build" -j2 $objects >"$clone/build.log" 2>&1
  local stats
  stats=$(ccache --print-stats)
  awk -v h="$(echo "$stats" | awk '$1 ~ /^(direct|preprocessed)_cache_hit$/ { s += $2 } END { print s + 0 }')" \
      -v m="$(echo "$stats" | awk '$1 == "cache_miss" { print $2 }')" \
      'NR > 1 && $4 ~ /\.o$/ { s += ($2 - $1) / 1000 } END { printf "%s %s %.1f\n", h, m, s }' "$clone/build/.ninja_log"
}
for rev in "$1" "$2"; do
  sha=$(git -C "$root" rev-parse --short "$rev")
  cache=$work/ccache-$sha
  for k in first second; do
    git clone -q --shared --no-checkout "$root" "$work/$k-$sha"
    git -C "$work/$k-$sha" checkout -q "$sha"
  done
  build "$work/first-$sha" "$cache" >/dev/null
  read -r hits misses secs < <(build "$work/second-$sha" "$cache")
  printf '%s (%s): a second clone at another path: %s hits, %s misses, %s s of compiles\n' "$rev" "$sha" "$hits" "$misses" "$secs"
done
