#!/usr/bin/env bash
# Hangs and deaths through NcclComm (fluxtrain-ncclsim, parallel.comm = "nccl"; dp 2):
#   STOP  world rank 1 stops itself (SIGSTOP) on entering its 40th NCCL collective — the stand-in's
#         test hook FT_NCCLSIM_STOP, so the stop falls before an NCCL collective every time: rank
#         0 waits in it, aborts its communicator (ncclCommAbort) after the collective timeout and
#         the job ends with an error naming the collective, the group and rank 1 as never arrived;
#   ASYNC rank 1's 40th NCCL collective fails as a broken link does (the stand-in's
#         FT_NCCLSIM_ASYNC_ERROR: ncclCommGetAsyncError reports it, the operation never finishes):
#         rank 1 reports the asynchronous error naming the collective, long before the timeout;
#   KILL  rank 1 is killed mid-training: the job ends in bounded time.
# usage: nccl_hang_test.sh FLUXTRAIN_NCCLSIM CONFIG
set -euo pipefail
FT=$1; CFG=$2
WORK=$(mktemp -d); trap 'pkill -KILL -f "$WORK" 2>/dev/null || true; rm -rf "$WORK"' EXIT
TIMEOUT=5

start_job() {  # name [collective timeout]
  "$FT" train --config "$CFG" --nproc 2 --set parallel.dp=2 --set 'parallel.comm="nccl"' --set train.steps=100000 \
    --set train.eval_interval=0 --set parallel.collective_timeout_s=${2:-$TIMEOUT} --run-dir "$WORK/$1" > "$WORK/$1.log" 2>&1 &
  JOB=$!
}

wait_job() {  # name t0
  local rc=0
  timeout 120 tail --pid=$JOB -f /dev/null || rc=$?
  wait $JOB || true
  elapsed=$(echo "$(date +%s.%N) - $2" | bc)
  [ $rc -eq 0 ] || { echo "FAIL: $1: the job still runs after 120 s"; cat "$WORK/$1.log"; exit 1; }
  (( $(echo "$elapsed < $TIMEOUT + 40" | bc) )) || { echo "FAIL: $1 took ${elapsed}s"; exit 1; }
}

# STOP before a collective, through the stand-in's hook.
t0=$(date +%s.%N)
FT_NCCLSIM_STOP=1:40 start_job STOP
wait_job STOP "$t0"
line=$(grep -m1 "timed out" "$WORK/STOP.log" || true)
echo "SIGSTOP of rank 1 before its 40th NCCL collective: job ended after ${elapsed}s (collective timeout ${TIMEOUT}s)"
echo "$line"
echo "$line" | grep -q "over NCCL timed out" || { echo "FAIL: the timeout was not NcclComm's"; cat "$WORK/STOP.log"; exit 1; }
echo "$line" | grep -q "ranks holding it up: 1 (never arrived)" || { echo "FAIL: rank 1 not named as never arrived"; cat "$WORK/STOP.log"; exit 1; }

# An asynchronous NCCL error, with a collective timeout far beyond the bound checked.
t0=$(date +%s.%N)
FT_NCCLSIM_ASYNC_ERROR=1:40 start_job ASYNC 300
wait_job ASYNC "$t0"
line=$(grep -m1 "asynchronous error" "$WORK/ASYNC.log" || true)
echo "asynchronous error on rank 1's 40th NCCL collective: job ended after ${elapsed}s (collective timeout 300s)"
echo "$line"
echo "$line" | grep -q "rank 1: all_reduce #40 on group dp over NCCL: NCCL reported an asynchronous error" ||
  { echo "FAIL: the asynchronous error was not reported"; cat "$WORK/ASYNC.log"; exit 1; }

# KILL mid-training, from outside.
start_job KILL
for _ in $(seq 300); do
  [ -s "$WORK/KILL/metrics.jsonl" ] && [ "$(wc -l < "$WORK/KILL/metrics.jsonl")" -ge 3 ] && break
  sleep 0.2
done
pid=""
for p in $(pgrep -f "ncclsim train.*$WORK/KILL" || true); do
  if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then pid=$p; fi
done
[ -n "$pid" ] || { echo "FAIL: rank 1 not found"; cat "$WORK/KILL.log"; exit 1; }
t0=$(date +%s.%N)
kill -KILL "$pid"
wait_job KILL "$t0"
echo "SIGKILL of rank 1: job ended after ${elapsed}s"
echo "hang and death through NcclComm both stopped the job in bounded time"
