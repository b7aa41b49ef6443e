#!/usr/bin/env bash
# Tensor x pipeline (x data) parallel layouts, bad input: every layout the model or the batch
# cannot be split into stops when the config loads — before mpirun starts a rank — with one
# error line naming the keys and a hint saying which degrees work or how to pad.
source "$(dirname "$0")/lib.sh"
cfg=$ROOT/configs/tiny.toml  # 4 layers, dim 64, 4 heads, 2 kv heads, ffn 160, vocab 256
run="--run-dir $WORK/run --set train.steps=2"
tp2pp2="--set parallel.tp=2 --set parallel.pp=2"

# tp must divide the hidden size, the heads, the kv heads (or be a multiple of them), ffn, vocab.
expect_error "parallel.tp = 3: model.dim = 64 is not divisible by 3" \
  $FT train --config $cfg $run --set parallel.tp=3 --set parallel.pp=2 --nproc 6
expect_error "tensor-parallel degrees that work for this model: 1, 2, 4" \
  $FT train --config $cfg $run --set parallel.tp=8 --set parallel.pp=2 --nproc 16
expect_error "model.n_heads = 4 is not divisible by 8" \
  $FT train --config $cfg $run --set parallel.tp=8 --set parallel.pp=2 --nproc 16
expect_error "model.n_kv_heads = 3 is neither divisible by 2" \
  $FT train --config $cfg $run $tp2pp2 --set model.dim=96 --set model.n_heads=6 --set model.n_kv_heads=3 \
  --set model.ffn_dim=192 --nproc 4
expect_error "pad model.vocab_size to 256" \
  $FT train --config $cfg $run $tp2pp2 --set model.vocab_size=255 --nproc 4
expect_error "pad model.ffn_dim to 164; or tensor-parallel degrees that work for this model: 1, 2" \
  $FT train --config $cfg $run --set parallel.tp=4 --set parallel.pp=2 --set model.ffn_dim=162 --nproc 8
# More stages than layers, micro-batches that do not divide the per-rank batch.
expect_error "parallel.pp = 5 is greater than the number of layers, model.n_layers = 4" \
  $FT train --config $cfg $run --set parallel.tp=2 --set parallel.pp=5 --nproc 10
expect_error "parallel.micro_batches = 3 does not divide the per-rank batch of 4 sequences" \
  $FT train --config $cfg $run $tp2pp2 --set parallel.dp=2 --set parallel.micro_batches=3 --nproc 8
# Sequence parallelism: the micro-batch's tokens must split over the tp ranks.
expect_error "splits the 1 x 31 tokens of a micro-batch (micro-batch size x train.seq_len) over parallel.tp = 2" \
  $FT train --config $cfg $run $tp2pp2 --set parallel.sequence_parallel=true --set train.seq_len=31 \
  --set train.micro_batch_size=1 --nproc 4
echo "tensor x pipeline parallel bad input gave clear errors"
