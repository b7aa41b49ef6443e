#!/usr/bin/env bash
# What context parallelism buys (issue 33, point 6): the longest sequence llama-20m trains at on 2
# ranks under a memory limit, with cp 1 (dp 2: each rank holds whole samples), cp 2 (each rank
# holds half of every sample) and cp 2 + model.recompute = "selective"; tokens/s at each; and, for
# the cp 2 runs, how much of the ring's communication the block compute hides (the trainer's
# "ring attention overlap" line, parallel/context_parallel/ring_attention.h).
#
#   bench/cp_longest_seq.sh [LIMIT_MIB_PER_RANK] [START_T]      # defaults: 768 MiB, T = 256
#   ONLY="cp2+selective" bench/cp_longest_seq.sh 640 2048       # one setting (cp1, cp2, cp2+selective)
#
# The limit is a memory cgroup holding the 2-rank launch (2 x LIMIT plus 64 MiB for the launcher):
# `systemd-run --scope -p MemoryMax=` where systemd runs, else a cgroup v2 directory, else a
# cgroup v1 memory directory under this shell's own cgroup (what works on the dev machine). Each
# setting trains 2 steps (batch 2, micro-batch 1, fp32, synthetic data, one thread per rank) at
# T = START_T, 2·START_T, ... until a run is OOM-killed, then bisects twice between the last T that
# fit and the first that did not (T a multiple of 64). tokens/s is the second step's. The trainer's
# own memory check (which reads the cgroup's limit) is off: the limit itself decides.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FT=${FLUXTRAIN:-$ROOT/build/fluxtrain}
LIMIT_MIB=${1:-768}; START_T=${2:-256}
WORK=$(mktemp -d); CG=""
cleanup() { [ -n "$CG" ] && [ -d "$CG" ] && rmdir "$CG" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
TOTAL=$(( (2 * LIMIT_MIB + 64) * 1024 * 1024 ))

# How to run a command under the limit: sets RUNNER (systemd) or CG (a cgroup directory we made).
RUNNER=()
if systemd-run --scope -q -p MemoryMax=$TOTAL true > /dev/null 2>&1; then
  RUNNER=(systemd-run --scope -q -p MemoryMax=$TOTAL -p MemorySwapMax=0)
elif [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  CG=/sys/fs/cgroup$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)/ft_cp_bench_$$
  mkdir "$CG" && echo $TOTAL > "$CG/memory.max" && echo 0 > "$CG/memory.swap.max" 2>/dev/null || true
else
  own=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
  CG=/sys/fs/cgroup/memory$own/ft_cp_bench_$$
  mkdir "$CG" && echo $TOTAL > "$CG/memory.limit_in_bytes"
fi
oom_kills() {  # OOM kills in our cgroup so far (systemd: the launch's exit status tells)
  if [ -z "$CG" ]; then echo 0
  elif [ -f "$CG/memory.events" ]; then awk '$1 == "oom_kill" {print $2}' "$CG/memory.events"
  else awk '$1 == "oom_kill" {print $2}' "$CG/memory.oom_control"; fi
}
limited() {  # runs "$@" inside the limit
  if [ -n "$CG" ]; then (echo $BASHPID > "$CG/cgroup.procs" && exec "$@"); else "${RUNNER[@]}" "$@"; fi
}

# try NAME T SETS...: 0 when the run fits (prints tokens/s), 1 when it was OOM-killed.
try() {
  local name=$1 T=$2; shift 2
  local dir="$WORK/$name-$T" before; before=$(oom_kills)
  if limited "$FT" train --config "$ROOT/configs/llama-20m.toml" --run-dir "$dir" --nproc 2 \
      --set train.steps=2 --set train.eval_interval=0 --set train.batch_size=2 --set train.micro_batch_size=1 \
      --set train.seq_len=$T --set model.max_seq_len=$T --set train.threads=1 --set data.source=\"synthetic\" \
      --set ckpt.interval=0 --set metrics.tensorboard=false --set train.memory_check=false "$@" > "$WORK/$name-$T.log" 2>&1; then
    tps=$(/usr/bin/python3 -c 'import json,sys; print(round([json.loads(l) for l in open(sys.argv[1]) if "\"step_s\"" in l][-1]["tokens_per_s"]))' "$dir/metrics.jsonl")
    ring=$(grep -o 'hidden share of the overlapped transfers [0-9.na]*' "$WORK/$name-$T.log" | awk '{print $NF}' || true)
    wait=$(grep -o 'waited [0-9.]* s after' "$WORK/$name-$T.log" | awk '{print $2}' || true)
    hops=$(grep -o 'took [0-9.]* s ([0-9.]* ms each)' "$WORK/$name-$T.log" | awk '{print $2}' || true)
    printf '  %-14s T %6d fits     %8s tokens/s%s\n' "$name" "$T" "$tps" \
      "${ring:+   ring: wait ${wait} s, dk/dv hops ${hops} s, hidden share ${ring}}"
    echo "$name $T $tps ${ring:-}" >> "$WORK/fits"
    rm -rf "$dir"
    return 0
  fi
  if [ "$(oom_kills)" != "$before" ] || grep -qiE 'killed|signal 9|out of memory|bad_alloc' "$WORK/$name-$T.log"; then
    printf '  %-14s T %6d OOM\n' "$name" "$T"
    rm -rf "$dir"
    return 1
  fi
  echo "$name at T = $T failed for another reason than memory:"; tail -20 "$WORK/$name-$T.log"; exit 1
}

search() {  # search NAME SETS...: prints the longest T that fits
  local name=$1; shift
  [ -z "${ONLY:-}" ] || [ "$ONLY" = "$name" ] || return 0
  local ok=0 bad=0 T=$START_T
  while try "$name" $T "$@"; do ok=$T; T=$((T * 2)); done
  bad=$T
  [ $ok -gt 0 ] || { echo "  $name: even T = $START_T does not fit"; return; }
  for _ in 1 2; do
    local mid=$(( (ok + bad) / 2 / 64 * 64 ))
    [ $mid -gt $ok ] && [ $mid -lt $bad ] || break
    if try "$name" $mid "$@"; then ok=$mid; else bad=$mid; fi
  done
  echo "$name $ok $bad" >> "$WORK/longest"
}

echo "llama-20m on 2 ranks, memory limit ${LIMIT_MIB} MiB per rank (cgroup: ${CG:-systemd scope} holding the launch," \
  "$((TOTAL / 1048576)) MiB); $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
search cp1 --set parallel.dp=2 --set parallel.cp=1
search cp2 --set parallel.dp=1 --set parallel.cp=2
search cp2+selective --set parallel.dp=1 --set parallel.cp=2 --set model.recompute=\"selective\"
echo
printf '%-16s %12s %14s %14s\n' layout "longest T" "first OOM T" "tokens/s there"
while read -r name ok bad; do
  tps=$(awk -v n="$name" -v t="$ok" '$1 == n && $2 == t {print $3}' "$WORK/fits")
  printf '%-16s %12d %14d %14s\n' "$name" "$ok" "$bad" "$tps"
done < <(cat "$WORK/longest" 2>/dev/null)
