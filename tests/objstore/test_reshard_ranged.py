"""Resharding from a bucket reads only the chunks each rank needs, by ranged GETs (issue 31, point 3),
against moto (S3) and fake-gcs-server (GCS), each behind servers.Front, which counts the bytes of
every object GET it serves:

1. one process (dp 1) trains 4 steps of a 24-layer tiny model and saves an encrypted checkpoint
   (13 MB in 1 MiB chunks) to a local directory, uploaded as is to s3://ckpt/one and gs://ckpt/one;
2. the on-disk resharded resume: pp 2 (each stage holds half the layers: a contiguous half of the
   rank file) from the local directory, steps 5..8;
3. the same resume from each bucket: the losses of steps 5..8 equal the on-disk resume's bit for bit;
   per rank, the bytes fetched (the run's "resume_read" row in checkpoints.jsonl) are at most the
   stored bytes of the chunks its reads covered (the needed ranges rounded out to whole chunks) and
   at most 65% of the object (a stage needs half of it); the Front served exactly the bytes the
   ranks say. (dp x ZeRO and tp shards interleave through a dp 1 file at a layer's or a matrix's
   granularity, finer than a chunk: those layouts read nearly every chunk; a stage's layers do not.)

usage: .venv/bin/python tests/objstore/test_reshard_ranged.py FLUXTRAIN CONFIG
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402

FT, CONFIG = sys.argv[1], sys.argv[2]
KEY = "5f1e2d3c4b5a69788796a5b4c3d2e1f000112233445566778899aabbccddeeff"
MODEL = ["model.n_layers=24", "train.eval_interval=0", "train.batch_size=8", "train.seq_len=32", "train.threads=1",
         "ckpt.encrypt=true", "ckpt.chunk_mb=1"]
STEP4 = "step_00000004"


def train(run_dir, sets, env, nproc=1, resume=None):
    cmd = [FT, "train", "--config", CONFIG, "--run-dir", run_dir]
    if nproc > 1:
        cmd += ["--nproc", str(nproc)]
    for s in MODEL + sets:
        cmd += ["--set", s]
    if resume:
        cmd += ["--resume", resume]
    return subprocess.run(cmd, capture_output=True, text=True, env=dict(env, FLUXTRAIN_CKPT_KEY=KEY), timeout=300)


def losses(run_dir):
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    return {r["step"]: r["loss"] for r in rows}


def resume_read(run_dir):
    path = os.path.join(run_dir, "checkpoints.jsonl")
    rows = [json.loads(line) for line in open(path)] if os.path.exists(path) else []
    rows = [r for r in rows if r.get("event") == "resume_read"]
    return rows[-1] if rows else None


def main():
    tmp = tempfile.mkdtemp(prefix="ft_reshard_ranged_")
    moto = gcs = s3_front = gcs_front = None
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    try:
        moto = servers.Moto(tmp)
        s3_front = servers.Front(moto.port)
        gcs = servers.FakeGcs(tmp)
        gcs_front = servers.Front(gcs.port, gcs=True)
        base = {k: v for k, v in os.environ.items()
                if k not in ("GOOGLE_OAUTH_ACCESS_TOKEN", "STORAGE_EMULATOR_HOST", "AWS_ENDPOINT_URL",
                             "GOOGLE_APPLICATION_CREDENTIALS")}
        s3_env = dict(base, **moto.env())
        gcs_env = dict(base, GOOGLE_OAUTH_ACCESS_TOKEN="ya29.test")  # the front checks no token here

        # 1. dp 1 saves step 4 locally; the same bytes go to both buckets
        saved = os.path.join(tmp, "saved")
        local_root = os.path.join(tmp, "ckpt")
        p = train(saved, ["train.steps=4", "ckpt.interval=4", f"ckpt.dir={local_root}"], base)
        if p.returncode != 0:
            raise SystemExit(f"FAIL: the dp 1 save exited {p.returncode}:\n{p.stderr[-3000:]}")
        moto.s3.create_bucket(Bucket="ckpt")
        moto.upload_dir("ckpt", "one", local_root)
        gcs.create_bucket("ckpt")
        gcs.upload_dir("ckpt", "one", local_root)
        obj = os.path.getsize(os.path.join(local_root, STEP4, "rank-00000.ftckpt"))
        print(f"  rank-00000.ftckpt: {obj} bytes")

        # 2. the on-disk resharded resume: pp 2
        reshard = ["train.steps=8", "parallel.pp=2", "train.micro_batch_size=2", "ckpt.interval=0"]
        disk = os.path.join(tmp, "disk")
        p = train(disk, reshard, base, nproc=2, resume=os.path.join(local_root, STEP4))
        if p.returncode != 0:
            raise SystemExit(f"FAIL: the on-disk resume exited {p.returncode}:\n{p.stderr[-3000:]}")
        ref = losses(disk)
        check(sorted(ref)[0] == 5, f"the on-disk resume starts at step 5 ({sorted(ref)[:1]})")

        # 3. the same resume from each bucket, by ranged GETs
        for scheme, front, env in (("s3", s3_front, s3_env), ("gs", gcs_front, gcs_env)):
            run = os.path.join(tmp, f"from_{scheme}")
            p = train(run, reshard + [f"data.endpoint={front.endpoint}"], env, nproc=2,
                      resume=f"{scheme}://ckpt/one/{STEP4}")
            check(p.returncode == 0, f"{scheme}: the resume exits 0 ({p.returncode}) "
                  f"{p.stderr[-2500:] if p.returncode else ''}")
            if p.returncode != 0:
                continue
            got = losses(run)
            check(sorted(got)[0] == 5 and all(got.get(s) == ref[s] for s in range(5, 9)),
                  f"{scheme}: losses 5..8 bit-identical to the on-disk resharded resume: "
                  + " ".join(f"{got.get(s, float('nan')):.9f}" for s in range(5, 9)))
            row = resume_read(run)
            line = [l for l in p.stderr.splitlines() if "by ranged GETs" in l]
            print("  " + (line[0] if line else "(no resume read line)"))
            check(row is not None and row["object_bytes"] == obj, f"{scheme}: a resume_read row: {row}")
            if row is None:
                continue
            fetched, needed = row["fetched_bytes"], row["chunk_bytes_needed"]
            check(len(fetched) == 2 and all(0 < f <= n for f, n in zip(fetched, needed)),
                  f"{scheme}: per rank, fetched {fetched} <= the chunks its reads covered {needed}")
            check(all(f <= 0.65 * obj for f in fetched),
                  f"{scheme}: each rank fetched at most 65% of the {obj}-byte object "
                  f"({', '.join(f'{100.0 * f / obj:.0f}%' for f in fetched)})")
            served = sum(b for path, b in front.bytes_served.items() if path.endswith(".ftckpt"))
            check(served == sum(fetched), f"{scheme}: the front served {served} bytes of rank files, "
                  f"the ranks say {sum(fetched)}")
    finally:
        for s in (s3_front, gcs_front):
            if s:
                s.stop()
        for s in (moto, gcs):
            if s:
                s.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"FAIL: {len(failures)} check(s)")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
