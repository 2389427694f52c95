#!/usr/bin/env bash
# Real public traces end to end: each kind (Kineto, execution trace, nsys, PyTorch snapshot)
# imported, then every command a user runs next on it, with the properties that must hold
# whatever the trace: exit 0 (3 for an out-of-memory run), or one line on stderr and exit 2;
# never a crash, a hang, a traceback or a half-written output; the peak simulate finds at
# unlimited capacity is info's (same bytes, same device, the device said); JSON parses; export's
# tables hold the trace's figures and the stored run's; runs stored belong to the trace.
# Hostile but legitimate: capacities below the largest allocation and of 1 byte, --ranks of one
# rank, --device naming a device without allocations, order-only timing in sweep, --ranks and
# validate, validate of a trace whose replay needs more memory than any test machine has.
# The traces (tests/data/public/SOURCES.md) are a few per kind, chosen for what differs: host and
# GPU allocations (the host's larger, equal or smaller), no allocations (a timeline), order-only
# timing, segments or none, a warm start.
# Usage: real_traces_test.sh MHC PUBLIC_DATASETS
set -u
mhc=$1
pub=$2
. "$(dirname "$0")/preamble.sh"
cd "$tmp" || exit 1

# run WANT_RCS LABEL CMD...: mhc CMD (60 s at most) with stdout in out, stderr in err; the status
# must be one of WANT_RCS ("0", "0 3", "2"); exit 2 means one line on stderr starting "mhc: ".
# Nothing may look like a crash on stderr.
run() {
    local want=$1 label=$2; shift 2
    timeout 60 "$mhc" "$@" >out 2>err
    rc=$?
    [[ " $want " == *" $rc "* ]] || fail "$label: mhc $* exited $rc, wanted $want: $(head -c 800 err) $(head -c 400 out)"
    if grep -qiE "terminate called|assert|traceback|segmentation|std::|what\(\)" err; then
        fail "$label: mhc $* printed a crash: $(head -c 800 err)"
    fi
    if [ "$rc" = 2 ]; then
        [ "$(wc -l <err)" = 1 ] && grep -q "^mhc: " err || fail "$label: mhc $*: exit 2 wants one line 'mhc: ...': $(cat err)"
    fi
    # Warnings are lines of their own, each said as one ("mhc: warning: ..." or "warning: ...").
    return 0
}
one_line() { [ "$(wc -l <err)" = 1 ] || fail "$1: wanted one line on stderr: $(cat err)"; }
says() { grep -qF -- "$1" "${3:-err}" || fail "$2: does not say '$1': $(head -c 800 "${3:-err}")"; }
# The JSON and property checks are kept (their files copied into chk/) and made by one Python at
# the end: a Python start costs a quarter of a second on a loaded machine, and there are hundreds.
mkdir chk
n=0
keep() { n=$((n + 1)); cp -r "$1" "chk/$n"; kept=chk/$n; }
json() { keep "$1"; printf 'json\t%s\t%s\n' "$2" "$kept" >>checks.tsv; }
# py CHECK ARGS...: CHECK (below) on ARGS, files among them kept as they are now.
py() {
    local line="$1"$'\t'"$label"
    shift
    for a in "$@"; do
        if [ -e "$a" ]; then keep "$a"; a=$kept; fi
        line+=$'\t'"$a"
    done
    printf '%s\n' "$line" >>checks.tsv
}
q() { sqlite3 "$1" "$2" || fail "sqlite3 $1: $2"; }

policies="lru largest belady dtr cost_aware"
traces=(
    kineto/tracelens-h100-falconsai-nsfw-image-detection.json.gz   # GPU 0 and the host; a warm block before recording
    kineto/tb-plugin-resnet50-worker0.1623143089861.pt.trace.json.gz  # GPU 2.6 GiB, host 55 MiB
    kineto/hta-alexnet-param-bench.json.gz                         # kernels, no allocations
    kineto/tracelens-mi300x-ddp-resnet18-no-pool-pid1.json.gz      # allocations on the host alone (the GPU's not recorded)
    chakra/param-resnet-et-1.0.1.json.gz                           # order only, GPU and host
    chakra/simple_add_et.json.gz                                   # order only, the host's peak 53x GPU 0's
    nsys/con_kernel.sqlite                                         # pinned host buffers as large as GPU 0's
    nsys/fuser-h200-nsys-2024.6.sqlite                             # kernels, no allocations
    torch-snapshot/cs336-silmont2000-memory.pickle                 # segments, exact timing
    torch-snapshot/flexgen-oom-snapshot.pickle                     # order only, segments
    torch-snapshot/verl-megatron-vllm-end-state.pickle.gz          # end state only: a warm start
    torch-snapshot/mosaic-synthetic.pickle                         # segments dropped
)
for src in "${traces[@]}"; do
    label=$(basename "$src")
    t=$label.db
    run 0 "$label" import "$pub/$src" -o "$t"
    # Import warnings are lines of their own.
    if [ -s err ] && grep -qv "^mhc: warning: " err; then fail "$label: import: stderr not warnings: $(cat err)"; fi
    run 0 "$label" check "$t"
    says "$t: ok" "$label: check" out
    run 0 "$label" info "$t"
    run 0 "$label" info --json "$t"
    json out "$label: info --json"
    cp out info.json
    order_only=0
    [ "$(q "$t" "SELECT value FROM meta WHERE key = 'timing'")" = order-only ] && order_only=1
    allocations=$(q "$t" "SELECT count(*) FROM allocations")

    if [ "$allocations" = 0 ]; then
        # A timeline: every command that needs allocations refuses it in one line, saying so.
        for cmd in "simulate --capacity unlimited --no-store" "simulate --capacity 50% --no-store" \
                   "sweep -j 2 --no-store" "validate --link pcie4 --repeat 1 --no-store"; do
            read -r -a words <<<"$cmd"
            run 2 "$label" "${words[0]}" "$t" "${words[@]:1}"
            says "no allocations" "$label: $cmd"
            if grep -q "use --device" err; then fail "$label: $cmd: tells to use --device on a trace without allocations: $(cat err)"; fi
        done
        run 0 "$label" export "$t" -o p.json
        json p.json "$label: export"
        run 0 "$label" export "$t" --format csv -o csv
        py counts info.json csv
        py timeline info.json
        rm -rf csv p.json
        continue
    fi

    # Allocations on the host alone (PYTORCH_NO_CUDA_MEMORY_CACHING=1: the profiler saw no GPU
    # allocation): the device simulated by default is the GPU that ran the kernels, refused in one
    # line that names the host as the device with allocations and offers --device -1; with it the
    # host's peak is info's headline peak, and a limit is simulated (or an OOM said).
    if [ "$(q "$t" "SELECT count(*) FROM allocations WHERE device >= 0")" = 0 ]; then
        for cmd in "simulate --capacity unlimited --no-store" "simulate --capacity 50% --no-store" "sweep -j 2 --no-store" \
                   "validate --link pcie4 --repeat 1 --no-store"; do
            read -r -a words <<<"$cmd"
            run 2 "$label" "${words[0]}" "$t" "${words[@]:1}"
            says "$t: no allocations on device " "$label: $cmd"
            says "the devices with allocations: -1 (the host) (--device -1)" "$label: $cmd"
        done
        run 0 "$label" simulate "$t" --device -1 --capacity unlimited --allocator ideal --no-store --json
        json out "$label: simulate --device -1 --json"
        cp out ideal.json
        run 0 "$label" simulate "$t" --device -1 --capacity unlimited --allocator ideal --no-store
        cp out ideal.txt
        says "(device -1)" "$label: simulate --device -1" out
        py unlimited info.json ideal.json ideal.txt
        for policy in $policies; do
            run "0 3" "$label" simulate "$t" --device -1 --capacity 50% --policy "$policy" --no-store --json
            json out "$label: simulate --device -1 50% $policy"
            py limited out "$rc"
            if [ "$rc" = 3 ]; then one_line "$label: 50% $policy OOM"; says "out of memory" "$label: OOM"; fi
        done
        continue
    fi

    # ---- unlimited capacity: the peak and device info gives; the device is said ----
    run 0 "$label" simulate "$t" --capacity unlimited --allocator ideal --no-store --json
    json out "$label: simulate --json"
    cp out ideal.json
    run 0 "$label" simulate "$t" --capacity unlimited --allocator ideal --no-store
    cp out ideal.txt
    py unlimited info.json ideal.json ideal.txt
    run 0 "$label" simulate "$t" --capacity unlimited --no-store --json
    json out "$label: simulate caching --json"

    # ---- 80% and 50% with each policy: finished within the capacity, or one OOM line and exit 3 ----
    for capacity in 80% 50%; do
        for policy in $policies; do
            run "0 3" "$label" simulate "$t" --capacity "$capacity" --policy "$policy" --no-store --json
            json out "$label: simulate $capacity $policy"
            py limited out "$rc"
            if [ "$rc" = 3 ]; then one_line "$label: $capacity $policy OOM"; says "out of memory" "$label: OOM"; fi
        done
    done
    # ---- below the largest allocation, and 1 byte: an OOM said once, exit 3 ----
    device=$(sed -n '1s/.*(device \(-\{0,1\}[0-9]*\)).*/\1/p' ideal.txt)
    [ -n "$device" ] || fail "$label: simulate does not say its device: $(head -1 ideal.txt)"
    largest=$(q "$t" "SELECT max(bytes) FROM allocations WHERE device = $device")
    for capacity in "$((largest - 1))B" 1B; do
        run 3 "$label" simulate "$t" --capacity "$capacity" --no-store --json
        json out "$label: simulate --capacity $capacity"
        py limited out 3
        one_line "$label: --capacity $capacity"
        run 3 "$label" simulate "$t" --capacity "$capacity" --no-store
        [ "$(grep -ci "out of memory" out)" = 1 ] || fail "$label: --capacity $capacity: the OOM not said once: $(cat out)"
    done
    # ---- --device: one without allocations is refused naming those that have them ----
    if [ "$(q "$t" "SELECT count(*) FROM allocations WHERE device = -1")" = 0 ]; then
        run 2 "$label" simulate "$t" --device -1 --capacity unlimited --no-store
        says "the devices with allocations: " "$label: --device -1"
        if grep -q "use --device)" err; then fail "$label: --device -1 told to use --device: $(cat err)"; fi
    else
        run 0 "$label" simulate "$t" --device -1 --capacity unlimited --no-store
        says "(device -1)" "$label: --device -1" out
    fi

    # ---- --ranks with one rank: the single run's figures, or order-only timing refused ----
    if [ "$order_only" = 1 ]; then
        run 2 "$label" simulate --ranks "$t" --capacity 80% --no-store
        says "order only" "$label: --ranks"
    else
        run 0 "$label" simulate "$t" --capacity unlimited --no-store --json
        cp out caching.json
        run 0 "$label" simulate --ranks "$t" --capacity unlimited --no-store --json
        json out "$label: --ranks --json"
        py coupled out caching.json
        run "0 3" "$label" simulate --ranks "$t" --capacity 50% --no-store
    fi

    # ---- sweep: stored runs belong to this trace; order-only timing prints no loss, no bisection ----
    cp "$t" sweep.db
    run 0 "$label" sweep sweep.db -j 2 --policies lru,belady --capacities 80%,50%
    # The device the grid simulates is said where the trace has several (simulate's, info's).
    if [ "$(q "$t" "SELECT count(DISTINCT device) FROM allocations")" -gt 1 ]; then
        says "device $device (the trace's devices with allocations: " "$label: sweep's device" out
    fi
    if [ "$order_only" = 1 ]; then
        says "no bisection" "$label: sweep" out
        # The table's loss and stall time: "-", not a share of event numbers. Columns widen to their
        # longest entry, so they are found from the row's end: swap-out and swap-in are two words
        # each (figure, unit), stall time and loss one word each when not a figure ("-", "OOM").
        if grep -E "^(lru|belady) " out | awk '$(NF-5) ~ /[0-9]/ || $(NF-4) ~ /[0-9]/ {bad = 1} END {exit !bad}'; then
            fail "$label: sweep prints a loss for order-only timing: $(cat out)"
        fi
        run 0 "$label" info sweep.db
        if grep -E "^ +[0-9]+ simulated" out | awk '{print $7}' | grep -q "%"; then
            fail "$label: info prints a stored run's loss for order-only timing: $(cat out)"
        fi
    fi
    stored=$(sqlite3 sweep.db "SELECT count(*) FROM runs")
    [ "$stored" -ge 4 ] || fail "$label: sweep stored $stored runs"
    run 0 "$label" check sweep.db
    run 0 "$label" info sweep.db
    says "runs        $stored stored" "$label: info after sweep" out

    # ---- a stored run, exported: the tables and the Perfetto counters hold the figures ----
    cp "$t" run.db
    run "0 3" "$label" simulate run.db --capacity 80% --json
    cp out run.json
    id=$(sqlite3 run.db "SELECT max(id) FROM runs")
    run 0 "$label" export run.db --format csv -o csv
    py csv info.json csv "$id" run.json
    run 0 "$label" export run.db --run "$id" -o p.json.gz
    gzip -dc p.json.gz >p.json || fail "$label: perfetto .json.gz is not gzip"
    py perfetto p.json info.json run.json
    # Exported for viewing, not a trace: re-importing it is refused in one line.
    run 2 "$label" import p.json.gz -o back.db
    [ ! -e back.db ] || fail "$label: a refused import left back.db"
    # An existing output without --force: refused before any work, the file left whole.
    sum=$(md5sum <p.json.gz)
    run 2 "$label" export run.db --run "$id" -o p.json.gz
    [ "$(md5sum <p.json.gz)" = "$sum" ] || fail "$label: a refused export changed its output"
    # Runs stored in a runs database belong to this trace: another trace's reading is refused.
    run "0 3" "$label" simulate "$t" --capacity 50% --runs-db runs.db
    run 0 "$label" info "$t" --runs-db runs.db
    says "runs        1 stored" "$label: info --runs-db" out
    if [ -n "${previous:-}" ]; then
        run 2 "$label" info "$previous" --runs-db runs.db
        says "runs.db" "$label: another trace's runs database"
    fi
    previous=$t
    rm -rf csv p.json p.json.gz run.db run.json sweep.db runs.db

    # ---- allocator: on segments, the recorded reserved peak is info's; else refused ----
    if [ "$(q "$t" "SELECT count(*) FROM segments")" != 0 ]; then
        run 0 "$label" allocator "$t" --json
        json out "$label: allocator --json"
        py allocator out info.json
        run 0 "$label" allocator "$t"
    else
        run 2 "$label" allocator "$t"
        says "no segments recorded" "$label: allocator"
    fi
    # ---- advise: a trace without modules is refused, saying what it needs ----
    run 2 "$label" advise "$t" --gpu h100-sxm
    says "no modules recorded" "$label: advise"
done

# ---- validate on a few (the host replay runs each configuration): JSON, and said limits ----
# An order-only trace: said in one warning line, the peaks compared.
run "0 3" "simple_add_et" validate simple_add_et.json.gz.db --link pcie4 --repeat 1 --no-store --json
json out "validate --json"
py validate out simple_add_et
says "timing is order only" "validate of an order-only trace"
run "0 3" "falconsai" validate tracelens-h100-falconsai-nsfw-image-detection.json.gz.db --capacity 90% --link pcie4 --repeat 1 --no-store --json
json out "validate --json (falconsai)"
# A replay whose page pool needs more memory than the host has (vLLM's 178 GiB decode capture):
# refused before it allocates, not ended by the kernel's OOM killer (SIGKILL, nothing said).
# Files of at most 512 MiB meanwhile: the page pool is a memfd, so without the check its
# allocation stops there (SIGXFSZ, exit 153) instead of taking the test machine's memory.
run 0 "vllm" import "$pub/kineto/tracelens-mi300x-vllm-decode-graph-capture.json.gz" -o vllm.db
(ulimit -f 1048576 && run 2 "vllm" validate vllm.db --link pcie4 --repeat 1 --no-store) || exit 1
says "of this host's memory" "validate beyond the host's memory"

# Nothing half-written: no temporary file left anywhere in the folder.
left=$(find . -name '*.tmp*' -o -name '*-journal' -o -name '.mhc-*' | head -5)
[ -z "$left" ] || fail "temporary files left: $left"

# The checks kept above, each a line of checks.tsv: CHECK LABEL ARGS... (files under chk/).
python3 - checks.tsv <<'PY' || fail "the checks above failed"
import collections, csv, json, sys

def load(p): return json.load(open(p))

def unlimited(info, sim, text):
    """simulate's unlimited peak and device are info's headline peak, and the device is said."""
    info, sim, text = load(info), load(sim), open(text).read()
    peak = info["peak"]
    assert sim["metrics"]["simulated_peak_bytes"] == peak["bytes"], (sim["metrics"]["simulated_peak_bytes"], peak)
    assert sim["device"] == peak["device"], (sim["device"], peak)
    assert sim["metrics"]["peak_reduction"] == 0 and sim["metrics"]["stalls"] == 0, sim["metrics"]
    assert f"(device {peak['device']})" in text.splitlines()[0], text.splitlines()[0]
    by_device = {m["device"]: m["peak_bytes"] for m in info["memory"]}
    assert by_device[peak["device"]] == peak["bytes"], (by_device, peak)
    # The headline is the largest GPU's (ties: the lowest); the host's only where no GPU allocates.
    gpus = {d: b for d, b in by_device.items() if d >= 0 and b > 0}
    if gpus:
        best = max(gpus.values())
        assert peak["device"] == min(d for d, b in gpus.items() if b == best), (peak, by_device)

def limited(sim, rc):
    """A finished run keeps within its capacity; an OOM run has no reduction and says what was short."""
    sim = load(sim)
    m = sim["metrics"]
    if rc == "0":
        assert not sim["oom"] and m["simulated_peak_bytes"] <= m["capacity_bytes"], m
    else:
        # bytes_short is 0 where the free bytes suffice (docs/simulator.md: "fragmentation"),
        # which includes a capacity below the one segment a request needs (2 MiB for 512 B).
        assert sim["oom"]["bytes_short"] >= 0 and m["peak_reduction"] is None, (sim["oom"], m)
        assert sim["oom"]["bytes_short"] > 0 or sim["oom"]["fragmentation"], sim["oom"]

def rows(folder, table): return list(csv.DictReader(open(f"{folder}/{table}.csv", newline="")))

def counts(info, folder):
    """The CSV tables have the trace's rows, and its meta."""
    info = load(info)
    for table in ("allocations", "kernels", "copies", "markers", "accesses"):
        n = len(rows(folder, table))
        assert n == info["counts"][table], (table, n, info["counts"])
    meta = {r["key"]: r["value"] for r in rows(folder, "meta")}
    for k, v in info["meta"].items(): assert meta.get(k) == v, (k, meta.get(k), v)
    if info["largest_allocations"]:
        assert max(int(r["bytes"]) for r in rows(folder, "allocations")) == info["largest_allocations"][0]["bytes"]

def run_csv(info, folder, run, sim):
    """...and the stored run's figures, those simulate printed."""
    counts(info, folder)
    sim = load(sim)
    metrics = {r["key"]: float(r["value"]) for r in rows(folder, "run_metrics") if r["run"] == run}
    for key in ("simulated_peak_bytes", "baseline_peak_bytes", "swap_in_bytes", "swap_out_bytes", "capacity_bytes"):
        if sim["metrics"].get(key) is not None:
            assert metrics[key] == sim["metrics"][key], (key, metrics.get(key), sim["metrics"][key])
    assert [r["id"] for r in rows(folder, "runs")] == [run], rows(folder, "runs")

def perfetto(p, info, sim):
    """Each device's live-bytes counter reaches info's peak; the run's counter its simulated peak."""
    p, info, sim = load(p), load(info), load(sim)
    names = {e["pid"]: e["args"]["name"] for e in p["traceEvents"] if e.get("ph") == "M" and e["name"] == "process_name"}
    live = collections.defaultdict(int)
    simulated = 0
    for e in p["traceEvents"]:
        if e.get("ph") != "C": continue
        if e["name"] == "live bytes": live[names[e["pid"]]] = max(live[names[e["pid"]]], e["args"]["bytes"])
        if e["name"] == "simulated device bytes": simulated = max(simulated, e["args"]["bytes"])
    for m in info["memory"]:
        name = "host" if m["device"] < 0 else f"GPU {m['device']}"
        got = [v for k, v in live.items() if k.lower().startswith(name.lower())]
        assert got == [m["peak_bytes"]], (name, dict(live), m)
    if not sim["oom"]:
        assert simulated == sim["metrics"]["simulated_peak_bytes"], (simulated, sim["metrics"]["simulated_peak_bytes"])

def allocator(a, info):
    """The allocator's recorded reserved peak is info's for that device."""
    a, info = load(a), load(info)
    mem = {m["device"]: m for m in info["memory"]}
    assert a["recorded"]["reserved_peak"] == mem[a["device"]]["reserved_peak_bytes"], (a["recorded"], mem)

def coupled(c, sim):
    """One rank at unlimited capacity is simulate's run of that trace."""
    c, sim = load(c), load(sim)
    assert len(c["ranks"]) == 1, c
    rank = c["ranks"][0]
    assert not rank["oom"] and rank["simulated_peak"] == sim["metrics"]["simulated_peak_bytes"], (rank, sim["metrics"])
    assert rank["simulated_makespan"] == sim["metrics"]["simulated_makespan_ns"], (rank, sim["metrics"])

def timeline(info):
    """A trace without allocations: no peak, and its lists are lists, empty."""
    info = load(info)
    assert info["peak"] is None, info["peak"]
    assert info["memory"] == [] and info["largest_allocations"] == [], info
    assert isinstance(info["top_kernels"], list) and info["counts"]["kernels"] > 0, info["counts"]

def validate(v, name):
    v = load(v)
    assert name in v["trace"], v["trace"]

checks = dict(unlimited=unlimited, limited=limited, counts=counts, csv=run_csv, perfetto=perfetto,
              allocator=allocator, coupled=coupled, validate=validate, timeline=timeline, json=lambda f: load(f))
failed = 0
done = collections.Counter()
for line in open(sys.argv[1]):
    what, label, *args = line.rstrip("\n").split("\t")
    try:
        checks[what](*args)
        done[what] += 1
    except Exception as e:
        failed += 1
        print(f"FAIL: {label}: {what} {' '.join(args)}: {type(e).__name__}: {str(e)[:600]}")
print("checks passed:", ", ".join(f"{k} {v}" for k, v in sorted(done.items())))
sys.exit(1 if failed else 0)
PY
echo "real traces: ${#traces[@]} traces end to end"
