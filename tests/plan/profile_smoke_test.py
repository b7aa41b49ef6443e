#!/usr/bin/env python3
"""`fluxtrain plan --profile` over 2 ranks, then `--profile-file` for dp=2, pp=2 and cp=2 layouts (a smoke test).

Checks what the profile must hold — every op of the real step timed (the op calls of one step of
the config, each with its seconds), alone and again by 2 processes at once (the set recorded at
concurrency 2, the same (op, shape)s, and the dp = 2 prediction priced from it), beside each op set
the timed steps' time beyond their priced ops (the untimed share the prediction's compute carries), every mesh axis's collectives fitted over the 2 ranks with a
positive bandwidth whose line passes near its own measured points — and that the prediction of a
2-rank layout prices its compute from measured (op, shape)s and its data-parallel collectives
from the dp line; and for context parallelism (cp = 2, ring) that the profile timed the cp axis's
ring hop and the dp x cp gradient group, and each ring rank's block attention op by op at the
(query, key) pairs its zig-zag chunks see (counted here independently), so that the cp = 2
prediction prices every block by its own measurement and counts the bytes the dry run counts
(`fluxtrain train --dry-run`), with the ring's hidden share bounded by what it sends. How close the prediction comes to a measured step is bench/profile_predict.py's
question, not this test's (no timing asserts in CI).

usage: profile_smoke_test.py FLUXTRAIN CONFIG
"""
import json
import os
import subprocess
import sys
import tempfile

FT, CONFIG = sys.argv[1], sys.argv[2]
failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


def run(*args):
    p = subprocess.run([FT, "plan"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"fluxtrain plan {' '.join(args)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p.stdout


with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "p.json")
    print(run("--profile", "--config", CONFIG, "--nproc", "2", "--profile-threads", "1", "--repeats", "2", "--out", path))
    prof = json.load(open(path))
    check(prof["format"] == "fluxtrain-profile" and prof["version"] == 2, "magic and version")
    sets = {(s["concurrency"], s["threads"]): s["ops"] for s in prof["op_sets"]}
    ops = sets[(1, 1)]
    # Beside each op set: its steps timed whole, their time beyond their ops as the set prices them.
    untimed = {(s["concurrency"], s["threads"]): s.get("untimed_share", 0) for s in prof["op_sets"]}
    check(all(0 < u < 10 for u in untimed.values()), f"the steps' time beyond their priced ops measured: {untimed}")
    two = os.cpu_count() >= 2  # 2 processes of 1 thread fit the CPUs: the ops are timed at concurrency 2
    if two:
        busy = sets.get((2, 1), [])
        check({(o["op"], o["shape"]) for o in busy} == {(o["op"], o["shape"]) for o in ops}
              and all(o["seconds"] >= 0 for o in busy),
              f"the same {len(busy)} (op, shape)s timed by 2 processes at once (concurrency 2, 1 thread)")
        check(sorted(sets) == [(1, 1), (2, 1)], f"op sets (concurrency, threads): {sorted(sets)}")
    else:
        print("skip  concurrency 2: this machine has 1 CPU")
    check(len(ops) > 10 and all(o["seconds"] >= 0 and o["calls"] >= 1 for o in ops),
          f"{len(ops)} distinct ops timed at 1 thread")
    check(any(o["kind"] == "gemm" for o in ops) and any(o["op"].startswith("attention") for o in ops),
          "GEMMs and attention among them")
    for axis in ("dp", "tp", "pp"):
        fits = prof["collectives"].get(axis, {})
        check("all_reduce" in fits and fits["all_reduce"]["bytes_per_s"] > 0, f"{axis}: all_reduce fitted")
        for op, f in fits.items():
            pts = f["points"]
            check(len(pts) >= 5 and pts == sorted(pts) and all(t > 0 for _, t in pts),
                  f"{axis} {op}: {len(pts)} sizes, {pts[0][0]:.0f}..{pts[-1][0]:.0f} B, "
                  f"line {f['latency_s'] * 1e6:.1f} us + {f['bytes_per_s'] / 1e9:.3f} GB/s")
    check("send" in prof["collectives"].get("pp", {}), "pp: sends timed")
    cp_fits, grad_fits = prof["collectives"].get("cp", {}), prof["collectives"].get("dp_cp", {})
    check("send" in cp_fits and "all_reduce" in cp_fits, "cp: the ring hop (send) and the step's sums timed")
    check({"all_reduce", "reduce_scatter", "all_gather"} <= set(grad_fits), "dp_cp: the gradient group's collectives")

    # The ring's blocks at cp = 2, T = 32: rank r holds chunks {r, 3 - r} of 8 tokens; its queries
    # see (query, key) pairs of each block by position (the causal mask), counted here.
    def pairs(q_rank, k_rank, T=32, cp=2):
        c = T // (2 * cp)
        pos = lambda r: [p for ch in sorted((r, 2 * cp - 1 - r)) for p in range(ch * c, ch * c + c)]  # noqa: E731
        return sum(sum(1 for k in pos(k_rank) if k <= q) for q in pos(q_rank))
    want = {pairs(q, k) for q in range(2) for k in range(2)}
    got = {o["shape"].split("pairs=")[1] for o in ops if o["op"] == "attention_block_forward"}
    check(got == {str(p) for p in want}, f"ring blocks timed at the pairs each rank sees: {sorted(got)} "
          f"(counted: {sorted(want)})")
    check(any(o["op"] == "attention_block_backward" for o in ops), "the blocks' backward timed")

    out = json.loads(run("--profile-file", path, "--config", CONFIG, "--set", "parallel.dp=2", "--threads", "1",
                         "--json"))
    print(json.dumps(out, indent=1))
    check(out["world"] == 2 and out["step_s"] > 0, f"dp=2 step predicted: {out['step_s']:.4f} s")
    if two:
        check(out["concurrency"] == 2 and out["concurrency_wanted"] == 2,
              f"dp=2: priced by the ops timed 2 at once (concurrency {out['concurrency']})")
    check(out["untimed_share"] == untimed[(out["concurrency"], 1)],
          f"dp=2: its ops stretched by the untimed share of their set ({out['untimed_share']:.3f})")
    one = json.loads(run("--profile-file", path, "--config", CONFIG, "--threads", "1", "--json"))
    check(one["concurrency"] == 1 and one["concurrency_wanted"] == 1, "1 rank: priced by the ops timed alone")
    check(out["measured_share"] > 0.9, f"{100 * out['measured_share']:.0f}% of the compute priced by measured ops "
          "(the profile timed the whole model at the batch of 1, 2 and 4 replicas)")
    check(out["comm_s_by_axis"].get("dp", 0) > 0, "the dp gradient all-reduce priced")
    total = out["compute_s"] + sum(out["comm_s_by_axis"].values())
    check(abs(total - out["step_s"]) <= 1e-9 * total, "step = compute + collectives (no pipeline)")
    text = run("--profile-file", path, "--config", CONFIG, "--set", "parallel.pp=2", "--threads", "1")
    print(text)
    check("bubble" in text, "pp=2: the schedule's bubble is priced")
    cp2 = ["--set", "parallel.cp=2"]
    out = json.loads(run("--profile-file", path, "--config", CONFIG, *cp2, "--threads", "1", "--json"))
    print(json.dumps(out, indent=1))
    check(out["world"] == 2 and out["cp"] == 2 and out["step_s"] > 0, f"cp=2 step predicted: {out['step_s']:.4f} s")
    check(out["measured_share"] > 0.9, f"cp=2: {100 * out['measured_share']:.0f}% of the compute priced by measured "
          "ops (the block attention of both ring ranks among them)")
    check(out["comm_s_by_axis"].get("dp_cp", 0) > 0, "cp=2: the gradient all-reduce over dp x cp priced")
    check(out["cp_s"] > 0 and 0 <= out["cp_exposed_s"] <= out["cp_s"],
          f"cp=2: {1e3 * out['cp_s']:.3f} ms of ring transfers, {1e3 * out['cp_exposed_s']:.3f} ms exposed")
    dry = subprocess.run([FT, "train", "--config", CONFIG, "--dry-run", "--world-size", "2", "--gpu", "cpu", "--json",
                          "--set", "parallel.cp=2"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    if dry.returncode != 0:
        failures.append(f"dry run: {dry.stderr[-500:]}")
    else:
        ranks = json.loads(dry.stdout)["ranks"]
        dry_cp = ranks[out["slowest_rank"]]["comm_bytes_per_step"]["cp"]["total"]
        check(out["cp_bytes"] == dry_cp, f"cp=2: {out['cp_bytes']:.0f} bytes on the cp group, the dry run's {dry_cp}")
    text = run("--profile-file", path, "--config", CONFIG, *cp2, "--set", 'parallel.cp_attention="all_to_all"',
               "--threads", "1")
    print(text)
    check("cp 2 (all_to_all)" in text and "exposed" in text, "cp=2 all-to-all predicted")
    # `plan --cp-attention` fixes the estimate's schedule (parallel.cp_attention's values); another
    # value is a one-line error naming it.
    for sched in ("ring", "all_to_all"):
        j = json.loads(run("--model", "llama2-7b", "--gpus", "16", "--seq-len", "32768", "--cp", "2", "--cp-attention",
                           sched, "--json"))
        check(j["layout"]["cp"] == 2 and j["layout"]["cp_attention"] == sched, f"--cp 2 --cp-attention {sched}")
    p = subprocess.run([FT, "plan", "--model", "llama2-7b", "--cp", "2", "--cp-attention", "rings"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = p.stderr.strip().splitlines()[0] if p.stderr.strip() else ""
    check(p.returncode != 0 and "--cp-attention rings" in first and "parallel.cp_attention" in first,
          f"a bad --cp-attention is refused: {first}")
    # A bad profile: one line naming the file.
    bad = os.path.join(tmp, "bad.json")
    open(bad, "w").write('{"format": "x"}')
    p = subprocess.run([FT, "plan", "--profile-file", bad, "--config", CONFIG], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    check(p.returncode != 0 and "not a profile" in p.stderr, "a file that is not a profile is refused")

print(f"\n{len(failures)} failures")
sys.exit(1 if failures else 0)
