#!/usr/bin/env bash
# A rank that hangs (SIGSTOP) or dies (SIGKILL) mid-training: the other ranks stop within the
# configured collective timeout with an error naming the rank, never hang forever.
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

rank_pid() {  # pid of world rank $1 of the job writing into $WORK/$2
  for p in $(pgrep -f "fluxtrain train.*$WORK/$2" || true); do
    if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then echo $p; return; fi
  done
}

start_job() {  # name
  "$FT" train --config "$CFG" --nproc 2 --set parallel.dp=2 --set train.steps=100000 --set train.eval_interval=0 \
    --set train.threads=1 --set parallel.collective_timeout_s=$TIMEOUT --run-dir "$WORK/$1" > "$WORK/$1.log" 2>&1 &
  JOB=$!
  local deadline=$((SECONDS + 300))  # only a bound on a job that never starts
  while [ $SECONDS -lt $deadline ]; do
    [ -s "$WORK/$1/metrics.jsonl" ] && [ "$(wc -l < "$WORK/$1/metrics.jsonl")" -ge 3 ] && return
    kill -0 $JOB 2>/dev/null || break
    sleep 0.2
  done
  echo "FAIL: job $1 did not reach step 3"; cat "$WORK/$1.log"; exit 1
}

for sig in STOP KILL; do
  start_job $sig
  pid=$(rank_pid 1 $sig)
  [ -n "$pid" ] || { echo "FAIL: rank 1 not found"; exit 1; }
  t0=$(date +%s.%N)
  kill -$sig $pid
  rc=0; timeout 300 tail --pid=$JOB -f /dev/null || rc=$?
  wait $JOB || true
  t1=$(date +%s.%N)
  elapsed=$(echo "$t1 - $t0" | bc)
  [ $rc -eq 0 ] || { echo "FAIL: SIG$sig: the job still runs after 300 s"; exit 1; }
  echo "SIG$sig of rank 1: job ended after ${elapsed}s (collective timeout ${TIMEOUT}s)"
  if [ $sig = STOP ]; then
    grep -q "ranks holding it up: 1 " "$WORK/$sig.log" || { echo "FAIL: no error naming rank 1"; cat "$WORK/$sig.log"; exit 1; }
    grep -m1 "timed out" "$WORK/$sig.log"
  fi
  # That the timeout fired is the log line above; this bounds the rest (mpirun ending the job) on a
  # slow or loaded machine, not how fast it is.
  (( $(echo "$elapsed < $TIMEOUT + 120" | bc) )) || { echo "FAIL: took ${elapsed}s"; exit 1; }
done
echo "hang and death both stopped the job in bounded time"
