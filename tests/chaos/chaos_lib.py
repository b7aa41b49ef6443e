"""The chaos run's parts: a seeded fault schedule, the faults themselves (real signals, a host's link
and processes, a full checkpoint file system, a corrupted checkpoint file, a CPU cap, the
supervisor killed) and the recovery table.

    sched = schedule(seed=1, steps=300, faults=12, interval=10, min_history=10)
    env = {"FLUXTRAIN_FAULT_INJECT": inject_spec(sched)}     # the NaN and the spike, also for the reference
    chaos = Chaos(cluster, ft, config, run_dir, sets, env, ckpt_root)
    chaos.start()
    for f in sched: chaos.hit(f)                               # waits for f.step, hurts, waits for recovery
    chaos.finish()
    print_recovery_table(chaos.done)
"""
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))
from cluster_lib import Launch, events, fail, raw_metrics  # noqa: E402

# Each kind once, then more of the cheap ones. "interrupting": training stops and resumes from a
# checkpoint (restart by the supervisor, or a relaunch with --resume auto).
KINDS = ["kill", "hang", "host_lost", "drain", "supervisor_kill", "corrupt_ckpt", "disk_full", "nan", "spike",
         "straggler"]
INTERRUPTING = {"kill", "hang", "host_lost", "drain", "supervisor_kill"}
EXTRA = ["kill", "hang", "nan", "corrupt_ckpt", "straggler", "kill", "drain", "host_lost", "supervisor_kill",
         "disk_full"]
CASE_STUDY_S = 90.0  # the case study's promised recovery


class Fault:
    def __init__(self, kind, step, rank=None, host=None):
        self.kind, self.step, self.rank, self.host = kind, step, rank, host
        self.at = None  # Unix time the test hurt the job
        self.recovery_s = None  # fault -> first new step (None: not measured)
        self.note = ""

    def __repr__(self):
        return f"{self.kind}@{self.step}"


def schedule(seed, steps, faults, interval, min_history, world=4, hosts=4):
    """Seeded: `faults` faults, each kind at least once. The spike comes early, before any
    interrupting fault, and those start only once two checkpoints after it are committed (a
    schedule kept from before the loss-spike detector's window was saved in checkpoints: a resume
    now judges a replayed spike as the uninterrupted run did, and keeping it keeps every seed's
    schedule). The others get one random step each in equal segments of the rest of the run."""
    if faults < len(KINDS):
        raise ValueError(f"faults: {faults}, expected at least one of each of the {len(KINDS)} kinds")
    rng = random.Random(seed)
    spike = rng.randint(min_history + 3, 2 * interval - 2)
    rest = [k for k in KINDS if k != "spike"] + [EXTRA[i % len(EXTRA)] for i in range(faults - len(KINDS))]
    rng.shuffle(rest)
    first, last = 3 * interval + 5, steps - 15
    seg = (last - first) / len(rest)
    if seg < 8:
        raise ValueError(f"{faults} faults in {steps} steps: {seg:.1f} steps apart, expected at least 8")
    out = [Fault("spike", spike)]
    for i, kind in enumerate(rest):
        lo = int(first + i * seg)
        step = rng.randint(lo, max(lo, int(first + (i + 1) * seg) - 4))
        out.append(Fault(kind, step, rank=rng.randrange(world), host=rng.randrange(1, hosts)))
    return out


def inject_spec(sched):
    """FLUXTRAIN_FAULT_INJECT for the data faults: a NaN from one rank, a loss spike × 30 — by the
    batch, so a replay meets them again and the uninterrupted reference run gets the same."""
    items = []
    for f in sched:
        if f.kind == "nan":
            items.append(f"nan@{f.step}:{f.rank}")
        elif f.kind == "spike":
            items.append(f"spike@{f.step}*30")
    return ",".join(items)


class Chaos:
    """The job under `fluxtrain launch --hosts` on host 0, relaunched with --resume auto after a
    drain or a killed supervisor; faults applied one at a time."""

    def __init__(self, cluster, ft, config, run_dir, sets, env, ckpt_root, world=4):
        self.c, self.ft, self.config, self.run_dir = cluster, ft, config, run_dir
        self.sets, self.env, self.ckpt_root, self.world = list(sets), dict(env), ckpt_root, world
        self.run = None
        self.launches = 0
        self.done = []
        self.corrupted = []  # checkpoint directories whose file the test damaged
        self.started_at = None

    # ------------------------------------------------------------ the job

    def start(self, resume=False):
        self.launches += 1
        if self.started_at is None:
            self.started_at = time.time()
        log = f"{self.run_dir}.launch-{self.launches}.log"
        self.run = Launch(self.c, self.ft, self.config, self.run_dir, self.sets, env=self.env,
                          extra=["--resume", "auto"] if resume else [], log_path=log)

    def beats(self):
        """Heartbeats of the newest attempt: (attempt, {rank: record})."""
        hb = self.run.heartbeats()
        if not hb:
            return 0, {}
        a = max(r["attempt"] for r in hb.values())
        return a, {k: r for k, r in hb.items() if r["attempt"] == a}

    def wait_step(self, step, timeout=300):
        """Until every rank of one attempt is training past `step`; the heartbeats then."""
        t0 = time.time()
        while time.time() - t0 < timeout:
            if self.run.p.poll() is not None:
                fail(f"launch {self.launches} exited ({self.run.p.returncode}) before step {step}:\n"
                     + self.run.output()[-5000:])
            a, hb = self.beats()
            if len(hb) == self.world and all(r["phase"] == "train" and r["step"] >= step for r in hb.values()):
                return a, hb
            time.sleep(0.02)
        fail(f"step {step} not reached in {timeout} s:\n" + self.run.output()[-5000:])

    def wait_new_step(self, attempt, timeout=240):
        """Until a rank of an attempt after `attempt` completed a step; its heartbeat time."""
        t0 = time.time()
        while time.time() - t0 < timeout:
            a, hb = self.beats()
            if a > attempt:
                t = [r["time"] for r in hb.values() if r["phase"] in ("train", "done") and r["step"] > r["start_step"]]
                if t:
                    return min(t)
            if self.run.p.poll() is not None and self.run.p.returncode != 0:
                fail(f"launch {self.launches} exited ({self.run.p.returncode}) while recovering:\n"
                     + self.run.output()[-5000:])
            time.sleep(0.02)
        fail(f"no new step {timeout} s after the fault:\n" + self.run.output()[-5000:])

    def finish(self, timeout=400):
        rc = self.run.wait(timeout)
        if rc != 0:
            fail(f"launch {self.launches} exited {rc}:\n" + self.run.output()[-5000:])

    def recovered_at(self, after):
        """The first `recovered` event after Unix time `after`: (time of the first new step, kind)."""
        for e in events(self.run_dir):
            if e["event"] == "recovered" and e["time"] >= after:
                fail_ev = [x for x in events(self.run_dir) if x["event"] == "failure" and x["time"] >= after]
                if fail_ev:
                    return fail_ev[0]["detected_at"] + e["recovery_s"], e["failure"]
        return None, None

    # ------------------------------------------------------------ faults

    def hit(self, f):
        a, hb = self.wait_step(f.step)
        victim = hb[f.rank] if f.rank is not None else None
        getattr(self, "_" + f.kind)(f, a, hb, victim)
        self.done.append(f)
        rec = f"{f.recovery_s:.2f} s" if f.recovery_s is not None else "-"
        print(f"fault {len(self.done):2d} {f.kind:15s} step {max(r['step'] for r in hb.values()):4d} "
              f"recovery {rec:>9s}  {f.note}", flush=True)

    def _restart_recovery(self, f, a):
        t_step = self.wait_new_step(a)
        exact, _ = self.recovered_at(f.at)
        f.recovery_s = (exact or t_step) - f.at

    def blamed(self, after):
        """Whom the supervisor's first failure after Unix time `after` names: 'kind rank R on HOST (dp, tp,
        pp, cp), phase P'."""
        ev = [e for e in events(self.run_dir) if e["event"] == "failure" and e["time"] >= after]
        if not ev or not ev[0].get("culprits"):
            return f"{ev[0]['kind']}, nobody named" if ev else "no failure event"
        c = ev[0]["culprits"][0]
        return (f"{ev[0]['kind']} rank {c['rank']} on {c['host']} (dp {c['dp']}, tp {c['tp']}, pp {c['pp']}, "
                f"cp {c['cp']}), phase {c['phase']}, process {c['process']}")

    def _kill(self, f, a, hb, v):
        f.at = time.time()
        os.kill(v["pid"], signal.SIGKILL)
        self._restart_recovery(f, a)
        f.note = f"SIGKILL rank {v['rank']} on {v['host']}; named: {self.blamed(f.at)}"

    def _hang(self, f, a, hb, v):
        f.at = time.time()
        os.kill(v["pid"], signal.SIGSTOP)
        self._restart_recovery(f, a)
        f.note = f"SIGSTOP rank {v['rank']} on {v['host']}; named: {self.blamed(f.at)}"

    def _host_lost(self, f, a, hb, v):
        i = f.host
        seen = self.run.output().count("waiting up to")
        f.at = time.time()
        self.c.kill_host(i)
        t0 = time.time()
        while self.run.output().count("waiting up to") <= seen:
            if time.time() - t0 > 180 or self.run.p.poll() is not None:
                fail("the supervisor did not wait for the lost host:\n" + self.run.output()[-5000:])
            time.sleep(0.1)
        time.sleep(2)  # the host stays away a moment after the supervisor noticed
        self.c.restore_host(i)
        f.note = f"host {self.c.hosts[i]}: link down, every process killed; back after {time.time() - f.at:.1f} s"
        self._restart_recovery(f, a)

    def _drain(self, f, a, hb, v):
        i = [k for k, h in enumerate(self.c.hosts) if h == v["host"]][0]
        pids = [str(r["pid"]) for r in hb.values() if r["host"] == v["host"]]
        f.at = time.time()
        self.c.run(i, ["kill", "-TERM"] + pids)
        rc = self.run.wait(120)
        if rc != 4:
            fail(f"drain: launch exited {rc}, expected 4 (stopped with a checkpoint):\n" + self.run.output()[-5000:])
        stop = max(r["step"] for r in self.run.heartbeats().values())
        self.start(resume=True)
        f.recovery_s = self.wait_new_step(a) - f.at
        f.note = f"SIGTERM on {v['host']}: stopped after step {stop} (exit 4), relaunched with --resume auto"

    def _supervisor_kill(self, f, a, hb, v):
        f.at = time.time()
        self.run.p.kill()  # nsenter execs the supervisor: this is `fluxtrain launch` itself
        self.run.p.wait()
        t0 = time.time()
        while any("sshd" not in cmd for i in range(self.c.n) for _, cmd in self.c.processes(i)):
            if time.time() - t0 > 60:
                left = [cmd[:100] for i in range(self.c.n) for _, cmd in self.c.processes(i) if "sshd" not in cmd]
                fail(f"the job outlived its killed supervisor by 60 s: {left}")
            time.sleep(0.1)
        gone = time.time() - f.at
        self.start(resume=True)
        f.recovery_s = self.wait_new_step(a) - f.at
        f.note = f"SIGKILL to the supervisor; its job gone after {gone:.1f} s; relaunched with --resume auto"

    def _corrupt_ckpt(self, f, a, hb, v):
        for _ in range(50):
            committed = sorted(d for d in os.listdir(self.ckpt_root)
                               if os.path.exists(os.path.join(self.ckpt_root, d, "manifest.json")))
            try:
                d = os.path.join(self.ckpt_root, committed[-1])
                victim = sorted(x for x in os.listdir(d) if x.endswith(".ftckpt"))[f.rank % self.world]
                path = os.path.join(d, victim)
                f.at = time.time()
                with open(path, "r+b") as fh:
                    fh.seek(os.path.getsize(path) // 2)
                    b = fh.read(16)
                    fh.seek(-16, 1)
                    fh.write(bytes(x ^ 0xFF for x in b))
                self.corrupted.append(d)
                f.note = f"16 bytes flipped in {committed[-1]}/{victim}"
                return
            except (OSError, IndexError):  # retention removed it meanwhile
                time.sleep(0.05)
        fail("no committed checkpoint to corrupt")

    def _disk_full(self, f, a, hb, v):
        """The checkpoint file system (a small tmpfs) filled up by another writer until a save has
        failed, then freed: training goes on, the next save commits."""
        filler = os.path.join(self.ckpt_root, "..", "filler")
        f.at = time.time()
        with open(filler, "wb", buffering=0) as fh:
            try:
                while True:
                    fh.write(b"\0" * (1 << 20))
            except OSError:  # ENOSPC: full
                pass
        before = saves(self.run_dir)
        t0 = time.time()
        while not [s for s in saves(self.run_dir)[len(before):] if not s["ok"]]:
            if time.time() - t0 > 120:
                fail("no checkpoint save failed while the disk was full")
            if self.run.p.poll() is not None:
                fail("the job ended while the disk was full:\n" + self.run.output()[-5000:])
            time.sleep(0.05)
        failed = [s["step"] for s in saves(self.run_dir)[len(before):] if not s["ok"]]
        os.unlink(filler)
        freed = time.time()
        n = len(saves(self.run_dir))
        while not [s for s in saves(self.run_dir)[n:] if s["ok"]]:
            if time.time() - freed > 120:
                fail("no checkpoint committed after the disk was freed")
            time.sleep(0.05)
        ok = [s["step"] for s in saves(self.run_dir)[n:] if s["ok"]][0]
        f.recovery_s = time.time() - freed
        f.note = (f"ckpt file system full for {freed - f.at:.1f} s: save of step {failed[0]} failed, training went on; "
                  f"step {ok} committed {f.recovery_s:.1f} s after it was freed (recovery: free -> commit)")

    def _nan(self, f, a, hb, v):
        self._in_step(f, f"NaN from rank {f.rank} at step {f.step}: update skipped")

    def _spike(self, f, a, hb, v):
        self._in_step(f, f"loss x 30 at step {f.step}: update skipped")

    def _in_step(self, f, note):
        """A data fault is in the batch (FLUXTRAIN_FAULT_INJECT): from the end of the step before it
        to the first step after it."""
        f.at = time.time()
        _, hb = self.wait_step(f.step + 1)
        f.recovery_s = max(r["time"] for r in hb.values()) - f.at
        f.note = note

    def _straggler(self, f, a, hb, v):
        i = f.host
        f.at = time.time()
        self.c.cpu_limit(i, 0.05)
        s0 = max(r["step"] for r in hb.values())
        _, hb2 = self.wait_step(s0 + 8)
        self.c.cpu_unlimit(i)
        slow = (time.time() - f.at) / 8
        capped = sorted(r["rank"] for r in hb.values() if r["host"] == self.c.hosts[i])
        named = sorted({x["rank"] for r in raw_metrics(self.run_dir) if r["step"] > s0 for x in r.get("stragglers", [])})
        f.note = (f"host {self.c.hosts[i]} (rank {capped}) capped at 0.05 CPU for 8 steps ({slow * 1e3:.0f} ms a step); "
                  f"stragglers named meanwhile: {named}")
        f.recovery_s = None


def saves(run_dir):
    path = os.path.join(run_dir, "checkpoints.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        rows = [json.loads(l) for l in fh if l.strip()]
    return [r for r in rows if r.get("event") == "save"]


def print_recovery_table(done):
    """Faults by kind and their recovery (fault -> first new step): median, max, against 90 s."""
    kinds = {}
    for f in done:
        kinds.setdefault(f.kind, []).append(f)
    print(f"\n{'fault kind':16s} {'count':>5s} {'median s':>9s} {'max s':>8s}  vs {CASE_STUDY_S:.0f} s", flush=True)
    worst = 0.0
    for kind in KINDS:
        fs = kinds.get(kind, [])
        rs = [f.recovery_s for f in fs if f.recovery_s is not None]
        if rs:
            worst = max(worst, max(rs) if kind in INTERRUPTING else 0)
            verdict = "ok" if max(rs) <= CASE_STUDY_S else "OVER"
            print(f"{kind:16s} {len(fs):5d} {statistics.median(rs):9.2f} {max(rs):8.2f}  {verdict}", flush=True)
        else:
            print(f"{kind:16s} {len(fs):5d} {'-':>9s} {'-':>8s}  (no interruption)", flush=True)
    print(f"total            {len(done):5d}", flush=True)
    return worst


def verify_checkpoints(ft, root, corrupted):
    """`fluxtrain ckpt verify` on every committed checkpoint: the ones the test damaged (if still
    kept) must fail it, every other one pass."""
    ok = bad = 0
    for d in sorted(os.listdir(root)):
        path = os.path.join(root, d)
        if not os.path.exists(os.path.join(path, "manifest.json")):
            continue
        p = subprocess.run([ft, "ckpt", "verify", path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=120)
        if path in corrupted:
            if p.returncode == 0:
                fail(f"ckpt verify passes {path}, whose file the test corrupted")
            bad += 1
        elif p.returncode != 0:
            fail(f"committed checkpoint {path} cannot be resumed: {p.stdout.strip()[-500:]}")
        else:
            ok += 1
    print(f"checkpoints: {ok} committed checkpoint(s) verify; {bad} corrupted by the test still kept and refused "
          f"by verify", flush=True)
