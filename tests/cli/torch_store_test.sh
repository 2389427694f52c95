#!/usr/bin/env bash
# `mhc-torch capture` keeps the store's promises (docs/trace-format.md, "Durability and
# concurrency"): killed at random moments (SIGINT, SIGTERM, SIGKILL) it leaves the previous output
# whole or none, and no temporary file once the next capture has run; captures at once onto one
# output leave one complete trace; onto a full disk, one line and nothing left. Skipped (exit 77)
# where no Python with torch and mhc_torch is found. Seven captures, each mostly torch's import, of
# tiny-mhc at n = 1 with one layer (mhc_torch's own model: tiny-llama added transformers' import, a
# third more CPU each): the timed one, three killed, the two at once (which also run after the
# SIGKILL, so they are the next capture that removes its temporary file), and the full disk's,
# which runs beside the two at once (it writes into its own folder).
set -u
set -m   # background jobs as from a terminal: without it SIGINT is ignored by them (kill_test.sh)
mhc=$1
python=$2
pkg=$3   # the folder holding the mhc_torch package
[ -x "$python" ] && PYTHONPATH=$pkg "$python" -c "import torch, mhc_torch" 2>/dev/null \
    || { echo "skipped: no Python with torch and mhc_torch at $python"; exit 77; }
. "$(dirname "$0")/preamble.sh"
cd "$tmp" || exit 1
capture() { PYTHONPATH=$pkg MHC_EXE=$mhc "$python" -m mhc_torch.cli capture tiny-mhc --hc 1 --seq 16 --layers 1 "$@"; }
no_temps() {
    local left; left=$(ls | grep -E "mhc-tmp-|\.tmp-[0-9]+|-journal$" || true)
    [ -z "$left" ] || fail "left behind: $left"
}

# The first capture, timed: the kills land in its second half, where the trace is written.
start=$(date +%s%N)
capture -o c.db >/dev/null 2>err || fail "capture: $(cat err)"
took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
"$mhc" check c.db >/dev/null || fail "the capture fails check"
sum=$(sha256sum <c.db)
RANDOM=${KILL_TEST_SEED:-5}
for sig in INT TERM KILL; do
    delay_ms=$(( took_ms / 2 + RANDOM % (took_ms / 2) ))
    capture --force -o c.db >/dev/null 2>&1 &
    pid=$!
    sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
    kill -s $sig $pid 2>/dev/null
    wait $pid; rc=$?
    echo "capture, SIG$sig after ${delay_ms} ms: exit $rc"
    # Whatever it reached: the previous trace, or the new one whole.
    "$mhc" check c.db >/dev/null 2>err || fail "after SIG$sig: the output fails check: $(cat err)"
    [ "$sig" = KILL ] || no_temps
done

# A full disk: one line, no output, no temporary file (a tmpfs in a private mount namespace where
# it can be mounted, else a file size limit). Started here, waited for after the two below.
mkdir full
full_disk() {
    if unshare -m sh -c 'd=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs "$d" && umount "$d" && rmdir "$d"' 2>/dev/null; then
        unshare -m sh -c "mount -t tmpfs -o size=64k tmpfs full && dd if=/dev/zero of=full/filler bs=4k >/dev/null 2>&1;
            PYTHONPATH='$pkg' '$python' -m mhc_torch.cli capture tiny-mhc --hc 1 --seq 16 --layers 1 -o full/x.db >/dev/null 2>err;
            echo \$? >rc; rm -f full/filler; ls full >left"
        echo tmpfs >mode
    else
        (trap '' XFSZ; ulimit -f 8; capture -o full/x.db >/dev/null 2>err; echo $? >rc; ls full >left)
        echo fsize >mode
    fi
}
full_disk & pf=$!

# Two captures at once onto one new output, the SIGKILLed capture's temporary file beside it: one
# complete trace, no temporary file (that one is gone too: the next capture removes it).
rm c.db
capture --force -o c.db >/dev/null 2>e1 & p1=$!
capture --force -o c.db >/dev/null 2>e2 & p2=$!
wait $p1 || fail "capture 1 at once: $(cat e1)"
wait $p2 || fail "capture 2 at once: $(cat e2)"
"$mhc" check c.db >/dev/null || fail "captures at once left a broken trace"
no_temps

wait $pf
mode=$(cat mode)
[ "$(cat rc)" != 0 ] || fail "a capture onto a full disk ($mode) succeeded"
[ "$(wc -l <err)" = 1 ] || fail "a capture onto a full disk ($mode): not one line: $(cat err)"
[ ! -s left ] || fail "a capture onto a full disk ($mode) left: $(cat left)"
echo "ok (full disk: $mode: $(cat err))"
