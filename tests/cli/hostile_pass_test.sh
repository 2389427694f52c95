#!/usr/bin/env bash
# A hostile tester's second pass (docs/cli.md, "Messages and exit statuses"): what the other
# hostile tests did not try, each said in one line with exit 2 before any output is made.
#   1. An output in a folder this user may not write into: said one way by every command that
#      writes a file ("cannot write into DIR: Permission denied"); SQLite's "cannot create: unable
#      to open database file", an export's "cannot write", kernels' "cannot open for writing" before.
#   2. kernels sinkhorn's tensors that are not regular files: a named pipe waited for a writer
#      without a word, a folder was "9223372036854775807 bytes is not a whole number of ...
#      matrices", /dev/zero "is empty", <(cmd) "cannot open for reading".
#   3. import - with standard input closed was "/dev/stdin: no such file".
#   4. validate --capacity unlimited (or inf) replayed the baseline a second time, stored it as
#      another run and judged its noise as a loss.
#   5. advise --trace-out naming the capture itself, with --force, replaced the capture; --setting
#      naming a file not there, a folder or a pipe was "setting: not JSON: ... last read: 's'".
# Usage: hostile_pass_test.sh MHC CAPTURE (a model capture: tests/data/advise/tiny_mhc.db)
set -u
mhc=$1
capture=$2
. "$(dirname "$0")/preamble.sh"
cd "$tmp" || exit 1
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 2 --seq 128 -o t.db >/dev/null || fail generate
echo '{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":10,"dur":5,"args":{"device":0,"stream":7}}]}' >k.json
head -c 512 /dev/zero >H.f32   # 8 matrices of 4 x 4 float32 zeros

# 1. A read-only folder. Root writes anywhere: as root these run as the user nobody (skipped
# without setpriv).
as_user=()
if [ "$(id -u)" = 0 ]; then
    command -v setpriv >/dev/null && as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
    chmod 0755 "$tmp"
fi
if [ "$(id -u)" != 0 ] || [ ${#as_user[@]} -gt 0 ]; then
    mkdir ro && chmod 0555 ro
    chmod 0644 t.db k.json H.f32
    for cmd in "generate --preset gpt2-small --steps 1 --layers 1 --seq 64 -o ro/x.db" "import k.json -o ro/x.db" \
               "export t.db -o ro/x.json" "export t.db --format perfetto -o ro/x.pftrace" \
               "calibrate --backend host --quick --rounds 1 --max-chunk 16KiB -o ro/x.json" \
               "kernels sinkhorn --n 4 --iters 2 --input H.f32 --output ro/x.f32"; do
        # shellcheck disable=SC2086
        "${as_user[@]}" "$mhc" $cmd >out 2>err; rc=$?
        [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qE "^mhc: ro/x\.[a-z0-9]+: cannot write into ro: Permission denied$" err ||
            fail "$cmd into a read-only folder exited $rc: $(cat err)"
        [ -z "$(ls -A ro)" ] || fail "$cmd left $(ls -A ro)"
    done
else
    echo "skipped: read-only folders (root without setpriv)"
fi

# 2. kernels sinkhorn's input and --grad that are no regular file.
mkfifo pipe.f32
mkdir dir.f32
k=(kernels sinkhorn --n 4 --iters 2)
for input in pipe.f32 dir.f32 /dev/zero; do
    timeout 10 "$mhc" "${k[@]}" --input "$input" --output P.f32 >out 2>err; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] || fail "kernels sinkhorn --input $input exited $rc: $(cat err)"
    case $input in
        pipe.f32) grep -qF "pipe.f32: is a pipe, not a regular file: a tensor is read by its size; give a file" err ;;
        dir.f32) grep -qF "dir.f32: is a directory" err ;;
        /dev/zero) grep -qF "/dev/zero: is a character device, not a regular file" err ;;
    esac || fail "kernels sinkhorn --input $input: $(cat err)"
    timeout 10 "$mhc" "${k[@]}" --input H.f32 --output P.f32 --backward --grad "$input" --grad-output G.f32 >out 2>err; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF "$input: is a" err ||
        fail "kernels sinkhorn --grad $input exited $rc: $(cat err)"
done
timeout 10 "$mhc" "${k[@]}" --input <(cat H.f32) --output P.f32 >out 2>err; rc=$?
[ $rc = 2 ] && grep -q "/dev/fd/[0-9]*: is a pipe, not a regular file" err || fail "kernels sinkhorn --input <(cat) exited $rc: $(cat err)"
[ ! -e P.f32 ] && [ ! -e G.f32 ] || fail "a refused kernels command wrote its output"
"$mhc" "${k[@]}" --input H.f32 --output P.f32 >out 2>err || fail "kernels sinkhorn of a file: $(cat err)"

# 3. import - with standard input closed.
refused "import -: standard input is closed; pipe the trace into mhc or name a file" import - -o c.db <&-
[ ! -e c.db ] || fail "import - with stdin closed wrote c.db"

# 4. validate --capacity naming the baseline: refused before any replay.
for c in unlimited 90%,unlimited inf; do
    refused "--capacity: '${c##*,}': the unlimited baseline, which validate always replays; give limits" \
        validate t.db --link pcie4 --repeat 1 --no-store --capacity "$c"
    [ ! -s out ] || fail "validate --capacity $c replayed first: $(head -c 200 out)"
done

# 5. advise --trace-out naming the capture (the same name, another spelling, a hard link).
cp "$capture" cap.db
ln cap.db cap-hard.db
for out in cap.db ./cap.db cap-hard.db; do
    refused "$out: is the input file cap.db; write the output to another file" \
        advise cap.db --setting '{}' --trace-out "$out" --force
    cmp -s cap.db "$capture" || fail "advise --trace-out $out --force replaced the capture"
done
"$mhc" advise cap.db --setting '{}' --trace-out new.db >out 2>err || fail "advise --trace-out new.db: $(cat err)"
echo '{}' >setting.json
"$mhc" advise cap.db --setting setting.json >out 2>err || fail "advise --setting setting.json: $(cat err)"
# --trace-out naming the --setting file, with --force, replaced the setting with a trace (exit 0).
refused "./setting.json: is the input file setting.json; write the output to another file" \
    advise cap.db --setting setting.json --trace-out ./setting.json --force
[ "$(cat setting.json)" = '{}' ] || fail "advise --trace-out replaced the setting file"
refused "--setting: 'setting2.json': no such file, and not a JSON object" advise cap.db --setting setting2.json
refused "--setting: 'dir.f32': a directory, not a setting file" advise cap.db --setting dir.f32
refused "--setting: 'pipe.f32': not a regular file (a pipe or a device)" advise cap.db --setting pipe.f32
echo ok
