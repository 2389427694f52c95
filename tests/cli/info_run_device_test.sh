#!/bin/bash
# `mhc info` lists a run with the device it simulated when that is not GPU 0, as mhc-view names it:
# nsys's con_kernel sample simulated at 70% on GPU 0 and with --device -1 (the host's pinned
# buffers) printed two rows named "lru+none@70%/pcie4/caching" (2026-12-06). The runs section is
# compared with tests/cli/golden/info-runs-devices.txt (regenerate: --update, and review the diff).
mhc=$(realpath "$1") data=$(realpath "$2") update=$3
. "$(dirname "$0")/preamble.sh"
golden="$(realpath "$(dirname "$0")")/golden/info-runs-devices.txt"
src="$data/nsys/con_kernel.sqlite"
[ -f "$src" ] || { echo "SKIP: $src missing"; exit 0; }
cd "$tmp" || fail "no folder"
"$mhc" import "$src" -o con.db >/dev/null 2>err || fail "import: $(cat err)"
"$mhc" simulate con.db --capacity 70% --policy lru >out 2>err || [ $? = 3 ] || fail "simulate: $(cat err)"
grep -q '^run            lru+none@70%/pcie4/caching (device 0)$' out || fail "simulate on GPU 0: $(head -1 out)"
"$mhc" simulate con.db --capacity 70% --policy lru --device -1 >out 2>err || [ $? = 3 ] || fail "simulate --device -1: $(cat err)"
grep -q '^run            lru+none@70%/pcie4/caching (device -1)$' out || fail "simulate on the host: $(head -1 out)"
"$mhc" info con.db >info.txt 2>err || fail "info: $(cat err)"
sed -n '/^runs /,$p' info.txt >runs.txt
if [ "$update" = --update ]; then cp runs.txt "$golden"; echo "updated $golden"; exit 0; fi
diff -u "$golden" runs.txt || fail "info's runs differ from $golden"
echo "PASS"
