"""Checkpoints straight to Google Cloud Storage (ckpt.dir = "gs://bucket/prefix") end to end, against
fake-gcs-server behind servers.Front (Google's OAuth2 service-account flow, bearer tokens checked,
the resumable sessions' committed offsets and final CRC32C check GCS does and the emulator lacks),
the tiny model at dp 2 (--nproc 2: mpirun), 8 steps:

1. an encrypted run saving at steps 4 and 8 to gs://ckpt/run, the first chunk of rank 0's file of
   step 4 cut mid-way (the session is resumed from its committed offset: each byte of the object
   reaches the server at most twice); `ckpt ls`, `ckpt verify` and `ckpt export-hf` on gs://;
2. a run SIGKILLed while rank 1 uploads step 8 (the front never answers its chunks): no manifest
   for step 8; `--resume auto` resumes step 4 and steps 5..8 have the losses of the uninterrupted
   run, bit for bit;
3. a committed checkpoint whose rank object is damaged (same size, one byte flipped): the resume
   falls back to step 4, naming the object, with the same losses;
4. (12 steps) a 503 storm on step 8's uploads (retried with backoff, then training stops naming step 4) and
   credentials refused on them (401: not retried, the same stop); each resumes bit-identical;
5. a bucket that does not exist: one error line before step 1, exit 2.

usage: .venv/bin/python tests/objstore/test_gcs_ckpt.py FLUXTRAIN CONFIG
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402

FT, CONFIG = sys.argv[1], sys.argv[2]
KEY = "5f1e2d3c4b5a69788796a5b4c3d2e1f000112233445566778899aabbccddeeff"
COMMON = ["train.steps=8", "train.eval_interval=0", "train.batch_size=8", "train.seq_len=32", "train.threads=1",
          "parallel.dp=2", "parallel.zero=1", "ckpt.interval=4", "ckpt.encrypt=true", "ckpt.part_mb=1"]


def main():
    tmp = tempfile.mkdtemp(prefix="ft_gcs_ckpt_")
    gcs = servers.FakeGcs(tmp)
    front = servers.Front(gcs.port, gcs=True)
    key_file, front.public_key = servers.make_service_account(tmp, front.token_uri)
    front.check_auth = True
    env = {k: v for k, v in os.environ.items()
           if k not in ("GOOGLE_OAUTH_ACCESS_TOKEN", "STORAGE_EMULATOR_HOST", "AWS_ENDPOINT_URL")}
    env.update(GOOGLE_APPLICATION_CREDENTIALS=key_file, FLUXTRAIN_CKPT_KEY=KEY)
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    def command(run_dir, sets, resume=None):
        cmd = [FT, "train", "--config", CONFIG, "--run-dir", run_dir, "--nproc", "2"]
        for s in COMMON + sets + [f"data.endpoint={front.endpoint}"]:
            cmd += ["--set", s]
        return cmd + (["--resume", resume] if resume else [])

    def train(run_dir, sets, resume=None):
        return subprocess.run(command(run_dir, sets, resume), capture_output=True, text=True, env=env, timeout=300)

    def ft_ckpt(*args):
        return subprocess.run([FT, "ckpt", *args, "--gcs-endpoint", front.endpoint], capture_output=True, text=True,
                              env=env, timeout=300)

    def losses(run_dir):
        rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
        return {r["step"]: r["loss"] for r in rows}

    def objects(prefix):
        url = f"{gcs.endpoint}/storage/v1/b/ckpt/o?prefix={urllib.parse.quote(prefix, safe='')}"
        items = json.loads(urllib.request.urlopen(url, timeout=30).read()).get("items", [])
        return {o["name"]: int(o["size"]) for o in items}

    def resumed(name, ref, prefix):
        run = os.path.join(tmp, name)
        p = train(run, [f"ckpt.dir=gs://ckpt/{prefix}"], resume="auto")
        got = losses(run) if p.returncode == 0 else {}
        check(p.returncode == 0 and sorted(got)[0] == 5 and all(got.get(s) == ref[s] for s in range(5, 9)),
              f"{name}: --resume auto resumed step 4, losses 5..8 bit-identical: "
              + " ".join(f"{got.get(s, float('nan')):.9f}" for s in range(5, 9))
              + (p.stderr[-2000:] if p.returncode else ""))
        return p

    try:
        gcs.create_bucket("ckpt")
        # 1. uninterrupted, encrypted, one chunk of step 4 cut mid-way
        front.drop_chunks, front.chunk_match = 1, "run/step_00000004/rank-00000.ftckpt"
        full = os.path.join(tmp, "full")
        p = train(full, ["ckpt.dir=gs://ckpt/run"])
        if p.returncode != 0:
            raise SystemExit(f"FAIL: training to GCS exited {p.returncode}:\n{p.stderr[-3000:]}")
        ref = losses(full)
        saved = objects("run/")
        check(sorted(saved) == [f"run/step_0000000{s}/{n}" for s in (4, 8)
                                for n in ("manifest.json", "rank-00000.ftckpt", "rank-00001.ftckpt")],
              f"objects: {sorted(saved)}")
        line = [l for l in p.stderr.splitlines() if "checkpoint step 8 committed" in l]
        print("  " + (line[0] if line else "(no save line)"))
        check(bool(line) and "uploaded to gs://ckpt/run" in line[0], "the save line reports the upload")
        check("data.endpoint has no effect" not in p.stderr and "ckpt.part_mb has no effect" not in p.stderr,
              "data.endpoint and ckpt.part_mb take effect for gs://")
        resume_line = [l for l in p.stderr.splitlines() if "resuming the session" in l]
        print("  " + (resume_line[0] if resume_line else "(no resume warning)"))
        size = saved.get("run/step_00000004/rank-00000.ftckpt", 0)
        sent = front.upload_bytes.get("run/step_00000004/rank-00000.ftckpt", 0)
        check(front.dropped_chunks == 1 and bool(resume_line) and size < sent <= 2 * size,
              f"a chunk cut mid-way: the session resumed, {sent} bytes sent for a {size}-byte object")
        check(front.token_requests >= 1, f"service-account tokens: {front.token_requests} requested")
        m = json.loads(urllib.request.urlopen(f"{gcs.endpoint}/storage/v1/b/ckpt/o/"
                                              + urllib.parse.quote("run/step_00000008/manifest.json", safe="")
                                              + "?alt=media", timeout=30).read())
        check((m.get("encryption") or {}).get("algorithm") == "AES-256-GCM", "the manifest says AES-256-GCM")
        spool = os.path.join(full, ".ckpt-upload")
        check(not os.listdir(spool) if os.path.isdir(spool) else True, "no spool file left")

        p = ft_ckpt("ls", "gs://ckpt/run")
        check(p.returncode == 0 and p.stdout.count("committed") == 2, f"ckpt ls: {p.stdout.strip()}{p.stderr[-500:]}")
        p = ft_ckpt("verify", "gs://ckpt/run")
        check(p.returncode == 0 and "verify: ok" in p.stdout, f"ckpt verify gs://ckpt/run: {p.stdout.strip()}"
              f"{p.stderr[-500:]}")
        hf = os.path.join(tmp, "hf")
        p = ft_ckpt("export-hf", "gs://ckpt/run/step_00000008", hf)
        check(p.returncode == 0 and os.path.isfile(os.path.join(hf, "config.json")) and
              os.path.isfile(os.path.join(hf, "model.safetensors")),
              f"ckpt export-hf gs://ckpt/run/step_00000008 ({p.returncode}) {p.stderr[-500:]}")

        # 2. killed while rank 1 uploads step 8
        front.stall_chunks = "kill/step_00000008/rank-00001.ftckpt"
        proc = subprocess.Popen(command(os.path.join(tmp, "kill"), ["ckpt.dir=gs://ckpt/kill"]),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)
        deadline = time.time() + 120
        while front.stalled == 0 and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        stalled = front.stalled > 0
        servers.kill_session(proc.pid)
        proc.wait()
        front.stall_chunks = None
        check(stalled, "rank 1's chunk of step 8 was stalled, then the run SIGKILLed")
        left = sorted(objects("kill/"))
        check("kill/step_00000004/manifest.json" in left and "kill/step_00000008/manifest.json" not in left,
              f"step 4 committed, no manifest for step 8: {left}")
        p = resumed("kill-resumed", ref, "kill")
        if any(k.startswith("kill/step_00000008/") for k in left):  # rank 0's file may have been uploaded
            check("removing gs://ckpt/kill/step_00000008/: incomplete" in p.stderr, "the incomplete step is cleaned")

        # 3. a damaged object in a committed checkpoint (same size, one byte flipped)
        name = "run/step_00000008/rank-00001.ftckpt"
        body = bytearray(urllib.request.urlopen(f"{gcs.endpoint}/storage/v1/b/ckpt/o/"
                                                + urllib.parse.quote(name, safe="") + "?alt=media", timeout=30).read())
        body[len(body) // 2] ^= 0x01
        gcs.upload("ckpt", name, bytes(body))
        p = resumed("fallback", ref, "run")
        warn = [l for l in p.stderr.splitlines() if "skipping checkpoint" in l]
        for w in warn:
            print("  " + w)
        check(any("gs://ckpt/run/step_00000008/rank-00001.ftckpt" in w for w in warn),
              "the fallback names the damaged object")

        # 4. a 503 storm on step 8's uploads: retried with backoff, then training stops naming step 4;
        #    credentials refused (401) on them: not retried, the same stop. Each resumes bit-identical.
        for prefix, status, reason, message in (("storm", 503, "backendError", "Backend Error"),
                                                ("cred", 401, "authError", "Invalid Credentials")):
            front.gcs_fail(f"{prefix}/step_00000008/", status, reason, message)
            # 12 steps: the save of step 8 is not the last one (which blocks the exit on its own path).
            p = train(os.path.join(tmp, prefix), [f"ckpt.dir=gs://ckpt/{prefix}", "train.steps=12"])
            answered = front.gcs_fault["answered"]
            front.gcs_fault = None
            err = [l for l in p.stderr.splitlines() if "error:" in l and "training stops" in l]
            print("  " + (err[0] if err else p.stderr[-500:]))
            check(p.returncode == 2 and bool(err) and f"HTTP {status} {reason}" in err[0] and
                  f"the last committed checkpoint is gs://ckpt/{prefix}/step_00000004" in err[0],
                  f"{prefix}: one error naming HTTP {status} and step 4, exit 2 ({p.returncode})" + (
                      "" if err and f"HTTP {status}" in err[0] else p.stderr[-2500:]))
            # 503: each upload's initiation tried 5 times (4 retries); 401: once.
            check(answered >= (5 if status == 503 else 1) and (status == 503 or answered <= 2),
                  f"{prefix}: {answered} requests refused")
            check(f"{prefix}/step_00000008/manifest.json" not in objects(f"{prefix}/"), f"{prefix}: step 8 not committed")
            resumed(f"{prefix}-resumed", ref, prefix)

        # 5. a bucket that does not exist: one line before step 1
        nob = os.path.join(tmp, "nobucket")
        p = train(nob, ["ckpt.dir=gs://no-such-bucket/run"])
        errors = [l for l in p.stderr.splitlines() if "does not exist" in l]
        print("  " + (errors[0] if errors else p.stderr[-500:]))
        check(p.returncode == 2, f"a missing bucket exits 2 ({p.returncode})")
        check(len(errors) >= 1 and "gs://no-such-bucket/" in errors[0] and
              not os.path.exists(os.path.join(nob, "metrics.jsonl")), "the error names the bucket before step 1")
    finally:
        front.stop()
        gcs.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"FAIL: {len(failures)} check(s)")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
