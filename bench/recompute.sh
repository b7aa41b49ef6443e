#!/usr/bin/env bash
# Activation recomputation: peak memory and step time of model.recompute = none, selective and full
# on one process, same model, batch and steps (issue 33, point 4).
#
#   bench/recompute.sh [CONFIG] [STEPS] [--set k=v ...]     # default configs/llama-125m.toml, 3 steps
#
# Reported per mode: the allocator's activation bytes and total peak (metrics.jsonl, last step),
# the planner's and the dry run's activation bytes for the same config (`plan --calibrate`,
# `train --dry-run --gpu cpu`), the process's peak RSS (/usr/bin/time -v), and the median step time
# of the steps after the first; ratios against none last.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FT=${FLUXTRAIN:-$ROOT/build/fluxtrain}
CONFIG=${1:-$ROOT/configs/llama-125m.toml}; STEPS=${2:-3}; shift $(( $# < 2 ? $# : 2 ))
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
SETS=(--set train.steps=$STEPS --set train.eval_interval=0 --set data.source=\"synthetic\" --set ckpt.interval=0
      --set metrics.tensorboard=false "$@")

echo "config $(basename "$CONFIG"), steps $STEPS, extra: ${*:-none}"
printf '%-10s %14s %14s %14s %14s %12s %10s\n' mode "act (alloc)" "act (planner)" "act (dry run)" "peak (alloc)" \
  "peak RSS" "step s"
for mode in none selective full; do
  dir="$WORK/$mode"
  /usr/bin/time -v -o "$WORK/$mode.time" "$FT" train --config "$CONFIG" "${SETS[@]}" \
    --set model.recompute=\"$mode\" --run-dir "$dir" > "$WORK/$mode.log" 2>&1 || { tail -20 "$WORK/$mode.log"; exit 1; }
  "$FT" plan --calibrate "$dir" --json > "$WORK/$mode.plan.json"
  "$FT" train --config "$CONFIG" "${SETS[@]}" --set model.recompute=\"$mode\" --dry-run --gpu cpu --json \
    --world-size 1 > "$WORK/$mode.dry.json"
  rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/$mode.time")
  /usr/bin/python3 - "$dir/metrics.jsonl" "$WORK/$mode.plan.json" "$WORK/$mode.dry.json" "$rss_kb" "$mode" \
    >> "$WORK/table" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"step_s"' in l]
plan = json.load(open(sys.argv[2]))["runs"][0]["memory"]["activations"]
dry = json.load(open(sys.argv[3]))["ranks"][0]["memory_bytes"]["activations"]
last = rows[-1]
steady = rows[1:] if len(rows) > 1 else rows
print(sys.argv[5], last["mem_activations_bytes"], plan["planner_bytes"], dry, last["mem_peak_bytes"],
      int(sys.argv[4]) * 1024, statistics.median(r["step_s"] for r in steady))
EOF
  tail -1 "$WORK/table" | awk '{printf "%-10s %11.1f MiB %11.1f MiB %11.1f MiB %11.1f MiB %8.1f MiB %10.2f\n",
    $1, $2 / 1048576, $3 / 1048576, $4 / 1048576, $5 / 1048576, $6 / 1048576, $7}'
done
awk 'NR == 1 {a = $2; p = $5; r = $6; t = $7}
     {printf "%-10s activations x%.3f, peak x%.3f, peak RSS x%.3f, step time x%.3f (vs none); planner/alloc %.4f, dry run/alloc %.4f\n",
      $1, $2 / a, $5 / p, $6 / r, $7 / t, $3 / $2, $4 / $2}' "$WORK/table"
