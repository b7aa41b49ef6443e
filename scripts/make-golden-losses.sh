#!/usr/bin/env bash
# Writes the golden CPU losses the GPU trainer is compared against: llama-20m
# (configs/llama-20m.toml: synthetic data, seed 1234) with a 256-token vocabulary, 30 steps, in fp32
# and bf16, trained by the CPU backend, at two shapes of the same model:
#   runs       batch 4 x seq 512 (the preset's): scripts/gpu_check.sh, stage 2, on a real GPU
#   ci_runs    batch 2 x seq 32: the virtual GPU in CI (ctest vgpu_golden_llama20m,
#              tests/vgpu/golden_test.py), small enough for the SIMT executor
# The JSON records the commands, the commit, the CPU and every step's loss and gradient norm.
#
# Why 256 tokens: the synthetic task (progressions modulo the vocabulary) is learnt within 30 steps
# at 256 (loss 5.6 -> 3.2), while at the preset's 32000 the loss stays within 0.2 of ln 32000 for
# 30 steps — a comparison that could not tell a broken backward pass from a right one.
#
#   scripts/make-golden-losses.sh [FLUXTRAIN] [OUT] [SETS]
#     FLUXTRAIN  default build/fluxtrain
#     OUT        default tests/cuda/golden/llama-20m.json
#     SETS       default "runs ci_runs"; a set left out keeps its entry of OUT (`runs` trains 30 steps
#                of batch 4 x 512 twice: ~2 min on an idle 2-core machine, far more on a busy one)
# Each set records the commit, date and CPU it was made at.
#
# ctest cuda_golden_losses (scripts/gpu_check.py --cpu-dry-run --stages 2) re-runs the first fp32
# and bf16 steps of `runs` and all of `ci_runs` (--golden-runs ci_runs) and checks the file still
# matches the code (regenerate it with this script when a change to the model moves the losses on
# purpose).
set -euo pipefail
cd "$(dirname "$0")/.."
FT=${1:-build/fluxtrain}
OUT=${2:-tests/cuda/golden/llama-20m.json}
SETS=${3:-runs ci_runs}
STEPS=30
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# The shapes: the key in the JSON and the settings beyond the config's.
declare -A SHAPE=([runs]="" [ci_runs]="train.batch_size=2 train.seq_len=32")
declare -A CMDS
for key in $SETS; do
  [ -n "${SHAPE[$key]+set}" ] || { echo "error: set '$key' unknown; hint: runs or ci_runs" >&2; exit 2; }
  for prec in fp32 bf16; do
    # FLUXTRAIN and RUN_DIR stand for the binary and a fresh run directory.
    cmd=(FLUXTRAIN train --config configs/llama-20m.toml --run-dir RUN_DIR --set model.vocab_size=256 --set "train.steps=$STEPS"
         --set "train.precision=\"$prec\"" --set train.eval_interval=0 --set ckpt.interval=0
         --set metrics.tensorboard=false)
    for s in ${SHAPE[$key]}; do cmd+=(--set "$s"); done
    CMDS[$key.$prec]=$(/usr/bin/python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "${cmd[@]}")
    echo "golden: $key $prec: ${cmd[*]}" >&2
    run=("${cmd[@]/#FLUXTRAIN/$FT}")
    "${run[@]/#RUN_DIR/$TMP/$key.$prec}" > "$TMP/$key.$prec.log" 2>&1 || { cat "$TMP/$key.$prec.log" >&2; exit 1; }
  done
done

mkdir -p "$(dirname "$OUT")"
/usr/bin/python3 - "$TMP" "$OUT" "$STEPS" "$(git rev-parse HEAD)" "$SETS" "${CMDS[runs.fp32]:-}" "${CMDS[runs.bf16]:-}" \
  "${CMDS[ci_runs.fp32]:-}" "${CMDS[ci_runs.bf16]:-}" << 'PY'
import datetime, json, os, platform, sys
tmp, out, steps, commit, sets = sys.argv[1:6]
cmds = dict(zip(["runs.fp32", "runs.bf16", "ci_runs.fp32", "ci_runs.bf16"], sys.argv[6:10]))
old = json.load(open(out)) if os.path.exists(out) else {}
def cpu():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()
doc = {
    "what": "golden CPU losses of llama-20m (configs/llama-20m.toml) with a 256-token vocabulary: 'runs' at the "
            "preset's batch 4 x seq 512, compared against by scripts/gpu_check.sh stage 2; 'ci_runs' at batch 2 x "
            "seq 32, compared against by the virtual GPU's ctest vgpu_golden_llama20m",
    "made_by": "scripts/make-golden-losses.sh",
    "steps": int(steps),
}
for key in ("runs", "ci_runs"):
    if key not in sets.split():  # kept as it was (a file from before the sets recorded their own)
        if key not in old:
            sys.exit(f"error: {out} has no '{key}' to keep; hint: make it too (SETS \"runs ci_runs\")")
        doc[key] = old[key]
        for field in ("commit", "date", "cpu"):
            if field in old and field not in doc[key]:
                doc[key][field] = old[field]
        continue
    doc[key] = {"commit": commit, "date": datetime.date.today().isoformat(), "cpu": cpu()}
    for prec in ("fp32", "bf16"):
        name = f"{key}.{prec}"
        rows = [json.loads(l) for l in open(os.path.join(tmp, name, "metrics.jsonl")) if l.strip()]
        rows = [r for r in rows if "loss" in r and "step" in r]
        assert len(rows) == int(steps), f"{name}: {len(rows)} steps in metrics.jsonl, expected {steps}"
        log = open(os.path.join(tmp, name + ".log")).read().splitlines()
        doc[key][prec] = {"command": json.loads(cmds[name]),
                          "log_head": [l for l in log[:3] if "CPU" in l or "precision" in l],
                          "loss": [r["loss"] for r in rows], "grad_norm": [r.get("grad_norm") for r in rows]}
with open(out + ".tmp", "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
os.replace(out + ".tmp", out)
for key in ("runs", "ci_runs"):
    r = doc[key]
    print(f"golden: wrote {out} {key}: fp32 {r['fp32']['loss'][0]:.4f} -> {r['fp32']['loss'][-1]:.4f}, "
          f"bf16 {r['bf16']['loss'][0]:.4f} -> {r['bf16']['loss'][-1]:.4f}")
PY
