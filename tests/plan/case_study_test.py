#!/usr/bin/env python3
"""`fluxtrain plan --case configs/claims/case-study.json`: the customer's 7B on 128 A100 in full.

Every number the planner prints is recomputed here from the case's own figures and published
constants (the LLaMA 7B shape, the A100's 312 TFLOP/s, Llama 3's failure rate, Young's interval),
not compared with output recorded earlier. The step time is the planner's (its model has its own
tests); everything that follows from it — tokens/s, MFU, days, cost, interruptions, checkpoint
save time, Young/Daly's interval and the run's losses — is checked against arithmetic here.

usage: case_study_test.py FLUXTRAIN CASE_JSON
"""
import json
import math
import re
import subprocess
import sys

FT, CASE = sys.argv[1], sys.argv[2]
PRICE = 2.0
failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


def close(a, b, rel=1e-6):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


def plan(*extra, json_out=True):
    cmd = [FT, "plan", "--case", CASE, "--price", str(PRICE)] + list(extra) + (["--json"] if json_out else [])
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")
    return json.loads(p.stdout) if json_out else p.stdout


case = json.load(open(CASE))
L, h, F, V, s = case["layers"], case["hidden"], case["ffn_hidden"], case["vocab"], case["seq_len"]
gpus, batch = case["num_gpus"], case["global_batch_seqs"]
nodes = gpus // 8  # DGX A100: 8 GPUs per node

# LLaMA 7B: embedding, 32 blocks (q, k, v, o; gate, up, down; two norms), final norm, untied head.
N = V * h + L * (4 * h * h + 3 * h * F + 2 * h) + h + V * h
# PaLM's convention, as the trainer counts MFU: 6 x the matmul parameters (all but the embedding
# table and the norms' weights) + 12 x layers x dim x seq_len.
matmul_params = N - V * h - (2 * L + 1) * h
flops_per_token = 6 * matmul_params + 12 * L * h * s
peak = 312e12  # A100 dense bf16, datasheet
rate_per_gpu_day = 419 / (54 * 16384)  # Llama 3: 419 interruptions in 54 days on 16,384 GPUs
tokens = case["epochs"] * case["dataset_tokens"]

j = plan()
step = j["step_time_s"]
print(f"planned layout {j['layout']}, step {step:.4f} s")
check(j["job"]["model"]["params"] == N, f"parameters {j['job']['model']['params']} == {N}")
check(j["gpus"] == gpus and j["job"]["gpu"] == "a100-80gb", "128 x a100-80gb")
check(j["memory"]["fits"] and j["memory"]["total_gb"] <= j["memory"]["capacity_gb"], "the layout fits in memory")
lay = j["layout"]
check(lay["dp"] * lay["tp"] * lay["pp"] * lay["cp"] == gpus, "dp x tp x pp x cp = 128")
tps = batch * s / step
check(close(j["tokens_per_s"], tps), f"tokens/s {j['tokens_per_s']:.6g} == {batch} x {s} / step = {tps:.6g}")
mfu = tps * flops_per_token / (gpus * peak)
check(close(j["mfu"], mfu), f"MFU {j['mfu']:.4f} == tokens/s x (6 N_matmul + 12Lhs) / (128 x 312T) = {mfu:.4f}")
steps = math.ceil(tokens / (batch * s))
check(j["steps"] == steps, f"steps {j['steps']} == ceil(12.6T / 2.1M) = {steps}")
train_s = steps * step
check(close(j["wall_days"], train_s / 86400), f"days {j['wall_days']:.3f} == steps x step / 86400")
gpu_hours = train_s * gpus / 3600
check(close(j["gpu_hours"], gpu_hours), f"GPU-hours {j['gpu_hours']:.6g} == {gpu_hours:.6g}")
check(close(j["cost_usd"], gpu_hours * PRICE), f"cost ${j['cost_usd']:.6g} == GPU-hours x ${PRICE}")

# Failures and checkpoints.
c = j["checkpoints"]
per_day = gpus * rate_per_gpu_day
check(close(j["interruptions_per_day"], per_day), f"interruptions/day {j['interruptions_per_day']:.5f} == 128 x 419 / (54 x 16384)")
mtbf = 86400 / per_day
check(close(c["mtbf_s"], mtbf), f"MTBF {c['mtbf_s']:.6g} s == {mtbf:.6g} s ({mtbf / 86400:.2f} days)")
ckpt_bytes = 12 * N  # fp32 weights + AdamW m, v
check(close(c["bytes"], ckpt_bytes), f"checkpoint {c['bytes'] / 1e9:.2f} GB == 12 B x N")
save = ckpt_bytes / (nodes * 2e9)
check(not c["save_measured"] and close(c["save_s"], save), f"save {c['save_s']:.3f} s == bytes / (16 nodes x 2 GB/s)")
interval = case["ckpt_every_steps"] * step
check(c["interval_steps"] == case["ckpt_every_steps"] and close(c["interval_s"], interval),
      f"interval {c['interval_s']:.1f} s == 2000 x step")
young = math.sqrt(2 * save * mtbf)
check(close(c["optimal_interval_s"], young), f"Young/Daly {c['optimal_interval_s']:.1f} s == sqrt(2 x save x MTBF) = {young:.1f}")
restart = case["recovery_s"]


def losses(tau, save_s):
    interruptions = per_day * train_s / 86400
    failure_s = interruptions * (restart + tau / 2)
    saves = train_s / tau
    overhead = saves * save_s
    wall = train_s + failure_s + overhead
    lost_h = (failure_s + overhead) * gpus / 3600
    return dict(interruptions=interruptions, failure_s=failure_s, saves=saves, save_overhead_s=overhead,
                goodput=train_s / wall, wall_days=wall / 86400, lost_gpu_hours=lost_h, lost_usd=lost_h * PRICE)


for name, tau in (("at_chosen", interval), ("at_optimal", young)):
    want = losses(tau, save)
    for k, v in want.items():
        check(close(c[name][k], v), f"{name}.{k} {c[name][k]:.6g} == {v:.6g}")
check(close(j["goodput"], losses(interval, save)["goodput"]), "the plan's goodput is the chosen interval's")
check(close(j["wall_days_with_failures"], losses(interval, save)["wall_days"]), "days with failures")
# Young's interval minimises the loss: neither half nor double it does better.
lost = lambda tau: losses(tau, save)["failure_s"] + losses(tau, save)["save_overhead_s"]
check(lost(young) <= min(lost(young / 2), lost(young * 2), lost(interval)), "Young's interval loses least")

# A measured save time replaces the predicted one.
m = plan("--ckpt-save-s", "30")["checkpoints"]
check(m["save_measured"] and m["save_s"] == 30, "--ckpt-save-s 30 is used")
check(close(m["optimal_interval_s"], math.sqrt(2 * 30 * mtbf)), f"Young/Daly at 30 s: {m['optimal_interval_s']:.1f} s")
st = plan("--storage-gbs", "0.5")["checkpoints"]
check(close(st["save_s"], ckpt_bytes / (nodes * 0.5e9)), "--storage-gbs 0.5 per node")

# The claims: which are impossible, with the arithmetic.
v = j["case"]["check"]
check(not v["possible"], "the case's claims cannot all be true")
peak_tps = gpus * peak / flops_per_token
msgs = " | ".join(x["message"] for x in v["violations"])
for claim, implied in (("tokens_per_s_total", case["tokens_per_s_total"]),
                       ("step_time_s", batch * s / case["step_time_s"]),
                       ("wall_days", tokens / (case["wall_days"] * 86400))):
    pct = f"{100 * implied / peak_tps:.0f}%"
    check(pct in msgs, f"{claim}: {implied:.4g} tokens/s is {pct} of the peak {peak_tps:.4g} and is named impossible")
at_claimed_mfu = tokens / (case["mfu"] * peak_tps) / 86400
check(f"{at_claimed_mfu:.1f} days at the claimed 58% MFU" in " ".join(v["facts"]),
      f"at the claimed 58% MFU the run takes {at_claimed_mfu:.1f} days")

# The terminal report shows the same numbers.
text = plan(json_out=False)
print(text)


def row(name):
    m_ = re.search(r"^\s+" + re.escape(name) + r"\s+(\S+)\s+(\S+)", text, re.M)
    return m_.groups() if m_ else (None, None)


claimed, planned = row("tokens/s")
check(claimed and float(claimed) == case["tokens_per_s_total"] and close(float(planned), tps, 1e-3),
      f"table: tokens/s claimed {claimed}, planned {planned}")
claimed, planned = row("step time (s)")
check(claimed and float(claimed) == case["step_time_s"] and close(float(planned), step, 5e-3),
      f"table: step claimed {claimed}, planned {planned}")
claimed, planned = row("MFU (%)")
check(claimed and abs(float(planned) - 100 * mfu) <= 0.051, f"table: MFU claimed {claimed}, planned {planned}")
claimed, planned = row("days")
check(claimed and abs(float(planned) - train_s / 86400) <= 0.051, f"table: days claimed {claimed}, planned {planned}")
m_ = re.search(r"Young/Daly sqrt\(2 x (\S+) s x (\S+) s\)", text)
check(m_ and close(float(m_.group(1)), save, 1e-2) and close(float(m_.group(2)), mtbf, 1e-2),
      "the report prints Young/Daly's arithmetic")
check(f"{case['ckpt_every_steps'] * case['step_time_s'] / 60:.1f} min between checkpoints" in text,
      "2000 steps at the claimed 0.42 s = 14.0 min")
check("[impossible]" in text, "the report says which claims are impossible")

# Bad input: one line naming the value.
p = subprocess.run([FT, "plan", "--case", CASE, "--storage-gbs", "0"], stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, text=True)
check(p.returncode != 0 and "storage write bandwidth = 0" in p.stderr, "--storage-gbs 0 is refused, naming it")

print(f"\n{len(failures)} failures")
sys.exit(1 if failures else 0)
