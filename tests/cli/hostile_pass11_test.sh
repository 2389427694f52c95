#!/usr/bin/env bash
# Hostile pass 11 (docs/cli.md, "Messages and exit statuses"): what passes 1 to 10 left.
#   1. Names shown as they are: a C1 control character (U+009B, the escape of 8-bit terminals), a
#      bidirectional override (U+202E: "x\u202Egpj.db" shows as "xbd.jpg"), a zero-width character
#      or a line separator in a file name, a label or a value was echoed as it is by mhc, mhc-view
#      and mhc-torch; a link profile or calibrate --name holding one was taken into every run's name.
#   2. The trace cache's key with no writable home (HOME naming no folder): the cache was off
#      without a word (every command read every row again); now $TMPDIR/mhc-UID is used when it is
#      the user's alone, and what leaves the cache off is said once.
#   3. Files users write by hand, read whole into memory before a byte was looked at: a link
#      profile, an advise --setting, mhc-view --families and mhc-torch's --setting and --recipe
#      (a trace given as --recipe was read whole just to see its first 16 bytes). A sparse file of
#      gigabytes ended in an internal error or a MemoryError traceback; now refused by its size.
#   4. mhc-torch --recipe, mhc-torch and mhc advise --setting: what the file held was said naming
#      no file ("recipe: expected a JSON object with a "model""); now the file, and meta
#      capture.recipe of a trace.
#   5. A capture's meta JSON nested 200,000 deep (capture.unpacks, capture.frame_holds): mhc check
#      ended in a segfault (nlohmann's dump() recurses once a level), as could advise's printer of
#      the optimizer's defaults; now said by check and advise alike, before anything walks it.
#   6. Negative zero from a link profile ("nccl_share": -0.0, "latency_s": -0.0) was stored as -0
#      in run_config (pass 8 made options' -0 zero; a profile's went around it).
# Usage: hostile_pass11_test.sh MHC PYTHON PKG [MHC_VIEW] (PKG: the folder holding mhc_torch; the
# mhc-view parts are skipped, said, without it)
set -u
mhc=$1
python=$2
pkg=$3
view=${4:-}
[ -x "$python" ] || python=python3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/preamble.sh"
cd "$tmp" || exit 1
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 --vocab 1000 \
    -o t.db >/dev/null || fail generate
cp t.db fresh.db   # no trace cache in it yet
torch_refused() {   # torch_refused WANT ARGS...: `mhc-torch ARGS...` exits 2 in one line with WANT
    local want=$1; shift
    PYTHONPATH=$pkg timeout 60 "$python" -m mhc_torch.cli "$@" >out 2>err </dev/null; local rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF -- "$want" err || fail "mhc-torch $* exited $rc: $(head -c 300 err)"
}
# No byte of a C1 control (UTF-8 C2 80..C2 9F), a bidirectional control (E2 80 AA..AE, E2 81 A6..A9),
# a zero-width one (E2 80 8B..8F) or a line or paragraph separator (E2 80 A8, A9) in FILE.
shown() {
    ! LC_ALL=C grep -qP '\xc2[\x80-\x9f]|\xe2\x80[\x8b-\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]' "$1"
}

# 1. Names shown as they are.
csi=$(printf 'a\xc2\x9b31m.db') rlo=$(printf 'x\xe2\x80\xaegpj.db') zw=$(printf 'z\xe2\x80\x8b\xe2\x80\xa8.db')
refused "mhc: a?31m.db: no such file" info "$csi"
shown err || fail "info: a C1 control reached stderr: $(cat -A err)"
refused "mhc: x?gpj.db: no such file" info "$rlo"
refused "mhc: z??.db: no such file" simulate "$zw" --capacity 80%
shown err || fail "simulate: a zero-width character or separator reached stderr: $(cat -A err)"
# What a trace holds: a label, the device's name.
cp t.db lab.db
sqlite3 lab.db "UPDATE strings SET text = 'evil' || char(155) || '[31m' || char(8238) || 'lebal'
                WHERE id = (SELECT label FROM allocations ORDER BY bytes DESC LIMIT 1);
                UPDATE meta SET value = 'gpu' || char(8232) || char(8294) || 'x' WHERE key = 'device_name'" ||
    fail sqlite3
"$mhc" info lab.db --top 3 >out 2>err || fail "info lab.db: $(cat err)"
grep -q "evil?\[31m?lebal" out && grep -q "^device      gpu??x" out || fail "info lab.db: $(cat -A out | head -20)"
shown out || fail "info printed a control or invisible character: $(cat -A out | head -20)"
# A name that goes into every run's name is refused holding one (it was only for C0 controls).
python3 - <<'PY' || fail "python3 link profiles"
import json
base = {"name": "pcie\u202egpj", "h2d": {"bandwidth_Bps": 2e10, "latency_s": 1e-5},
        "d2h": {"bandwidth_Bps": 2e10, "latency_s": 1e-5}, "copy_engines": 2, "duplex_factor": 0.5}
json.dump(base, open("rlo.json", "w"))
json.dump(dict(base, name="link\u009b2J"), open("c1.json", "w"))
json.dump(dict(base, name="caf\u00e9 \u94fe\u8def"), open("ok.json", "w"))
PY
refused "rlo.json: field 'name': holds a control character or one not shown (U+202E" \
    simulate t.db --capacity 80% --no-store --link rlo.json
refused "c1.json: field 'name': holds a control character or one not shown (U+009B" \
    simulate t.db --capacity 80% --no-store --link c1.json
"$mhc" -q simulate t.db --capacity 80% --no-store --link ok.json >/dev/null 2>err || fail "a name in other scripts: $(cat err)"
refused "--name: 'my?link': holds a control character or one not shown (U+2066" calibrate --backend host --quick \
    --rounds 1 --max-chunk 16KiB --name "$(printf 'my\xe2\x81\xa6link')" -o cal.json
[ ! -e cal.json ] || fail "a refused calibrate wrote cal.json"
torch_refused "mhc-torch: a?31m.db: no such file" runs "$csi"
shown err || fail "mhc-torch: a C1 control reached stderr: $(cat -A err)"
torch_refused "mhc-torch: x?gpj.db: no such file" runs "$rlo"
if [ -n "$view" ] && [ -x "$view" ]; then
    DISPLAY='' WAYLAND_DISPLAY='' timeout 20 "$view" "$csi" >out 2>err </dev/null; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF "a?31m.db" err && shown err ||
        fail "mhc-view of a name with a C1 control exited $rc: $(cat -A err)"
else
    echo "SKIP part 1 (mhc-view): no mhc-view"
fi

# 2. The trace cache with no writable home: $TMPDIR/mhc-UID, else said once.
echo x >afile
uid=$(id -u)
cached() { sqlite3 "$1" "SELECT count(*) FROM trace_cache" 2>/dev/null || echo 0; }
mkdir tmpd
cp fresh.db c.db
HOME=$tmp/afile XDG_CACHE_HOME='' TMPDIR=$tmp/tmpd "$mhc" -q simulate c.db --capacity 80% --no-store >/dev/null 2>err ||
    fail "simulate with HOME naming a file: $(cat err)"
[ ! -s err ] || fail "simulate with the cache in TMPDIR said: $(cat err)"
[ "$(cached c.db)" -gt 0 ] || fail "no trace cache written with HOME naming no folder"
[ "$(stat -c %a "tmpd/mhc-$uid")" = 700 ] && [ "$(stat -c %a "tmpd/mhc-$uid/trace-cache.key")" = 600 ] ||
    fail "the cache folder in TMPDIR: $(ls -la "tmpd/mhc-$uid" 2>&1)"
# A folder of that name that others may write into (made by someone else first, in a shared /tmp)
# is not used: the cache is off, and that is said once, whatever the number of runs.
mkdir tmpe && mkdir -m 777 "tmpe/mhc-$uid"
cp fresh.db d.db
HOME=$tmp/afile XDG_CACHE_HOME='' TMPDIR=$tmp/tmpe "$mhc" -q sweep d.db --capacities 90%,80%,70% --no-bisect --no-store \
    >/dev/null 2>err || fail "sweep with an open cache folder: $(cat err)"
[ "$(grep -c "note: the trace cache is off" err)" = 1 ] && [ "$(wc -l <err)" = 1 ] &&
    grep -qF "tmpe/mhc-$uid: others may read or write it" err || fail "the cache off, said: $(cat err)"
[ "$(cached d.db)" = 0 ] || fail "the trace cache was written with its key in a folder others may write"
[ ! -e "tmpe/mhc-$uid/trace-cache.key" ] || fail "a key was made in a folder others may write"
# A key file others may read: said, naming it.
mkdir -p xdg/mhc && head -c 16 /dev/urandom >xdg/mhc/trace-cache.key && chmod 644 xdg/mhc/trace-cache.key
XDG_CACHE_HOME=$tmp/xdg "$mhc" -q simulate d.db --capacity 80% --no-store >/dev/null 2>err || fail "simulate: $(cat err)"
grep -qF "note: the trace cache is off (each command reads every row): $tmp/xdg/mhc/trace-cache.key: others may read it" err &&
    [ "$(wc -l <err)" = 1 ] || fail "a key file others may read: $(cat err)"
# MHC_TRACE_CACHE=0 asks for no cache: nothing said.
HOME=$tmp/afile XDG_CACHE_HOME='' TMPDIR=$tmp/tmpe MHC_TRACE_CACHE=0 "$mhc" -q simulate d.db --capacity 80% --no-store \
    >/dev/null 2>err && [ ! -s err ] || fail "MHC_TRACE_CACHE=0 said: $(cat err)"

# 3. Hand-written files are read up to 16 MiB, not whole: a sparse file of 3 GiB, in 1.5 GiB of
# address space (it ended in std::bad_alloc, an internal error, or a MemoryError traceback).
truncate -s 3G big.json
limited() { (ulimit -v 1500000 && "$@"); }
big_refused() {   # big_refused WHO ARGS...
    local who=$1; shift
    limited "$@" >out 2>err </dev/null; local rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF "big.json: more than 16.00 MiB, larger than a" err ||
        fail "$who of a 3 GiB file exited $rc: $(head -c 300 err)"
}
big_refused "simulate --link" "$mhc" simulate t.db --capacity 80% --no-store --link big.json
big_refused "advise --setting" "$mhc" advise "$here/../data/advise/tiny_mhc.db" --setting big.json
big_refused "mhc-torch --setting" env PYTHONPATH="$pkg" "$python" -m mhc_torch.cli capture tiny-gpt2 -o m.db --setting big.json
big_refused "mhc-torch --recipe" env PYTHONPATH="$pkg" "$python" -m mhc_torch.cli capture --recipe big.json -o m.db
if [ -n "$view" ] && [ -x "$view" ]; then
    DISPLAY='' WAYLAND_DISPLAY='' limited timeout 60 "$view" t.db --families big.json >out 2>err </dev/null; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF "big.json: more than 16.00 MiB" err ||
        fail "mhc-view --families of a 3 GiB file exited $rc: $(head -c 300 err)"
fi
[ ! -e m.db ] || fail "a refused capture wrote m.db"

# 4. mhc-torch --recipe: what it holds said naming the file (and the meta key of a trace).
echo '{"model": 5}' >r.json
torch_refused "mhc-torch: recipe: r.json: expected a JSON object with a \"model\"" capture --recipe r.json -o m.db
printf '{"model": "tiny-gpt2", "steps": 1e400}' >inf.json
torch_refused "mhc-torch: recipe: inf.json: steps: expected an integer, got Infinity" capture --recipe inf.json -o m.db
cp t.db rec.db
sqlite3 rec.db "INSERT OR REPLACE INTO meta VALUES('capture.recipe', '[[[')" || fail sqlite3
torch_refused "mhc-torch: recipe: rec.db: meta capture.recipe: not JSON" capture --recipe rec.db -o m.db
echo '{"checkpoint": 5}' >s.json
torch_refused "mhc-torch: setting: s.json: checkpoint: expected an object, got a number" capture tiny-gpt2 --setting s.json -o m.db
# The same for mhc advise --setting FILE (and nlohmann's tag left out of its parse errors).
refused "mhc: s.json: field 'checkpoint': must be an object" advise "$here/../data/advise/tiny_mhc.db" --setting s.json
echo '{"weights": ' >cut.json
refused "mhc: cut.json: not JSON: parse error at line 2, column 1" advise "$here/../data/advise/tiny_mhc.db" \
    --setting cut.json
[ ! -e m.db ] || fail "a refused capture wrote m.db"

# 5. Meta JSON nested past 64 levels: said, not walked.
capture=$here/../data/advise/tiny_mhc.db
python3 -c "print('[' * 200000 + '[1, 2]' + ']' * 200000)" >deep.txt
python3 -c "print('{\"lr\": ' * 200000 + '1' + '}' * 200000)" >deepobj.txt
for case in "capture.unpacks|deep.txt" "capture.frame_holds|deep.txt" "capture.optimizer_defaults|deepobj.txt"; do
    IFS='|' read -r key file <<<"$case"
    cp "$capture" c.db && chmod u+w c.db
    sqlite3 c.db "INSERT OR REPLACE INTO meta VALUES('$key', readfile('$file'))" || fail sqlite3
    timeout 60 "$mhc" check c.db >out 2>err; rc=$?
    [ $rc = 2 ] && grep -qxF "c.db: meta $key: JSON nested deeper than 64 levels (a capture writes a few) [meta]" out ||
        fail "check of $key nested 200,000 deep exited $rc: $(head -c 300 out) $(head -c 300 err)"
    refused "c.db: meta $key: JSON nested deeper than 64 levels" advise c.db --capacity 80MiB
done

# 6. Negative zero from a link profile is stored as 0.
python3 - <<'PY' || fail "python3 m0.json"
import json
json.dump({"name": "m0", "h2d": {"bandwidth_Bps": 2e10, "latency_s": -0.0}, "d2h": {"bandwidth_Bps": 2e10, "latency_s": 1e-5},
           "copy_engines": 2, "duplex_factor": 0.5, "nccl_share": -0.0, "memcpy_share": -0.0}, open("m0.json", "w"))
PY
cp fresh.db z.db
"$mhc" -q simulate z.db --capacity 80% --link m0.json >/dev/null 2>err || fail "simulate --link m0.json: $(cat err)"
[ "$(sqlite3 z.db "SELECT count(*) FROM run_config WHERE key LIKE 'link.%'")" -gt 3 ] || fail "no link.* run_config rows"
[ "$(sqlite3 z.db "SELECT group_concat(key) FROM run_config WHERE value LIKE '-0%' AND CAST(value AS REAL) = 0")" = "" ] ||
    fail "negative zero stored: $(sqlite3 z.db "SELECT key, value FROM run_config WHERE value LIKE '-0%'")"

echo "all hostile pass 11 checks passed"
