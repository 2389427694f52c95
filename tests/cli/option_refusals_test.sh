#!/usr/bin/env bash
# Every refusal of an option's value is said in one form (docs/cli.md, "Messages and exit
# statuses"): `mhc: [COMMAND: ]--option: 'value': what is wrong; what is accepted`, the option as
# the user typed it (`--eviction`, not `--policy`), exit 2, one line. Every option that takes a
# value, of every command `mhc --help` lists (and of `kernels sinkhorn` and mhc-view), read from
# its --help so that a new option is tried too, is given `bogus`, `-5`, `500` and `0`:
#   - `bogus` must be refused in that form, unless the option takes free text (a name, a file, a
#     find text: listed below);
#   - the others, where refused, in that form too, or for something that is not the value's fault
#     (the base command's own limits, listed below).
# Usage: option_refusals_test.sh MHC [MHC_VIEW]
set -u
mhc=$1
view=${2:-}
. "$(dirname "$0")/preamble.sh"
data=$(cd "$(dirname "$0")/../data" && pwd)
cd "$tmp" || exit 1
"$mhc" -q generate --preset gpt2-small --steps 1 --layers 2 --seq 128 -o t.db >/dev/null || fail generate
cp "$data/advise/tiny_mhc.db" a.db
head -c 512 /dev/zero >H.f32   # 8 matrices of 4 x 4 float32 zeros
echo '{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":10,"dur":5,"args":{"device":0,"stream":7}}]}' >k.json

# A command each option is given to: cheap, and refused before any work by a bad value.
declare -A base=(
    [generate]="generate --preset gpt2-small --steps 1 --layers 2 --seq 128 -o g.db --force"
    [simulate]="simulate t.db --capacity 100% --no-store"
    [sweep]="sweep t.db --capacities 100% --policies lru --no-bisect --no-store"
    [advise]="advise a.db --capacity 800MiB --top 1"
    [validate]="validate t.db --capacity 99% --link pcie4 --no-store --repeat 1 --max-replay-time 60ms"
    [export]="export t.db -o e.json --force"
    [check]="check t.db" [info]="info t.db" [allocator]="allocator t.db"
    [calibrate]="calibrate --backend host --quick --rounds 1 --max-chunk 16KiB -o c.json --force"
    [import]="import k.json -o i.db --force"
    [prune]="prune t.db --run 1"
    [seconds]="seconds 5s"
    [record]="record -o r.db --force"
    [help]="help"
    [kernels sinkhorn]="kernels sinkhorn --n 4 --iters 2 --input H.f32 --output P.f32 --force")
# Options whose value is free text or a file: `bogus` is a name, or a file refused as files are
# (`mhc: bogus: no such file`).
free='--keys|--name|--output|--runs-db|--input|--grad|--grad-output|--kineto|--ranks|--library|--trace-out|--model|--setting|--screenshot|--layout|--families|--find|--type'
# Refusals of an accepted value for something else: the base's replay limit, a run the trace does
# not hold, a file the base lacks, an option the others leave idle ("--x with --y", "and --y").
other='the replays would take|has no device|no allocations on|run [0-9]+ does not exist|no segments recorded|--[a-z-]+ (with|without) --|and --[a-z-]+( [^ :]+)?: |with dp 1|^mhc: [^ ]+: no such file'
# A value in range that another option's refuses against it (--heads 500: "--hidden: '768': must be a
# multiple of heads (500)"): said in the form, of the other option.
formed="^mhc: ([a-z ]+: )?--[a-z0-9-]+: '[^']*': "

commands=$("$mhc" --help | sed -n '/^Commands:/,$p' | grep -oE '^  [a-z]+' | tr -d ' ')
[ -n "$commands" ] || fail "mhc --help lists no command"
for cmd in $commands; do
    [ "$cmd" = kernels ] && cmd="kernels sinkhorn"
    [ -n "${base[$cmd]:-}" ] || fail "no base command for '$cmd': add one here so that its options are tried"
done

tried=0
bad=()   # every refusal not in the form, listed together at the end
wrong() { bad+=("$*"); }
# check PROGRAM WHERE BASE OPTION KIND VALUE: runs BASE with OPTION VALUE (in place of BASE's own
# OPTION, if any) and checks the refusal's form.
check() {
    local program=$1 where=$2 cmdline=$3 o=$4 kind=$5 v=$6 args=() rc line prefix
    # shellcheck disable=SC2206
    local words=($cmdline) replaced=0 i
    for ((i = 0; i < ${#words[@]}; i++)); do
        if [ "${words[i]}" = "$o" ] && [ $replaced = 0 ]; then
            args+=("$o" "$v"); i=$((i + 1)); replaced=1
        else
            args+=("${words[i]}")
        fi
    done
    [ $replaced = 1 ] || args+=("$o" "$v")
    [ "$where" = record ] && args+=(-- true)
    "$program" "${args[@]}" >out 2>err </dev/null; rc=$?
    tried=$((tried + 1))
    line=$(head -1 err)
    rm -rf -- bogus -5 500 0   # written by an output option given one: a file, not the value's test
    case $rc in 0) [ "$v" = bogus ] && ! [[ $o =~ ^($free)$ ]] && wrong "$where $o bogus was taken (exit 0)"; return ;;
                2) ;;
                *) [ "$(basename "$program")" = mhc-view ] && [ $rc = 1 ] && return   # no display: after the checks
                   wrong "$where $o '$v' exited $rc: $line"; return ;;
    esac
    [ "$(wc -l <err)" = 1 ] || { wrong "$where $o '$v': not one line: $(cat err)"; return; }
    prefix="$(basename "$program"): "
    [ "$where" != "" ] && [ "$(basename "$program")" = mhc ] && prefix+="($where: )?"
    # The form: the option as typed, the value quoted (as printable() shows it).
    [[ $line =~ ^$prefix$o:\ \'.*\':\  ]] && {
        [[ $line == *"'$v'"* ]] || [[ $line == *"'$v"* ]] || wrong "$where $o '$v': another value quoted: $line"
        return
    }
    [[ $o =~ ^($free)$ ]] && return
    [ "$v" != bogus ] && { [[ $line =~ $other ]] || [[ $line =~ $formed ]]; } && return
    wrong "$where $o '$v' ($kind): not said as '$o: '$v': ...': $line"
}

options_of() {   # the options with a value in a --help text: "OPTION KIND" a line
    # A value's name is capitals (SIZE, X,Y, WxH, N|auto, FILE.py); a flag's line goes on with words.
    grep -E '^ +(-[a-zA-Z], )?--[a-z0-9-]+(, --[a-z0-9-]+)? [A-Z][A-Z]*([xX][A-Z]+)?([|,.][A-Za-z]+)*( |$)' |
        sed -E 's/^ *(-[a-zA-Z], )?(--[a-z0-9-]+)(, (--[a-z0-9-]+))? ([^ ]+).*/\2 \5 \4/'
}

for cmd in "${!base[@]}"; do
    # shellcheck disable=SC2086
    while read -r o kind alias; do
        [ -n "$o" ] || continue
        for v in bogus -5 500 0; do check "$mhc" "$cmd" "${base[$cmd]}" "$o" "$kind" "$v"; done
        # An option's other name is said as typed (--eviction lur: "--eviction: 'lur': ...").
        [ -n "$alias" ] && check "$mhc" "$cmd" "${base[$cmd]}" "$alias" "$kind" bogus
    done < <("$mhc" $cmd --help | options_of)
done
# Short names too (-o, -j): said as typed.
check "$mhc" sweep "${base[sweep]}" -j N bogus
if [ -n "$view" ]; then
    "$mhc" -q simulate t.db --capacity 90% >/dev/null || fail "simulate for mhc-view"
    vbase="t.db --screenshot v.png"
    while read -r o kind alias; do
        [ -n "$o" ] || continue
        for v in bogus -5 500 0; do check "$view" "" "$vbase" "$o" "$kind" "$v"; done
    done < <("$view" --help | options_of)
fi
# Values inside a value keep the form (before 2026-12-06 each had its own): an --allocator-conf
# item is quoted whole, then what is wrong and what its key takes; a --setting's JSON is quoted, then
# the field; a value in a file is said by the file and its field instead of the option.
deep() {   # deep WANT(regex) ARGS...: refused in one line matching WANT, exit 2
    local want=$1; shift
    "$mhc" "$@" >out 2>err </dev/null; local rc=$?
    tried=$((tried + 1))
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && [[ $(cat err) =~ $want ]] ||
        wrong "$* (exit $rc): not said as /$want/: $(cat err)"
}
for item in max_split_size_mb:abc max_split_size_mb:19 max_non_split_rounding_mb:-1 expandable_segments:maybe \
            garbage_collection_threshold:2 garbage_collection_threshold:x roundup_power2_divisions:3 \
            'roundup_power2_divisions:[3:2]' 'roundup_power2_divisions:[64:2' backend:cudaMallocAsync max_splitsize_mb:64; do
    quoted=$(printf '%s' "$item" | sed 's/[][]/\\&/g')
    for cmd in "simulate t.db --capacity 90% --no-store" "sweep t.db --capacities 90% --no-bisect --no-store" \
               "allocator t.db" "validate t.db --capacity 90% --no-store"; do
        # shellcheck disable=SC2086
        deep "^mhc: --allocator-conf: '$quoted': .+(; .+ takes |; use |; a list)" $cmd --allocator-conf "$item"
    done
    # shellcheck disable=SC2016
    json=$(printf '{"allocator": "%s"}' "$item")
    deep "^mhc: --setting: '\\{\"allocator\": \"$quoted\"\\}': field 'allocator': '$quoted': " advise a.db --setting "$json"
    printf '%s' "$json" >s.json
    deep "^mhc: s.json: field 'allocator': '$quoted': " advise a.db --setting s.json
    cp t.db m.db && sqlite3 m.db "INSERT OR REPLACE INTO meta VALUES ('allocator.conf', '$item')" || fail sqlite3
    deep "^mhc: m.db: meta allocator.conf: '$quoted': " simulate m.db --capacity 90% --no-store
done
for json in '{"checkpoint": 5}' '{"optimizer": {"state": "gpu2"}}' '{"bogus": 1}' '{"offload": {"min_bytes": "x"}}' \
            '{"checkpoint": {"modules": ["nope"]}}' '{"weights": "fp8"}'; do
    field=$(printf '%s' "$json" | sed -E 's/^\{"([a-z_]+)".*/\1/')
    deep "^mhc: --setting: '.+': field '$field[a-z_.]*': " advise a.db --setting "$json"
    printf '%s' "$json" >s.json
    deep "^mhc: s.json: field '$field[a-z_.]*': " advise a.db --setting s.json
done
deep "^mhc: --setting: 'missing.json': no such file" advise a.db --setting missing.json
# The link's own bounds, said of the option (it was "link pcie4-custom: field 'h2d.bandwidth_Bps': ...").
for case in "--h2d-bandwidth 1B/s" "--d2h-bandwidth 2000TB/s" "--latency 2h"; do
    # shellcheck disable=SC2086
    deep "^mhc: ${case% *}: '${case#* }': (below|above) .+; .+ is .+ to " simulate t.db --capacity 90% --no-store $case
done
for cmd in "advise a.db --capacity 800MiB" "sweep t.db --capacities 90% --no-store"; do
    # shellcheck disable=SC2086
    deep "^mhc: --budget: '9m': " $cmd --budget 9m
done
[ $tried -gt 400 ] || fail "only $tried option values tried"
[ ${#bad[@]} = 0 ] || { printf '%s\n' "${bad[@]}"; fail "${#bad[@]} of $tried refusals not in the form --option: 'value': ..."; }
echo "ok: $tried option values tried"
