#!/usr/bin/env bash
# GPU check of the CUPTI recorder (issue 6, docs/recording.md). Records a few steps of a
# small GPT-like PyTorch training loop with `mhc record --torch`, runs `mhc check` and
# `mhc info` on the trace, compares with a run on PyTorch's own caching allocator (no
# --torch), and measures the step-time overhead of recording with and without access
# inference. Writes traces and $OUT/record-results.txt.
#
# Use: source it and call mhc_gpu_record (what scripts/gpu-check.sh does), or run it:
#   OUT=out MHC=build/cli/mhc scripts/gpu/record.sh
# Env: OUT (results folder), MHC (the mhc binary), PYTHON (python with torch),
#      MHC_RECORD_STEPS (training steps per run, default 30).

mhc_gpu_record() {
    local out=${OUT:?OUT must name the results folder}
    local mhc=${MHC:-build/cli/mhc}
    local py=${PYTHON:-python3}
    local steps=${MHC_RECORD_STEPS:-30}
    local res="$out/record-results.txt"
    mkdir -p "$out"
    : >"$res"
    log() { echo "$*" | tee -a "$res"; }

    if ! "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
        log "record: SKIPPED (no PyTorch with CUDA in $py)"
        return 0
    fi
    if [[ ! -x $mhc ]]; then
        log "record: SKIPPED ($mhc not built)"
        return 0
    fi

    local train="$out/record_train.py"
    cat >"$train" <<'PY'
# A small GPT-like model trained for a few steps; prints one JSON line with step times.
import json, sys, time
import torch
import torch.nn as nn

steps = int(sys.argv[1])
torch.manual_seed(0)
dev = "cuda"
V, D, H, L, T, B = 8192, 512, 8, 4, 256, 16

class Block(nn.Module):
    def __init__(self, i):
        super().__init__()
        self.i = i
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, H, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))
    def forward(self, x, mask):
        torch.cuda.nvtx.range_push(f"layer {self.i}")
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        x = x + self.mlp(self.ln2(x))
        torch.cuda.nvtx.range_pop()
        return x

class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.pos = nn.Parameter(torch.zeros(T, D))
        self.blocks = nn.ModuleList(Block(i) for i in range(L))
        self.head = nn.Linear(D, V)
    def forward(self, idx):
        mask = torch.triu(torch.full((T, T), float("-inf"), device=idx.device), 1)
        x = self.emb(idx) + self.pos
        for b in self.blocks:
            x = b(x, mask)
        return self.head(x)

model = GPT().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
data = torch.randint(0, V, (B, T + 1), device=dev)
times = []
for s in range(steps):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    torch.cuda.nvtx.range_push(f"step {s}")
    logits = model(data[:, :-1])
    loss = nn.functional.cross_entropy(logits.reshape(-1, V), data[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t0)
print(json.dumps({"step_s": times, "loss": float(loss),
                  "alloc_conf": __import__("os").environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                  "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}))
PY

    # Median step time after 5 warm-up steps, in ms.
    step_ms() {
        "$py" - "$1" <<'PY'
import json, statistics, sys
line = [l for l in open(sys.argv[1]) if l.startswith("{")][-1]
t = json.loads(line)["step_s"][5:]
print(f"{statistics.median(t) * 1e3:.3f}")
PY
    }
    run() {   # run NAME CMD...: stdout JSON to $out/NAME.json, stderr to NAME.log
        local name=$1; shift
        local t0=$SECONDS
        "$@" >"$out/$name.json" 2>"$out/$name.log"
        local rc=$?
        echo "  $name: exit $rc, $((SECONDS - t0)) s wall" >>"$res"
        return $rc
    }

    log "== record: GPT-like training loop, $steps steps ($(date -u +%FT%TZ))"
    log "mhc: $mhc"
    # Baselines: the same allocator backend as --torch, so that the difference is recording.
    PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync run base_async "$py" "$train" "$steps"
    run base_native "$py" "$train" "$steps"
    run rec_torch "$mhc" record -o "$out/record-torch.db" --torch -- "$py" "$train" "$steps"
    run rec_torch_noacc "$mhc" record -o "$out/record-torch-noacc.db" --torch --no-accesses -- "$py" "$train" "$steps"
    run rec_native "$mhc" record -o "$out/record-native.db" -- "$py" "$train" "$steps"
    # A second baseline after the recordings: step-time drift between runs bounds what an
    # overhead figure below can mean.
    PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync run base_async2 "$py" "$train" "$steps"

    local b1 b2 r1 r2 bn rn
    b1=$(step_ms "$out/base_async.json" 2>/dev/null)
    b2=$(step_ms "$out/base_async2.json" 2>/dev/null)
    bn=$(step_ms "$out/base_native.json" 2>/dev/null)
    r1=$(step_ms "$out/rec_torch.json" 2>/dev/null)
    r2=$(step_ms "$out/rec_torch_noacc.json" 2>/dev/null)
    rn=$(step_ms "$out/rec_native.json" 2>/dev/null)
    log "median step time (ms, steps 5..$((steps - 1))):"
    log "  baseline cudaMallocAsync      ${b1:-n/a}  (again after the recordings: ${b2:-n/a})"
    log "  baseline native allocator     ${bn:-n/a}"
    log "  record --torch                ${r1:-n/a}"
    log "  record --torch --no-accesses  ${r2:-n/a}"
    log "  record (native allocator)     ${rn:-n/a}"
    if [[ -n $b1 && -n $b2 && -n $r1 && -n $r2 ]]; then
        "$py" - "$b1" "$b2" "$r1" "$r2" "${bn:-0}" "${rn:-0}" <<'PY' | tee -a "$res"
import sys
b1, b2, r1, r2, bn, rn = map(float, sys.argv[1:])
base = (b1 + b2) / 2
print(f"overhead vs mean cudaMallocAsync baseline {base:.3f} ms:")
print(f"  kernels + memory + accesses: {100 * (r1 / base - 1):+.2f}%")
print(f"  kernels + memory only:       {100 * (r2 / base - 1):+.2f}%")
print(f"  access inference alone:      {100 * (r1 - r2) / base:+.2f}% of a step")
print(f"  baseline drift between runs: {100 * abs(b2 - b1) / base:.2f}%")
if bn > 0 and rn > 0:
    print(f"  native allocator, all on:    {100 * (rn / bn - 1):+.2f}%")
PY
    fi

    for db in record-torch record-torch-noacc record-native; do
        local f="$out/$db.db"
        log "-- $db.db"
        if [[ ! -f $f ]]; then
            log "  MISSING (see $out/rec_*.log)"
            continue
        fi
        log "  size $(du -h "$f" | cut -f1)"
        "$mhc" check "$f" >>"$res" 2>&1
        log "  mhc check: exit $?"
        "$mhc" info "$f" >>"$res" 2>&1
        # Tensor-level or segment-level? Allocation count and size spread, labels, meta.
        "$py" - "$f" <<'PY' >>"$res" 2>&1
import sqlite3, statistics, sys
c = sqlite3.connect(sys.argv[1])
sizes = [r[0] for r in c.execute("SELECT bytes FROM allocations")]
if sizes:
    print(f"  allocations {len(sizes)}, median {statistics.median(sizes):.0f} B, max {max(sizes)} B")
for label, n in c.execute("SELECT s.text, count(*) FROM allocations a JOIN strings s ON s.id = a.label GROUP BY 1 ORDER BY 2 DESC"):
    print(f"    {label}: {n}")
n_acc = c.execute("SELECT count(*) FROM accesses").fetchone()[0]
n_k = c.execute("SELECT count(*) FROM kernels").fetchone()[0]
n_ks = c.execute("SELECT count(*) FROM kernels WHERE step >= 0").fetchone()[0]
print(f"  kernels {n_k} ({n_ks} with a step), accesses {n_acc}")
for k, n in c.execute("SELECT kind, count(*) FROM markers GROUP BY 1"):
    print(f"    marker kind {k}: {n}")
for k, v in c.execute("SELECT key, value FROM meta WHERE key LIKE 'record.%' OR key IN ('complete','dropped_records','cupti_overhead_ns','cupti_overhead_records','device_name','driver_cuda_version')"):
    print(f"    {k} = {v}")
PY
    done
    log "record: done; traces and logs in $out"
}

# Run directly (not sourced).
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    set -u
    OUT=${OUT:-out} mhc_gpu_record
fi
