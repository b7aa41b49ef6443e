"""Pipeline bubble, measured against theory, in one run.

For each layout, `fluxtrain train` runs a few steps under mpirun; every stage timestamps the
forward and backward actions it executes (PipelineRunner); the pipeline's pass runs from the first
stage's start to the last stage's end, a stage's idle time is that span minus its busy time, and
the measured bubble is Σ idle / (stages × span) (metrics.jsonl: pp_bubble, per_rank.pp_idle_s). The peer is the schedule itself:
the same action table simulated with unit-time actions (pp_bubble_theory), which equals the
textbook (p−1)/(m+p−1) for 1F1B and (p−1)/(v·m+p−1) for interleaved. The ratio is printed last.
"w/ FLOPs" times the same table with each chunk's forward and backward FLOPs (the head's chunk
is heavier, and its forward action also runs the head's fused backward) — pp_bubble_theory_flops:
what the partition's imbalance adds to the textbook figure.

    /usr/bin/python3 bench/pipeline_bubble.py [FLUXTRAIN] [STEPS]

Each rank runs one thread. The machine this was written on has 2 cores: pp = 2 fits, pp = 4 is
oversubscribed (two stages share a core while both compute), which stretches busy time in the
steady state — read pp = 4 with that in mind.
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
MICRO_BATCHES = 8
# A small model whose layers take milliseconds, so computation dominates messages and bookkeeping.
MODEL = ["--set", "model.dim=128", "--set", "model.n_layers=8", "--set", "model.n_heads=4", "--set",
         "model.n_kv_heads=4", "--set", "model.ffn_dim=344", "--set", "model.vocab_size=512"]
COMMON = MODEL + ["--set", f"train.steps={STEPS}", "--set", "train.eval_interval=0", "--set",
                  f"train.batch_size={MICRO_BATCHES}", "--set", "train.seq_len=32", "--set",
                  f"parallel.micro_batches={MICRO_BATCHES}", "--set", "train.threads=1"]
LAYOUTS = [  # name, pp, schedule, virtual stages
    ("pp2 1f1b", 2, "1f1b", 1),
    ("pp2 gpipe", 2, "gpipe", 1),
    ("pp4 1f1b", 4, "1f1b", 1),
    ("pp4 interleaved v2", 4, "interleaved", 2),
]


def run(tmp, name, pp, sched, v):
    run_dir = os.path.join(tmp, name.replace(" ", "_"))
    cmd = [FT, "train", "--config", os.path.join(ROOT, "configs", "tiny.toml"), "--run-dir", run_dir] + COMMON + [
        "--set", f"parallel.pp={pp}", "--set", f"parallel.pp_schedule={sched}", "--set",
        f"parallel.virtual_stages={v}", "--nproc", str(pp)]
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{name} failed:\n{p.stderr}")
    rows = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))][1:]  # skip the first step
    return {
        "measured": statistics.median(r["pp_bubble"] for r in rows),
        "theory": rows[0]["pp_bubble_theory"],
        "theory_flops": rows[0]["pp_bubble_theory_flops"],
        "idle_ms": [1e3 * statistics.median(r["per_rank"]["pp_idle_s"][s] for r in rows) for s in range(pp)],
        "busy_ms": [1e3 * statistics.median(r["per_rank"]["pp_busy_s"][s] for r in rows) for s in range(pp)],
        "step_s": statistics.median(r["step_s"] for r in rows),
    }


def main():
    with tempfile.TemporaryDirectory() as tmp:
        results = [(name, pp, sched, v, run(tmp, name, pp, sched, v)) for name, pp, sched, v in LAYOUTS]
    print(f"{MICRO_BATCHES} micro-batches, {STEPS} steps (first skipped), medians; 1 thread per rank, {os.cpu_count()} cores")
    print(f"{'layout':<20} {'step s':>7}  {'busy ms per stage':<24} {'idle ms per stage':<24} {'measured':>9} "
          f"{'theory':>7} {'w/ FLOPs':>8}")
    for name, pp, sched, v, r in results:
        busy = " ".join(f"{x:.0f}" for x in r["busy_ms"])
        idle = " ".join(f"{x:.0f}" for x in r["idle_ms"])
        print(f"{name:<20} {r['step_s']:>7.3f}  {busy:<24} {idle:<24} {r['measured']:>9.3f} {r['theory']:>7.3f} "
              f"{r['theory_flops']:>8.3f}")
    for name, pp, sched, v, r in results:
        print(f"ratio measured/theory bubble {name}: {r['measured'] / r['theory']:.2f}")


if __name__ == "__main__":
    main()
