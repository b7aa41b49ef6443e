#!/usr/bin/env bash
# Checkpoint throughput against the disk's own sequential write throughput, in one run:
#   1. the disk: dd writes the same number of bytes as one checkpoint, fsync'ed (conv=fsync);
#   2. fluxtrain saves a checkpoint (the final one, written while nothing else runs), plaintext
#      and AES-256-GCM encrypted — bytes / background write time (checkpoints.jsonl write_s);
#   3. the training stall per save, asynchronous vs synchronous (ckpt.async = false), for a save
#      in the middle of training;
#   4. resume: process start to the end of the first resumed step, and the load itself.
# Ratios last.
#
#   bench/ckpt_bench.sh [PRESET] [DIR]      # default llama-20m in a temporary directory on /tmp's disk
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
FT="$root/build/fluxtrain"
PRESET="${1:-llama-20m}"
WORK="${2:-$(mktemp -d /var/tmp/ft_ckpt_bench.XXXXXX)}"
trap 'rm -rf "$WORK"' EXIT
export FLUXTRAIN_CKPT_KEY=$(openssl rand -hex 32)
SETS=(--set model.preset=\"$PRESET\" --set model.vocab_size=8192 --set train.batch_size=2 --set train.seq_len=64
      --set train.eval_interval=0 --set train.steps=4 --set ckpt.interval=2 --set ckpt.keep=1)

run() {  # name, extra sets...
  local name=$1; shift
  "$FT" train --config "$root/configs/tiny.toml" --run-dir "$WORK/$name" "${SETS[@]}" "$@" > "$WORK/$name.log" 2>&1
}
field() {  # run, step, key
  python3 -c "import json,sys; r=[json.loads(l) for l in open('$WORK/$1/checkpoints.jsonl') if '\"save\"' in l]; \
print([x for x in r if x['step']==$2][0]['$3'])"
}

run plain
run encrypted --set ckpt.encrypt=true
run sync --set ckpt.async=false
bytes=$(field plain 4 bytes)
mb=$(python3 -c "print(f'{$bytes/1e6:.1f}')")
echo "checkpoint of $PRESET: $mb MB (fp32 weights + AdamW moments) on $(df -h "$WORK" | awk 'NR==2{print $1}')"

# The disk: the same bytes, sequential, fsync'ed.
count=$(( (bytes + 4194303) / 4194304 ))
dd_out=$(dd if=/dev/zero of="$WORK/dd.bin" bs=4M count=$count conv=fsync 2>&1 | tail -1)
dd_s=$(sed -E 's/.* copied, ([0-9.]+) s.*/\1/' <<<"$dd_out")
rm -f "$WORK/dd.bin"
disk=$(python3 -c "print(f'{$count*4194304/1e6/$dd_s:.0f}')")
plain_s=$(field plain 4 write_s); enc_s=$(field encrypted 4 write_s)
plain=$(python3 -c "print(f'{$bytes/1e6/$plain_s:.0f}')"); enc=$(python3 -c "print(f'{$bytes/1e6/$enc_s:.0f}')")
echo "disk sequential write (dd, conv=fsync):  $disk MB/s"
echo "checkpoint write, plaintext:              $plain MB/s ($plain_s s)"
echo "checkpoint write, AES-256-GCM:            $enc MB/s ($enc_s s)"

a_stall=$(field plain 2 stall_s); a_write=$(field plain 2 write_s); s_stall=$(field sync 2 stall_s)
echo "training stall per save: async $(python3 -c "print(f'{$a_stall*1e3:.1f}')") ms (copy to staging), sync $(python3 -c "print(f'{$s_stall*1e3:.1f}')") ms"

# Resume: from the newest checkpoint, one more step.
"$FT" train --config "$root/configs/tiny.toml" --run-dir "$WORK/plain" "${SETS[@]}" --set train.steps=5 --resume auto \
  > "$WORK/resume.log" 2>&1
load=$(grep -oE 'loaded .* in [0-9.]+ s' "$WORK/resume.log" | grep -oE '[0-9.]+ s$')
first=$(python3 -c "import json; print([json.loads(l) for l in open('$WORK/plain/checkpoints.jsonl') if 'resume' in l][-1]['seconds_from_start'])")
echo "resume: checkpoint load $load; process start to the end of the first resumed step $(python3 -c "print(f'{$first:.2f}')") s"
python3 - <<PY
print(f"stall async / sync: {$a_stall/$s_stall:.3f}")
print(f"checkpoint write / disk sequential write: plaintext {$plain/$disk:.2f}, encrypted {$enc/$disk:.2f}")
PY
