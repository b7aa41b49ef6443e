#!/usr/bin/env python3
"""`fluxtrain plan --profile` over 2 ranks, then `--profile-file` for a dp=2 layout (a smoke test).

Checks what the profile must hold — every op of the real step timed (the op calls of one step of
the config, each with its seconds), every mesh axis's collectives fitted over the 2 ranks with a
positive bandwidth whose line passes near its own measured points — and that the prediction of a
2-rank layout prices its compute from measured (op, shape)s and its data-parallel collectives
from the dp line. How close the prediction comes to a measured step is bench/profile_predict.py's
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
    check(prof["format"] == "fluxtrain-profile" and prof["version"] == 1, "magic and version")
    ops = prof["ops"]["1"]
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

    out = json.loads(run("--profile-file", path, "--config", CONFIG, "--set", "parallel.dp=2", "--threads", "1",
                         "--json"))
    print(json.dumps(out, indent=1))
    check(out["world"] == 2 and out["step_s"] > 0, f"dp=2 step predicted: {out['step_s']:.4f} s")
    check(out["measured_share"] > 0.9, f"{100 * out['measured_share']:.0f}% of the compute priced by measured ops "
          "(the profile timed the whole model at the batch of 1, 2 and 4 replicas)")
    check(out["comm_s_by_axis"].get("dp", 0) > 0, "the dp gradient all-reduce priced")
    total = out["compute_s"] + sum(out["comm_s_by_axis"].values())
    check(abs(total - out["step_s"]) <= 1e-9 * total, "step = compute + collectives (no pipeline)")
    text = run("--profile-file", path, "--config", CONFIG, "--set", "parallel.pp=2", "--threads", "1")
    print(text)
    check("bubble" in text, "pp=2: the schedule's bubble is priced")
    # A bad profile: one line naming the file.
    bad = os.path.join(tmp, "bad.json")
    open(bad, "w").write('{"format": "x"}')
    p = subprocess.run([FT, "plan", "--profile-file", bad, "--config", CONFIG], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    check(p.returncode != 0 and "not a profile" in p.stderr, "a file that is not a profile is refused")

print(f"\n{len(failures)} failures")
sys.exit(1 if failures else 0)
