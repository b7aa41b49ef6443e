#!/usr/bin/env bash
# make demo: prepare the built-in corpus (Debian's English and Russian manual pages), train a
# small LLaMA on it, and show the results (validation bits per character, the HTML report, and
# what the model writes in English and in Russian, from its last checkpoint).
set -euo pipefail
cd "$(dirname "$0")/.."
FT=${FLUXTRAIN:-build/fluxtrain}  # FLUXTRAIN=build-portable/fluxtrain: the AVX2 build
DATA=data/manpages
RUN=runs/demo
t_start=$SECONDS

if [ -f "$DATA/manifest.json" ] && $FT data verify "$DATA" > /dev/null 2>&1; then
  echo "demo: using the prepared dataset in $DATA"
else
  rm -rf "$DATA"
  $FT prepare --out "$DATA" --shards 8 --vocab-size 8192
fi

t_prepared=$SECONDS

rm -rf "$RUN"  # a fresh run each time (the demo owns runs/demo; a run directory is never overwritten)
$FT train --config configs/demo.toml --run-dir "$RUN"
t_trained=$SECONDS

/usr/bin/python3 - "$RUN" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
precision = json.load(open(sys.argv[1] + "/config.json"))["train"]["precision"]
val = [r for r in rows if "val_loss" in r]
print(f"demo: {len(rows)} steps in {precision}, training loss {rows[0]['loss']:.3f} -> {rows[-1]['loss']:.3f}")
if val:
    print(f"demo: validation {val[0]['val_loss']:.3f} -> {val[-1]['val_loss']:.3f} nats/token, "
          f"{val[-1].get('val_bpc', float('nan')):.3f} bits/char at step {val[-1]['step']}")
    print("demo: validation bits/char over the run: " +
          ", ".join(f"{r['step']}: {r['val_bpc']:.3f}" for r in val if "val_bpc" in r))
    langs = sorted(k[len("val_bpc_"):] for k in val[-1] if k.startswith("val_bpc_"))
    if langs:
        print("demo: bits/char by language: " + ", ".join(f"{l} {val[-1]['val_bpc_' + l]:.3f}" for l in langs))
PY
$FT report "$RUN"

# What the model learned: short continuations from the final checkpoint (KV-cache decoding).
echo "demo: generation from $RUN/checkpoints (temperature 0.7, top-p 0.9):"
for prompt in "The ls command" "Эта функция"; do
  echo "--- $prompt"
  $FT generate --ckpt "$RUN" --prompt "$prompt" --max-tokens 40 --temperature 0.7 --top-p 0.9 --seed 1
done

precision=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["train"]["precision"])' "$RUN/config.json")
echo "demo: done in $((SECONDS - t_start)) s (prepare $((t_prepared - t_start)) s, training $((t_trained - t_prepared)) s," \
     "report and generation $((SECONDS - t_trained)) s); precision $precision"
