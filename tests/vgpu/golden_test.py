#!/usr/bin/env python3
"""llama-20m on the virtual GPU against the golden CPU losses (issue 29 point 5; ctests
vgpu_golden_llama20m and _bf16): fluxtrain-vgpu trains the golden file's `ci_runs` (llama-20m with a 256-token
vocabulary at batch 2 x seq 32, 30 steps, scripts/make-golden-losses.sh) with train.device = "cuda",
and every step's loss and gradient norm is compared with the golden ones by scripts/gpu_check.py's
stage 2 itself (golden_losses: the same commands, tolerances and "does the golden run learn" check
as on a real GPU), so nothing of the comparison is repeated here.

usage: golden_test.py OUT_DIR [--precisions fp32,bf16] [--steps N]
  --steps N   only the first N steps (a quick look; the ctest trains all 30)
Environment: FT_VGPU_BIN (fluxtrain-vgpu). Exit status 0 when every step is within tolerance."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import gpu_check  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--steps", type=int, default=None)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    # gpu_check finds the trainer through FT_FLUXTRAIN; OpenMP's idle threads sleep rather than spin
    # (under ctest -j the spinning took CPU from the other tests; results do not depend on it).
    os.environ["FT_FLUXTRAIN"] = os.environ["FT_VGPU_BIN"]
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    c = gpu_check.Check(a.out, 2400.0)
    c.gpu = "the virtual GPU (tests/vgpu)"  # stage 2 then appends train.device = "cuda"
    c.golden_runs = "ci_runs"
    c.steps = a.steps
    c.golden_limit = 1200  # ~3.5 min on an idle core; a busy machine (ctest -j) takes far longer
    gpu_check.golden_losses(c, 2, "llama-20m on the virtual GPU vs golden CPU losses", [],
                            tuple(a.precisions.split(",")))
    stage = c.doc["stages"][-1]
    for prec in a.precisions.split(","):
        got = stage.get(prec, {})
        if "loss" in got:
            want = json.load(open(gpu_check.GOLDEN))["ci_runs"][prec]
            for i, (l, g) in enumerate(zip(got["loss"], got["grad_norm"])):
                print(f"{prec} step {i + 1}: loss {l:.9f} golden {want['loss'][i]:.9f}; "
                      f"grad norm {g:.9f} golden {want['grad_norm'][i]:.9f}")
    print(f"{stage['status']}: {stage['seconds']} s: {stage['summary']}")
    if stage["status"] != "ok":
        log = os.path.join(a.out, "stage2.log")
        if os.path.exists(log):
            print(open(log).read()[-4000:])
        raise SystemExit("FAIL: the virtual GPU's llama-20m run is outside stage 2's tolerance of the golden losses")
    print("PASS")


if __name__ == "__main__":
    main()
