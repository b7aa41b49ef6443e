#!/usr/bin/env python3
"""The supervisor's restart and elastic paths with checkpoints in a bucket (ckpt.dir = "s3://…",
issue 31 point 3): the tiny 2-rank job of fault_injection_test.py under `fluxtrain launch`, saving
to moto (tests/objstore/servers.py), hurt with a real SIGKILL.

usage: bucket_restart_test.py FLUXTRAIN CONFIG WORK_DIR SCENARIO   (needs the fault_ref fixture)
  kill      SIGKILL rank 1 mid-run: the supervisor restarts from the bucket's newest committed
            checkpoint (an s3:// URL); losses bit-identical to the uninterrupted reference run, every
            sample read once; the bucket holds the newest ckpt.keep checkpoints, no multipart upload
  elastic   4 ranks on two (local) hosts, the host of the killed rank dropped: dp 4 → 2, resumed from
            the bucket at the new size (losses within 1e-3 of the dp-2 reference, as on disk)"""
import os
import shutil
import signal
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "objstore"))
import servers  # noqa: E402
from fault_lib import HOLD, Launch, check_losses_identical, check_samples, events, fail, metrics_by_step  # noqa: E402

FT, CFG, WORK, SCENARIO = sys.argv[1:5]
REF = os.path.join(WORK, "reference")
STEPS = 40  # fault_lib.BASE's train.steps


def fresh(name):
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    return d


def bucket_keys(moto, prefix):
    out = []
    for page in moto.s3.get_paginator("list_objects_v2").paginate(Bucket="ckpt", Prefix=prefix.rstrip("/")):
        out += [o["Key"] for o in page.get("Contents", []) if o["Key"].startswith(prefix)]
    return sorted(out)


def finished(run, restarts):
    rc = run.wait()
    if rc != 0:
        fail(f"launch exited {rc}; log:\n" + run.output()[-5000:])
    ev = events(run.run_dir)
    got = [e for e in ev if e["event"] == "restart"]
    if len(got) != restarts:
        fail(f"{len(got)} restart(s), expected {restarts}: {ev}")
    return ev


def restarted_from_bucket(ev, prefix):
    r = [e for e in ev if e["event"] == "restart"][0]
    if not r["checkpoint"].startswith(f"s3://ckpt/{prefix}/step_"):
        fail(f"the restart should name a checkpoint under s3://ckpt/{prefix}/: {r}")
    print(f"restart from {r['checkpoint']} (step {r['step']})", flush=True)


def kill(moto):
    d = fresh("bucket_kill")
    env = dict(HOLD, **moto.env(), AWS_ENDPOINT_URL="")
    run = Launch(FT, CFG, d, sets=["ckpt.dir=s3://ckpt/kill", f"data.endpoint={moto.endpoint}"], env=env)
    run.wait_for_step(17)
    run.signal(1, signal.SIGKILL)
    ev = finished(run, 1)
    restarted_from_bucket(ev, "kill")
    check_losses_identical(REF, d, STEPS)
    check_samples(d, STEPS)
    left = bucket_keys(moto, "kill/")
    want = [f"kill/step_{s:08d}/{n}" for s in (30, 35, 40)
            for n in ("manifest.json", "rank-00000.ftckpt", "rank-00001.ftckpt")]
    if left != want:
        fail(f"the bucket should hold the newest 3 checkpoints: {left}")
    if moto.s3.list_multipart_uploads(Bucket="ckpt").get("Uploads"):
        fail("a multipart upload was left behind")
    print("kill: restarted from the bucket, losses bit-identical, 3 checkpoints kept, no upload left", flush=True)


def elastic(moto):
    d = fresh("bucket_elastic")
    hosts = os.path.join(WORK, "bucket-elastic-hosts.txt")
    with open(hosts, "w") as f:
        f.write("localhost slots=2\n127.0.0.2 slots=2\n")
    sets = ["parallel.dp=4", "fault.elastic=true", "fault.host_max_failures=1", "ckpt.dir=s3://ckpt/elastic",
            f"data.endpoint={moto.endpoint}"]
    env = dict(HOLD, **moto.env(), AWS_ENDPOINT_URL="")
    run = Launch(FT, CFG, d, sets=sets, env=env, extra=["--hosts", hosts])
    run.wait_for_step(17, world=4)
    run.signal(3, signal.SIGKILL)
    ev = finished(run, 1)
    shrink = [e for e in ev if e["event"] == "shrink"]
    if not shrink or shrink[0]["to_dp"] != 2:
        fail(f"expected dp 4 -> 2: {ev}")
    restarted_from_bucket(ev, "elastic")
    check_samples(d, STEPS)
    ref, m = metrics_by_step(REF), metrics_by_step(d)
    worst = max(abs(m[k]["loss"] - ref[k]["loss"]) for k in range(1, STEPS + 1))
    print(f"elastic: dp 4 -> 2, resumed from the bucket; largest loss difference to the dp-2 reference {worst:.2e}")
    if worst > 1e-3:
        fail("losses after the elastic restart drifted")


def main():
    tmp = os.path.join(WORK, f"moto-{SCENARIO}")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    moto = servers.Moto(tmp)
    try:
        moto.s3.create_bucket(Bucket="ckpt")
        {"kill": kill, "elastic": elastic}[SCENARIO](moto)
    finally:
        moto.stop()
    print("OK")


if __name__ == "__main__":
    main()
