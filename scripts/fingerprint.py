#!/usr/bin/env python3
"""The behaviour fingerprint of a build: what a refactor must leave unchanged, bit for bit.

Trains the tiny model for 12 steps in 8 layouts (one process; dp 2 at ZeRO 0-3; tp 2 with
sequence parallelism; pp 2 with 1F1B micro-batches; dp 2 x tp 2 x pp 2 at ZeRO 3), in bf16 and
"auto" precision on one process, and a run stopped at step 6 then resumed to 12; prints each run's
losses, gradient norms and validation losses exactly (the JSON text metrics.jsonl holds) with
their SHA-256, then the dry run of the 7B layout on 128 ranks and `fluxtrain plan` for it.
Two builds behave the same when their outputs are identical:

    scripts/fingerprint.py build/fluxtrain > before.txt   # on the old tree
    scripts/fingerprint.py build/fluxtrain > after.txt    # on the new tree
    diff before.txt after.txt && echo identical

Timing fields (step time, tokens/s, MFU) are left out: they are the machine's, not the build's.
usage: fingerprint.py FLUXTRAIN [CONFIG]   (CONFIG: configs/tiny.toml)
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

FT = sys.argv[1]
CONFIG = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "configs", "tiny.toml")
COMMON = ["--set", "train.steps=12", "--set", "train.eval_interval=6", "--set", "train.threads=1", "--set",
          "train.micro_batch_size=2", "--set", "optim.lr=3e-3"]
# name: (ranks, extra settings)
RUNS = {
    "single fp32": (1, []),
    "dp2 z0": (2, ["parallel.dp=2", "parallel.zero=0"]),
    "dp2 z1": (2, ["parallel.dp=2", "parallel.zero=1"]),
    "dp2 z2": (2, ["parallel.dp=2", "parallel.zero=2"]),
    "dp2 z3": (2, ["parallel.dp=2", "parallel.zero=3"]),
    "tp2 sp": (2, ["parallel.tp=2", "parallel.sequence_parallel=true"]),
    "pp2 1f1b": (2, ["parallel.pp=2"]),
    "dp2 tp2 pp2 z3": (8, ["parallel.dp=2", "parallel.tp=2", "parallel.pp=2", "parallel.zero=3"]),
    "single bf16": (1, ["train.precision=\"bf16\""]),
    "single auto": (1, ["train.precision=\"auto\""]),
}
KEYS = ("step", "loss", "grad_norm", "val_loss", "lr", "skipped")


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stdout[-3000:]}")
    return p.stdout


def train(run_dir, nproc, sets, more=()):
    cmd = [FT, "train", "--config", CONFIG, "--run-dir", run_dir] + COMMON + list(more)
    for s in sets:
        cmd += ["--set", s]
    if nproc > 1:
        cmd += ["--nproc", str(nproc)]
    run(cmd)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    # The exact text of each kept value: json.dumps of a float is its shortest round-trip repr.
    return [json.dumps({k: r[k] for k in KEYS if k in r}, sort_keys=True) for r in rows if "step" in r]


def show(name, lines):
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
    print(f"{name}: {len(lines)} rows, sha256 {digest}")
    for line in lines:
        print(f"  {line}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for name, (nproc, sets) in RUNS.items():
            show(name, train(os.path.join(tmp, name.replace(" ", "_")), nproc, sets))
        resumed = os.path.join(tmp, "resume")
        train(resumed, 1, ["ckpt.interval=6", "train.steps=6", "optim.decay_steps=12"])
        show("resumed at 6", train(resumed, 1, ["ckpt.interval=6", "optim.decay_steps=12"], ["--resume", "auto"]))
        straight = os.path.join(tmp, "straight")
        show("straight to 12", train(straight, 1, ["ckpt.interval=6", "optim.decay_steps=12"]))
    layout = ["--set", "parallel.dp=16", "--set", "parallel.tp=8", "--set", "train.seq_len=4096", "--set",
              "train.batch_size=1024", "--set", "train.precision=\"bf16\"", "--set", "parallel.zero=1", "--set",
              "model.preset=\"llama2-7b\""]
    dry = run([FT, "train", "--config", CONFIG, "--dry-run", "--world-size", "128", "--json"] + layout)
    show("dry run 7B x 128", [line for line in dry.splitlines() if "seconds" not in line and "_s\"" not in line])
    plan = run([FT, "plan", "--model", "llama2-7b", "--gpu", "a100-80gb", "--gpus", "128", "--tp", "8", "--dp", "16",
                "--seq-len", "4096", "--global-batch", "1024", "--tokens", "1T", "--zero", "3"])
    show("plan 7B x 128", plan.splitlines())


if __name__ == "__main__":
    main()
