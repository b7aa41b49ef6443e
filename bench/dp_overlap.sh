#!/usr/bin/env bash
# Data parallelism on this machine, in one run:
#   (b) the fraction of gradient all-reduce time hidden behind backward at dp=2 (ZeRO 0,
#       bucketed all-reduce on the communicator's own thread): 1 - comm_wait_s / comm_all_reduce_s,
#       where comm_all_reduce_s is the time the collectives took on the comm thread and
#       comm_wait_s the time the training thread then still waited for them;
#   (c) tokens/s of dp=2 ranks x 1 thread against 1 rank x 2 threads, same global batch.
#
#   bench/dp_overlap.sh [CONFIG] [STEPS] [--set k=v ...]      (default configs/llama-125m.toml, 6)
#
# Medians over the steps after the first. The 2-core machine runs 2 ranks + their comm threads,
# so (b) is a lower bound of what dedicated network hardware would hide.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FT=${FLUXTRAIN:-$ROOT/build/fluxtrain}
CONFIG=${1:-$ROOT/configs/llama-125m.toml}; STEPS=${2:-6}; shift $(( $# < 2 ? $# : 2 ))
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
SETS=(--set train.steps=$STEPS --set train.eval_interval=0 --set data.source=\"synthetic\"
      --set parallel.zero=0 "$@")
export OMP_WAIT_POLICY=PASSIVE

OMP_NUM_THREADS=1 "$FT" train --config "$CONFIG" "${SETS[@]}" --set train.threads=1 --set parallel.dp=2 --nproc 2 \
  --run-dir "$WORK/dp2" 2> "$WORK/dp2.log" || { cat "$WORK/dp2.log"; exit 1; }
OMP_NUM_THREADS=2 "$FT" train --config "$CONFIG" "${SETS[@]}" --set train.threads=2 \
  --run-dir "$WORK/t2" 2> "$WORK/t2.log" || { cat "$WORK/t2.log"; exit 1; }

/usr/bin/python3 - "$WORK" <<'EOF'
import json, statistics, sys
work = sys.argv[1]
def rows(run):
    r = [json.loads(l) for l in open(f"{work}/{run}/metrics.jsonl")]
    return r[1:] if len(r) > 1 else r
dp2, t2 = rows("dp2"), rows("t2")
comm = statistics.median(r["comm_all_reduce_s"] for r in dp2)
wait = statistics.median(r["comm_wait_s"] for r in dp2)
step = statistics.median(r["step_s"] for r in dp2)
grad_mb = statistics.median(r["comm_all_reduce_bytes"] for r in dp2) / 2**20
tps_dp2 = statistics.median(r["tokens_per_s"] for r in dp2)
tps_t2 = statistics.median(r["tokens_per_s"] for r in t2)
print(f"dp=2 x 1 thread: step {step:.2f} s, all-reduce {comm:.3f} s on the comm thread "
      f"({grad_mb:.0f} MiB sent per rank), training thread waited {wait:.3f} s")
print(f"(b) hidden fraction of gradient communication: {1 - wait / comm:.1%}")
print(f"(c) tokens/s dp=2 x 1 thread: {tps_dp2:.1f}   1 rank x 2 threads: {tps_t2:.1f}")
print(f"ratio dp2x1 / 1x2: {tps_dp2 / tps_t2:.2f}")
EOF
