"""Checkpoints straight to S3 (ckpt.dir = "s3://bucket/prefix") end to end, against moto with
signature checks on (tests/objstore/servers.py), the tiny model at dp 2 (--nproc 2: mpirun):

1. train 8 steps, saving encrypted checkpoints at steps 4 and 8 to s3://ckpt/run; a save that
   died before its commit is simulated by deleting step 8's manifest; `--resume auto` from the
   bucket then resumes step 4 (step 8's leftovers are cleaned) and steps 5..8 have the losses of
   the uninterrupted run, bit for bit;
2. a committed checkpoint whose rank object was deleted: the resume falls back to the previous
   one, naming the missing object, with the same losses;
3. retention (ckpt.keep = 2, every 2 steps) deletes old checkpoints' objects but not an object
   it did not write; no multipart upload and no spool file is left;
4. a bucket that does not exist: one error line before step 1, exit 2.

usage: .venv/bin/python tests/s3/test_s3_ckpt.py FLUXTRAIN CONFIG
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "objstore"))
import servers  # noqa: E402

FT, CONFIG = sys.argv[1], sys.argv[2]
KEY = "5f1e2d3c4b5a69788796a5b4c3d2e1f000112233445566778899aabbccddeeff"
COMMON = ["train.steps=8", "train.eval_interval=0", "train.batch_size=8", "train.seq_len=32", "train.threads=1",
          "parallel.dp=2", "parallel.zero=1"]


def train(moto, run_dir, sets, resume=None):
    cmd = [FT, "train", "--config", CONFIG, "--run-dir", run_dir, "--nproc", "2"]
    for s in COMMON + sets:
        cmd += ["--set", s]
    if resume:
        cmd += ["--resume", resume]
    cmd += ["--set", f"data.endpoint={moto.endpoint}"]  # as the data side reads it
    env = dict(os.environ, **moto.env(), FLUXTRAIN_CKPT_KEY=KEY)
    env.pop("AWS_ENDPOINT_URL", None)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)


def ft_ckpt(moto, *args):
    env = dict(os.environ, **moto.env(), FLUXTRAIN_CKPT_KEY=KEY)
    env.pop("AWS_ENDPOINT_URL", None)
    return subprocess.run([FT, "ckpt", *args, "--s3-endpoint", moto.endpoint], capture_output=True, text=True,
                          env=env, timeout=300)


def losses(run_dir):
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    return {r["step"]: r["loss"] for r in rows}


def keys(moto, prefix):
    # moto checks signatures of a '/' in the query against its decoded form (see tests/s3/test_s3.py),
    # so the listing's prefix has none and is filtered here.
    out = []
    for page in moto.s3.get_paginator("list_objects_v2").paginate(Bucket="ckpt", Prefix=prefix.rstrip("/")):
        out += [o["Key"] for o in page.get("Contents", []) if o["Key"].startswith(prefix)]
    return sorted(out)


def main():
    tmp = tempfile.mkdtemp(prefix="ft_s3_ckpt_")
    moto = servers.Moto(tmp)
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    try:
        moto.s3.create_bucket(Bucket="ckpt")
        # 1. uninterrupted run, encrypted, to the bucket
        full = os.path.join(tmp, "full")
        p = train(moto, full, ["ckpt.interval=4", "ckpt.keep=3", "ckpt.encrypt=true", "ckpt.dir=s3://ckpt/run"])
        if p.returncode != 0:
            raise SystemExit(f"FAIL: training to S3 exited {p.returncode}:\n{p.stderr[-3000:]}")
        ref = losses(full)
        saved = keys(moto, "run/")
        check(saved == [f"run/step_0000000{s}/{n}" for s in (4, 8)
                        for n in ("manifest.json", "rank-00000.ftckpt", "rank-00001.ftckpt")], f"objects: {saved}")
        line = [l for l in p.stderr.splitlines() if "checkpoint step 8 committed" in l]
        print("  " + (line[0] if line else "(no save line)"))
        check(bool(line) and "uploaded to s3://ckpt/run" in line[0], "the save line reports the upload")
        check("data.endpoint has no effect" not in p.stderr, "data.endpoint is the checkpoints' endpoint too")
        m = json.loads(moto.s3.get_object(Bucket="ckpt", Key="run/step_00000008/manifest.json")["Body"].read())
        check((m.get("encryption") or {}).get("algorithm") == "AES-256-GCM", "the manifest says AES-256-GCM")
        check(not moto.s3.list_multipart_uploads(Bucket="ckpt").get("Uploads"), "no multipart upload left")
        check(not os.listdir(os.path.join(full, ".ckpt-upload")) if os.path.isdir(os.path.join(full, ".ckpt-upload"))
              else True, "no spool file left")

        p = ft_ckpt(moto, "ls", "s3://ckpt/run")
        check(p.returncode == 0 and p.stdout.count("committed") == 2, f"ckpt ls: {p.stdout.strip()}{p.stderr[-500:]}")
        p = ft_ckpt(moto, "verify", "s3://ckpt/run")
        check(p.returncode == 0 and "verify: ok" in p.stdout, f"ckpt verify s3://ckpt/run: {p.stdout.strip()}"
              f"{p.stderr[-500:]}")

        # A save that died before its commit: step 8 without its manifest.
        moto.s3.delete_object(Bucket="ckpt", Key="run/step_00000008/manifest.json")
        resumed = os.path.join(tmp, "resumed")
        p = train(moto, resumed, ["ckpt.interval=4", "ckpt.keep=3", "ckpt.encrypt=true", "ckpt.dir=s3://ckpt/run"],
                  resume="auto")
        check(p.returncode == 0, f"resume from the bucket exits 0 ({p.returncode}) {p.stderr[-2000:] if p.returncode else ''}")
        if p.returncode == 0:
            got = losses(resumed)
            check(sorted(got)[0] == 5 and all(got.get(s) == ref[s] for s in range(5, 9)),
                  "resumed at step 5, losses 5..8 bit-identical: " + " ".join(f"{got.get(s, float('nan')):.9f}"
                                                                        for s in range(5, 9)))
            check("removing s3://ckpt/run/step_00000008/: incomplete" in p.stderr, "the incomplete step is cleaned")

        # 2. a committed checkpoint whose rank object is gone: fall back, naming it
        moto.s3.delete_object(Bucket="ckpt", Key="run/step_00000008/rank-00001.ftckpt")
        p = ft_ckpt(moto, "verify", "s3://ckpt/run/step_00000008")
        check(p.returncode == 1 and "s3://ckpt/run/step_00000008/rank-00001.ftckpt" in p.stderr,
              f"ckpt verify names the missing object, exit 1 ({p.returncode}): {p.stderr.strip()[:300]}")
        fell = os.path.join(tmp, "fallback")
        p = train(moto, fell, ["ckpt.interval=4", "ckpt.keep=3", "ckpt.encrypt=true", "ckpt.dir=s3://ckpt/run"],
                  resume="auto")
        check(p.returncode == 0, f"fallback resume exits 0 ({p.returncode}) {p.stderr[-2000:] if p.returncode else ''}")
        warn = [l for l in p.stderr.splitlines() if "skipping checkpoint" in l]
        print("  " + (warn[0] if warn else "(no warning)"))
        check(bool(warn) and "s3://ckpt/run/step_00000008/rank-00001.ftckpt" in warn[0],
              "the fallback names the missing object")
        if p.returncode == 0:
            got = losses(fell)
            check(sorted(got)[0] == 5 and all(got.get(s) == ref[s] for s in range(5, 9)),
                  "fell back to step 4, losses 5..8 bit-identical")

        # An explicit step URL, as the supervisor's restarts name one.
        named = os.path.join(tmp, "named")
        p = train(moto, named, ["ckpt.interval=4", "ckpt.keep=3", "ckpt.encrypt=true", "ckpt.dir=s3://ckpt/run"],
                  resume="s3://ckpt/run/step_00000004")
        check(p.returncode == 0 and sorted(losses(named))[0] == 5 and
              all(losses(named).get(s) == ref[s] for s in range(5, 9)),
              f"--resume s3://ckpt/run/step_00000004: losses 5..8 bit-identical {p.stderr[-1500:] if p.returncode else ''}")

        # 3. retention: keep 2 of 4 saves; an object it did not write survives
        moto.s3.put_object(Bucket="ckpt", Key="keep/step_00000002/notes.txt", Body=b"mine")
        kept = os.path.join(tmp, "kept")
        p = train(moto, kept, ["ckpt.interval=2", "ckpt.keep=2", "ckpt.dir=s3://ckpt/keep"])
        check(p.returncode == 0, f"retention run exits 0 ({p.returncode}) {p.stderr[-2000:] if p.returncode else ''}")
        left = keys(moto, "keep/")
        want = ["keep/step_00000002/notes.txt"] + [f"keep/step_0000000{s}/{n}" for s in (6, 8)
                                                   for n in ("manifest.json", "rank-00000.ftckpt", "rank-00001.ftckpt")]
        check(left == want, f"after retention: {left}")

        # 4. a bucket that does not exist: one line before step 1
        nob = os.path.join(tmp, "nobucket")
        p = train(moto, nob, ["ckpt.interval=4", "ckpt.dir=s3://no-such-bucket/run"])
        errors = [l for l in p.stderr.splitlines() if "NoSuchBucket" in l]
        print("  " + (errors[0] if errors else p.stderr[-500:]))
        check(p.returncode == 2, f"a missing bucket exits 2 ({p.returncode})")
        check(bool(errors) and not os.path.exists(os.path.join(nob, "metrics.jsonl")),
              "the error names NoSuchBucket before step 1")
    finally:
        moto.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"FAIL: {len(failures)} check(s)")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
