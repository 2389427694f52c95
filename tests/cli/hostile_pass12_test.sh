#!/usr/bin/env bash
# Hostile pass 12 (docs/cli.md, "Messages and exit statuses"): what passes 1 to 11 left.
#   1. A NUL byte quoted into a message cut it there: mhc::Error kept the text in
#      std::runtime_error, whose what() is read as a C string (an advise setting's module
#      "a\u0000b" said "field 'checkpoint.a" and no more; a --families rule "ge\0mm" "unknown family
#      'ge"). Error keeps its message as printable() shows it: the NUL is a '?', the rest is said.
#   2. A trace in SQLite's WAL mode (made so by another tool) in a folder the process cannot write:
#      every command said "cannot read: attempt to write a readonly database" (SQLite makes a -shm
#      index beside such a file to read it). Now read immutable when its -wal log is absent or
#      empty, by mhc and mhc-torch alike; one whose log holds writes is refused saying what to do.
#   3. --runs-db naming a loop of links or a link to nothing: simulate and sweep computed, then
#      failed to store ("cannot open or create: unable to open database file", exit 4), info said
#      "cannot open: unable to open database file"; --link naming one was "unknown link 'loop'".
#   4. An SQLite log an earlier file left beside an output (T.db-wal of a killed writer, T.db-journal
#      of an interrupted transaction) was applied by SQLite to the new trace written there: a
#      generated trace read as the earlier one's meta (check: content digest changed), an import
#      with an earlier journal "database disk image is malformed"; with --force the replaced file's
#      live log likewise; a new --runs-db made beside one read as "not an mhc runs database" after
#      the work (exit 4, the damaged file left). Now
#      refused before the work without --force, removed with the file it belongs to with it, by
#      mhc and mhc-torch capture.
# Usage: hostile_pass12_test.sh MHC PYTHON PKG [MHC_VIEW] (PKG: the folder holding mhc_torch; the
# parts that need torch, pandas, mhc-view or a folder the test cannot write are skipped, said)
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
has_torch=0
PYTHONPATH=$pkg "$python" -c "$find_modules" torch pandas 2>/dev/null && has_torch=1
torch_cli() { PYTHONPATH=$pkg timeout 300 "$python" -m mhc_torch.cli "$@"; }

# 1. A NUL byte in a quoted value: the whole message, the NUL shown as '?'.
printf '{"checkpoint": {"a\\u0000b": true}}' >nul.json
refused "mhc: nul.json: field 'checkpoint.a?b': " advise "$here/../data/advise/tiny_mhc.db" --setting nul.json
if [ -n "$view" ] && [ -x "$view" ]; then
    printf 'ge\0mm gemm\n' >fam.txt
    DISPLAY='' WAYLAND_DISPLAY='' timeout 20 "$view" t.db --families fam.txt >out 2>err </dev/null; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] && grep -qF "fam.txt:1: unknown family 'ge?mm'" err ||
        fail "mhc-view --families with a NUL exited $rc: $(cat -A err)"
else
    echo "SKIP part 1 (mhc-view): no mhc-view"
fi

# 2. A WAL-mode trace where the process cannot write: read immutable, or refused saying why.
cp t.db w.db && sqlite3 w.db "PRAGMA journal_mode=WAL" >/dev/null || fail "sqlite3 WAL"
# A log that holds writes not in the file: a writer killed before its checkpoint.
cp w.db l.db
python3 - <<'PY' || fail "python3 l.db"
import os, sqlite3
db = sqlite3.connect("l.db")
db.execute("PRAGMA wal_autocheckpoint=0")
db.execute("INSERT OR REPLACE INTO meta VALUES ('note', 'in the log')")
db.commit()
os._exit(0)
PY
[ -s l.db-wal ] && rm -f l.db-shm || fail "no l.db-wal"
want_info=$("$mhc" info t.db --top 3 | sed 1d)   # the same trace, read where it may be written
# Runs as root in a private mount namespace over a read-only tmpfs (root writes any folder whose
# mode says no), else in a folder of mode 0555.
cat >ro_part.sh <<'EOF'
set -u
ro=$1
fail() { echo "FAIL: $*"; exit 1; }
for cmd in "info ro/w.db --top 3" "check ro/w.db" "simulate ro/w.db --capacity 80% --no-store" \
           "export ro/w.db -o $PWD/w.json"; do
    # shellcheck disable=SC2086
    "$mhc" $cmd >out 2>err || fail "$cmd of a WAL trace in a read-only folder exited $?: $(cat err)"
done
"$mhc" info ro/w.db --top 3 | sed 1d >info.txt
[ "$(cat info.txt)" = "$want_info" ] || fail "info of the WAL trace differs: $(diff <(echo "$want_info") info.txt)"
[ -s w.json ] || fail "export of the WAL trace wrote nothing"
"$mhc" info ro/l.db >out 2>err; rc=$?
[ $rc = 2 ] && [ "$(wc -l <err)" = 1 ] &&
    grep -qF "mhc: ro/l.db: cannot read: it is in SQLite's WAL mode with writes in ro/l.db-wal not yet in it" err &&
    grep -qF "copy both files to a folder you can write" err || fail "info of a WAL trace with its log exited $rc: $(cat err)"
if [ -n "$view" ] && [ -x "$view" ]; then   # read before the window: without a display, the display is said
    DISPLAY='' WAYLAND_DISPLAY='' timeout 20 "$view" ro/w.db >out 2>err </dev/null
    grep -qF "cannot open a window" err || fail "mhc-view of a WAL trace in a read-only folder: $(cat err)"
fi
[ ! -e ro/w.db-shm ] && [ ! -e ro/w.db-wal ] || fail "a reader made files in the read-only folder"
if [ "$has_torch" = 1 ]; then
    PYTHONPATH=$pkg timeout 120 "$python" -m mhc_torch.cli runs ro/w.db >out 2>err ||
        fail "mhc-torch runs of a WAL trace in a read-only folder exited $?: $(cat err)"
    grep -q "no runs" out || fail "mhc-torch runs: $(cat out)"
    PYTHONPATH=$pkg timeout 120 "$python" -m mhc_torch.cli runs ro/l.db >out 2>err; rc=$?
    [ $rc = 2 ] && grep -qF "ro/l.db: cannot read: it is in SQLite's WAL mode with writes in ro/l.db-wal" err ||
        fail "mhc-torch runs of a WAL trace with its log exited $rc: $(cat err)"
fi
echo ok
EOF
export mhc want_info has_torch python pkg view
mkdir ro && cp w.db l.db l.db-wal ro/
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
    unshare -m bash -c 'mount -t tmpfs -o size=4m tmpfs ro && cp w.db l.db l.db-wal ro/ &&
                        mount -o remount,ro ro && bash ro_part.sh ro' >part2.out 2>&1 ||
        fail "part 2 (read-only mount): $(cat part2.out)"
elif [ "$(id -u)" != 0 ]; then
    chmod 0555 ro && bash ro_part.sh ro >part2.out 2>&1 || fail "part 2 (folder of mode 0555): $(cat part2.out)"
    chmod 0755 ro
else
    echo "SKIP part 2: root without unshare -m"
fi

# 3. --runs-db and --link naming a loop of links or a link to nothing: refused before the work.
ln -s loop2 loop1 && ln -s loop1 loop2 && ln -s nothing.db dangling
for cmd in "simulate t.db --capacity 80%" "sweep t.db --capacities 90%,80% --no-bisect" "info t.db"; do
    # shellcheck disable=SC2086
    refused "mhc: loop1: cannot be reached: Too many levels of symbolic links" $cmd --runs-db loop1
    [ ! -s out ] || fail "$cmd --runs-db loop1 printed before refusing: $(head -3 out)"
done
refused "mhc: dangling: is a symbolic link to nothing.db, which does not exist; --runs-db names the file itself" \
    simulate t.db --capacity 80% --runs-db dangling
[ ! -s out ] && [ ! -e nothing.db ] || fail "simulate --runs-db dangling: $(head -3 out)"
refused "mhc: loop1: cannot be reached: Too many levels of symbolic links" simulate t.db --capacity 80% --no-store --link loop1
refused "mhc: dangling: no such file" simulate t.db --capacity 80% --no-store --link dangling

# 4. An SQLite log beside an output: refused, or removed with --force; never applied to the new file.
python3 - <<'PY' || fail "python3 logs"
import os, shutil, sqlite3
shutil.copy("t.db", "j.db")
db = sqlite3.connect("j.db", isolation_level=None)
db.execute("PRAGMA cache_size=2")   # the change spills: the journal is written, its header whole
db.execute("BEGIN")
db.execute("UPDATE allocations SET bytes = bytes + 1")
db.execute("UPDATE strings SET text = text || 'x'")
os._exit(0)
PY
[ -s j.db-journal ] || fail "no j.db-journal"
gen=(generate --preset gpt2-small --steps 1 --layers 2 --seed 3)
kineto=$here/../import/fixtures/cpu_mlp_kineto.json.gz
for log in l.db-wal j.db-journal; do
    side=${log#*.db}
    for cmd in "${gen[*]}" "import $kineto"; do
        rm -f n.db n.db-*
        cp "$log" "n.db$side"
        # shellcheck disable=SC2086
        refused "mhc: n.db: n.db$side is there, an SQLite log of an earlier n.db that SQLite would apply to the new file" \
            $cmd -o n.db
        [ ! -e n.db ] && cmp -s "$log" "n.db$side" || fail "$cmd -o n.db beside n.db$side wrote or changed something"
        # shellcheck disable=SC2086
        "$mhc" -q $cmd -o n.db --force >/dev/null 2>err || fail "$cmd -o n.db --force: $(cat err)"
        [ ! -e "n.db$side" ] && [ ! -e n.db-shm ] || fail "$cmd --force left $(ls n.db-*)"
        "$mhc" check n.db >out 2>&1 || fail "$cmd -o n.db --force beside n.db$side: $(tail -2 out)"
        [ "$(sqlite3 n.db "SELECT count(*) FROM meta WHERE key = 'note'")" = 0 ] || fail "the earlier file's meta in n.db"
    done
done
# A WAL trace replaced with --force while its log holds writes: the log goes with it.
cp l.db n.db && cp l.db-wal n.db-wal && rm -f n.db-journal
"$mhc" -q "${gen[@]}" -o n.db --force >/dev/null 2>err || fail "generate over a WAL trace: $(cat err)"
"$mhc" check n.db >out 2>&1 && [ ! -e n.db-wal ] || fail "generate over a WAL trace with its log: $(tail -2 out)"
# A runs database to be made beside one: said before the work, nothing made.
rm -f r.db r.db-* && cp l.db-wal r.db-wal
refused "mhc: r.db: r.db-wal is there, an SQLite log of an earlier r.db that SQLite would apply to a new runs database" \
    simulate t.db --capacity 80% --runs-db r.db
[ ! -s out ] && [ ! -e r.db ] || fail "simulate --runs-db r.db beside r.db-wal: $(head -3 out)"
# An output that is no database (an export) is checked alike: a later reader may take it for one.
rm -f e.json && cp l.db-wal e.json-wal
refused "mhc: e.json: e.json-wal is there, an SQLite log of an earlier e.json" export t.db -o e.json
# An empty log, or a file of that name that is no SQLite log, is not one.
rm -f n.db n.db-* && : >n.db-wal && echo "notes" >n.db-journal
"$mhc" -q "${gen[@]}" -o n.db >/dev/null 2>err || fail "an empty -wal refused: $(cat err)"
[ -e n.db-journal ] || fail "a file that is no journal was removed"   # (SQLite removes it on opening n.db)
"$mhc" check n.db >/dev/null || fail "check n.db beside an empty -wal: $("$mhc" check n.db | tail -2)"
if [ "$has_torch" = 1 ]; then
    rm -f m.db m.db-* && cp l.db-wal m.db-wal
    torch_cli capture tiny-mhc --hc 1 --layers 1 --seq 16 --steps 1 -o m.db >out 2>err; rc=$?
    [ $rc = 2 ] && grep -qF "mhc-torch: m.db: m.db-wal is there, an SQLite log of an earlier m.db" err && [ ! -e m.db ] ||
        fail "mhc-torch capture beside m.db-wal exited $rc: $(tail -c 300 err)"
    torch_cli capture tiny-mhc --hc 1 --layers 1 --seq 16 --steps 1 -o m.db --force >out 2>err || fail "mhc-torch capture --force: $(tail -c 300 err)"
    [ ! -e m.db-wal ] && "$mhc" check m.db >/dev/null || fail "mhc-torch capture --force beside m.db-wal: $("$mhc" check m.db | tail -2)"
else
    echo "SKIP part 4 (mhc-torch): no torch or pandas"
fi

echo "all hostile pass 12 checks passed"
