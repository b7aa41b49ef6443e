#!/usr/bin/env bash
# Pipeline parallelism, bad input and the schedule printer: every bad layout stops before any
# rank starts (config validation), with one clear error line naming the keys.
source "$(dirname "$0")/lib.sh"
cfg=$ROOT/configs/tiny.toml
run="--run-dir $WORK/run --set train.steps=2"

expect_error "parallel.pp = 5 is greater than the number of layers, model.n_layers = 4" \
  $FT train --config $cfg $run --set parallel.pp=5 --nproc 5
expect_error "parallel.micro_batches = 3 does not divide the per-rank batch of 8 sequences" \
  $FT train --config $cfg $run --set parallel.pp=2 --set parallel.micro_batches=3 --nproc 2
expect_error "train.micro_batch_size = 3 does not divide the per-rank batch of 4 sequences" \
  $FT train --config $cfg $run --set parallel.pp=2 --set parallel.dp=2 --set train.micro_batch_size=3 --nproc 4
expect_error "parallel.pp × parallel.virtual_stages = 2 × 3 = 6 model chunks but model.n_layers = 4" \
  $FT train --config $cfg $run --set parallel.pp=2 --set parallel.pp_schedule=interleaved --set parallel.virtual_stages=3 --nproc 2
expect_error "groups of parallel.pp = 2, but a step has 1 micro-batch(es)" \
  $FT train --config $cfg $run --set parallel.pp=2 --set parallel.pp_schedule=interleaved --set parallel.virtual_stages=2 --nproc 2
expect_error "parallel.virtual_stages = 2 needs parallel.pp_schedule = \"interleaved\"" \
  $FT train --config $cfg $run --set parallel.pp=2 --set parallel.virtual_stages=2 --nproc 2
expect_error "model.tie_embeddings = true with parallel.pp = 2" \
  $FT train --config $cfg $run --set parallel.pp=2 --set model.tie_embeddings=true --nproc 2
expect_error "unknown schedule" $FT schedule --pp 4 --micro-batches 8 --schedule zigzag
expect_error "6 micro-batches are not a multiple of 4 stages" \
  $FT schedule --pp 4 --micro-batches 6 --schedule interleaved --virtual-stages 2

out=$($FT schedule --pp 4 --micro-batches 8 --schedule 1f1b)
grep -qF "bubble fraction 0.2727 (simulated), 0.2727 (theory" <<<"$out" || fail "1f1b bubble: $out"
grep -qF "stage  3 | .  .  .  F0 B0 F1 B1" <<<"$out" || fail "1f1b timeline: $out"
out=$($FT schedule --pp 4 --micro-batches 8 --schedule interleaved --virtual-stages 2)
grep -qF "bubble fraction 0.1579 (simulated), 0.1579 (theory" <<<"$out" || fail "interleaved bubble: $out"
echo "pipeline bad input gave clear errors; schedules print"
