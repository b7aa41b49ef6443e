#!/usr/bin/env bash
# Tensor parallelism vs data parallelism on 2 ranks: tokens/s of parallel.tp = 2 against
# parallel.dp = 2 on the same model, global batch and steps, in one run (the peer is our own data
# parallelism: the same machine, kernels and transport, so the ratio isolates the layout).
#
#   bench/tp_vs_dp.sh [CONFIG] [STEPS] [--set k=v ...]      # default configs/llama-125m.toml, 4 steps
#
# Each rank runs 1 OpenMP thread (2 ranks on 2 cores). Reported: median tokens/s of the steps after
# the first, the time per step spent in communication, and tp's bytes per step; ratio tp/dp last.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FT=${FLUXTRAIN:-$ROOT/build/fluxtrain}
CONFIG=${1:-$ROOT/configs/llama-125m.toml}; STEPS=${2:-4}; shift $(( $# < 2 ? $# : 2 ))
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
SETS=(--set train.threads=1 --set train.steps=$STEPS --set train.eval_interval=0 --set data.source=\"synthetic\"
      --set train.seq_len=512 --set train.batch_size=4 --set metrics.enabled=false "$@")
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OPENBLAS_CORETYPE=SkylakeX

summary() {  # run dir -> "tok/s exposed_comm_s_per_step tp_bytes_per_step"
  # Exposed communication: tp collectives block the step (tp_*_s); dp gradient reductions overlap
  # backward, and what the step waited for them is comm_wait_s.
  /usr/bin/python3 -c "
import json, statistics
rows = [json.loads(l) for l in open('$1/metrics.jsonl')]
steady = rows[1:] if len(rows) > 1 else rows
med = lambda f: statistics.median(f(r) for r in steady)
tp_s = lambda r: sum(v for k, v in r.items() if k.startswith('tp_') and k.endswith('_s'))
tp_b = lambda r: sum(v for k, v in r.items() if k.startswith('tp_') and k.endswith('_bytes'))
print(f\"{med(lambda r: r['tokens_per_s']):.1f} {med(lambda r: tp_s(r) + r['comm_wait_s']):.3f} {med(tp_b):.0f}\")"
}

for layout in tp dp; do
  "$FT" train --config "$CONFIG" "${SETS[@]}" --set parallel.$layout=2 --run-dir "$WORK/$layout" --nproc 2 \
    > "$WORK/$layout.log" 2>&1 || { tail -20 "$WORK/$layout.log"; exit 1; }
done
read -r tp_tps tp_comm tp_bytes <<< "$(summary "$WORK/tp")"
read -r dp_tps dp_comm dp_bytes <<< "$(summary "$WORK/dp")"
echo "config $(basename "$CONFIG") seq 512 batch 4, 2 ranks x 1 thread, steps $STEPS"
echo "tp=2: $tp_tps tok/s (exposed communication ${tp_comm} s/step, tp bytes/step $tp_bytes)"
echo "dp=2: $dp_tps tok/s (exposed communication ${dp_comm} s/step)"
echo "ratio tp/dp tokens/s: $(/usr/bin/python3 -c "print(f'{$tp_tps / $dp_tps:.2f}')")"
