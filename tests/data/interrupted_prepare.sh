#!/usr/bin/env bash
# An interrupted `fluxtrain prepare` (SIGKILL mid-run) must leave nothing that looks like a
# dataset; the next run removes its staging directory and succeeds.
#
#   tests/data/interrupted_prepare.sh build/fluxtrain
set -euo pipefail
bin="$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d /tmp/ft_interrupt_XXXXXX)"
trap 'rm -rf "$work"' EXIT
out="$work/ds"

"$bin" prepare --out "$out" >"$work/log" 2>&1 &   # the built-in corpus: a minute or more
pid=$!
# Killed once it is under way (its staging directory exists, made before it reads any input), not
# after a fixed sleep: a fast machine could finish first, a slow one not have started yet.
for _ in $(seq 3000); do   # up to 5 minutes: only a bound on a prepare that never starts
  ls -d "$out".tmp-* >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if ! kill -0 "$pid" 2>/dev/null || ! ls -d "$out".tmp-* >/dev/null 2>&1; then
  echo "FAIL: prepare ended, or made no staging directory $out.tmp-* in 5 minutes:"; cat "$work/log"; exit 1
fi
kill -9 "$pid"
wait "$pid" 2>/dev/null || true

if "$bin" data verify "$out" >"$work/verify" 2>&1; then
  echo "FAIL: an interrupted prepare left a dataset that verifies"; exit 1
fi
grep -q "not a fluxtrain dataset" "$work/verify" || { echo "FAIL: unexpected verify output:"; cat "$work/verify"; exit 1; }
staging=$(ls -d "$out".tmp-* 2>/dev/null | wc -l)
[ "$staging" -ge 1 ] || { echo "FAIL: the killed prepare left no staging directory: the check below would pass blindly"; exit 1; }
echo "interrupted prepare left $staging staging directory(ies) and no dataset"

"$bin" prepare --input "$root/tests/data/bilingual.txt" --out "$out" --shards 1 --vocab-size 400 >"$work/log2" 2>&1
"$bin" data verify "$out"
if ls -d "$out".tmp-* >/dev/null 2>&1; then
  echo "FAIL: the staging directory of the killed run is still there"; exit 1
fi
echo "1 passed, 0 failed"
