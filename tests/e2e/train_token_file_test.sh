#!/usr/bin/env bash
# Training from a flat uint16 token file: the loss falls and metrics.jsonl has every field.
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 - "$WORK/tokens.bin" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(0)
# A learnable stream: repeated short "words" drawn from a small vocabulary.
words = [rng.integers(0, 200, size=rng.integers(2, 6)) for _ in range(40)]
seq = np.concatenate([words[i] for i in rng.integers(0, 40, size=20000)]).astype(np.uint16)
seq.tofile(sys.argv[1])
PY
$FT train --config $ROOT/configs/tiny.toml --run-dir $WORK/run --set data.source=tokens \
  --set data.path=\"$WORK/tokens.bin\" --set train.steps=40 --set train.eval_interval=20 2>&1 | tail -3
/usr/bin/python3 - "$WORK/run/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
need = {"step", "loss", "lr", "grad_norm", "tokens", "tokens_per_s", "step_s", "mfu", "data_wait_s"}
assert len(rows) == 40, len(rows)
for r in rows:
    assert need <= set(r), need - set(r)
assert rows[-1]["tokens"] == 40 * 8 * 32
assert "val_loss" in rows[19] and "val_loss" in rows[39]
first, last = rows[0]["loss"], rows[-1]["loss"]
print(f"loss {first:.3f} -> {last:.3f}, val {rows[19]['val_loss']:.3f} -> {rows[39]['val_loss']:.3f}")
assert last < first - 1.0
PY
