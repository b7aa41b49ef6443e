#!/usr/bin/env python3
"""`fluxtrain train --dry-run`: every rank of a layout planned in one process.

1. The reference layout, LLaMA-2 7B on dp 16 x tp 8 = 128 ranks (and a pipeline layout): the
   dry-run's per-rank memory must be the planner's — its largest rank equals what
   `fluxtrain plan` reports for the same config, category by category — and it must not allocate
   the model (the process's peak RSS stays far below one rank's parameters).
2. Against real runs (tiny model, 4 processes under mpirun; dp, tp with and without sequence
   parallelism and with replicated kv heads, pp, ZeRO 0-3): what the dry-run says each rank
   sends per step on the dp, tp and pp groups equals what the real ranks counted, and its
   parameter arena is the one the trainer allocated (metrics.jsonl, last step).

usage: dry_run_test.py FLUXTRAIN CONFIG WORK_DIR"""
import json
import os
import resource
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from check_lib import check, finish  # noqa: E402
from launch_lib import sets_args as sets  # noqa: E402

FT, CFG, WORK = sys.argv[1:4]


def run(args, **kw):
    p = subprocess.run([FT] + args, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        print(p.stdout[-3000:], p.stderr[-3000:])
        sys.exit(f"FAIL: fluxtrain {' '.join(args)} exited {p.returncode}")
    return p


def dry(items, world, gpu):
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    p = run(["train", "--config", CFG, "--dry-run", "--world-size", str(world), "--gpu", gpu, "--json"] + sets(items))
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return json.loads(p.stdout), rss if rss > before * 1024 else None


def plan(items, gpu):
    return json.loads(run(["plan", "--config", CFG, "--gpu", gpu, "--json"] + sets(items)).stdout)


SEVEN_B = ['model.preset="llama2-7b"', "train.seq_len=4096", "train.batch_size=1024", "train.micro_batch_size=1",
           'train.precision="bf16"', "parallel.zero=1"]


def against_plan(name, items, world, gpu):
    d, rss = dry(items, world, gpu)
    p = plan(items, gpu)
    check(len(d["ranks"]) == world, f"{name} on {gpu}: {world} ranks planned")
    biggest = max(d["ranks"], key=lambda r: r["memory_bytes"]["total"])
    mem = biggest["memory_bytes"]
    # `fluxtrain plan --json` gives GB (1e9 bytes): equal up to that conversion's rounding.
    pm = {k.removesuffix("_gb"): v * 1e9 for k, v in p["memory"].items()
          if k.endswith("_gb") and k not in ("capacity_gb",)}
    print(f"  {name} on {gpu} ({d['layout']}): largest rank {biggest['rank']} (stage {biggest['coord']['pp']}) "
          f"of {len({r['coord']['pp'] for r in d['ranks']})} stage(s)")
    print(f"  {'category':<18} {'dry-run bytes':>16} {'fluxtrain plan':>16}")
    mem = dict(mem)
    same = True
    for cat, v in sorted(pm.items()):
        got = mem.get(cat, 0.0)
        print(f"  {cat:<18} {got:>16.0f} {v:>16.0f}")
        same &= abs(got - v) <= 1e-9 * max(v, 1.0) + 1
    check(same, f"{name} on {gpu}: the largest rank's memory is the planner's, category by category")
    dp = {r["comm_bytes_per_step"]["dp"]["total"] for r in d["ranks"]}
    tp = {r["comm_bytes_per_step"]["tp"]["total"] for r in d["ranks"]}
    print(f"  per rank and step: dp {sorted(dp)} bytes, tp {sorted(tp)} bytes")
    if rss:
        params = biggest["arena_elements"] * 4
        print(f"  dry-run peak RSS {rss / 2**20:.0f} MiB; one rank's fp32 arena alone would be {params / 2**20:.0f} MiB")
        check(rss < params / 4, f"{name}: nothing of the model was allocated")
    return d


def per_rank_metrics(run_dir):
    last = None
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            if line.strip():
                last = json.loads(line)
    return last


def against_real(name, items, world, zero=0, fp32_weights=True):
    run_dir = os.path.join(WORK, name)
    shutil.rmtree(run_dir, ignore_errors=True)
    base = ["train.steps=2", "train.eval_interval=0", "train.threads=1", "metrics.port=0", "train.batch_size=8",
            "train.micro_batch_size=2"] + items
    subprocess.run([FT, "train", "--config", CFG, "--run-dir", run_dir, "--nproc", str(world)] + sets(base),
                   check=True, capture_output=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    m = per_rank_metrics(run_dir)
    d, _ = dry(base, world, "cpu")
    per = m["per_rank"]
    print(f"  {name}: rank  {'pp bytes (dry / real)':>24}  {'tp bytes (dry / real)':>24}  {'arena bytes (dry / real)':>26}")
    for r in d["ranks"]:
        i = r["rank"]
        c = r["comm_bytes_per_step"]
        real_pp = per["pp_send_bytes"][i] if "pp_send_bytes" in per else 0
        real_tp = per["tp_bytes"][i] if "tp_bytes" in per else 0
        real_arena = per["mem_parameters_bytes"][i]
        sends = c["pp"].get("send_recv", 0)  # pp_send_bytes: the schedule's sends (not the loss all-reduce)
        print(f"  {name}: {i:>4}  {sends:>11} / {real_pp:<11.0f}  {c['tp']['total']:>11} / {real_tp:<11.0f}  "
              f"{r['arena_elements'] * 4:>12} / {real_arena:<12.0f}")
        check(sends == real_pp, f"{name} rank {i}: pipeline bytes per step as counted by the real run")
        check(c["tp"]["total"] == real_tp, f"{name} rank {i}: tensor-parallel bytes per step as counted by the real run")
        # ZeRO 3 keeps a shard and gathered units instead of the arena; bf16 adds the weights' bf16 copies
        if zero < 3 and fp32_weights:
            check(r["arena_elements"] * 4 == real_arena, f"{name} rank {i}: the parameter arena the trainer allocated")
    # Data-parallel bytes: rank 0's, by collective (the real run logs rank 0's dp group).
    c0 = d["ranks"][0]["comm_bytes_per_step"]["dp"]
    for kind in ("all_reduce", "reduce_scatter", "all_gather"):
        real = m.get(f"comm_{kind}_bytes", 0)
        print(f"  {name}: rank 0 dp {kind} bytes per step: dry-run {c0.get(kind, 0)}, real {real}")
        check(c0.get(kind, 0) == real, f"{name}: rank 0's dp {kind} bytes per step as counted by the real run")


os.makedirs(WORK, exist_ok=True)
print("== the reference layout: LLaMA-2 7B, dp 16 x tp 8 = 128 ranks")
against_plan("7b dp16xtp8", SEVEN_B + ["parallel.dp=16", "parallel.tp=8"], 128, "a100-80gb")
against_plan("7b dp16xtp8", SEVEN_B + ["parallel.dp=16", "parallel.tp=8"], 128, "cpu")
print("== a pipeline layout: 7B, dp 2 x tp 4 x pp 4 = 32 ranks, 1F1B")
against_plan("7b dp2xtp4xpp4", SEVEN_B + ["parallel.dp=2", "parallel.tp=4", "parallel.pp=4"], 32, "a100-80gb")
print("== against real runs of the tiny model (4 ranks)")
against_real("dp2xtp2-zero1", ["parallel.dp=2", "parallel.tp=2", "parallel.zero=1"], 4, zero=1)
against_real("tp2xpp2-sp", ["parallel.tp=2", "parallel.pp=2", "parallel.sequence_parallel=true"], 4)
against_real("dp2xpp2-zero3", ["parallel.dp=2", "parallel.pp=2", "parallel.zero=3"], 4, zero=3)
against_real("dp4-zero0", ["parallel.dp=4"], 4)
against_real("tp4-kv-replicated-zero2", ["parallel.tp=4", "parallel.zero=2"], 4, zero=2)
# bf16 compute: sequence parallelism gathers the normed GEMM inputs in bf16, the rest of tp in
# fp32; full recompute repeats the forward's collectives in backward. bf16 gradients under ZeRO 3.
against_real("tp2-sp-bf16-recompute",
             ["parallel.tp=2", "parallel.sequence_parallel=true", 'train.precision="bf16"', 'model.recompute="full"'], 2,
             fp32_weights=False)
against_real("dp2-zero3-bf16-grads", ["parallel.dp=2", "parallel.zero=3", 'parallel.grad_compression="bf16"'], 2, zero=3)

p = subprocess.run([FT, "train", "--config", CFG, "--dry-run", "--world-size", "100"] +
                   sets(SEVEN_B + ["parallel.dp=16", "parallel.tp=8"]), capture_output=True, text=True)
check(p.returncode != 0 and "the world has 100 rank(s) but parallel.dp × parallel.tp × parallel.pp = 16 × 8 × 1 = 128"
      in p.stderr, "a world size that is not dp x tp x pp: one clear error")
finish("PASS: the dry-run plans every rank without allocating; memory = the planner's; traffic = the real runs'")
