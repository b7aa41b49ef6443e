#!/usr/bin/env bash
# Writes the golden CPU losses the GPU trainer is compared against (scripts/gpu_check.sh, stage 2):
# llama-20m (configs/llama-20m.toml: batch 4, seq 512, synthetic data, seed 1234) with a 256-token
# vocabulary, 30 steps, in fp32 and bf16, trained by the CPU backend. The JSON records the
# commands, the commit, the CPU and every step's loss and gradient norm.
#
# Why 256 tokens: the synthetic task (progressions modulo the vocabulary) is learnt within 30 steps
# at 256 (loss 5.6 -> 3.2), while at the preset's 32000 the loss stays within 0.2 of ln 32000 for
# 30 steps — a comparison that could not tell a broken backward pass from a right one.
#
#   scripts/make-golden-losses.sh [FLUXTRAIN] [OUT]
#     FLUXTRAIN  default build/fluxtrain
#     OUT        default tests/cuda/golden/llama-20m.json
#
# tests/cuda/golden_losses_test.py re-runs the first fp32 steps and checks the file still matches the
# code (regenerate it with this script when a change to the model moves the losses on purpose).
set -euo pipefail
cd "$(dirname "$0")/.."
FT=${1:-build/fluxtrain}
OUT=${2:-tests/cuda/golden/llama-20m.json}
STEPS=30
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

declare -A CMDS
for prec in fp32 bf16; do
  # FLUXTRAIN and RUN_DIR stand for the binary and a fresh run directory.
  cmd=(FLUXTRAIN train --config configs/llama-20m.toml --run-dir RUN_DIR --set model.vocab_size=256 --set "train.steps=$STEPS"
       --set "train.precision=\"$prec\"" --set train.eval_interval=0 --set ckpt.interval=0
       --set metrics.tensorboard=false)
  CMDS[$prec]=$(/usr/bin/python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "${cmd[@]}")
  echo "golden: $prec: ${cmd[*]}" >&2
  run=("${cmd[@]/#FLUXTRAIN/$FT}")
  "${run[@]/#RUN_DIR/$TMP/$prec}" > "$TMP/$prec.log" 2>&1 || { cat "$TMP/$prec.log" >&2; exit 1; }
done

mkdir -p "$(dirname "$OUT")"
/usr/bin/python3 - "$TMP" "$OUT" "$STEPS" "${CMDS[fp32]}" "${CMDS[bf16]}" "$(git rev-parse HEAD)" << 'PY'
import datetime, json, os, platform, subprocess, sys
tmp, out, steps, cmd32, cmd16, commit = sys.argv[1:7]
def cpu():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()
runs = {}
for prec, cmd in (("fp32", cmd32), ("bf16", cmd16)):
    rows = [json.loads(l) for l in open(os.path.join(tmp, prec, "metrics.jsonl")) if l.strip()]
    rows = [r for r in rows if "loss" in r and "step" in r]
    assert len(rows) == int(steps), f"{prec}: {len(rows)} steps in metrics.jsonl, expected {steps}"
    log = open(os.path.join(tmp, prec + ".log")).read().splitlines()
    runs[prec] = {"command": json.loads(cmd), "log_head": [l for l in log[:3] if "CPU" in l or "precision" in l],
                  "loss": [r["loss"] for r in rows],
                  "grad_norm": [r.get("grad_norm") for r in rows]}
doc = {
    "what": "golden CPU losses of llama-20m (configs/llama-20m.toml) with a 256-token vocabulary, compared against by scripts/gpu_check.sh stage 2",
    "made_by": "scripts/make-golden-losses.sh",
    "commit": commit,
    "date": datetime.date.today().isoformat(),
    "cpu": cpu(),
    "steps": int(steps),
    "runs": runs,
}
with open(out + ".tmp", "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
os.replace(out + ".tmp", out)
print(f"golden: wrote {out}: fp32 {runs['fp32']['loss'][0]:.4f} -> {runs['fp32']['loss'][-1]:.4f}, "
      f"bf16 {runs['bf16']['loss'][0]:.4f} -> {runs['bf16']['loss'][-1]:.4f}")
PY
