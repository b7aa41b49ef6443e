#!/usr/bin/env bash
# Checkpoint write throughput against the disk's own sequential write throughput, in one run:
#   1. the disk: dd writes as many bytes as one checkpoint, fsync'ed (conv=fsync), before and
#      after the checkpoint runs (their mean is the peer);
#   2. fluxtrain saves checkpoints plaintext and AES-256-GCM encrypted: bytes / background write
#      time (checkpoints.jsonl write_s: checksums, encryption, write, fsync, rename) of the final
#      save, written while nothing else runs;
#   3. the training stall per save in the middle of training, asynchronous vs synchronous
#      (ckpt.async = false: the training thread copies, writes and commits);
#   4. resume: loading the checkpoint, and process start to the end of the first resumed step.
# Ratios last.
#
#   bench/ckpt_bench.sh [PRESET] [DIR]      # default llama-20m (vocab 8192), in /var/tmp (the disk)
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
  python3 -c "import json; r=[json.loads(l) for l in open('$WORK/$1/checkpoints.jsonl') if '\"save\"' in l]; \
print([x for x in r if x['step']==$2][0]['$3'])"
}
disk() {  # bytes -> MB/s of dd, sequential 4 MiB blocks, fsync'ed before dd reports
  local count=$(( ($1 + 4194303) / 4194304 ))
  local out s
  out=$(dd if=/dev/zero of="$WORK/dd.bin" bs=4M count=$count conv=fsync 2>&1 | tail -1)
  rm -f "$WORK/dd.bin"
  s=$(sed -E 's/.* copied, ([0-9.]+) s.*/\1/' <<<"$out")
  python3 -c "print(f'{$count*4194304/1e6/$s:.0f}')"
}

run probe --set train.steps=2 --set ckpt.interval=2
bytes=$(field probe 2 bytes)
echo "checkpoint of $PRESET (vocab 8192): $(python3 -c "print(f'{$bytes/1e6:.1f}')") MB (fp32 weights + AdamW moments)" \
     "on $(df -h "$WORK" | awk 'NR==2{print $1}'), $(nproc) cores"
disk1=$(disk "$bytes")
run plain
run encrypted --set ckpt.encrypt=true
run sync --set ckpt.async=false
disk2=$(disk "$bytes")
disk_mb=$(python3 -c "print(f'{($disk1+$disk2)/2:.0f}')")
plain_s=$(field plain 4 write_s); enc_s=$(field encrypted 4 write_s)
plain=$(python3 -c "print(f'{$bytes/1e6/$plain_s:.0f}')"); enc=$(python3 -c "print(f'{$bytes/1e6/$enc_s:.0f}')")
echo "disk sequential write (dd bs=4M conv=fsync): $disk1 MB/s before, $disk2 MB/s after: $disk_mb MB/s"
echo "checkpoint write, plaintext:                 $plain MB/s ($(python3 -c "print(f'{$plain_s:.3f}')") s)"
echo "checkpoint write, AES-256-GCM:               $enc MB/s ($(python3 -c "print(f'{$enc_s:.3f}')") s)"

a_stall=$(field plain 2 stall_s); a_copy=$(field plain 2 copy_s); a_sync=$(field plain 2 sync_s)
s_stall=$(field sync 2 stall_s)
python3 - <<PY
print(f"training stall per save (step 2 of 4): async {$a_stall*1e3:.1f} ms (background copy {$a_copy*1e3:.1f} ms, "
      f"copy + write {$a_sync*1e3:.0f} ms), sync {$s_stall*1e3:.0f} ms")
PY

# Resume: from the newest checkpoint, one more step.
"$FT" train --config "$root/configs/tiny.toml" --run-dir "$WORK/plain" "${SETS[@]}" --set train.steps=5 --resume auto \
  > "$WORK/resume.log" 2>&1
load=$(grep -oE 'loaded .* in [0-9.]+ s' "$WORK/resume.log" | grep -oE '[0-9.]+ s$')
first=$(python3 -c "import json; print([json.loads(l) for l in open('$WORK/plain/checkpoints.jsonl') if 'resume' in l][-1]['seconds_from_start'])")
echo "resume: checkpoint load $load; process start to the end of the first resumed step $(python3 -c "print(f'{$first:.2f}')") s"
python3 - <<PY
print(f"stall async / sync save: {$a_stall/$s_stall:.3f}")
print(f"checkpoint write / disk sequential write: plaintext {$plain/$disk_mb:.2f}, encrypted {$enc/$disk_mb:.2f}")
PY
