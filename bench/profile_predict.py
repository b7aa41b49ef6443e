"""Profile mode held to measurements: predicted vs measured step time of llama-20m layouts.

One profile (`fluxtrain plan --profile --nproc 2 --profile-threads 1`: the step's ops timed at 1
thread, every mesh axis's collectives over 2 ranks), then for each layout the prediction
(`fluxtrain plan --profile-file`) and the measurement (`fluxtrain train --nproc N`, the median
step_s of the steps after the first two). Nothing is fitted to the layouts: the profile is
taken once, before any of them runs.

    /usr/bin/python3 bench/profile_predict.py [FLUXTRAIN] [STEPS] [PROFILE]

PROFILE: an existing profile to predict from (taken with the same settings); otherwise one is taken
and kept as bench-profile.json in the working directory.

Each rank runs CPUs / ranks threads (the trainer's own rule on this machine, at least 1).
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "fluxtrain")
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 6
PROFILE = sys.argv[3] if len(sys.argv) > 3 else ""
CONFIG = os.path.join(ROOT, "configs", "llama-20m.toml")
COMMON = ["--set", f"train.steps={STEPS}", "--set", "train.eval_interval=0", "--set", "train.batch_size=4",
          "--set", "train.seq_len=128", "--set", "model.tie_embeddings=false"]  # untied: pp splits them
LAYOUTS = [  # name, ranks, settings
    ("dp2 zero0", 2, ["parallel.dp=2"]),
    ("dp2 zero1", 2, ["parallel.dp=2", "parallel.zero=1"]),
    ("dp2 zero2", 2, ["parallel.dp=2", "parallel.zero=2"]),
    ("dp2 zero3", 2, ["parallel.dp=2", "parallel.zero=3"]),
    ("dp2 bf16 grads", 2, ["parallel.dp=2", 'parallel.grad_compression="bf16"']),
    ("tp2", 2, ["parallel.tp=2"]),
    ("tp2 sp", 2, ["parallel.tp=2", "parallel.sequence_parallel=true"]),
    ("pp2 1f1b m4", 2, ["parallel.pp=2", "parallel.micro_batches=4"]),
    ("pp2 gpipe m4", 2, ["parallel.pp=2", "parallel.micro_batches=4", 'parallel.pp_schedule="gpipe"']),
    ("dp2 tp2", 4, ["parallel.dp=2", "parallel.tp=2"]),
]


def sets(settings):
    out = []
    for s in settings:
        out += ["--set", s]
    return out


def measure(tmp, name, ranks, settings):
    run_dir = os.path.join(tmp, name.replace(" ", "_"))
    cmd = [FT, "train", "--config", CONFIG, "--run-dir", run_dir] + COMMON + sets(settings) + ["--nproc", str(ranks)]
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{name} failed:\n{p.stderr[-3000:]}")
    rows = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))]
    return statistics.median(r["step_s"] for r in rows[2:])


def predict(profile, ranks, settings):
    threads = max(1, (os.cpu_count() or 1) // ranks)
    cmd = [FT, "plan", "--profile-file", profile, "--config", CONFIG, "--threads", str(threads), "--json"] + COMMON + \
        sets(settings)
    return json.loads(subprocess.run(cmd, stdout=subprocess.PIPE, check=True, text=True).stdout)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        profile = PROFILE or "bench-profile.json"
        if not PROFILE:
            subprocess.run([FT, "plan", "--profile", "--config", CONFIG, "--nproc", "2", "--profile-threads", "1",
                            "--out", profile] + COMMON,
                           check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
        print(f"{'layout':<16} {'ranks':>5} {'predicted s':>11} {'measured s':>10} {'error':>7}  compute / comm by axis")
        errors = []
        for name, ranks, settings in LAYOUTS:
            p = predict(profile, ranks, settings)
            m = measure(tmp, name, ranks, settings)
            err = p["step_s"] / m - 1
            errors.append(abs(err))
            comm = ", ".join(f"{k} {v:.3f}" for k, v in p["comm_s_by_axis"].items())
            print(f"{name:<16} {ranks:>5} {p['step_s']:>11.3f} {m:>10.3f} {100 * err:>+6.1f}%  {p['compute_s']:.3f} / {comm}",
                  flush=True)
        errors.sort()
        print(f"\n|error| median {100 * statistics.median(errors):.1f}%, max {100 * errors[-1]:.1f}%; "
              f"{sum(e <= 0.10 for e in errors)} of {len(errors)} within 10%")


if __name__ == "__main__":
    main()
