#!/usr/bin/env bash
# Input a hostile tester tries, refused in one line with exit 2 before any work (docs/cli.md,
# "Messages and exit statuses"): every option that takes a value, of every command (read from
# its --help, so a new option is tried too), given nan, inf, -inf, 1e400 (past a double) and ''
# (CLI11 reads an empty number as 0, an empty name as not given); a command's own commands
# (`kernels sinkhorn`) mistyped, missing or given an unknown option; an option or a flag given twice; an
# output that is a descriptor of the process (/dev/stdout, /dev/fd/1: replaced, as root, or
# written through); calibrate --repeat past what a machine can do, or into a missing folder; a
# link share below 0; stored runs `mhc info` would refuse, and rows of a run that is not there,
# which `mhc check` passed; a trace that is a FIFO or a device; an import from a named pipe says it
# waits for its writer; names that are not UTF-8 in the
# JSON printed and written.
set -u
mhc=$1
. "$(dirname "$0")/preamble.sh"
fixtures=$(cd "$(dirname "$0")/../import/fixtures" && pwd)
cd "$tmp" || exit 1
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 2 --seq 128 -o t.db >/dev/null || fail generate
head -c 512 /dev/zero >H.f32   # 8 matrices of 4 x 4 float32 zeros
echo '{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":10,"dur":5,"args":{"device":0,"stream":7}}]}' >k.json

# 1. Every option with a value, every command. What may take these words: a file (--runs-db,
# -o), a profile's name (calibrate --name); 'inf' is unlimited for --capacity. validate's
# --max-replay-time stops it before any replay: its refusal must not be the one that ends it.
# advise's trace is no capture: only a name (--link, --setting) may reach that refusal.
declare -A base=(
    [generate]="generate --preset gpt2-small --steps 1 --layers 2 --seq 128 -o g.db --force"
    [simulate]="simulate t.db --capacity 100% --no-store"
    [sweep]="sweep t.db --capacities 100% --policies lru --no-bisect --no-store"
    [advise]="advise t.db --capacity 800MiB"
    [validate]="validate t.db --capacity 99% --link pcie4 --no-store --repeat 1 --max-replay-time 60ms"
    [export]="export t.db -o e.json --force"
    [check]="check t.db" [info]="info t.db" [allocator]="allocator t.db"
    [calibrate]="calibrate --backend host --quick --rounds 1 --max-chunk 16KiB -o c.json --force"
    [import]="import k.json -o i.db --force"
    [kernels sinkhorn]="kernels sinkhorn --n 4 --iters 2 --input H.f32 --output P.f32")
tried=0
for cmd in "${!base[@]}"; do
    # shellcheck disable=SC2086
    help=$("$mhc" $cmd --help)
    opts=$(grep -oE '^ +(-[a-zA-Z], )?--[a-z0-9-]+ [A-Z]' <<<"$help" | grep -oE -- '--[a-z0-9-]+' | sort -u)
    [ -n "$opts" ] || fail "$cmd --help lists no option with a value"
    for o in $opts; do
        # A number in another base or with a sign '+' or a space is no option's number (0x10 was
        # read as 16): refused, naming the value as given. A whole number (N) takes decimal digits
        # alone: 010 (was read as 8) and 1e3 are refused too, and numbers past 64 bits (read as
        # the largest) or past an int (docs/cli.md, "Numbers").
        values=(nan inf -inf 1e400 '' 0x10 +5 ' 7' '7 ' $'7\n' '٣' '1_000')
        # Its value's word in the help (read by the shell: five processes an option before).
        kind=""
        while IFS= read -r line; do
            [[ $line =~ ^\ +(-[a-zA-Z],\ )?$o\ ([A-Z][^ ]*) ]] && { kind=${BASH_REMATCH[2]}; break; }
        done <<<"$help"
        [ "$kind" = N ] && values+=(010 1e3 -0x1 99999999999999999999 99999999999)
        for v in "${values[@]}"; do
            case "$o:$v" in
                --runs-db:?* | --output:?* | --name:?* | --capacity:inf | --capacities:inf) continue ;;
                --seed:99999999999) continue ;;   # a seed takes 64 bits: a seed, not past its range
            esac
            # shellcheck disable=SC2086
            "$mhc" ${base[$cmd]} "$o" "$v" >out 2>err; rc=$?
            tried=$((tried + 1))
            slurp err   # the checks below read it in the shell (preamble.sh)
            [ $rc = 2 ] && [ "$slurped_lines" = 1 ] || fail "$cmd $o '$v' exited $rc: $(head -c 300 err)"
            # An option that takes a number (or a list of them) names the value it refuses (a name
            # or a file may be refused for something else first).
            case $kind in N | X | N\|* | X\|* | DEVICE | ID | SIZE | SHARE* | RATE | DURATION | POINTS | LIST)
                case $v in 0x10 | +5 | ' 7' | '7 ' | 1_000 | 010 | 1e3 | -0x1 | 9999*)
                    says "given 2 times" || says "$v" ||
                        fail "$cmd $o '$v': the refusal does not name the value: $(cat err)" ;;
                esac ;;
            esac
            says "replays would take" && fail "$cmd $o '$v' was not refused before the replay: $(cat err)"
            [[ $o != --link && $o != --setting ]] && says "no modules recorded" &&
                fail "$cmd $o '$v' was not refused before the trace was read: $(cat err)"
        done
    done
done
[ $tried -gt 300 ] || fail "only $tried option values tried"
want="simulate: --latency: '': an empty value"; refused "$want" simulate t.db --capacity 70% --latency ''
refused "info: the trace argument is empty" info ''
# A message quoting a newline, a tab or an escape (a value, a file name) stays one line: each such
# byte is shown as '?' (a trace named 'a<newline>b.db' was said over two lines).
refused "mhc: a?b?c?.db: no such file" info $'a\nb\tc\e.db'
refused "--top: '7?': not a whole number" info t.db --top $'7\n'
refused "--nccl-share: 'nan': not a finite number" simulate t.db --capacity 70% --no-store --nccl-share nan
refused "--nccl-share: '-5': not in [0, 1)" simulate t.db --capacity 70% --no-store --nccl-share -5

# A malformed variable that only the store reads: refused before the simulation, not after it.
for cmd in "simulate t.db --capacity 90%" "sweep t.db --capacities 90% --policies lru --no-bisect" \
           "validate t.db --capacity 90% --link pcie4 --repeat 1"; do
    # shellcheck disable=SC2086
    MHC_STORE_WARN_SIZE=lots refused "MHC_STORE_WARN_SIZE='lots'" $cmd
    [ ! -s out ] || fail "$cmd computed before refusing MHC_STORE_WARN_SIZE: $(head -c 200 out)"
done

# 2. A command's own commands: named, with the nearest one; an unknown option named, not "unexpected arguments".
refused "kernels: 'sinkhron' is not one of its commands; did you mean sinkhorn?" kernels sinkhron
refused "kernels: a command is required: sinkhorn (mhc kernels --help)" kernels
refused "kernels sinkhorn: unknown option --json (mhc kernels sinkhorn --help)" \
    kernels sinkhorn --n 4 --iters 2 --input H.f32 --output P.f32 --json
refused "kernels sinkhorn: unexpected argument 'extra'" kernels sinkhorn --n 4 --iters 2 --input H.f32 --output P.f32 extra
[ ! -e P.f32 ] || fail "a refused kernels command wrote its output"
refused "mhc: a command is required; commands: advise," -q
refused "info: unexpected argument '--json'" info t.db -- --json   # after --, an argument: no "did you mean --json?"

# 3. An option given twice. A flag given twice was taken without a word (`info --json --json`):
# every flag of every command (read from its --help, with its negation), and the top level's.
refused "--capacity given 2 times; give it once" simulate t.db --capacity 70% --capacity 80% --no-store
base[record]="record -o r.db --force"
flags=0
for cmd in "${!base[@]}"; do
    # A flag's line: its names, then the description (after two spaces, or one before a word in
    # lower case) or nothing; an option's names are followed by its value (N, FILE, SIZE|SHARE).
    # shellcheck disable=SC2086
    names=$("$mhc" $cmd --help | grep -E '^ +(-[a-zA-Z], )?--[a-z0-9-]+(, --[a-z0-9-]+)?(  | [A-Z][a-z]|$)' |
        sed -E 's/^ +((-[a-zA-Z], )?--[a-z0-9-]+(, --[a-z0-9-]+)?).*/\1/' | grep -oE -- '--[a-z0-9-]+' |
        grep -vx -- --help | sort -u)
    for f in $names; do
        # shellcheck disable=SC2206
        case $cmd in record) args=(${base[$cmd]} "$f" "$f" -- true) ;; *) args=(${base[$cmd]} "$f" "$f") ;; esac
        # Given in the base command too (calibrate --quick): three times.
        refused "$f given " "${args[@]}"
        says "$f given 2 times; give it once" || says "$f given 3 times; give it once" || fail "$cmd $f $f: $(cat err)"
        flags=$((flags + 1))
    done
done
[ $flags -gt 30 ] || fail "only $flags flags given twice"
unset 'base[record]'
refused "-q given 2 times; give it once" -q -q info t.db
refused "--quiet given 2 times; give it once" --quiet --quiet info t.db
refused "--json given 2 times; give it once" info t.db --json --json

# 3b. A flag given a value (`--json=2`, `--force=yes`): CLI11 took it, read as the flag's setting
# ("0" or "false" turned it off, "abc" was a conversion error): every flag of every command and
# its negation, read from --help as above, refused naming it; the top level's, short ones too.
flags=0
for cmd in "${!base[@]}" record; do
    [ "$cmd" = record ] && base[record]="record -o r.db --force"
    # shellcheck disable=SC2086
    names=$("$mhc" $cmd --help | grep -E '^ +(-[a-zA-Z], )?--[a-z0-9-]+(, --[a-z0-9-]+)?(  | [A-Z][a-z]|$)' |
        sed -E 's/^ +((-[a-zA-Z], )?--[a-z0-9-]+(, --[a-z0-9-]+)?).*/\1/' | grep -oE -- '--[a-z0-9-]+' | sort -u)
    for f in $names; do
        for value in 2 0 true false yes ''; do
            # shellcheck disable=SC2206
            case $cmd in record) args=(${base[$cmd]} "$f=$value" -- true) ;; *) args=(${base[$cmd]} "$f=$value") ;; esac
            refused "$cmd: $f takes no value: '$f=$value' (mhc $cmd --help)" "${args[@]}"
        done
        flags=$((flags + 1))
    done
done
unset 'base[record]'
[ $flags -gt 35 ] || fail "only $flags flags given a value"
refused "kernels sinkhorn: --log-domain takes no value: '--log-domain=0' (mhc kernels sinkhorn --help)" \
    kernels sinkhorn --n 4 --iters 2 --input H.f32 --output P.f32 --log-domain=0
[ ! -e P.f32 ] || fail "kernels sinkhorn --log-domain=0 wrote its output"
refused "--quiet takes no value: '--quiet=0' (mhc --help)" --quiet=0 info t.db
refused "-q takes no value: '-q=1' (mhc --help)" -q=1 info t.db
refused "--version takes no value: '--version=1' (mhc --help)" --version=1
refused "info: -h takes no value: '-h=1' (mhc info --help)" info t.db -h=1
refused "info: unexpected argument '--json=2'" info t.db -- --json=2   # after --, an argument
refused "simulate: --no-store takes no value: '--no-store=0'" simulate t.db --capacity 100% --no-store=0
[ ! -s out ] || fail "simulate --no-store=0 ran: $(head -c 200 out)"

# 3c. An option the others given leave with nothing to do: refused before any work, naming both
# (advise's are in tests/advise/test_cli.cpp, with --comm-link on a step without collectives).
refused "--no-events and --no-store: a run not stored keeps no timeline anyway; give one" \
    simulate t.db --capacity 100% --no-store --no-events
# Without a limit nothing is evicted: how to evict, prefetch or swap is refused (said as written
# first among them); with a limit the same options run.
for opt in "--policy belady" "--eviction belady" "--prefetch none" "--link pcie5" "--h2d-bandwidth 1GB/s" \
           "--d2h-bandwidth 1GB/s" "--latency 1us" "--copy-engines 2" "--duplex-factor 0.5" "--nccl-share 0.1" \
           "--memcpy-share 0.1" "--cpu-buffer-ratio 2" "--max-swap-ops-per-sec 5" --no-early; do
    # shellcheck disable=SC2086
    refused " and --capacity unlimited: nothing is evicted or swapped without a limit; give one" \
        simulate t.db --capacity unlimited --no-store $opt
    [ ! -s out ] || fail "simulate --capacity unlimited $opt ran: $(head -c 200 out)"
done
"$mhc" simulate t.db --capacity unlimited --no-store --allocator ideal --device auto >out 2>err || fail "unlimited: $(cat err)"
"$mhc" simulate t.db --capacity 90% --no-store --policy belady --no-early --link pcie5 >out 2>err || fail "90%: $(cat err)"
v="validate t.db --capacity 99% --no-store --repeat 1"
# shellcheck disable=SC2086
{
    refused "--recalibrate and --link pcie4: only --link auto measures the link; give one" $v --link pcie4 --recalibrate
    refused "--calibration-max-age and --link pcie4: only --link auto caches" $v --link pcie4 --calibration-max-age 1
    refused "--calibration-max-age and --recalibrate: --recalibrate measures again whatever" \
        $v --recalibrate --calibration-max-age 1
    refused "--model-link and --time-scale 2: the modelled link only sets --time-scale auto; give one" \
        $v --link pcie4 --time-scale 2 --model-link pcie5
    refused "--unpaced and --backend cuda: only the host backend paces its copies; give one" \
        $v --link pcie4 --backend cuda --unpaced
}
[ ! -s out ] || fail "validate ran before refusing: $(head -c 200 out)"

# 4. Outputs that are descriptors of the process: refused, the link left as it is.
ln -s /proc/self/fd/1 stdout.json
"$mhc" export t.db -o stdout.json --force >redirected 2>err; rc=$?
[ $rc = 2 ] && grep -q "a descriptor of this process" err || fail "export through /proc/self/fd/1 exited $rc: $(cat err)"
[ -L stdout.json ] || fail "export --force replaced a link to its own standard output"
[ ! -s redirected ] || fail "export wrote through a link to its standard output"
# /dev/stdout itself is reached through a link of the test's own (two hops): as root, a failing
# mhc would replace /dev/stdout.
ln -s /dev/stdout dev-stdout.db
for out in stdout.json dev-stdout.db /dev/fd/1 /proc/self/fd/1; do
    "$mhc" generate --preset gpt2-small --steps 1 --layers 1 --seq 64 -o $out --force >redirected 2>err; rc=$?
    [ $rc = 2 ] && grep -q "a descriptor of this process" err || fail "generate -o $out exited $rc: $(cat err)"
    "$mhc" simulate t.db --capacity 100% --runs-db $out >redirected 2>err; rc=$?   # refused before the work
    [ $rc = 2 ] && grep -q "a descriptor of this process" err || fail "simulate --runs-db $out exited $rc: $(cat err)"
    grep -q "SQLite" redirected && fail "a runs database was written into the standard output ($out)"
done
[ -L dev-stdout.db ] && [ -L stdout.json ] || fail "a link to the standard output was replaced"

# 5. calibrate --repeat past 16 x its largest automatic count: refused at once, not hours later.
refused "--repeat" calibrate --backend host --repeat 100000000 -o p.json
[ ! -e p.json ] || fail "calibrate wrote a profile"
# An output folder that is not there: said before the minute of measuring, not after it.
refused "nodir/p.json: cannot write into nodir" calibrate --backend host --max-chunk 16MiB -o nodir/p.json
grep -q "h2d" out && fail "calibrate measured before it found the folder missing"
# 6. mhc check holds the stored runs to the rules `mhc info` and `mhc export` read them by: a run
# they refuse, or rows of a run without its runs row (a store cut short), is a problem, named.
"$mhc" -q simulate t.db --capacity 90% >/dev/null || fail "simulate"   # swaps: a run with events
"$mhc" check t.db >/dev/null || fail "check of a trace with a run"
checked() {   # checked SQL WANT: check exits 2 and names WANT
    cp t.db c.db
    sqlite3 c.db "$1" || fail "sqlite3 $1"
    "$mhc" check c.db >out 2>err; local rc=$?
    [ $rc = 2 ] && grep -qF -- "$2" out || fail "check after '$1' exited $rc: $(cat out err)"
}
checked "UPDATE runs SET kind = 'nonsense'" "kind 'nonsense' is not one of"
checked "UPDATE run_metrics SET value = 9e999 WHERE key = 'throughput_loss'" "not a finite number"
checked "UPDATE run_events SET kind = 99 WHERE rowid = (SELECT min(rowid) FROM run_events)" "run_events row"
checked "DELETE FROM runs" "which has no runs row"
# A run deleted by hand, its rows left: the next run takes a new id, none of those rows; check
# names the rows left behind (their run), not the new run.
cp t.db d.db
old_ids=$(sqlite3 d.db "SELECT group_concat(id) FROM runs")
sqlite3 d.db "DELETE FROM runs"
"$mhc" -q simulate d.db --capacity 100% >/dev/null || fail "simulate after a run deleted by hand"
new_id=$(sqlite3 d.db "SELECT id FROM runs")
case ",$old_ids," in *",$new_id,"*) fail "the new run took the deleted run's id $new_id (old ids $old_ids)";; esac
"$mhc" check d.db >out 2>err && fail "check passed the rows of a deleted run: $(cat out)"
grep -q "which has no runs row" out || fail "check of a deleted run's rows: $(cat out err)"
grep -q "of run $new_id," out && fail "check blamed the new run $new_id: $(cat out)"
# A trace that is a named pipe or a device: refused as such at once (no wait for a writer, no "empty").
mkfifo pipe.db
for cmd in info check simulate; do
    extra=(); [ $cmd = simulate ] && extra=(--capacity 50%)
    timeout 10 "$mhc" $cmd pipe.db "${extra[@]}" >out 2>err; rc=$?
    [ $rc = 2 ] && grep -qF "pipe.db: is a FIFO, not a regular file" err || fail "$cmd on a FIFO exited $rc: $(cat err)"
done
refused "/dev/zero: is a character device, not a regular file" info /dev/zero
# import of a named pipe reads it (mkfifo, then a writer), but says at once that it waits for its
# writer: it waited in silence. Process substitution and stdin (a pipe or a file) are read as they
# were, with nothing said.
# err is emptied first: the background job truncates it only once it has started, and the wait
# below must not read the previous command's line in the meantime.
mkfifo in.json
: >err
"$mhc" import in.json -o f.db >out 2>err &
pid=$!
note="mhc: import: the input in.json is a named pipe: reading it until its writer closes it"
for _ in $(seq 400); do grep -qF "$note" err && break; sleep 0.05; done
grep -qF "$note" err ||
    { kill $pid; fail "import of a named pipe with no writer said nothing: $(cat err)"; }
cat k.json >in.json
wait $pid || fail "import of a named pipe exited $?: $(cat err)"
refused "f.db: already exists; pass --force" import in.json -o f.db   # refused before the wait: one line
[ -s f.db ] && [ "$(wc -l <err)" = 1 ] || fail "import of a named pipe: $(cat out err)"
# -q leaves the note out, as it does a locked trace's.
"$mhc" -q import in.json -o q.db >out 2>err &
pid=$!
cat k.json >in.json
wait $pid || fail "import -q of a named pipe exited $?: $(cat err)"
[ ! -s err ] || fail "import -q of a named pipe said: $(cat err)"
"$mhc" import <(cat k.json) -o ps.db >out 2>err || fail "import <(cat) exited $?: $(cat err)"
[ ! -s err ] || fail "import <(cat) said: $(cat err)"
"$mhc" import /dev/stdin -o sd.db <k.json >out 2>err || fail "import /dev/stdin <file exited $?: $(cat err)"
[ ! -s err ] || fail "import /dev/stdin <file said: $(cat err)"
cat k.json | "$mhc" import - -o dash.db >out 2>err || fail "import - from a pipe exited $?: $(cat err)"
[ ! -s err ] && [ -s dash.db ] || fail "import - from a pipe: $(cat err)"
cat k.json | "$mhc" import /dev/stdin -o sp.db >out 2>err || fail "import /dev/stdin from a pipe exited $?: $(cat err)"
[ ! -s err ] || fail "import /dev/stdin from a pipe said: $(cat err)"
# An execution trace's --kineto is read twice: a pipe is refused (it waited forever for a second
# writer, or read as empty the second time).
mkfifo kp.json
refused "kp.json: --kineto reads a regular file, not a pipe" import "$fixtures/cpu_mlp_et.json.gz" --kineto kp.json -o e1.db
refused "/dev/fd/" import "$fixtures/cpu_mlp_et.json.gz" --kineto <(zcat "$fixtures/cpu_mlp_kineto.json.gz") -o e2.db
[ ! -e e1.db ] && [ ! -e e2.db ] || fail "import with a --kineto pipe wrote its output"
# A meta value info shows (what an importer changed), written by anyone: 5,000 bytes of one word
# and an escape sequence. info's lines stay within 100 columns (the value cut with ...; it was
# printed whole) and no control byte reaches the terminal (it was sent as is).
cp t.db meta.db
sqlite3 meta.db "INSERT OR REPLACE INTO meta VALUES('kineto.kernel_device', '$(head -c 5000 /dev/zero | tr '\0' a)');
                 INSERT OR REPLACE INTO meta VALUES('kineto.kernel_clamp', 'x' || char(27) || '[2J' || char(7) || 'y')"
"$mhc" info meta.db >out 2>err || fail "info of long meta values exited $?: $(cat err)"
awk 'length($0) > 100 { bad = 1 } END { exit bad }' out || fail "info printed a line past 100 columns: $(awk 'length($0) > 100' out | head -c 200)"
grep -q $'\x1b\|\x07' out && fail "info sent a meta value's control bytes to the terminal"
grep -q "^overlaps    x?\[2J?y$" out || fail "info of a meta value with control bytes: $(grep overlaps out)"
# A stored run's name past the line (runs are named by their settings; a link profile's name goes in it).
"$mhc" -q simulate meta.db --capacity 100% >/dev/null || fail "simulate meta.db"
sqlite3 meta.db "UPDATE runs SET name = printf('%.5000c', 'n')"
"$mhc" info meta.db >out 2>err || fail "info of a long run name exited $?: $(cat err)"
awk 'length($0) > 100 { bad = 1 } END { exit bad }' out || fail "info printed a run's name past 100 columns"
grep -q "^      nnnn*\.\.\.$" out || fail "info of a long run name: $(tail -2 out | head -c 300)"
# 7. Names that are not UTF-8 (a file name, a kernel name a trace holds, a profile's name): the JSON
# printed or written is still JSON (the bytes replaced), never "internal error" from the encoder.
bad=$(printf 'k\xff\xfe.db')
cp t.db "$bad"
sqlite3 "$bad" "UPDATE strings SET text = CAST(x'6bff6e' AS TEXT) WHERE id = (SELECT name FROM kernels LIMIT 1)"
json_ok() { python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null; }
"$mhc" info "$bad" --json >j.json 2>err || fail "info --json of a name not UTF-8 exited $?: $(cat err)"
json_ok j.json || fail "info --json: not JSON: $(head -c 300 j.json)"
"$mhc" simulate "$bad" --capacity 90% --no-store --json >j.json 2>err || fail "simulate --json exited $?: $(cat err)"
json_ok j.json || fail "simulate --json: not JSON"
"$mhc" calibrate --backend host --quick --rounds 1 --max-chunk 16KiB --name "$(printf 'n\xff')" -o "$bad.json" \
    >/dev/null 2>err || fail "calibrate --name not UTF-8 exited $?: $(cat err)"
json_ok "$bad.json" || fail "calibrate wrote a profile that is not JSON"
# 8. A value below an option's lower bound where the upper one is a type's limit: said in a few
# words, not with the limit's 309 digits ("--top: Value 0 not in range 0.000000 to 1797...").
refused "--top: '0': must be more than 0" info t.db --top 0
refused "--run: '-1': must not be negative" export t.db -o x.json --run -1
refused "--max: '-3': must not be negative" check t.db --max -3
refused "--gpu-flops: '0': must be more than 0" generate --steps 1 --gpu-flops 0 -o g.db
for cmd in "info t.db --top 0" "export t.db -o x.json --run -1" "check t.db --max -3"; do
    # shellcheck disable=SC2086
    "$mhc" $cmd >out 2>err
    [ "$(wc -c <err)" -lt 120 ] || fail "$cmd: a long message: $(head -c 200 err)"
done
[ ! -e x.json ] && [ ! -e g.db ] || fail "a refused command wrote its output"
# 9. A list naming one thing twice was simulated (replayed) and stored twice, its rows printed twice.
runs=$(sqlite3 t.db "SELECT count(*) FROM runs")
refused "--capacities: '80%' is given twice; give each once" sweep t.db --capacities 80%,80% --no-bisect
refused "--capacities: '80%' and '80 %' name the same thing" sweep t.db --capacities "80%,80 %" --no-bisect
refused "--policies: 'lru' is given twice" sweep t.db --capacities 80% --policies lru,lru --no-bisect
refused "--links: 'pcie4' is given twice" sweep t.db --capacities 80% --links pcie4,pcie4 --no-bisect
refused "--capacity: '70%' is given twice" validate t.db --capacity 70%,70%
[ "$(sqlite3 t.db "SELECT count(*) FROM runs")" = "$runs" ] || fail "a refused sweep or validate stored runs"
# Sizes that differ below format_bytes' two decimals are distinct capacities.
"$mhc" -q sweep t.db --capacities 700MiB,700.001MiB --policies lru --no-bisect --no-store >out 2>err ||
    fail "sweep of two close sizes: $(cat err)"
echo ok
