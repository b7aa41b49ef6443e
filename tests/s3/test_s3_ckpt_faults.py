"""Faults while checkpoints upload to S3 (ckpt.dir = "s3://bucket/prefix"), against moto behind the
fault-injecting Front (tests/objstore/servers.py), the tiny model at dp 2 (--nproc 2), 12 steps:

1. a rank killed during its upload: the Front never answers rank 1's part PUTs of step 8, the test
   SIGKILLs the run; no manifest for step 8; `--resume auto` resumes step 4 with the losses of an
   uninterrupted run bit for bit, and the orphaned multipart upload is aborted at that start;
2. a 503 storm (every PUT after step 4's commit): bounded retries with backoff, then one error naming
   the object; training stops naming step 4; nothing of step 8 is committed; the resume is bit-identical;
3. credentials that stop working after step 4's commit (403 ExpiredToken on every request): one
   error, not retried; training stops naming step 4; the resume is bit-identical;
4. saves due faster than uploads (step 3's PUTs answered 3 s late, a save every 3 steps): step 6
   is queued behind step 3's upload without a wait; step 9 finds both pending: with
   ckpt.when_busy = "wait" training waits (a warning, the time in the checkpoint badput bucket) and
   every save commits; with "skip" step 9 is skipped (a warning and a "skipped" row) and the final
   step 12 still commits. Losses as the uninterrupted run either way.

usage: .venv/bin/python tests/s3/test_s3_ckpt_faults.py FLUXTRAIN CONFIG
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "objstore"))
import servers  # noqa: E402

FT, CONFIG = sys.argv[1], sys.argv[2]
STEPS = 12
COMMON = [f"train.steps={STEPS}", "train.eval_interval=0", "train.batch_size=8", "train.seq_len=32",
          "train.threads=1", "parallel.dp=2", "parallel.zero=1"]


def command(run_dir, endpoint, sets, resume=None):
    cmd = [FT, "train", "--config", CONFIG, "--run-dir", run_dir, "--nproc", "2"]
    for s in COMMON + sets + ([f"data.endpoint={endpoint}"] if endpoint else []):
        cmd += ["--set", s]
    return cmd + (["--resume", resume] if resume else [])


def environ(moto):
    env = dict(os.environ, **moto.env())
    env.pop("AWS_ENDPOINT_URL", None)
    return env


def train(moto, run_dir, endpoint, sets, resume=None):
    return subprocess.run(command(run_dir, endpoint, sets, resume), capture_output=True, text=True,
                          env=environ(moto), timeout=300)


def losses(run_dir):
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    return {r["step"]: r["loss"] for r in rows}


def keys(moto, prefix):
    # No '/' in a signed query value for moto (see test_s3_ckpt.py): listed whole and filtered.
    out = []
    for page in moto.s3.get_paginator("list_objects_v2").paginate(Bucket="ckpt"):
        out += [o["Key"] for o in page.get("Contents", []) if o["Key"].startswith(prefix)]
    return sorted(out)


def uploads(moto, prefix):
    return [u["Key"] for u in moto.s3.list_multipart_uploads(Bucket="ckpt").get("Uploads", [])
            if u["Key"].startswith(prefix)]


def main():
    tmp = tempfile.mkdtemp(prefix="ft_s3_faults_")
    moto = servers.Moto(tmp, part_min_size=1 << 20)  # ckpt.part_mb = 1: two parts per rank file
    front = servers.Front(moto.port)
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    def resumed_bit_identical(name, prefix, extra=()):
        run = os.path.join(tmp, name + "-resumed")
        p = train(moto, run, moto.endpoint, [f"ckpt.interval=4", f"ckpt.dir=s3://ckpt/{prefix}", *extra],
                  resume="auto")
        got = losses(run) if p.returncode == 0 else {}
        check(p.returncode == 0 and sorted(got)[0] == 5 and all(got.get(s) == ref[s] for s in range(5, STEPS + 1)),
              f"{name}: --resume auto resumed step 4, losses 5..{STEPS} bit-identical "
              f"{p.stderr[-1500:] if p.returncode else ''}")
        return p

    try:
        moto.s3.create_bucket(Bucket="ckpt")
        base = os.path.join(tmp, "local")
        p = train(moto, base, None, ["ckpt.interval=4"])
        if p.returncode != 0:
            raise SystemExit(f"FAIL: the reference run exited {p.returncode}:\n{p.stderr[-3000:]}")
        ref = losses(base)

        # 1. a rank killed during its upload
        front.stall_puts = "kill/step_00000008/rank-00001.ftckpt"
        run = os.path.join(tmp, "kill")
        proc = subprocess.Popen(command(run, front.endpoint, ["ckpt.interval=4", "ckpt.part_mb=1",
                                                              "ckpt.dir=s3://ckpt/kill"]),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=environ(moto),
                                start_new_session=True)
        deadline = time.time() + 120
        while front.stalled == 0 and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        stalled = front.stalled > 0
        servers.kill_session(proc.pid)
        proc.wait()
        front.stall_puts = None
        check(stalled, "rank 1's part PUT of step 8 was stalled, then the run SIGKILLed")
        left = keys(moto, "kill/")
        check("kill/step_00000004/manifest.json" in left and "kill/step_00000008/manifest.json" not in left,
              f"step 4 committed, no manifest for step 8: {left}")
        orphans = uploads(moto, "kill/")
        # Rank 0's upload of step 8 may have been unfinished too when the run was killed.
        check("kill/step_00000008/rank-00001.ftckpt" in orphans and
              all(k.startswith("kill/step_00000008/rank-") for k in orphans),
              f"the orphaned multipart upload(s): {orphans}")
        p = resumed_bit_identical("kill", "kill", ["ckpt.part_mb=1"])
        aborted = [l for l in p.stderr.splitlines() if "aborted the unfinished upload" in l]
        print("  " + (aborted[0] if aborted else "(no abort line)"))
        check(len(aborted) == len(orphans) and
              any("s3://ckpt/kill/step_00000008/rank-00001.ftckpt" in l for l in aborted),
              f"the resumed run's start aborted the orphaned upload(s): {len(aborted)} line(s)")
        check(uploads(moto, "kill/") == [], "no multipart upload left")

        # 2. a 503 storm after step 4's commit
        front.fail_after(1, "storm/step_00000004/manifest.json", 503, "SlowDown", "Please reduce your request rate.",
                         methods=("PUT",))
        run = os.path.join(tmp, "storm")
        p = train(moto, run, front.endpoint, ["ckpt.interval=4", "ckpt.dir=s3://ckpt/storm"])
        answered = front.fault["answered"]
        front.fault = None
        err = [l for l in p.stderr.splitlines() if "checkpoint step 8 failed" in l]
        print("  " + (err[0] if err else p.stderr[-1500:]))
        retries = [l for l in p.stderr.splitlines() if "retrying in" in l]
        check(p.returncode != 0 and bool(err) and "HTTP 503 SlowDown" in err[0] and
              "s3://ckpt/storm/step_00000008/rank-0000" in err[0] and
              "the last committed checkpoint is s3://ckpt/storm/step_00000008" not in err[0] and
              "the last committed checkpoint is s3://ckpt/storm/step_00000004" in err[0],
              f"a storm: exit {p.returncode}, the error names the object and step 4")
        # Each rank's PUT: one try and 4 retries (0.2 + 0.4 + 0.8 + 1.6 s apart).
        check(0 < answered <= 10 and len(retries) <= 8, f"bounded retries: {answered} PUTs answered 503, "
              f"{len(retries)} retry lines")
        # The retries outlast the steps left (5 ms each): the failure surfaces at the final save.
        check(len(err) == 1 and "done:" not in p.stderr, f"one error line ({len(err)}), no 'done' line")
        check(not [k for k in keys(moto, "storm/step_00000008")], "nothing of step 8 is left")
        resumed_bit_identical("storm", "storm")

        # 3. credentials that stop working after step 4's commit
        front.fail_after(1, "cred/step_00000004/manifest.json", 403, "ExpiredToken",
                         "The provided token has expired.")
        run = os.path.join(tmp, "cred")
        p = train(moto, run, front.endpoint, ["ckpt.interval=4", "ckpt.dir=s3://ckpt/cred"])
        answered = front.fault["answered"]
        front.fault = None
        err = [l for l in p.stderr.splitlines() if "checkpoint step 8 failed" in l]
        print("  " + (err[0] if err else p.stderr[-1500:]))
        check(p.returncode != 0 and bool(err) and "HTTP 403 ExpiredToken" in err[0] and
              "the last committed checkpoint is s3://ckpt/cred/step_00000004" in err[0],
              f"expired credentials: exit {p.returncode}, one error naming step 4")
        check(not [l for l in p.stderr.splitlines() if "retrying in" in l] and answered <= 12,
              f"not retried: {answered} requests answered 403")
        check(len(err) == 1 and "done:" not in p.stderr, f"one error line ({len(err)}), no 'done' line")
        resumed_bit_identical("cred", "cred")

        # 4. saves due faster than uploads (ckpt.when_busy). Saves at steps 3, 6, 9 and 12; step 3's
        # rank files arrive 3 s late, steps 4..9 take milliseconds: step 6 is queued behind step 3's
        # upload (training goes on), step 9 finds both pending.
        def busy(policy):
            front.delay_puts = (f"{policy}/step_00000003/rank-", 3.0)
            run = os.path.join(tmp, policy)
            p = train(moto, run, front.endpoint, ["ckpt.interval=3", f"ckpt.dir=s3://ckpt/{policy}",
                                                  f"ckpt.when_busy={policy}"])
            front.delay_puts = None
            check(p.returncode == 0, f"when_busy={policy}: exit 0 ({p.returncode}) "
                  f"{p.stderr[-1500:] if p.returncode else ''}")
            queued = [l for l in p.stderr.splitlines() if "step 6 is due while step 3 is still being uploaded" in l]
            check(len(queued) == 1 and "queued behind it" in queued[0],
                  f"when_busy={policy}: step 6 queued behind step 3's upload, no wait: {queued}")
            rows = [json.loads(l) for l in open(os.path.join(run, "checkpoints.jsonl"))]
            saved = sorted(r["step"] for r in rows if r.get("event") == "save" and r.get("ok"))
            stall = {r["step"]: r["stall_s"] for r in rows if r.get("event") == "save" and r.get("ok")}
            check(stall.get(6, 9.9) < 1.0, f"when_busy={policy}: step 6's stall {stall.get(6, 0) * 1e3:.0f} ms "
                  "(queued, not waited for)")
            badput = json.load(open(os.path.join(run, "badput.json"))) if p.returncode == 0 else {}
            ckpt_s = badput.get("seconds", {}).get("checkpoint", 0.0)
            check(p.returncode == 0 and losses(run) == ref, f"when_busy={policy}: losses 1..12 as the uninterrupted run")
            return p, rows, saved, ckpt_s, stall

        p, rows, saved, wait_s, stall = busy("wait")
        warn = [l for l in p.stderr.splitlines() if "checkpoint step 9 is due while step 3" in l]
        print("  " + (warn[0] if warn else p.stderr[-1500:]))
        check(len(warn) == 1 and "training waits for step 3" in warn[0], "wait: one warning, training waits at step 9")
        check(saved == [3, 6, 9, 12], f"wait: every save committed: {saved}")
        print(f"  wait: step 9's stall {stall.get(9, 0):.2f} s, badput 'checkpoint' {wait_s:.2f} s")
        check(stall.get(9, 0) > 1.0 and wait_s >= 0.9 * stall.get(9, 0),
              "wait: step 9 waited for step 3's upload, and the wait is in the checkpoint badput bucket")
        p, rows, saved, skip_s, stall = busy("skip")
        warn = [l for l in p.stderr.splitlines() if "checkpoint step 9 skipped" in l]
        print("  " + (warn[0] if warn else p.stderr[-1500:]))
        check(len(warn) == 1 and [r["step"] for r in rows if r.get("event") == "skipped"] == [9],
              "skip: step 9 skipped, logged and recorded in checkpoints.jsonl")
        check(saved == [3, 6, 12], f"skip: steps 3, 6 and the final 12 committed: {saved}")
        # The final save is never skipped: step 12 waits for step 3's upload instead.
        print(f"  skip: step 12's stall {stall.get(12, 0):.2f} s (the final save waits), badput 'checkpoint' "
              f"{skip_s:.2f} s")
    finally:
        front.stop()
        moto.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"FAIL: {len(failures)} check(s)")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
