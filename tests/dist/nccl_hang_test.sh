#!/usr/bin/env bash
# Hangs and deaths through NcclComm on device buffers (fluxtrain-devemu-nccl: the host-emulated GPU
# with NcclComm over the host stand-in of CUDA and NCCL, tests/ncclemu; train.device = "cuda",
# parallel.comm = "nccl"; dp 2). Every case but KILL must end the job with exit code 3 (a
# communication failure: the supervisor restarts).
#   INIT   world rank 1 stops itself (SIGSTOP) on entering its 2nd NCCL initialisation (the dp
#          group's; the 1st is its size-1 tp group's) — the stand-in's hook FT_NCCLSIM_STOP_INIT:
#          rank 0's nonblocking ncclCommInitRankConfig is polled until the collective timeout, then
#          aborted, naming the group and rank 1 as never arrived;
#   HOST   rank 1 stops before its 1st NCCL collective (FT_NCCLSIM_STOP), the initial weights'
#          broadcast, which rank 0 waits for on the host (Work::wait);
#   STOP   rank 1 stops before its 40th collective, a gradient bucket's all-reduce, which rank 0's
#          engine only stream-waits: on the emulated GPU the training thread then blocks in the
#          compute stream's wait (as a GPU's compute stream would stall), and only NcclComm's watchdog
#          can end it — it aborts the communicator after the collective timeout and the job ends with
#          an error naming the collective, the group and rank 1 as never arrived;
#   ASYNC  rank 1's 40th NCCL collective fails as a broken link does (the stand-in's
#          FT_NCCLSIM_ASYNC_ERROR: ncclCommGetAsyncError reports it, the operation never finishes):
#          rank 1 reports the asynchronous error naming the collective, long before the timeout;
#   KILL   rank 1 is killed mid-training: the job ends in bounded time.
# usage: nccl_hang_test.sh FLUXTRAIN_DEVEMU_NCCL CONFIG
set -euo pipefail
FT=$1; CFG=$2
WORK=$(mktemp -d); trap 'pkill -KILL -f "$WORK" 2>/dev/null || true; rm -rf "$WORK"' EXIT
TIMEOUT=5
# Every wait for a peer, the healthy ones too, is bounded by the 5 s collective timeout. A run's
# first one waits while rank 0 measures this machine's GEMM peak (backends/cpu/peak.h: a few GEMMs,
# seconds on a slow CPU, once per machine and thread count): one single-process step at the
# ranks' thread count records it first, as tests/fault/fault_injection_test.py's warm_peak does.
"$FT" train --config "$CFG" --set train.steps=1 --set train.threads=1 --set train.eval_interval=0 \
  --run-dir "$WORK/peak" > "$WORK/peak.log" 2>&1 || { echo "FAIL: the single-process step failed"; cat "$WORK/peak.log"; exit 1; }

start_job() {  # name [collective timeout]
  "$FT" train --config "$CFG" --nproc 2 --set parallel.dp=2 --set 'train.device="cuda"' --set 'parallel.comm="nccl"' \
    --set train.steps=100000 \
    --set train.eval_interval=0 --set train.threads=1 --set parallel.collective_timeout_s=${2:-$TIMEOUT} \
    --run-dir "$WORK/$1" > "$WORK/$1.log" 2>&1 &
  JOB=$!
}

# The job must end within 300 s (a hang bound). That a timeout fired, or an asynchronous error was
# seen, is the job's log line (expect_line); the elapsed time (from before the job started: it
# includes mpirun's start-up, which a slow or loaded machine may stretch) is only bounded loosely.
wait_job() {  # name t0; sets elapsed and JOB_RC (the job's exit code)
  local rc=0
  timeout 300 tail --pid=$JOB -f /dev/null || rc=$?
  JOB_RC=0
  wait $JOB || JOB_RC=$?
  elapsed=$(echo "$(date +%s.%N) - $2" | bc)
  [ $rc -eq 0 ] || { echo "FAIL: $1: the job still runs after 300 s"; cat "$WORK/$1.log"; exit 1; }
  (( $(echo "$elapsed < $TIMEOUT + 120" | bc) )) || { echo "FAIL: $1 took ${elapsed}s"; exit 1; }
}

expect_line() {  # name pattern: the job's exit code is 3 and its log has a line matching pattern
  line=$(grep -m1 -E "$2" "$WORK/$1.log" || true)
  echo "$line"
  [ -n "$line" ] || { echo "FAIL: $1: no line matching '$2'"; cat "$WORK/$1.log"; exit 1; }
  [ "$JOB_RC" -eq 3 ] || { echo "FAIL: $1: exit code $JOB_RC, expected 3"; cat "$WORK/$1.log"; exit 1; }
}

# INIT: a rank that never reaches the dp group's NCCL initialisation.
t0=$(date +%s.%N)
FT_NCCLSIM_STOP_INIT=1:2 start_job INIT
wait_job INIT "$t0"
echo "SIGSTOP of rank 1 before the dp group's NCCL initialisation: job ended after ${elapsed}s (exit code $JOB_RC)"
expect_line INIT "rank 0: ncclCommInitRankConfig on group dp \(world ranks 0..1\) over NCCL timed out after ${TIMEOUT} s; ranks holding it up: 1 \(never arrived\)"

# HOST and STOP before a collective, through the stand-in's hook.
for c in HOST:1:broadcast STOP:40:all_reduce; do
  IFS=: read -r name k kind <<< "$c"
  t0=$(date +%s.%N)
  FT_NCCLSIM_STOP=1:$k start_job "$name"
  wait_job "$name" "$t0"
  echo "$name: SIGSTOP of rank 1 before its NCCL collective #$k: job ended after ${elapsed}s (collective timeout ${TIMEOUT}s, exit code $JOB_RC)"
  expect_line "$name" "rank 0: $kind #$k on group dp \(world ranks 0..1\) over NCCL timed out after ${TIMEOUT} s; ranks holding it up: 1 \(never arrived\)"
done

# An asynchronous NCCL error, with a collective timeout far beyond every bound checked.
t0=$(date +%s.%N)
FT_NCCLSIM_ASYNC_ERROR=1:40 start_job ASYNC 3600
wait_job ASYNC "$t0"
echo "asynchronous error on rank 1's 40th NCCL collective: job ended after ${elapsed}s (collective timeout 3600s, exit code $JOB_RC)"
expect_line ASYNC "rank 1: all_reduce #40 on group dp over NCCL: NCCL reported an asynchronous error"

# KILL mid-training, from outside.
start_job KILL
deadline=$((SECONDS + 300))  # only a bound on a job that never starts
until [ -s "$WORK/KILL/metrics.jsonl" ] && [ "$(wc -l < "$WORK/KILL/metrics.jsonl")" -ge 3 ]; do
  [ $SECONDS -lt $deadline ] && kill -0 $JOB 2>/dev/null || { echo "FAIL: KILL: the job did not reach step 3"; cat "$WORK/KILL.log"; exit 1; }
  sleep 0.2
done
pid=""
for p in $(pgrep -f "$(basename "$FT") train.*$WORK/KILL" || true); do
  if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then pid=$p; fi
done
[ -n "$pid" ] || { echo "FAIL: rank 1 not found"; cat "$WORK/KILL.log"; exit 1; }
t0=$(date +%s.%N)
kill -KILL "$pid"
wait_job KILL "$t0"
echo "SIGKILL of rank 1: job ended after ${elapsed}s"
echo "hangs (initialisation, host-waited, stream-waited), an asynchronous error and a death through NcclComm all stopped the job in bounded time"
