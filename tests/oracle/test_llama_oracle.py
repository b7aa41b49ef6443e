"""Oracle: fluxtrain's model and trainer against PyTorch on identical weights and batches.

Runs `fluxtrain debug-state` (the real trainer), then replays the same steps in PyTorch
(tests/oracle/llama_torch.py, torch.optim.AdamW, torch.nn.utils.clip_grad_norm_) and compares
the logits, the loss, the gradient of every parameter and the losses of every AdamW step.

usage: test_llama_oracle.py FLUXTRAIN CONFIG [--set k=v ...] [--precision fp32|bf16]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

# The oracle is PyTorch at the CPU's full ISA: ONEDNN_MAX_CPU_ISA (the AVX2 simulation of CI) is for
# fluxtrain, whose environment keeps it. PyTorch would hand bf16 matmuls to oneDNN on a CPU with
# AVX-512, where oneDNN limited to AVX2 has none.
FLUXTRAIN_ENV = dict(os.environ)
for _var in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
    os.environ.pop(_var, None)
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import safetensors_np  # noqa: E402
from llama_torch import Llama  # noqa: E402


def rel_err(ours, ref):
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    return float(np.abs(ours - ref).max() / max(np.linalg.norm(ref.ravel()) / math.sqrt(ref.size), 1e-30))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fluxtrain")
    ap.add_argument("config")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "state.safetensors")
        cmd = [args.fluxtrain, "debug-state", "--config", args.config, "--out", out, "--steps", str(args.steps),
               "--set", f'train.run_dir="{tmp}/run"']
        for s in args.set:
            cmd += ["--set", s]
        subprocess.run(cmd, check=True, env=FLUXTRAIN_ENV)
        st, meta = safetensors_np.load(out)
    cfg = json.loads(meta["config"])
    mc, oc, tc = cfg["model"], cfg["optim"], cfg["train"]
    bf16 = tc["precision"] == "bf16"
    tol_grad, tol_loss, tol_logits = (2e-2, 2e-2, 2e-2) if bf16 else (1e-4, 1e-5, 1e-4)

    init = {k[len("init."):]: torch.from_numpy(v) for k, v in st.items() if k.startswith("init.")}
    model = Llama(mc, init)
    names = list(init)
    decay = [model.w(n) for n in names if model.w(n).dim() >= 2]
    no_decay = [model.w(n) for n in names if model.w(n).dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": oc["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1.0, betas=(oc["beta1"], oc["beta2"]), eps=oc["eps"])

    failures = []
    print(f"precision {tc['precision']}: tolerances loss {tol_loss}, gradients {tol_grad}, logits {tol_logits}")
    for step in range(1, args.steps + 1):
        batch = torch.from_numpy(st[f"batch.{step}"]).long()
        inputs, targets = batch[:, :-1], batch[:, 1:]
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(inputs)
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))
        loss.backward()
        if step == 1:
            e = rel_err(st["logits"], logits.detach().float().reshape(st["logits"].shape).numpy())
            print(f"logits: max-abs error / rms = {e:.2e}")
            if e > tol_logits:
                failures.append(f"logits error {e:.2e}")
            worst = 0.0
            for n in names:
                g = model.w(n).grad.numpy()
                e = float(np.abs(st["grad." + n] - g).max() / max(np.linalg.norm(g.ravel()), 1e-30))
                worst = max(worst, e)
                if e > tol_grad:
                    failures.append(f"gradient of {n}: max-abs/norm {e:.2e}")
            print(f"gradients: worst max-abs error / norm over {len(names)} parameters = {worst:.2e}")
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), oc["grad_clip"]) if oc["grad_clip"] > 0 else None
        ours, ref = float(st["losses"][step - 1]), float(loss)
        e = abs(ours - ref) / abs(ref)
        print(f"step {step}: loss fluxtrain {ours:.7f} torch {ref:.7f} rel {e:.1e}"
              + (f" | grad norm {st['grad_norms'][step - 1]:.6f} vs {float(norm):.6f}" if norm is not None else ""))
        if e > tol_loss:
            failures.append(f"step {step} loss rel error {e:.2e}")
        for group in opt.param_groups:
            group["lr"] = float(st["lrs"][step - 1])
        opt.step()
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("oracle: all checks passed")


if __name__ == "__main__":
    main()
