#!/usr/bin/env bash
# `fluxtrain prepare` spread over ranks (--nproc N, i.e. mpirun) writes the same dataset, byte for
# byte, as one process, for N = 2 and 3 (a real RU+EN corpus from Debian's manual pages), and for
# 1, 2 and 3 threads on a corpus where SentencePiece's own result depends on its thread count; a
# bad input under 2 ranks gives one error and leaves nothing behind.
#   usage: prepare_ranks_test.sh FLUXTRAIN
set -euo pipefail
FT="$1"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
IN=(--input "/usr/share/man/man1/[a-b]*.gz" --input "/usr/share/man/ru/man1/[a-f]*.gz")
for n in 1 2 3; do
  nproc=(); [ "$n" -gt 1 ] && nproc=(--nproc "$n")
  timeout 300 "$FT" prepare "${IN[@]}" --out "$WORK/ds$n" --shards 5 --val-fraction 0.1 --vocab-size 512 \
    "${nproc[@]}" > "$WORK/log$n" 2>&1 || { cat "$WORK/log$n"; exit 1; }
  grep -q "$n rank(s)" "$WORK/log$n" || { echo "FAIL: the report of N=$n does not say $n rank(s)"; cat "$WORK/log$n"; exit 1; }
done
for n in 2 3; do
  if ! diff -r "$WORK/ds1" "$WORK/ds$n"; then echo "FAIL: N=$n differs from N=1"; exit 1; fi
done
echo "ok: N = 1, 2, 3 wrote identical datasets ($(ls "$WORK/ds1" | wc -l) files)"

# The tokenizer does not depend on the thread or rank count. On this corpus (vocabulary 2000)
# SentencePiece's BPE trainer writes a different model for 1, 2 and 3 training threads (checked
# first, so that the test keeps testing something), which prepare once took from the machine.
TOK_IN=(--input "/usr/share/man/man1/[a-c]*.gz" --input "/usr/share/man/ru/man1/[a-f]*.gz")
for t in 1 2 3; do
  timeout 300 "$FT" tokenizer train "${TOK_IN[@]}" --vocab-size 2000 --threads "$t" --out "$WORK/spm$t.model" \
    > "$WORK/log-spm$t" 2>&1 || { cat "$WORK/log-spm$t"; exit 1; }
done
if [ "$(sha256sum "$WORK"/spm[123].model | cut -d' ' -f1 | sort -u | wc -l)" -ne 3 ]; then
  echo "FAIL: SentencePiece wrote the same model for 1, 2 and 3 threads here: this corpus no longer tests prepare's"
  echo "      independence of the thread count; pick one on which the counts differ"; sha256sum "$WORK"/spm[123].model; exit 1
fi
echo "ok: SentencePiece alone: 3 different models for 1, 2, 3 threads"
runs=()
for t in 1 2 3; do
  OMP_NUM_THREADS=$t timeout 300 "$FT" prepare "${TOK_IN[@]}" --out "$WORK/t$t" --shards 8 --vocab-size 2000 \
    > "$WORK/log-t$t" 2>&1 || { cat "$WORK/log-t$t"; exit 1; }
  runs+=("t$t")
done
for n in 2 3; do
  timeout 300 "$FT" prepare "${TOK_IN[@]}" --out "$WORK/r$n" --shards 8 --vocab-size 2000 --nproc "$n" \
    > "$WORK/log-r$n" 2>&1 || { cat "$WORK/log-r$n"; exit 1; }
  runs+=("r$n")
done
for r in "${runs[@]:1}"; do
  if ! diff -r "$WORK/t1" "$WORK/$r" > /dev/null; then
    echo "FAIL: prepare with $r differs from one thread:"; sha256sum "$WORK"/*/tokenizer.model; exit 1
  fi
done
python3 -c 'import json,sys; t = json.load(open(sys.argv[1]))["tokenizer"]["train_threads"]; sys.exit(t != 8)' \
  "$WORK/t1/manifest.json" || { echo "FAIL: the manifest does not record 8 training threads"; exit 1; }
echo "ok: 1, 2, 3 threads and 2, 3 ranks wrote byte-identical datasets (tokenizer $(sha256sum "$WORK/t1/tokenizer.model" | cut -c1-12), manifest train_threads 8)"
if timeout 120 "$FT" prepare --input "$WORK/missing" --out "$WORK/bad" --nproc 2 > "$WORK/log-bad" 2>&1; then
  echo "FAIL: a missing input succeeded"; exit 1
fi
grep -q "error: .*missing" "$WORK/log-bad" || { echo "FAIL: no error naming the input"; cat "$WORK/log-bad"; exit 1; }
if ls "$WORK" | grep -q "^bad"; then echo "FAIL: a failed prepare left files: $(ls "$WORK")"; exit 1; fi
echo "ok: a bad input under 2 ranks: one error naming it, nothing left behind"
echo "4 passed, 0 failed"
