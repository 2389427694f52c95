#!/usr/bin/env python3
"""The CPU seconds that test files take to compile at each optimisation level, with Catch2's
precompiled header made again at each level (GCC uses it only where __OPTIMIZE__ agrees): each
file's command from BUILD/compile_commands.json with its last -O replaced, the levels taken in
turn file by file so that a shared machine's load falls on all of them alike.
  bench/ci/opt_levels.py BUILD LEVELS FILE...
e.g. bench/ci/opt_levels.py build -O2,-O1,-O0 tests/trace/test_store.cpp tests/sim/test_hand.cpp
Prints each file's seconds per level, then the sums."""
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile


def cpu_of(cmd, cwd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def at_level(args, level, pch, out):
    """args with the last -O replaced by level, the -include of the precompiled header by pch
    and the output by out."""
    args = list(args)
    last = max(i for i, a in enumerate(args) if a.startswith("-O"))
    args[last] = level
    for i, a in enumerate(args):
        if a == "-include" and "cmake_pch" in args[i + 1]:
            args[i + 1] = pch
        if a == "-o":
            args[i + 1] = out
    return args


def main(argv):
    if len(argv) < 4:
        print(__doc__)
        return 2
    build, levels, files = os.path.abspath(argv[1]), argv[2].split(","), [os.path.abspath(f) for f in argv[3:]]
    commands = {e["file"]: e for e in json.load(open(os.path.join(build, "compile_commands.json")))}
    pch_entry = next(e for e in commands.values() if e["file"].endswith("mhc_catch_pch.dir/cmake_pch.hxx.cxx"))
    tmp = tempfile.mkdtemp(prefix="opt-levels-")
    pch = {}
    for level in levels:
        header = os.path.join(tmp, f"pch{level}.hxx")
        with open(header, "w") as f:
            f.write("#pragma GCC system_header\n#include <catch2/catch.hpp>\n")
        args = shlex.split(pch_entry["command"])
        args = at_level(args, level, header, header + ".gch")
        args[args.index("-c") + 1] = header
        cpu_of(args, pch_entry["directory"])
        pch[level] = header
    total = {level: 0.0 for level in levels}
    for f in files:
        e = commands.get(f)
        if e is None:
            print(f"opt_levels: {f}: not in {build}/compile_commands.json", file=sys.stderr)
            return 2
        row = []
        for level in levels:
            args = at_level(shlex.split(e["command"]), level, pch[level], os.path.join(tmp, "out.o"))
            s = cpu_of(args, e["directory"])
            total[level] += s
            row.append(f"{level} {s:6.2f}")
        print(f"{os.path.relpath(f)}: " + "  ".join(row))
    print(f"{len(files)} files, CPU seconds: " + "  ".join(f"{level} {total[level]:.1f}" for level in levels))
    subprocess.run(["rm", "-rf", tmp], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
