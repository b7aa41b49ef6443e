"""What the fault and cluster tests share: a `fluxtrain launch` running in the background, watched
through its log and what its ranks write into the run directory (heartbeat/rank-N.json,
ranks.json), and the small helpers every test script uses.

    class Launch(LaunchedRun):                        # tests/fault/fault_lib.py, tests/cluster/cluster_lib.py
        def __init__(self, ...):
            super().__init__(run_dir, cmd, subprocess.Popen, env)
    run.wait_for_step(17, world=2)                    # every rank of attempt 1 is past step 17
    rc = run.wait(240)                                # on a timeout: stopped, FAIL with the log's tail
"""
import glob
import json
import os
import signal
import subprocess
import sys
import time


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def sets_args(sets):
    out = []
    for s in sets:
        out += ["--set", s]
    return out


def ranks_json(run_dir):
    with open(os.path.join(run_dir, "ranks.json")) as f:
        return json.load(f)


class LaunchedRun:
    """`cmd` (a `fluxtrain launch`) started by `popen(cmd, stdout=, stderr=, env=)`, its output in
    RUN_DIR.launch.log (or `log_path`: a relaunch of the same run keeps the first one's log)."""

    def __init__(self, run_dir, cmd, popen, env, log_path=None):
        self.run_dir, self.cmd = run_dir, cmd
        self.log_path = log_path or run_dir + ".launch.log"
        self.log = open(self.log_path, "w")
        self.t0 = time.time()
        self.p = popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def wait(self, timeout=240):
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill_all()
            fail(f"launch still running after {timeout} s; log:\n" + self.output()[-5000:])
        self.log.close()
        return rc

    def kill_all(self):
        """Stops the launcher (SIGTERM: it stops its ranks), killing it after 20 s."""
        try:
            self.p.send_signal(signal.SIGTERM)
            self.p.wait(20)
        except Exception:
            self.p.kill()

    def output(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def heartbeats(self):
        """rank -> its last heartbeat record."""
        out = {}
        for p in glob.glob(os.path.join(self.run_dir, "heartbeat", "rank-*.json")):
            try:
                with open(p) as f:
                    r = json.load(f)
                out[r["rank"]] = r
            except (OSError, ValueError):
                pass
        return out

    def wait_for_step(self, step, world=2, attempt=1, timeout=120):
        """Until ranks 0 .. world-1 of `attempt` have all completed `step`; returns the heartbeats."""
        t0 = time.time()
        while time.time() - t0 < timeout:
            if self.p.poll() is not None:
                fail(f"launch exited ({self.p.returncode}) before step {step}; log:\n" + self.output()[-5000:])
            hb = self.heartbeats()
            if all(k in hb and hb[k]["attempt"] == attempt and hb[k]["phase"] == "train" and hb[k]["step"] >= step
                   for k in range(world)):
                return hb
            time.sleep(0.005)
        fail(f"step {step} of attempt {attempt} not reached in {timeout} s; log:\n" + self.output()[-5000:])
