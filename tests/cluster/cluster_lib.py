"""What the cluster tests share: a prepared dataset, `fluxtrain launch --hosts` started on host 0 of a
netns cluster, and readers of what a run leaves behind.

    c = Cluster(4, work).up()
    ds = prepare_dataset(FT, work)
    run = Launch(c, FT, CONFIG, work + "/run", ["parallel.dp=4", ...])
    rc = run.wait(120)
"""
import glob
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fault"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from fault_lib import check_samples, consumed_samples, events, metrics_by_step, raw_metrics  # noqa: E402,F401
from launch_lib import LaunchedRun, fail, ranks_json, sets_args  # noqa: E402,F401

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
                       timeout=300)
    if p.returncode != 0:
        fail("prepare failed:\n" + p.stdout[-3000:])
    return out


class Launch(LaunchedRun):
    """`fluxtrain launch --hosts` running on host `on` of the cluster, in the background."""

    def __init__(self, cluster, ft, config, run_dir, sets=(), env=None, hosts_file=None, on=0, extra=(), log_path=None):
        self.cluster = cluster
        e = dict(os.environ)
        e.update({"OMP_NUM_THREADS": "1", "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
        e.update(env or {})
        cmd = [ft, "launch", "--config", config, "--hosts", hosts_file or cluster.hostfile, "--run-dir", run_dir
               ] + sets_args(sets) + list(extra)
        super().__init__(run_dir, cmd, lambda *a, **kw: cluster.popen(on, *a, **kw), e, log_path)


def host_of_rank(run_dir):
    return {r["rank"]: r["host"] for r in ranks_json(run_dir)["ranks"]}


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def check_no_leftovers(c, hosts):
    """Nothing of the job outlives it: only sshd runs on the hosts afterwards (60 s for the job's
    processes to go: a leftover stays, a slow machine's tear-down only takes longer)."""
    deadline = time.time() + 60
    while True:
        left = [(c.hosts[i], pid, cmd) for i in hosts for pid, cmd in c.processes(i) if "sshd" not in cmd]
        if not left:
            return
        if time.time() > deadline:
            fail("processes left on the hosts after the job ended: " + "; ".join(f"{h} {p} {cmd[:80]}"
                                                                             for h, p, cmd in left))
        time.sleep(0.2)
