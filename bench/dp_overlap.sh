#!/usr/bin/env bash
# Data parallelism on this machine, in one run:
#   (b) the fraction of gradient all-reduce time hidden behind backward at dp=2 (ZeRO 0,
#       bucketed all-reduce on the communicator's own thread): 1 - comm_wait_s / comm_all_reduce_s,
#       where comm_all_reduce_s is the time the collectives took on the comm thread and
#       comm_wait_s the time the training thread then still waited for them;
#   (c) tokens/s of dp=2 ranks x 1 thread against 1 rank x 2 threads, same global batch.
#   (b') the same share through NcclComm (parallel.comm = "nccl") on the host-emulated GPU's device
#       buffers with the host stand-in of CUDA and NCCL (build/fluxtrain-devemu-nccl, train.device =
#       "cuda"; skipped when it is not built): comm_all_reduce_s is the time between the timing
#       events around each all-reduce on the communication stream, comm_wait_s the time the compute
#       stream stalled on them (StreamTimer). The stand-in's streams are host threads and its
#       collectives MPI: this measures our host logic's overlap, not a GPU's.
#
#   bench/dp_overlap.sh [CONFIG] [STEPS] [--set k=v ...]      (default configs/llama-125m.toml, 6)
#
# Medians over the steps after the first. The 2-core machine runs 2 ranks + their comm threads,
# so (b) is a lower bound of what dedicated network hardware would hide.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FT=${FLUXTRAIN:-$ROOT/build/fluxtrain}
FT_NCCLSIM=${FLUXTRAIN_DEVEMU_NCCL:-$ROOT/build/fluxtrain-devemu-nccl}
CONFIG=${1:-$ROOT/configs/llama-125m.toml}; STEPS=${2:-6}; shift $(( $# < 2 ? $# : 2 ))
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
SETS=(--set train.steps=$STEPS --set train.eval_interval=0 --set data.source=\"synthetic\"
      --set parallel.zero=0 "$@")
export OMP_WAIT_POLICY=PASSIVE

OMP_NUM_THREADS=1 "$FT" train --config "$CONFIG" "${SETS[@]}" --set train.threads=1 --set parallel.dp=2 --nproc 2 \
  --run-dir "$WORK/dp2" 2> "$WORK/dp2.log" || { cat "$WORK/dp2.log"; exit 1; }
OMP_NUM_THREADS=2 "$FT" train --config "$CONFIG" "${SETS[@]}" --set train.threads=2 \
  --run-dir "$WORK/t2" 2> "$WORK/t2.log" || { cat "$WORK/t2.log"; exit 1; }
if [ -x "$FT_NCCLSIM" ]; then
  OMP_NUM_THREADS=1 "$FT_NCCLSIM" train --config "$CONFIG" "${SETS[@]}" --set train.threads=1 --set parallel.dp=2 \
    --set 'train.device="cuda"' --set 'parallel.comm="nccl"' --nproc 2 --run-dir "$WORK/nccl" 2> "$WORK/nccl.log" || { cat "$WORK/nccl.log"; exit 1; }
fi

/usr/bin/python3 - "$WORK" <<'EOF'
import json, os, statistics, sys
work = sys.argv[1]
def rows(run):
    r = [json.loads(l) for l in open(f"{work}/{run}/metrics.jsonl")]
    return r[1:] if len(r) > 1 else r
def med(rs, k):
    return statistics.median(r.get(k, 0) for r in rs)
dp2, t2 = rows("dp2"), rows("t2")
comm, wait, step = med(dp2, "comm_all_reduce_s"), med(dp2, "comm_wait_s"), med(dp2, "step_s")
grad_mb = med(dp2, "comm_all_reduce_bytes") / 2**20
tps_dp2, tps_t2 = med(dp2, "tokens_per_s"), med(t2, "tokens_per_s")
print(f"dp=2 x 1 thread: step {step:.2f} s, all-reduce {comm:.3f} s on the comm thread "
      f"({grad_mb:.0f} MiB sent per rank), training thread waited {wait:.3f} s")
print(f"(b) hidden fraction of gradient communication: {1 - wait / comm:.1%}")
if os.path.exists(f"{work}/nccl/metrics.jsonl"):
    nc = rows("nccl")
    ncomm, nwait, nstep = med(nc, "comm_all_reduce_s"), med(nc, "comm_wait_s"), med(nc, "step_s")
    print(f"NcclComm on the host stand-in, dp=2: step {nstep:.2f} s, all-reduce {ncomm:.3f} s on the "
          f"communication stream ({med(nc, 'comm_all_reduce_bytes') / 2**20:.0f} MiB sent per rank), "
          f"compute stream stalled {nwait:.3f} s")
    print(f"(b') hidden fraction, NCCL (stand-in: our host logic, not a GPU): {1 - nwait / ncomm:.1%}   "
          f"MPI: {1 - wait / comm:.1%}")
print(f"(c) tokens/s dp=2 x 1 thread: {tps_dp2:.1f}   1 rank x 2 threads: {tps_t2:.1f}")
print(f"ratio dp2x1 / 1x2: {tps_dp2 / tps_t2:.2f}")
EOF
