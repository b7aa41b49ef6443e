"""What the cluster tests share: a prepared dataset, `fluxtrain launch --hosts` started on host 0 of a
netns cluster, and readers of what a run leaves behind.

    c = Cluster(4, work).up()
    ds = prepare_dataset(FT, work)
    run = Launch(c, FT, CONFIG, work + "/run", ["parallel.dp=4", ...])
    rc = run.wait(120)
"""
import glob
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fault"))
from fault_lib import check_samples, consumed_samples, events, fail, metrics_by_step, raw_metrics  # noqa: E402,F401

SKIP = 77


def prepare_dataset(ft, work, shards=8):
    """A small real dataset (the licence texts every Debian system ships, cut into documents of 40
    lines): 8 training shards, a 512-piece tokenizer."""
    out = os.path.join(work, "dataset")
    if os.path.exists(os.path.join(out, "manifest.json")):
        return out
    src = os.path.join(work, "corpus")
    os.makedirs(src, exist_ok=True)
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        with open(os.path.realpath(path), errors="replace") as f:
            lines = f.readlines()
        for k in range(0, len(lines), 40):
            with open(os.path.join(src, f"{os.path.basename(path)}-{k // 40:03d}.txt"), "w") as g:
                g.writelines(lines[k:k + 40])
    p = subprocess.run([ft, "prepare", "--input", src, "--out", out, "--shards", str(shards), "--vocab-size", "512",
                        "--val-fraction", "0.05"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=120)
    if p.returncode != 0:
        fail("prepare failed:\n" + p.stdout[-3000:])
    return out


def sets_args(sets):
    out = []
    for s in sets:
        out += ["--set", s]
    return out


class Launch:
    """`fluxtrain launch --hosts` running on host `on` of the cluster, in the background."""

    def __init__(self, cluster, ft, config, run_dir, sets=(), env=None, hosts_file=None, on=0, extra=()):
        self.cluster, self.run_dir = cluster, run_dir
        e = dict(os.environ)
        e.update({"OMP_NUM_THREADS": "1", "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
        e.update(env or {})
        self.log_path = run_dir + ".launch.log"
        self.log = open(self.log_path, "w")
        self.cmd = [ft, "launch", "--config", config, "--hosts", hosts_file or cluster.hostfile, "--run-dir",
                    run_dir] + sets_args(sets) + list(extra)
        self.t0 = time.time()
        self.p = cluster.popen(on, self.cmd, stdout=self.log, stderr=subprocess.STDOUT, env=e)

    def wait(self, timeout):
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            fail(f"launch still running after {timeout} s; log:\n" + self.output()[-5000:])
        self.log.close()
        return rc

    def output(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def heartbeats(self):
        out = {}
        for p in glob.glob(os.path.join(self.run_dir, "heartbeat", "rank-*.json")):
            try:
                with open(p) as f:
                    r = json.load(f)
                out[r["rank"]] = r
            except (OSError, ValueError):
                pass
        return out

    def wait_for_step(self, step, world, attempt=1, timeout=120):
        t0 = time.time()
        while time.time() - t0 < timeout:
            if self.p.poll() is not None:
                fail(f"launch exited ({self.p.returncode}) before step {step}; log:\n" + self.output()[-5000:])
            hb = self.heartbeats()
            if len(hb) >= world and all(r["attempt"] == attempt and r["phase"] == "train" and r["step"] >= step
                                        for r in hb.values() if r["rank"] < world):
                return hb
            time.sleep(0.01)
        fail(f"step {step} of attempt {attempt} not reached in {timeout} s; log:\n" + self.output()[-5000:])


def ranks_json(run_dir):
    with open(os.path.join(run_dir, "ranks.json")) as f:
        return json.load(f)


def host_of_rank(run_dir):
    return {r["rank"]: r["host"] for r in ranks_json(run_dir)["ranks"]}


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-12)
