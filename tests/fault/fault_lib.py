"""Helpers for the fault-injection tests: run `fluxtrain launch` on real processes, watch the
ranks through their heartbeat files, hurt them with real signals, and check what the run left
behind (metrics.jsonl, samples/, supervisor.jsonl)."""
import glob
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from launch_lib import LaunchedRun, fail, ranks_json, sets_args  # noqa: E402,F401

# The tiny config, 2 data-parallel ranks, small timeouts so failures show within seconds.
BATCH = 8
BASE = [
    "parallel.dp=2", "train.steps=40", "train.threads=1", "train.eval_interval=0", "train.batch_size=8",
    "ckpt.interval=5", "ckpt.keep=3", "fault.record_samples=true", "metrics.port=0",
    "fault.collective_timeout_s=3", "fault.heartbeat_timeout_s=8", "fault.startup_timeout_s=120",
    "fault.stop_grace_s=3", "fault.max_restarts=2",
]

# For the runs a test hurts once it has seen a step (wait_for_step, then a signal): a 40-step tiny
# run ends a fraction of a second after step 17 on a fast machine, and the signal must still find
# it running. Each checkpoint (every 5 steps) then holds the next update 250 ms (the checkpoint
# module's test knob, FLUXTRAIN_CKPT_TEST_COPY_DELAY_MS): at least a second from step 17 to the
# end on any machine, however fast, with the same losses. A slow machine only gets slower.
HOLD = {"FLUXTRAIN_CKPT_TEST_COPY_DELAY_MS": "250"}


class Launch(LaunchedRun):
    """A `fluxtrain launch` of the tiny config (BASE, then `sets`) in the background."""

    def __init__(self, ft, cfg, run_dir, sets=(), env=None, extra=()):
        e = dict(os.environ)
        e.update(env or {})
        e["OMP_NUM_THREADS"] = "1"
        cmd = [ft, "launch", "--config", cfg, "--run-dir", run_dir] + sets_args(list(BASE) + list(sets)) + list(extra)
        super().__init__(run_dir, cmd, subprocess.Popen, e)
        self.hurt_at = None  # when the test hurt a rank (Unix time)

    def pid(self, rank):
        hb = self.heartbeats()
        if rank not in hb:
            fail(f"no heartbeat of rank {rank}")
        entry = [r for r in ranks_json(self.run_dir)["ranks"] if r["rank"] == rank][0]
        if entry["pid"] != hb[rank]["pid"]:
            fail(f"ranks.json says pid {entry['pid']} for rank {rank}, its heartbeat {hb[rank]['pid']}")
        return entry["pid"]

    def signal(self, rank, sig):
        pid = self.pid(rank)
        self.hurt_at = time.time()
        os.kill(pid, sig)
        print(f"sent {signal.Signals(sig).name} to rank {rank} (pid {pid})", flush=True)


def metrics_by_step(run_dir):
    """step -> the last metrics.jsonl line for it (a resumed run rewrites later steps)."""
    out = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            if line.strip():
                j = json.loads(line)
                out[j["step"]] = j
    return out


def raw_metrics(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(l) for l in f if l.strip()]


def events(run_dir):
    path = os.path.join(run_dir, "supervisor.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def consumed_samples(run_dir):
    """step -> sorted list of the global sample indices the final attempt covering it read."""
    by_step = {}  # step -> attempt -> list of (begin, end)
    for p in glob.glob(os.path.join(run_dir, "samples", "rank-*.jsonl")):
        with open(p) as f:
            per_rank = {}
            for line in f:
                j = json.loads(line)
                per_rank[(j["step"], j["attempt"])] = (j["begin"], j["end"])  # a rank may redo a step
        for (step, att), rng in per_rank.items():
            by_step.setdefault(step, {}).setdefault(att, []).append(rng)
    out = {}
    for step, atts in by_step.items():
        last = max(atts)
        out[step] = sorted(i for b, e in atts[last] for i in range(b, e))
    return out


def check_samples(run_dir, steps, skipped=(), batch=BATCH, replicas=1):
    """No sample read twice, none missed: the final steps cover [0, N) minus the skipped windows.
    replicas: the ranks of one data-parallel replica that read the same samples (its tensor-parallel
    ranks each record them): every sample of a step must be read by exactly that many."""
    s = consumed_samples(run_dir)
    if sorted(s) != list(range(1, steps + 1)):
        fail(f"samples recorded for steps {sorted(s)[:5]}..., expected 1..{steps}")
    seen = []
    for step in range(1, steps + 1):
        idx = s[step]
        if replicas > 1:
            odd = sorted(i for i in set(idx) if idx.count(i) != replicas)
            if odd:
                fail(f"step {step}: samples {odd[:10]} not read by each of the {replicas} ranks of their replica")
            idx = sorted(set(idx))
        if len(idx) != batch or idx != list(range(idx[0], idx[0] + batch)) or idx[0] % batch:
            fail(f"step {step} read samples {idx}, not one whole global batch")
        seen += idx
    if len(seen) != len(set(seen)):
        dup = sorted({i for i in seen if seen.count(i) > 1})
        fail(f"samples read twice: {dup[:10]}")
    skip = {i for b, e in skipped for i in range(b, e)}
    expected = [i for i in range(len(seen) + len(skip)) if i not in skip]
    if sorted(seen) != expected:
        missing = sorted(set(expected) - set(seen))
        fail(f"samples skipped that should not be: {missing[:10]}")
    print(f"samples: {len(seen)} read exactly once over {steps} steps" +
          (f"; {len(skip)} deliberately skipped in {list(skipped)}" if skip else "; none skipped"), flush=True)


def check_losses_identical(ref_dir, run_dir, steps):
    a, b = metrics_by_step(ref_dir), metrics_by_step(run_dir)
    for s in range(1, steps + 1):
        if a[s]["loss"] != b[s]["loss"]:
            fail(f"step {s}: loss {b[s]['loss']!r} differs from the uninterrupted run's {a[s]['loss']!r}")
    print(f"losses: all {steps} steps bit-identical to the uninterrupted run", flush=True)


def recovery_times(run_dir):
    """[(failure kind, seconds from detection to the first step after the restart, the Unix time of
    that step)] from supervisor.jsonl."""
    ev = events(run_dir)
    detected = [e["detected_at"] for e in ev if e["event"] == "failure"]
    rec = [e for e in ev if e["event"] == "recovered"]
    return [(e["failure"], e["recovery_s"], d + e["recovery_s"]) for e, d in zip(rec, detected)]
