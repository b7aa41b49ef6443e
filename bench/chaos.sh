#!/usr/bin/env bash
# The long chaos run (issue 34): tests/chaos/chaos_test.py with at least 50 faults over 3,000 steps —
# 4 netns hosts, dp 2 x tp 2, ZeRO 1, asynchronous checkpoints every 10 steps; the seeded schedule of
# kills, hangs, lost hosts, drains, a killed supervisor, corrupted checkpoints, a full checkpoint
# disk, NaNs, a loss spike and CPU-capped hosts; judged bitwise against an uninterrupted run. Prints
# the recovery table (median and max by kind against the case study's 90 s). Root; about an hour
# on an idle 2-core machine.
#
#   bench/chaos.sh [STEPS] [FAULTS] [SEED] [WORK]        # default 3000 50 1 /var/tmp/ft_chaos_bench
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
STEPS="${1:-3000}"
FAULTS="${2:-50}"
SEED="${3:-1}"
WORK="${4:-/var/tmp/ft_chaos_bench}"
mkdir -p "$WORK"
/usr/bin/python3 "$root/tests/chaos/chaos_test.py" "$root/build/fluxtrain" "$root/configs/tiny.toml" "$WORK" \
  --steps "$STEPS" --faults "$FAULTS" --seed "$SEED" --budget-s 14400 2>&1 | tee "$WORK/chaos-$STEPS-$SEED.out"
