# Replay validation on a GPU (issue 7). A bash fragment sourced by scripts/gpu-check.sh:
# builds nothing, uses build-gpu/cli/mhc, writes its figures under $OUT/validate.
# Budget: about 2-3 minutes on an H100/H200.
set -u
MHC=${MHC:-build-gpu/cli/mhc}
VOUT="$OUT/validate"
mkdir -p "$VOUT"
{
  echo "== calibrate (cuda)"
  "$MHC" calibrate --backend cuda --quick -o "$VOUT/gpu-link.json" || echo "calibrate failed: $?"
  for preset in llama2-7b mhc-27b; do
    trace="$VOUT/$preset.db"
    echo "== generate $preset (2 layers, 3 steps, dp 1)"
    "$MHC" generate --preset "$preset" --steps 3 --layers 2 --dp 1 --no-zero1 -o "$trace" || continue
    "$MHC" info "$trace" | head -8
    for alloc in caching ideal; do
      echo "== validate $preset --allocator $alloc (cuda backend, calibrated link)"
      timeout 240 "$MHC" validate "$trace" --backend cuda --allocator "$alloc" \
        --link "$VOUT/gpu-link.json" --policy lru --prefetch lookahead:8 \
        --capacity 80%,65%,50% --time-scale 1 || echo "validate exit $?"
    done
  done
  if [ -n "${RECORDED_TRACE:-}" ] && [ -f "$RECORDED_TRACE" ]; then
    echo "== validate the recorded trace $RECORDED_TRACE"
    cp "$RECORDED_TRACE" "$VOUT/recorded.db"
    timeout 120 "$MHC" validate "$VOUT/recorded.db" --backend cuda --allocator caching \
      --link "$VOUT/gpu-link.json" --capacity 80%,60% || echo "validate exit $?"
  fi
} 2>&1 | tee "$VOUT/validate.txt"
