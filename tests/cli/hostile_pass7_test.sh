#!/usr/bin/env bash
# Hostile pass 7 (docs/cli.md, "Messages and exit statuses"): what pass 6 left.
#   1. Kineto import: an event's name, cat or ph (or a metadata event's args.name) of another JSON
#      type ("name": ["k"], "cat": 5, "ph": null) was read as an empty string, the event kept;
#   2. check, info and export read a run metric outside its domain (simulated_peak_bytes -5,
#      printed "-5 B"; stalls 2.5; capacity_bytes -7) as a figure;
#   3. advise --verify ran the model file a trace's capture.recipe names (anyone's trace: any file);
#   4. mhc-torch --kernel-times read a gzip bomb whole and took a key given twice;
#   5. export --format csv -o FIFO said "FIFO is a file, not a folder".
# Usage: hostile_pass7_test.sh MHC PYTHON PKG (PKG: the folder holding mhc_torch; PYTHON with torch
# for the part that imports it, skipped, said, without one)
set -u
mhc=$1
python=$2
pkg=$3
. "$(dirname "$0")/preamble.sh"
capture=$(cd "$(dirname "$0")/../data/advise" && pwd)/tiny_mhc.db
cd "$tmp" || exit 1

# 1. A string field of another JSON type: refused naming the file, the event and the field.
rest='"ts":10,"dur":5,"args":{"device":0,"stream":7}'
ev="\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",$rest"
for bad in "name:an array:\"ph\":\"X\",\"cat\":\"kernel\",\"name\":[\"k\"]" \
           "name:an object:\"ph\":\"X\",\"cat\":\"kernel\",\"name\":{\"a\":1}" \
           "name:a number:\"ph\":\"X\",\"cat\":\"kernel\",\"name\":5" \
           "cat:null:\"ph\":\"X\",\"cat\":null,\"name\":\"k\"" \
           "ph:a boolean:\"ph\":true,\"cat\":\"kernel\",\"name\":\"k\""; do
    field=${bad%%:*}; rest_of=${bad#*:}; what=${rest_of%%:*}; body=${rest_of#*:}
    echo "{\"traceEvents\":[{$ev},{$body,$rest}]}" >bad.json
    refused "bad.json: traceEvents[1]: '$field' is $what, not a string" import bad.json -o bad.db --format kineto
    [ ! -e bad.db ] || fail "import with $body wrote bad.db"
done
echo "{\"traceEvents\":[{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"args\":{\"name\":[\"x\"]}},{$ev}]}" >bad.json
refused "bad.json: traceEvents[0]: args.name is an array, not a string" import bad.json -o bad.db --format kineto
echo "{\"traceEvents\":[{$ev}]}" >good.json
"$mhc" import good.json -o good.db --format kineto >out 2>err || fail "import of a well-typed event: $(cat err)"

# 2. A run metric outside its domain: check names it; info refuses it rather than print "-5 B".
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 --vocab 1000 \
    -o t.db >/dev/null || fail generate
"$mhc" simulate t.db --capacity 90% >/dev/null 2>err || fail "simulate: $(cat err)"
"$mhc" check t.db >out 2>err || fail "check of a stored run: $(cat err)"
for m in "simulated_peak_bytes -5" "stalls 2.5" "stall_ns -1" "capacity_bytes -7" "swap_ins -1"; do
    cp t.db m.db
    sqlite3 m.db "UPDATE run_metrics SET value = ${m#* } WHERE key = '${m% *}'" || fail "sqlite3 $m"
    "$mhc" check m.db >out 2>err; rc=$?
    [ $rc != 0 ] || fail "check passed run_metrics $m: $(cat out)"
    grep -qF "'${m% *}' is ${m#* }, out of its domain" out err || fail "check with $m: $(cat out err)"
    refused "'${m% *}' is ${m#* }, out of its domain" info m.db
done
cp t.db m.db && sqlite3 m.db "UPDATE run_metrics SET value = -1 WHERE key = 'capacity_bytes'"
"$mhc" check m.db >out 2>err || fail "capacity_bytes -1 (unlimited) refused: $(cat out err)"
cp t.db m.db && sqlite3 m.db "UPDATE run_metrics SET value = -0.25 WHERE key = 'peak_reduction'"
"$mhc" check m.db >out 2>err || fail "a negative peak_reduction (a signed figure) refused: $(cat out err)"

# 3. advise --verify runs no model file a trace names: the file is said, and run only as --model.
cp "$capture" theirs.db
sqlite3 theirs.db "UPDATE meta SET value = json_set(value, '\$.model', '$tmp/evil.py') WHERE key = 'capture.recipe'"
printf 'import os\nopen("%s/ran", "w").write("x")\n' "$tmp" >evil.py
printf '#!/bin/sh\n# capture --recipe R --setting S -o OUT\necho "$3" >recipe.seen\ncp "%s" "$7"\n' "$capture" >fake.sh
chmod +x fake.sh
MHC_TORCH=./fake.sh refused "theirs.db: its capture.recipe names the model file $tmp/evil.py: --verify runs no code a trace names; to run that file, give --model $tmp/evil.py" \
    advise theirs.db --setting '{}' --verify
[ ! -e recipe.seen ] || fail "advise --verify ran the capture before refusing: $(cat recipe.seen)"
cp evil.py mine.py
MHC_TORCH=./fake.sh "$mhc" advise theirs.db --setting '{}' --verify --model mine.py >out 2>err ||
    fail "advise --verify --model: $(cat err)"
grep -qF -- "--verify runs the model file mine.py (--model)" err || fail "advise --verify --model did not say the file: $(cat err)"
grep -qF "\"model\":\"$tmp/mine.py\"" recipe.seen || fail "advise --verify --model ran: $(cat recipe.seen)"
MHC_TORCH=./fake.sh refused "--model: nothing.py does not exist" advise theirs.db --setting '{}' --verify --model nothing.py
MHC_TORCH=./fake.sh refused "--model: $capture is a capture of the preset 'tiny-mhc', not of a model file" \
    advise "$capture" --setting '{}' --verify --model mine.py
refused "--model: the model file --verify runs, and no --verify is given" advise "$capture" --setting '{}' --model mine.py
[ ! -e ran ] || fail "evil.py ran"

# 5. An output folder's place taken by a named pipe: said as one.
mkfifo fifo
refused "fifo: cannot create directory: fifo is a FIFO, not a folder" export t.db --format csv -o fifo
echo x >plain
refused "plain: cannot create directory: plain is a file, not a folder" export t.db --format csv -o plain

# 4. mhc-torch --kernel-times: a gzip bomb (4 MiB in about 4 KiB) read past --max-input-size, and a key
# given twice (no profiler writes one: none of the 40 public Kineto traces in tests/data/public).
if ! PYTHONPATH=$pkg "$python" -c "$find_modules" torch 2>/dev/null; then
    echo "part 4 skipped: $python has no torch"
    exit 0
fi
torch_refused() {
    local want=$1; shift
    PYTHONPATH=$pkg timeout 120 "$python" -m mhc_torch.cli capture "$@" >out 2>err </dev/null; local rc=$?
    [ $rc = 2 ] || fail "mhc-torch capture $* exited $rc, wanted 2: $(head -c 300 err)"
    [ "$(wc -l <err)" = 1 ] || fail "mhc-torch capture $*: wanted one line: $(head -c 300 err)"
    grep -qF -- "$want" err || fail "mhc-torch capture $*: does not say '$want': $(cat err)"
}
"$python" -c "
import gzip
with gzip.open('bomb.json.gz', 'wb') as f:
    f.write(b'{\"traceEvents\": [' + b' ' * (4 << 20) + b']}')"
torch_refused "--kernel-times: bomb.json.gz: expands past 1.00 MiB; raise with --max-input-size" \
    tiny-mhc -o k.db --kernel-times bomb.json.gz --max-input-size 1MiB
echo '{"traceEvents": [], "traceEvents": [{"ph": "X"}]}' >twice.json
torch_refused "--kernel-times: twice.json: key 'traceEvents' is given twice" tiny-mhc -o k.db --kernel-times twice.json
echo "all hostile pass 7 checks passed"
