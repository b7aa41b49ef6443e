#!/usr/bin/env bash
# fluxtrain vs PyTorch training throughput on the same config, threads, batch and steps, in one run.
#
#   bench/train_vs_torch.sh CONFIG THREADS [PRECISION] [STEPS] [--set k=v ...]
#
# PyTorch (Debian's python3-torch 1.13, oneDNN for its matmuls and OpenBLAS) gets its best on
# this CPU: OPENBLAS_CORETYPE=SkylakeX (Debian's OpenBLAS otherwise runs a Prescott kernel) and
# OMP_WAIT_POLICY=PASSIVE. Both report the median tokens/s of the steps after the first, and the
# median tokens per CPU-second (process CPU time of the step, all threads): on a machine shared with
# other work the wall-clock rate swings with their load, the CPU-time rate much less.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FT=${FLUXTRAIN:-$ROOT/build/fluxtrain}
CONFIG=$1; THREADS=$2; PRECISION=${3:-fp32}; STEPS=${4:-6}; shift $(( $# < 4 ? $# : 4 ))
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
SETS=(--set train.threads=$THREADS --set train.precision=\"$PRECISION\" --set train.steps=$STEPS
      --set train.eval_interval=0 --set data.source=\"synthetic\" "$@")

"$FT" config --config "$CONFIG" "${SETS[@]}" > "$WORK/config.json"
export OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=PASSIVE OPENBLAS_CORETYPE=SkylakeX

"$FT" train --config "$CONFIG" "${SETS[@]}" --run-dir "$WORK/run" 2> "$WORK/ft.log" || { cat "$WORK/ft.log"; exit 1; }
ours=$(/usr/bin/python3 -c "
import json, statistics, sys
rows = [json.loads(l) for l in open('$WORK/run/metrics.jsonl')]
steady = rows[1:] if len(rows) > 1 else rows
tokens = rows[0]['tokens']
print(f\"{statistics.median(r['tokens_per_s'] for r in steady):.2f} {statistics.median(r['mfu'] for r in steady):.3f} \"
      f\"{tokens / statistics.median(r['cpu_s'] for r in steady):.2f}\")")
torch=$(/usr/bin/python3 "$ROOT/bench/torch_train.py" "$WORK/config.json" $THREADS $STEPS 2> "$WORK/torch.log") \
  || { cat "$WORK/torch.log"; exit 1; }
read -r ours_tps ours_mfu ours_cpu <<< "$ours"
read -r torch_tps torch_cpu <<< "$torch"
echo "config $(basename "$CONFIG") threads $THREADS precision $PRECISION steps $STEPS"
echo "fluxtrain: $ours_tps tok/s (mfu $ours_mfu), $ours_cpu tok per CPU-s"
echo "pytorch:   $torch_tps tok/s, $torch_cpu tok per CPU-s"
echo "ratio per CPU-second: $(/usr/bin/python3 -c "print(f'{$ours_cpu / $torch_cpu:.2f}')")"
echo "ratio fluxtrain/pytorch: $(/usr/bin/python3 -c "print(f'{$ours_tps / $torch_tps:.2f}')")"
