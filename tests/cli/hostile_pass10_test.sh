#!/usr/bin/env bash
# Hostile pass 10 (docs/cli.md, "Messages and exit statuses"): what passes 1 to 9 left.
#   1. mhc-view's words by mhc's rules (mhc/common/command_line.hpp, one place for both): a flag
#      given a value (--fit-y=1, --help=1) or twice was taken; an option given twice was said in
#      CLI11's words ("--size: At Most 1 required but received 2"), one given '' as "1 required TEXT
#      missing", and --step 1e3 took the number grammar's exceptions. Its files: --screenshot or
#      --layout naming the trace, the runs database or the rules file was taken (the trace replaced
#      by a PNG), both outputs one file too; --families naming a FIFO or /dev/zero hung, a folder
#      was read as no rules.
#   2. Bytes after the end of a gzip input that are no gzip member were dropped without a word
#      (zlib's gzread): a damaged or appended file imported as whole. Now refused naming the byte;
#      members one after another are read whole and zeros after the last are skipped (gzip's rule).
#      Bytes after a snapshot pickle's STOP opcode likewise (Python's pickle.load leaves them unread).
#   3. A capture's device figures (meta capture.gpu.hbm_bw, capture.launch_overhead_ns) were read
#      with std::stod unchecked and cast to int64: 'nan', '-1', '1e300' taken (undefined behaviour),
#      '0x10' read as 16, 1e30 ns of launch overhead blamed on "allocations row 1: t_alloc". Now
#      check says them and advise refuses them, naming the key.
#   4. The cache inside a trace (trace_cache) was trusted by keyless checksums anyone can work out:
#      a trace whose check passes, with another trace's entry of the same fingerprint copied in,
#      simulated and showed in info the other trace's peak (42 MiB for rows of 138 MiB). Entries are
#      now tagged with the user's secret key; one written under another key is not used.
#   5. A link profile's by_chunk rows out of order, of one size or of a fractional size were taken:
#      a reversed profile gave every chunk the largest's rate, 4096.5 bytes read as 4096.
#   6. info printed what a trace says as it is: a label with a newline over two lines, an escape
#      sent to the terminal, and a meta device_name past 512 bytes cut with its line's newline
#      (the next line joined to it).
#   7. A trace whose full path is 512 bytes or more (SQLite's limit) was "cannot open: unable to open
#      database file", an output there "cannot create: ...": now the limit is said.
# Usage: hostile_pass10_test.sh MHC PYTHON PKG [MHC_VIEW] (PKG: the folder holding mhc_torch; the
# parts that need torch or mhc-view are skipped, said, without them)
set -u
mhc=$1
python=$2
pkg=$3
view=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/preamble.sh"
cd "$tmp" || exit 1
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 --vocab 1000 \
    -o t.db >/dev/null || fail generate

# 1. mhc-view's words as mhc's (DISPLAY empty: a command line taken would fail later, exit 1).
if [ -n "$view" ] && [ -x "$view" ]; then
    view_refused() {   # view_refused WANT ARGS...
        local want=$1; shift
        DISPLAY='' WAYLAND_DISPLAY='' timeout 20 "$view" "$@" >out 2>err </dev/null; local rc=$?
        [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qxF -- "mhc-view: $want" err ||
            fail "mhc-view $* exited $rc, wanted 2 and 'mhc-view: $want': $(cat err)"
    }
    view_refused "--fit-y takes no value: '--fit-y=1' (mhc-view --help)" t.db --fit-y=1
    view_refused "--help takes no value: '--help=1' (mhc-view --help)" t.db --help=1
    view_refused "--fit-y given 2 times; give it once" t.db --fit-y --fit-y
    view_refused "--size given 2 times; give it once" t.db --size 800x600 --size 900x700
    view_refused "--screenshot given 2 times; give it once" t.db --screenshot a.png --screenshot b.png
    view_refused "--runs-db: '': an empty value (mhc-view --help)" t.db --runs-db=
    view_refused "--families: '': an empty value (mhc-view --help)" t.db --families ''
    view_refused "--step: '1e3': not a whole number (decimal digits only: no sign '+', space, 0x or exponent)" \
        t.db --step 1e3
    view_refused "unknown option --no-such (mhc-view --help)" t.db --no-such
    # Its files as mhc checks its own: an output naming an input (--screenshot t.db replaced the
    # trace with a PNG after the frame), both outputs one file, a rules file that is a FIFO (a hang
    # before the window), a device (/dev/zero: read without end) or a folder (no rules, no word).
    echo "gemm gemm" >fam.txt
    mkfifo fam.fifo
    view_refused "t.db: is the input file t.db; write the output to another file" t.db --screenshot t.db
    view_refused "t.db: is the input file t.db; write the output to another file" t.db --screenshot s.png --layout t.db
    view_refused "fam.txt: is the input file fam.txt; write the output to another file" t.db --families fam.txt \
        --screenshot fam.txt
    view_refused "--layout ./s.png is also --screenshot; write them to two files" t.db --screenshot s.png --layout ./s.png
    view_refused "fam.fifo: is a FIFO, not a regular file" t.db --families fam.fifo
    view_refused "/dev/zero: is a character device, not a regular file" t.db --families /dev/zero
    view_refused "$tmp: is a directory, not a regular file" t.db --families "$tmp"
    [ "$(head -c 15 t.db)" = "SQLite format 3" ] || fail "mhc-view replaced t.db"
    # The same words to mhc, said the same way.
    refused "info: --json takes no value: '--json=1' (mhc info --help)" info t.db --json=1
    refused "--top given 2 times; give it once" info t.db --top 3 --top 4
else
    echo "SKIP part 1: no mhc-view"
fi

# 2. gzip input: junk after the end refused; several members read whole; zero padding skipped.
kineto=$here/../import/fixtures/cpu_mlp_kineto.json.gz
"$mhc" -q import "$kineto" -o k.db >/dev/null || fail "import of the fixture"
want=$(sqlite3 k.db "SELECT count(*) FROM allocations")
size=$(stat -c %s "$kineto")
{ cat "$kineto"; printf 'JUNK'; } >junk.json.gz
refused "junk.json.gz: byte $size follows the end of the gzip data and is not gzip data (an appended or damaged file)" \
    import junk.json.gz -o j.db
[ ! -e j.db ] || fail "a refused import wrote j.db"
{ cat "$kineto"; head -c 1000 /dev/zero; printf 'x'; } >zx.json.gz
refused "zx.json.gz: byte $((size + 1000)) follows the end of the gzip data" import zx.json.gz -o j.db
{ cat "$kineto"; head -c 70000 /dev/zero; } >pad.json.gz
"$mhc" -q import pad.json.gz -o pad.db >/dev/null 2>err || fail "import of a gzip padded with zeros: $(cat err)"
gzip -dc "$kineto" >k.json
half=$(( $(stat -c %s k.json) / 2 ))
{ head -c $half k.json | gzip; tail -c +$((half + 1)) k.json | gzip; } >two.json.gz
"$mhc" -q import two.json.gz -o two.db >/dev/null 2>err || fail "import of two gzip members: $(cat err)"
[ "$(sqlite3 two.db "SELECT count(*) FROM allocations")" = "$want" ] || fail "two gzip members: not read whole"
head -c $((size - 5)) "$kineto" >cut.json.gz
refused "cut.json.gz: the gzip data is truncated" import cut.json.gz -o j.db
python3 -c '
import pickle
ev = lambda action, t: {"action": action, "addr": 4096, "size": 512, "stream": 0, "time_us": t, "frames": []}
data = pickle.dumps({"segments": [], "device_traces": [[ev("alloc", 1), ev("free_requested", 2), ev("free_completed", 3)]]})
open("p.pickle", "wb").write(data)
open("pj.pickle", "wb").write(data + b"JUNK")
print(len(data))' >plen || fail "python3 pickles"
"$mhc" -q import p.pickle -o p.db >/dev/null 2>err || fail "import p.pickle: $(cat err)"
refused "pj.pickle: pickle: byte $(cat plen) follows the pickle's end (STOP): 4 bytes that are no part of it (an appended or damaged file)" \
    import pj.pickle -o j.db
[ ! -e j.db ] || fail "a refused import wrote j.db"

# 3. The capture's device figures, checked by check and advise alike.
capture=$here/../data/advise/tiny_mhc.db
for bad in "capture.gpu.hbm_bw|nan|is not a bandwidth in B/s in [1e3, 1e15]" \
           "capture.gpu.hbm_bw|-1|is not a bandwidth in B/s in [1e3, 1e15]" \
           "capture.gpu.hbm_bw|0x10|is not a bandwidth in B/s in [1e3, 1e15]" \
           "capture.launch_overhead_ns|1e30|is not a whole number of ns in [0, 1000000000]"; do
    IFS='|' read -r key value why <<<"$bad"
    cp "$capture" c.db && chmod u+w c.db
    sqlite3 c.db "UPDATE meta SET value = '$value' WHERE key = '$key'" || fail sqlite3
    [ "$(sqlite3 c.db "SELECT value FROM meta WHERE key = '$key'")" = "$value" ] || fail "the capture has no meta $key"
    "$mhc" check c.db >out 2>err; rc=$?
    [ $rc = 2 ] && grep -qxF "c.db: meta $key: '$value' $why [meta]" out || fail "check of $key '$value' exited $rc: $(cat out err)"
    refused "c.db: meta $key: '$value' $why" advise c.db --capacity 80MiB
done

# 4. A cache entry written by someone else (another key: another XDG_CACHE_HOME) is not used.
mkdir theirs mine
cp t.db A.db && cp t.db B.db
sqlite3 B.db "UPDATE allocations SET bytes = bytes * 4 WHERE id = (SELECT id FROM allocations ORDER BY bytes DESC LIMIT 1)" ||
    fail sqlite3
for f in A.db B.db; do   # one fingerprint: the same meta (digests marked edited alike) and counts
    sqlite3 $f "UPDATE meta SET value = 'edited:0' WHERE key = 'content_digest'" || fail sqlite3
done
XDG_CACHE_HOME=$tmp/theirs "$mhc" -q simulate A.db --capacity 1GiB --no-store >/dev/null || fail "simulate A.db"
[ "$(sqlite3 A.db "SELECT count(*) FROM trace_cache")" -gt 0 ] || fail "A.db was not cached (the case is not tried)"
sqlite3 B.db "ATTACH 'A.db' AS a; CREATE TABLE trace_cache AS SELECT * FROM a.trace_cache" || fail sqlite3
"$mhc" check B.db >out 2>err || fail "check of B.db: $(cat out err)"
peak() { python3 -c 'import json, sys; print(int(json.load(sys.stdin)["metrics"]["baseline_peak_bytes"]))'; }
want=$(MHC_TRACE_CACHE=0 "$mhc" simulate B.db --capacity 1GiB --no-store --json | peak)
got=$(XDG_CACHE_HOME=$tmp/mine "$mhc" simulate B.db --capacity 1GiB --no-store --json | peak)
[ "$got" = "$want" ] || fail "B.db simulated from A.db's cache entry: peak $got, its rows give $want"
[ "$(MHC_TRACE_CACHE=0 "$mhc" simulate A.db --capacity 1GiB --no-store --json | peak)" != "$want" ] ||
    fail "A.db and B.db have one peak (the case is not tried)"

# 5. A link profile's by_chunk rows: in increasing size, whole bytes.
python3 - <<'PY' || fail "python3 link profiles"
import json
base = {"name": "p", "h2d": {"bandwidth_Bps": 2e10, "latency_s": 1e-5}, "d2h": {"bandwidth_Bps": 2e10, "latency_s": 1e-5},
        "copy_engines": 2, "duplex_factor": 0.5, "source": "hand",
        "by_chunk": [{"bytes": 4096, "h2d_Bps": 1e9, "d2h_Bps": 1e9}, {"bytes": 65536, "h2d_Bps": 5e9, "d2h_Bps": 5e9}]}
json.dump(base, open("ok.json", "w"))
json.dump(dict(base, by_chunk=base["by_chunk"][::-1]), open("rev.json", "w"))
json.dump(dict(base, by_chunk=[base["by_chunk"][0], dict(base["by_chunk"][1], bytes=4096)]), open("same.json", "w"))
json.dump(dict(base, by_chunk=[dict(base["by_chunk"][0], bytes=4096.5)]), open("frac.json", "w"))
PY
"$mhc" simulate t.db --capacity 80% --no-store --link ok.json >out 2>err || fail "simulate --link ok.json: $(cat err)"
refused "rev.json: field 'by_chunk[1].bytes': 4096 is not more than by_chunk[0].bytes 65536 (rows in increasing size)" \
    simulate t.db --capacity 80% --no-store --link rev.json
refused "same.json: field 'by_chunk[1].bytes': 4096 is not more than by_chunk[0].bytes 4096" \
    simulate t.db --capacity 80% --no-store --link same.json
refused "frac.json: field 'by_chunk[0].bytes': 4096.5 is not a whole number of bytes" \
    simulate t.db --capacity 80% --no-store --link frac.json

# 6. info: labels and meta with control bytes one line each; a long device name whole.
cp t.db lab.db
sqlite3 lab.db "UPDATE strings SET text = 'evil' || char(10) || 'line' || char(27) || '[31m'
                WHERE id = (SELECT label FROM allocations ORDER BY bytes DESC LIMIT 1);
                UPDATE meta SET value = 'gpu' || char(10) || 'x' || printf('%.600c', 'y') WHERE key = 'device_name'" ||
    fail sqlite3
"$mhc" info lab.db --top 3 >out 2>err || fail "info lab.db: $(cat err)"
grep -q "evil?line?\[31m" out || fail "info lab.db: the label is not shown on one line: $(cat -A out | head -30)"
! grep -q "^line" out && ! grep -q $'\033' out || fail "info lab.db printed a control byte: $(cat -A out | head -30)"
grep -q "^device      gpu?xyyyy" out || fail "info lab.db: the device line: $(grep -a device out | cut -c1-80)"
grep -q "^duration " out || fail "info lab.db: the line after the device's was joined to it"

# 7. Full paths past SQLite's 512 bytes: the limit said, in and out.
deep=$tmp/$(printf 'd%.0s' $(seq 250))/$(printf 'e%.0s' $(seq 250))
mkdir -p "$deep" && cp t.db "$deep/t.db" || fail "mkdir $deep"
for cmd in "info $deep/t.db" "simulate $deep/t.db --capacity 90% --no-store" "import $kineto -o $deep/n.db"; do
    # shellcheck disable=SC2086
    "$mhc" $cmd >out 2>err; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] &&
        grep -q "bytes, and SQLite opens files whose full path is under 512 (from /, links resolved): use a shorter folder\$" err ||
        fail "${cmd%% *} of a path past 512 bytes exited $rc: $(cut -c1-40,500- err)"
done
[ ! -e "$deep/n.db" ] && [ "$(ls "$deep")" = t.db ] || fail "import left files in $deep: $(ls "$deep")"

echo "all hostile pass 10 checks passed"
