# Sourced by bench/lib.sh for the compare scripts (bench/sim/compare.sh, load_compare.sh, allocator_compare.sh,
# bench/trace/store_compare.sh, bench/import/compare.sh): builds a base commit and this tree with
# the same benchmark sources on both sides, so that every figure is printed beside the base's from
# one run; prints the comparison's header and names each side's tree.
#   build_base_and_this BASE "FOLDERS" TARGET...
# The base is a git worktree in build/bench-base-COMMIT (inside this tree's ignored build folder,
# so that a compiler cache with CCACHE_BASEDIR above the tree reuses the objects of any checkout of
# that commit), kept for the next run; `git worktree remove --force build/bench-base-COMMIT` drops
# it. This tree's bench/include, bench/CMakeLists.txt and the FOLDERS' sources (bench/FOLDER) are
# copied into it. Sets $wt to the base worktree. Env: MHC_CMAKE_ARGS, MHC_JOBS.
build_base_and_this() {
  local base=$1 folders=$2 root dir
  shift 2
  root=$(pwd)
  wt="$root/build/bench-base-$(git rev-parse --short "$base")"
  [ -d "$wt" ] || git worktree add --detach "$wt" "$base" >/dev/null
  mkdir -p "$wt/bench/include"
  cp -r bench/include/mhc "$wt/bench/include/"
  cp bench/CMakeLists.txt "$wt/bench/CMakeLists.txt"
  for dir in $folders; do
    mkdir -p "$wt/bench/$dir"
    cp "bench/$dir/CMakeLists.txt" "bench/$dir"/*.cpp "$wt/bench/$dir/"
  done
  local args=(-G Ninja -DCMAKE_BUILD_TYPE=Release ${MHC_CMAKE_ARGS:-})
  for dir in "$wt" "$root"; do
    cmake -S "$dir" -B "$dir/build" "${args[@]}" >/dev/null
    cmake --build "$dir/build" -j"${MHC_JOBS:-2}" --target "$@" >/dev/null
  done
}

# The first lines of a comparison: the base against this tree (marked +changes where the FOLDERS
# differ from HEAD) and the machine, with TAIL after it. Reads $base.
#   compare_header "FOLDERS" [TAIL]
compare_header() {
  # shellcheck disable=SC2086 # FOLDERS is a list of paths
  echo "base $(git rev-parse --short "$base") vs this tree $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- $1 || echo +changes)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)${2:+, $2}"
}

# The tree a side runs from: before = the base's worktree ($wt), after = this tree ($root).
side_dir() { if [ "$1" = before ]; then echo "$wt"; else echo "$root"; fi; }
