"""Profile mode held to measurements: predicted vs measured step time of llama-20m layouts.

One profile (`fluxtrain plan --profile --nproc 2 --profile-threads 1`: the step's ops timed at 1
thread, alone and by 2 processes at once, every mesh axis's collectives over 2 ranks), then for each layout the prediction
(`fluxtrain plan --profile-file`) and the measurement (`fluxtrain train --nproc N`, the median
step_s of the steps after the first two). Nothing is fitted to the layouts: the profile is
taken once, before any of them runs.

    /usr/bin/python3 bench/profile_predict.py [FLUXTRAIN] [STEPS] [PROFILE] [--only "dp2 zero0,dp2 tp2"]

PROFILE: an existing profile to predict from (taken with the same settings); otherwise one is taken
and kept as bench-profile.json in the working directory. --only: the layouts to run, by name.

Each rank runs CPUs / ranks threads (the trainer's own rule on this machine, at least 1). The
prediction prices the ops from the set timed at the layout's concurrency (its ranks computing at
once here: min(ranks, CPUs / threads)); the last column's "@N" says which concurrency priced them.

Where a measured step's time went (the columns after the error), from the kernel's scheduler
statistics of every rank's threads (/proc/PID/task/TID/schedstat) over the measured steps, per step,
for the rank whose training thread ran longest: "on-CPU" is its training thread's CPU time (what
the prediction's compute prices: the ops), "other" its other threads' (the communication thread,
the data prefetcher), "run-queue" the time the training thread was ready but waited for a CPU
(cores shared with other ranks or other processes), "idle" the rest of the step (the thread
asleep: collective waits, a slow peer). Unlike the step's wall time, on-CPU holds under load; a
step far above its on-CPU time names where the difference is (run-queue or idle).
"r0 compute" is rank 0's step less the time it waited in collectives and pipeline receives (the
trainer's compute_s: waits count whether the thread polls or sleeps) beside the predicted compute
of rank 0 (`compute_s_by_rank`): for pp the stage's own ops apart from the waits between stages.
The line ends with every rank's on-CPU (by rank) beside every rank's predicted compute, the profile's
untimed share (the profiled steps' CPU work outside their ops) and the compute predicted from the
same profile without it (the ops alone, their fills and copies priced apart: the prediction before it).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = argparse.ArgumentParser(description="profile mode: predicted vs measured llama-20m layouts")
ARGS.add_argument("fluxtrain", nargs="?", default=os.path.join(ROOT, "build", "fluxtrain"))
ARGS.add_argument("steps", nargs="?", type=int, default=6)
ARGS.add_argument("profile", nargs="?", default="")
ARGS.add_argument("--only", default="", help="comma-separated layout names (default: all)")
OPTS = ARGS.parse_args()
FT, STEPS, PROFILE = os.path.realpath(OPTS.fluxtrain), OPTS.steps, OPTS.profile
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
    ("cp2 ring", 2, ["parallel.cp=2"]),
    ("cp2 all_to_all", 2, ["parallel.cp=2", 'parallel.cp_attention="all_to_all"']),
    ("dp2 tp2", 4, ["parallel.dp=2", "parallel.tp=2"]),
]


def sets(settings):
    out = []
    for s in settings:
        out += ["--set", s]
    return out


def rank_pids(run_dir):
    """The processes training into run_dir: the ranks under mpirun (not the launcher)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{pid}/cmdline").read().split("\0")
            if argv[0] == FT and run_dir in argv and "OMPI_COMM_WORLD_RANK=" in open(f"/proc/{pid}/environ").read():
                pids.append(int(pid))
        except OSError:
            pass
    return pids


def world_rank(pid):
    """The rank mpirun gave the process (its OMPI_COMM_WORLD_RANK)."""
    try:
        for kv in open(f"/proc/{pid}/environ").read().split("\0"):
            if kv.startswith("OMPI_COMM_WORLD_RANK="):
                return int(kv.split("=", 1)[1])
    except OSError:
        pass
    return -1


def sched(pids):
    """Per rank: (training thread's on-CPU s, its run-queue wait s, the whole process's CPU s)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
                on, runq = (int(x) / 1e9 for x in f.read().split()[:2])
            with open(f"/proc/{pid}/stat") as f:
                utime, stime = (int(x) for x in f.read().rsplit(")", 1)[1].split()[11:13])
            out[pid] = (on, runq, (utime + stime) / tick)
        except OSError:
            pass
    return out


def per_step(first, last, n):
    """One rank's (training thread's on-CPU, its run-queue wait, the other threads' CPU) per step
    between two snapshots of sched()."""
    on, runq, cpu = ((b - a) / n for a, b in zip(first, last))
    return on, runq, max(0.0, cpu - on)


def measure(tmp, name, ranks, settings):
    """The median step_s after the first two steps, and where the steps' time went (see the top)."""
    run_dir = os.path.join(tmp, name.replace(" ", "_"))
    metrics = os.path.join(run_dir, "metrics.jsonl")
    cmd = [FT, "train", "--config", CONFIG, "--run-dir", run_dir] + COMMON + sets(settings) + ["--nproc", str(ranks)]
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    err = tempfile.TemporaryFile(mode="w+")
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, text=True, env=env)
    first = last = None  # (steps done, seconds, sched) when the 2nd step is seen done, and the latest
    pids = []
    while p.poll() is None:
        done = sum(1 for _ in open(metrics)) if os.path.exists(metrics) else 0
        if done >= 2:
            pids = pids if len(pids) == ranks else rank_pids(run_dir)
            snap = (done, time.monotonic(), sched(pids))
            if first is None:
                first = snap if len(snap[2]) == ranks else None
            elif len(snap[2]) == len(first[2]) == ranks:
                last = snap
        time.sleep(0.05)
    if p.returncode != 0:
        err.seek(0)
        sys.exit(f"{name} failed:\n{err.read()[-3000:]}")
    rows = [json.loads(l) for l in open(metrics)]
    where = None
    if first and last and last[0] > first[0]:
        n, wall = last[0] - first[0], (last[1] - first[1]) / (last[0] - first[0])
        per = [per_step(first[2][pid], last[2][pid], n) for pid in last[2] if pid in first[2]]
        on, runq, other = max(per)
        where = {"on_cpu": on, "other": other, "run_queue": runq, "idle": max(0.0, wall - on - runq)}
        where["on_cpu_by_rank"] = [per_step(first[2][pid], last[2][pid], n)[0]
                                   for pid in sorted(last[2], key=world_rank) if pid in first[2]]
    if where is not None:  # rank 0's step less its waits in collectives and receives (metrics' compute_s)
        where["r0_compute"] = statistics.median(r.get("compute_s", 0.0) for r in rows[2:])
    return statistics.median(r["step_s"] for r in rows[2:]), where


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
        # The same profile without its untimed shares: the prediction from the ops alone (before them).
        ops_only = os.path.join(tmp, "ops-only.json")
        prof = json.load(open(profile))
        for s in prof.get("op_sets", []):
            s.pop("untimed_share", None)
        json.dump(prof, open(ops_only, "w"))
        only = [n.strip() for n in OPTS.only.split(",") if n.strip()]
        unknown = [n for n in only if n not in [l[0] for l in LAYOUTS]]
        if unknown:
            sys.exit(f"--only: no layout named {unknown}; the layouts: {', '.join(l[0] for l in LAYOUTS)}")
        print(f"{'layout':<16} {'ranks':>5} {'predicted s':>11} {'measured s':>10} {'error':>7}  "
              f"{'on-CPU':>6} {'other':>6} {'run-queue':>9} {'idle':>6} {'r0 compute meas/pred':>20}  "
              "predicted compute @ops' concurrency / comm by axis")
        errors = []
        for name, ranks, settings in LAYOUTS:
            if only and name not in only:
                continue
            p = predict(profile, ranks, settings)
            bare = predict(ops_only, ranks, settings)
            m, where = measure(tmp, name, ranks, settings)
            err = p["step_s"] / m - 1
            errors.append(abs(err))
            comm = ", ".join(f"{k} {v:.3f}" for k, v in p["comm_s_by_axis"].items())
            w = " ".join(f"{where[k]:>{n}.3f}" for k, n in (("on_cpu", 6), ("other", 6), ("run_queue", 9),
                                                              ("idle", 6))) if where else f"{'-':>30}"
            r0 = p.get("compute_s_by_rank", [float("nan")])[0]
            w += f" {where['r0_compute']:>10.3f}/{r0:<9.3f}" if where else f" {'-':>20}"
            by_rank = " ".join(f"{x:.3f}" for x in where["on_cpu_by_rank"]) if where else "-"
            print(f"{name:<16} {ranks:>5} {p['step_s']:>11.3f} {m:>10.3f} {100 * err:>+6.1f}%  {w}  "
                  f"{p['compute_s']:.3f} @{p.get('concurrency', 1)} / {comm}  [on-CPU by rank {by_rank}; "
                  f"predicted {' '.join(f'{x:.3f}' for x in p.get('compute_s_by_rank', []))}; untimed share "
                  f"{100 * p.get('untimed_share', 0):.1f}%, compute from the ops alone {bare['compute_s']:.3f}]",
                  flush=True)
        errors.sort()
        print(f"\n|error| median {100 * statistics.median(errors):.1f}%, max {100 * errors[-1]:.1f}%; "
              f"{sum(e <= 0.10 for e in errors)} of {len(errors)} within 10%")


if __name__ == "__main__":
    main()
