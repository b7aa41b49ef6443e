#!/usr/bin/env bash
# train.device on this machine: "cuda" without a usable GPU stops at start with one line naming
# the device and, in a build with the CUDA backend, the driver's own reason (cudaGetDeviceCount's
# error), writing no checkpoint or metrics; "auto" then trains on the CPU. On a machine with a GPU
# "cuda" is not an error, and this test only checks that "auto" trains.
source "$(dirname "$0")/lib.sh"
cfg=$ROOT/configs/tiny.toml
if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; then
  echo "a GPU is visible here: train.device = \"cuda\" is not expected to fail"
else
  expect_error 'device cuda: ' $FT train --config $cfg --run-dir $WORK/run-cuda --set train.steps=2 \
    --set train.device=\"cuda\"
  out=$($FT train --config $cfg --run-dir $WORK/run-cuda2 --set train.steps=2 --set train.device=\"cuda\" 2>&1 \
        >/dev/null) && fail "train.device = cuda trained without a GPU"
  [ "$(grep -c '^error: ' <<<"$out")" = 1 ] || fail "not one error line: $out"
  if [ -n "${FT_EXPECT_CUDA_BUILD:-}" ]; then
    grep -q '^error: device cuda: cudaGetDeviceCount: .*(cudaError[A-Za-z]*)$' <<<"$out" ||
      fail "a CUDA build should name the driver's reason: $out"
    echo "ok: the driver's reason: $(grep '^error: ' <<<"$out")"
  fi
  [ ! -e "$WORK/run-cuda2/metrics.jsonl" ] || fail "a metrics file was written by a run that never started"
  ls "$WORK/run-cuda2"/step-* > /dev/null 2>&1 && fail "a checkpoint was written by a run that never started"
fi
$FT train --config $cfg --run-dir $WORK/run-auto --set train.steps=2 --set train.device=\"auto\" > $WORK/auto.log 2>&1 ||
  { cat $WORK/auto.log; fail "train.device = auto did not train"; }
[ -s "$WORK/run-auto/metrics.jsonl" ] || fail "train.device = auto wrote no metrics"
echo "ok: train.device = auto trains here"
