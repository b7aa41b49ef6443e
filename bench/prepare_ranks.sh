#!/usr/bin/env bash
# prepare spread over ranks vs SentencePiece's own encoder, on the same text, in one run:
#   fluxtrain prepare --tokenizer T --nproc N   (N = 1, 2: read, normalise, encode, write shards)
#   spm_encode --model T                        (N processes on N equal parts of the same text)
# Input: the first FILES Debian changelogs (/usr/share/doc/*/changelog.Debian.gz) as .txt files.
# Prints wall-clock MB/s of input text for each and the ratio last.
#   usage: bench/prepare_ranks.sh [FLUXTRAIN] [FILES]
set -euo pipefail
FT="${1:-build/fluxtrain}"
FILES="${2:-600}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/in"
i=0
for f in /usr/share/doc/*/changelog.Debian.gz; do
  zcat "$f" > "$WORK/in/$(printf %05d $i).txt"
  i=$((i + 1)); [ "$i" -ge "$FILES" ] && break
done
BYTES=$(cat "$WORK"/in/*.txt | wc -c)
MB=$(python3 -c "print($BYTES / 1e6)")
"$FT" prepare --input "$WORK/in" --out "$WORK/tok" --vocab-size 8192 --near-dup-threshold 0 > /dev/null
TOK="$WORK/tok/tokenizer.model"
now() { date +%s.%N; }
rate() { python3 -c "print(f'{$MB / ($2 - $1):.2f}')"; }
declare -A ours peer
for n in 1 2; do
  nproc=(); [ "$n" -gt 1 ] && nproc=(--nproc "$n")
  t0=$(now)
  "$FT" prepare --input "$WORK/in" --out "$WORK/ds$n" --tokenizer "$TOK" --near-dup-threshold 0 --shards 8 \
    "${nproc[@]}" > "$WORK/log$n" 2>&1
  t1=$(now)
  ours[$n]=$(rate "$t0" "$t1")
  # spm_encode on the same text cut into n parts, n processes at once.
  cat "$WORK"/in/*.txt > "$WORK/all.txt"
  split -n "l/$n" -d "$WORK/all.txt" "$WORK/part$n."
  t0=$(now)
  for p in "$WORK"/part$n.*; do spm_encode --model "$TOK" --output_format=id < "$p" > /dev/null & done
  wait
  t1=$(now)
  peer[$n]=$(rate "$t0" "$t1")
  echo "N=$n  fluxtrain prepare (read + normalise + encode + shards): ${ours[$n]} MB/s   spm_encode: ${peer[$n]} MB/s" \
       "   [$(grep -o 'encode [0-9.]*s ([0-9.]* MB/s, [0-9]* rank(s))' "$WORK/log$n")]"
done
cmp -s "$WORK/ds1/train-00000.ftshard" "$WORK/ds2/train-00000.ftshard" && diff -rq "$WORK/ds1" "$WORK/ds2" > /dev/null \
  && echo "N=1 and N=2 datasets identical" || echo "N=1 and N=2 datasets DIFFER"
echo "input: $FILES files, $MB MB; load average $(cut -d' ' -f1-3 /proc/loadavg)"
python3 -c "print(f'ratio fluxtrain/spm_encode: N=1 {${ours[1]}/${peer[1]}:.2f}x, N=2 {${ours[2]}/${peer[2]}:.2f}x; fluxtrain N=2/N=1 {${ours[2]}/${ours[1]}:.2f}x')"
