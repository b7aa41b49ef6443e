#!/usr/bin/env bash
# Bad input to `fluxtrain train`: each case exits with one clear error line naming the problem.
source "$(dirname "$0")/lib.sh"
cfg=$ROOT/configs/tiny.toml
run="--run-dir $WORK/run --set train.steps=2"

expect_error "unknown config key 'model.n_layer'" $FT train --config $cfg $run --set model.n_layer=3
expect_error "did you mean 'model.n_layers'" $FT train --config $cfg $run --set model.n_layer=3
expect_error "model.n_heads = 4 is not divisible by model.n_kv_heads = 3" $FT train --config $cfg $run --set model.n_kv_heads=3
expect_error "model.dim = 66 is not divisible by model.n_heads = 4" $FT train --config $cfg $run --set model.dim=66
expect_error "config file $WORK/nope.toml does not exist" $FT train --config $WORK/nope.toml
expect_error "token file $WORK/missing.bin" $FT train --config $cfg $run --set data.source=tokens --set data.path=\"$WORK/missing.bin\"
printf 'abc' > $WORK/odd.bin
expect_error "token file $WORK/odd.bin is truncated" $FT train --config $cfg $run --set data.source=tokens --set data.path=\"$WORK/odd.bin\"
expect_error "loss is NaN at step 1" $FT train --config $cfg $run --set model.init_std=1e30 --set fault.nan_policy=\"stop\"
# The default guard skips non-finite updates, but not forever (fault.max_consecutive_skips).
expect_error "loss is NaN at step 1, and the 9 step(s) after it were skipped too" \
  $FT train --config $cfg --run-dir $WORK/run-skips --set train.steps=20 --set model.init_std=1e30
# train.device: "cuda" on a machine without a usable GPU (or a build without the backend) says why
# in one line; anything else names what is accepted.
expect_error 'device cuda: ' $FT train --config $cfg --run-dir $WORK/run-cuda --set train.steps=2 --set train.device=\"cuda\"
expect_error 'train.device = "tpu" is not a device fluxtrain knows: expected "cpu", "cuda" or "auto"' $FT train --config $cfg $run --set train.device=\"tpu\"
# parallel.comm: "nccl" on a CPU rank (or in a build without NCCL) says why in one line.
expect_error 'parallel.comm = "nccl"' $FT train --config $cfg --run-dir $WORK/run-nccl --set train.steps=2 --set parallel.comm=\"nccl\"
expect_error 'parallel.comm' $FT train --config $cfg $run --set parallel.comm=\"gloo\"
printf '[model\ndim = 3\n' > $WORK/bad.toml
expect_error "$WORK/bad.toml:1" $FT train --config $WORK/bad.toml
echo "all bad-input cases gave clear errors"
