#!/usr/bin/env bash
# Hostile pass 19 (docs/cli.md, "Messages and exit statuses"; docs/torch.md): what passes 1 to 18
# left.
#   (mhc-torch's streams full or closed, a model's exit handlers, __del__ and threads, runs of
#      files missing a table: python/tests/test_cli_streams_hostile.py.)
#   1. generate --gpu-bw 1B/s said "--gpu-bw: '1': not in [1000, 1e+16] B/s" (the value as read,
#      not as written, its bounds in no unit a user writes), --gpu-flops 1e0 "'1'" too; --gpu-memory
#      1B was taken. Now said as typed; a GPU's memory is 1 MiB to 2^56 bytes.
#   2. Refusals that quoted the value by hand said one of 81 to 1,024 bytes whole (validate --repeat,
#      --replay-steps, --time-scale, --max-swap-ops-per-sec, --input-dtype,
#      --host-tensor-cost, an --allocator-conf key given twice); now as quoted_value says it.
#   3. A path past 1,024 bytes with spaces in it (folders named "my runs") was said whole on stderr:
#      no word of it was long. Now capped between its ": " as a long word is (mhc and mhc-torch).
#   4. A trace cut short by another process while a command read it: SIGBUS, exit 135, nothing said,
#      export's temporary file left; now one line naming the file, exit 2, nothing half-written left.
#   5. prune --run 18446744073709551615 and advise of a trace whose module is "layers.99999999999":
#      "mhc: internal error: stoll" ("stoi"), exit 1; now refused in one line, or read.
# Usage: hostile_pass19_test.sh MHC
set -u
mhc=$1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/preamble.sh"
cd "$tmp" || exit 1
"$mhc" -q generate --preset gpt2-small --steps 2 --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 \
    --vocab 1000 -o t.db >/dev/null || fail generate

# 1. The GPU's figures of generate, said as typed, within their bounds.
refused "--gpu-bw: '1B/s': not in [1kB/s, 10000TB/s]" generate --steps 1 --gpu-bw 1B/s -o g.db
refused "--gpu-bw: '20000 TB/s': not in [1kB/s, 10000TB/s]" generate --steps 1 --gpu-bw '20000 TB/s' -o g.db
refused "--gpu-flops: '1e0': not in [1e6, 1e20] FLOP/s" generate --steps 1 --gpu-flops 1e0 -o g.db
refused "--gpu-memory: '1B': at least 1.00 MiB" generate --steps 1 --gpu-memory 1B -o g.db
refused "--gpu-memory: '66000TiB': at most 64.00 PiB" generate --steps 1 --gpu-memory 66000TiB -o g.db
refused "--host-bandwidth: '999 B/s': not in [1kB/s, 1000TB/s]" advise "$here/../data/advise/tiny_mhc.db" --capacity 800MiB --host-bandwidth '999 B/s'
[ ! -e g.db ] || fail "a refused generate left g.db"
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 1 --hidden 64 --heads 2 --seq 32 --micro-batch 1 \
    --vocab 1000 --gpu-bw 1kB/s --gpu-memory 1MiB --gpu-flops 1e6 -o g.db >/dev/null 2>err ||
    fail "generate at the lower bounds: $(cat err)"

# 2. Values of 81 to 1,024 bytes were quoted whole by refusals formed by hand ("'" + text + "'"):
#    each is its first 60 and its length, as quoted_value says every other value.
x200=$(printf 'x%.0s' $(seq 200))
x60=$(printf "%.60s" "$x200")
refused "--repeat: '$x60...(200 bytes)': auto or a whole number" validate t.db --capacity 90% --no-store --repeat "$x200"
refused "--replay-steps: '$x60...(200 bytes)': all or a number" validate t.db --capacity 90% --no-store --replay-steps "$x200"
refused "--time-scale: '$x60...(200 bytes)': auto or a number" validate t.db --capacity 90% --no-store --time-scale "$x200"
refused "--input-dtype: '$x60...(200 bytes)': not an element type" kernels sinkhorn --n 4 --iters 2 --input t.db \
    --output P.f32 --input-dtype "$x200"
tiny=0.$(printf '0%.0s' $(seq 197))1   # 1e-198, 200 bytes
refused "--max-swap-ops-per-sec: '${tiny:0:60}...(200 bytes)': must be 0" simulate t.db --capacity 90% --no-store \
    --max-swap-ops-per-sec "$tiny"
conf=max_split_size_mb:100,expandable_segments:True,garbage_collection_threshold:0.5,max_split_size_mb:200
refused "--allocator-conf: '${conf:0:60}...(${#conf} bytes)': max_split_size_mb is given twice" \
    simulate t.db --capacity 90% --no-store --allocator caching --allocator-conf "$conf"
two=2.$(printf '0%.0s' $(seq 197))s   # 2 s, 200 bytes
refused "--host-tensor-cost: '${two:0:60}...(200 bytes)': more than 1 s" advise "$here/../data/advise/tiny_mhc.db" --capacity 800MiB --host-tensor-cost "$two"

# 5. Numbers past int64 where a whole number was checked only against uint64, or not at all:
#    "mhc: internal error: stoll" / "stoi", exit 1.
refused "--run: '18446744073709551615': not a run id" prune t.db --run 18446744073709551615
cp "$here/../data/advise/tiny_mhc.db" adv.db
sqlite3 adv.db "UPDATE strings SET text = 'MhcTransformer.layers.99999999999' WHERE text = 'MhcTransformer.layers.1'" ||
    fail "rename a module of adv.db"
"$mhc" advise adv.db --setting \
    '{"checkpoint": {"modules": ["MhcTransformer.layers.0", "MhcTransformer.layers.99999999999"]}}' >out 2>err ||
    fail "advise of a module numbered 99999999999 exited $?: $(tail -c 300 err)"

# a link made too slow by --duplex-factor 1e-300: its time said in 305 digits, now as 1.89e+304
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 2 --seq 128 -o l.db >/dev/null || fail "generate l.db"
refused "s, past the simulator's time range (2^62 ns)" simulate l.db --capacity 60% --no-store --duplex-factor 1e-300
[ "$(wc -c <err)" -lt 250 ] && grep -q "bytes takes [0-9.]*e+[0-9]* s, past" err ||
    fail "--duplex-factor 1e-300: a line of $(wc -c <err) bytes: $(head -c 300 err)"

# 3. A path of 1,049 bytes through five folders named "my runs " and 200 r: one short line.
spaced=.
for i in 1 2 3 4 5; do spaced="$spaced/my runs $(printf 'r%.0s' $(seq 200))"; done
mkdir -p "$spaced" || fail "mkdir the spaced folders"
cp t.db "$spaced/t.db"
refused "mhc: ./my runs rrr" info "$spaced/nope.db"
[ "$(wc -c <err)" -lt 200 ] && grep -qF "...($((${#spaced} + 8)) bytes): no such file" err ||
    fail "info SPACED/nope.db: $(wc -c <err) bytes: $(head -c 300 err)"
refused "...($((${#spaced} + 5)) bytes): already exists" export t.db -o "$spaced/t.db"

# 4. A trace cut short (truncate) by another process while a command reads it: SQLite reads it
#    through a memory map, and a page past the new end killed the command with SIGBUS (exit 135,
#    nothing said, export's temporary file left). Tried at several delays, with the trace cache off
#    (every command reads the file): each try ends in exit 0 (done before the cut) or 2 with one line.
"$mhc" -q generate --preset llama2-7b --steps 30 -o big.db >/dev/null || fail "generate big.db"
landed=0
for delay in 0.02 0.05 0.1 0.15 0.2 0.3 0.4 0.6; do
    for cmd in check export; do
        cp big.db b.db
        rm -f e.json
        if [ $cmd = check ]; then args=(check b.db); else args=(export b.db -o e.json); fi
        MHC_TRACE_CACHE=0 "$mhc" "${args[@]}" >out 2>err &
        pid=$!
        sleep $delay
        truncate -s 2000000 b.db
        wait $pid
        rc=$?
        [ $rc = 0 ] && continue
        [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] ||
            fail "$cmd b.db cut short after ${delay}s: exit $rc (135: SIGBUS): $(head -c 300 err)"
        if grep -q "cut short by another process" err; then
            landed=$((landed + 1))
            grep -qx "mhc: b.db: cut short by another process while mhc read it (SIGBUS); stopped, nothing half-written left" err ||
                fail "$cmd b.db cut short: $(cat err)"
        fi
        [ -z "$(ls | grep '^e\.json')" ] || fail "$cmd b.db cut short after ${delay}s left $(ls | grep '^e\.json')"
    done
done
[ $landed -gt 0 ] || echo "SKIP part 4's SIGBUS: no cut of 16 landed inside a mapped read (SQLite saw each first)"

echo "all hostile pass 19 checks passed"
