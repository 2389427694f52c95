#!/usr/bin/env bash
# `mhc record` without a GPU: options, environment given to the command, exit statuses.
# Usage: record_cli_test.sh MHC LIBRARY|none
set -uo pipefail
mhc=$(realpath "$1")
lib=$2
. "$(dirname "$0")/preamble.sh"
fake="$tmp/libfake.so"; printf '\177ELF' >"$fake"   # a shared library as far as mhc looks (its ELF header)

"$mhc" record >/dev/null 2>&1; [[ $? == 2 ]] || fail "no command: want exit 2"
"$mhc" record --library "$tmp/missing.so" -- true >/dev/null 2>&1
[[ $? == 2 ]] || fail "missing library: want exit 2"
"$mhc" record --library "$fake" -o "$tmp/nodir/run.db" -- true >/dev/null 2>&1
[[ $? == 2 ]] || fail "output in a missing directory: want exit 2"

# The recorder's variables outside their values (0 or 1; 1..4096 MB) are refused before the
# command runs, in one line naming the variable (the library would warn and use the default).
for assign in MHC_RECORD_FORCE=yes MHC_RECORD_ACCESSES=no MHC_RECORD_SIGNALS=2 MHC_RECORD_BUFFER_MB=8M \
              MHC_RECORD_DEVICE_BUFFER_MB=0 MHC_RECORD_BUFFER_MB=4097; do
    env "$assign" "$mhc" record --library "$fake" -o "$tmp/env.db" -- touch "$tmp/ran" >/dev/null 2>"$tmp/err"; rc=$?
    [[ $rc == 2 ]] || fail "$assign: want exit 2, got $rc: $(cat "$tmp/err")"
    [[ $(wc -l <"$tmp/err") == 1 ]] && grep -qF "$assign: not " "$tmp/err" || fail "$assign: $(cat "$tmp/err")"
    [[ ! -e $tmp/ran ]] || fail "$assign: the command ran anyway"
done
MHC_RECORD_BUFFER_MB=4096 MHC_RECORD_SIGNALS=0 "$mhc" record --library "$fake" -o "$tmp/env.db" -- true >/dev/null 2>&1
[[ $? == 5 ]] || fail "documented MHC_RECORD_* values were refused"

# An existing output is refused before the command runs, unless --force (then the recorder is
# told to replace it, rank and pid files included).
echo "old" > "$tmp/exists.db"
"$mhc" record --library "$fake" -o "$tmp/exists.db" -- touch "$tmp/ran" >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 2 ]] || fail "existing output: want exit 2, got $rc"
grep -q -- "--force" "$tmp/err" || fail "existing output: no --force hint: $(cat "$tmp/err")"
[[ ! -e $tmp/ran ]] || fail "existing output: the command ran anyway"
[[ $(cat "$tmp/exists.db") == old ]] || fail "existing output was changed"
out=$("$mhc" record --library "$fake" --force -o "$tmp/exists.db" -- sh -c 'echo "$MHC_RECORD_FORCE"' 2>/dev/null)
[[ $(head -1 <<<"$out") == 1 ]] || fail "--force: MHC_RECORD_FORCE=$(head -1 <<<"$out")"
out=$("$mhc" record --library "$fake" -o "$tmp/new.db" -- sh -c 'echo "$MHC_RECORD_FORCE"' 2>/dev/null)
[[ $(head -1 <<<"$out") == 0 ]] || fail "without --force: MHC_RECORD_FORCE=$(head -1 <<<"$out")"
# A variable the user set counts as its flag: MHC_RECORD_FORCE=1 as --force (the existing output
# taken, the recorder told to replace), MHC_RECORD_ACCESSES=0 as --no-accesses (both were
# overwritten with the flags' defaults in silence).
out=$(MHC_RECORD_FORCE=1 "$mhc" record --library "$fake" -o "$tmp/exists.db" -- sh -c 'echo "$MHC_RECORD_FORCE"' 2>/dev/null)
[[ $(head -1 <<<"$out") == 1 ]] || fail "MHC_RECORD_FORCE=1 without --force: MHC_RECORD_FORCE=$(head -1 <<<"$out")"
out=$(MHC_RECORD_ACCESSES=0 "$mhc" record --library "$fake" -o "$tmp/new.db" -- sh -c 'echo "$MHC_RECORD_ACCESSES"' 2>/dev/null)
[[ $(head -1 <<<"$out") == 0 ]] || fail "MHC_RECORD_ACCESSES=0: MHC_RECORD_ACCESSES=$(head -1 <<<"$out")"
out=$("$mhc" record --library "$fake" -o "$tmp/new.db" -- sh -c 'echo "$MHC_RECORD_ACCESSES"' 2>/dev/null)
[[ $(head -1 <<<"$out") == 1 ]] || fail "accesses by default: MHC_RECORD_ACCESSES=$(head -1 <<<"$out")"

# The command's status is ours; a program that never initialises CUDA writes no trace.
out=$("$mhc" record --library "$fake" -o "$tmp/run.db" -- sh -c 'exit 5' 2>&1); rc=$?
[[ $rc == 5 ]] || fail "exit status: want 5, got $rc"
grep -q "no trace written" <<<"$out" || fail "no-trace message missing: $out"
grep -q "exited with status 5" <<<"$out" || fail "status message missing: $out"
out=$("$mhc" record --library "$fake" -- "$tmp/no-such-program" 2>&1); rc=$?
[[ $rc == 127 ]] || fail "missing program: want 127, got $rc"
grep -q "no-such-program: command not found" <<<"$out" || fail "missing program: not said: $out"
grep -q "initialise CUDA" <<<"$out" && fail "missing program blamed on CUDA: $out"
out=$("$mhc" record --library "$fake" -- nosuchcmd-mhc-test 2>&1); rc=$?
[[ $rc == 127 ]] || fail "command not in PATH: want 127, got $rc"
grep -q "nosuchcmd-mhc-test: command not found" <<<"$out" || fail "command not in PATH: not said: $out"
: > "$tmp/not-executable"
"$mhc" record --library "$fake" -- "$tmp/not-executable" >/dev/null 2>&1; rc=$?
[[ $rc == 126 ]] || fail "not executable: want 126, got $rc"
# A command that succeeds without writing a trace is not a successful recording.
out=$("$mhc" record --library "$fake" -o "$tmp/run.db" -- true 2>&1); rc=$?
[[ $rc == 5 ]] || fail "no trace after exit 0: want 5, got $rc"
grep -q "no trace written" <<<"$out" || fail "no-trace message missing: $out"
"$mhc" record --library "$fake" -- sh -c 'kill -TERM $$' >/dev/null 2>&1; rc=$?
[[ $rc == 143 ]] || fail "killed by SIGTERM: want 143, got $rc"

# The environment the recorder reads.
env_line='echo "$CUDA_INJECTION64_PATH|$MHC_RECORD_OUTPUT|$MHC_RECORD_ACCESSES|$PYTORCH_CUDA_ALLOC_CONF|$MHC_RECORD_ROOT_PID|$$"'
out=$(cd "$tmp" && "$mhc" record --library "$fake" -o run.db --torch -- sh -c "$env_line" 2>"$tmp/err")
IFS='|' read -r inj output acc conf root self <<<"$(head -1 <<<"$out")"
[[ $inj == "$fake" ]] || fail "CUDA_INJECTION64_PATH=$inj"
[[ $output == "$tmp/run.db" ]] || fail "MHC_RECORD_OUTPUT=$output (want an absolute path)"
[[ $acc == 1 ]] || fail "MHC_RECORD_ACCESSES=$acc"
[[ $conf == backend:cudaMallocAsync ]] || fail "PYTORCH_CUDA_ALLOC_CONF=$conf"
[[ $root == "$self" ]] || fail "MHC_RECORD_ROOT_PID=$root, child pid $self"
grep -q "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync" "$tmp/err" || fail "--torch not announced"
out=$(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$mhc" record --library "$fake" --torch --no-accesses -- sh -c "$env_line" 2>/dev/null)
IFS='|' read -r inj output acc conf root self <<<"$(head -1 <<<"$out")"
[[ $acc == 0 ]] || fail "--no-accesses: MHC_RECORD_ACCESSES=$acc"
[[ $conf == "expandable_segments:True,backend:cudaMallocAsync" ]] || fail "appended conf: $conf"

# The injection library is found beside the build's mhc when built.
if [[ $lib != none ]]; then
  out=$(MHC_RECORD_LIBRARY= "$mhc" record -o "$tmp/run.db" -- sh -c 'echo "$CUDA_INJECTION64_PATH"' 2>&1)
  [[ $? == 5 ]] || fail "auto-discovery of the library (want 5: no trace without a GPU): $out"
  [[ $(head -1 <<<"$out") -ef $lib ]] || fail "found $(head -1 <<<"$out"), built $lib"
fi
echo ok
