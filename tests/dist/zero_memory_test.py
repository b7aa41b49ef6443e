"""ZeRO-3 at dp = 4 holds at most 0.3x the model-state bytes (parameters + gradients + optimizer
state, from the allocator's accounting in metrics.jsonl) of ZeRO-0 on the same model.

usage: zero_memory_test.py FLUXTRAIN CONFIG
"""
import json
import os
import subprocess
import sys
import tempfile

FT, CONFIG = sys.argv[1], sys.argv[2]
MODEL = ["--set", "model.n_layers=32", "--set", "train.steps=2", "--set", "train.eval_interval=0",
         "--set", "train.batch_size=4", "--set", "train.seq_len=16", "--set", "parallel.dp=4", "--nproc", "4"]
KEYS = ("mem_parameters_bytes", "mem_gradients_bytes", "mem_optimizer_state_bytes")


def states(tmp, zero):
    run_dir = os.path.join(tmp, f"z{zero}")
    subprocess.run([FT, "train", "--config", CONFIG, "--run-dir", run_dir, "--set", f"parallel.zero={zero}"] + MODEL,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    last = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))][-1]
    return {k: last[k] for k in KEYS}


with tempfile.TemporaryDirectory() as tmp:
    results = {z: states(tmp, z) for z in (0, 1, 2, 3)}
print(f"{'zero':>4} " + " ".join(f"{k[4:-6]:>16}" for k in KEYS) + f" {'total':>10} {'vs zero0':>8}")
z0 = sum(results[0].values())
for z, r in results.items():
    t = sum(r.values())
    print(f"{z:>4} " + " ".join(f"{r[k]:16d}" for k in KEYS) + f" {t:10d} {t / z0:8.3f}")
ratio = sum(results[3].values()) / z0
if ratio > 0.3:
    print(f"FAILED: zero3 holds {ratio:.3f}x the model states of zero0 (> 0.3)")
    sys.exit(1)
print(f"zero3 at dp=4 holds {ratio:.3f}x the model-state bytes of zero0")
