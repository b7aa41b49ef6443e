#!/usr/bin/env python3
"""Stopping on purpose (issue 14.9), end to end on real processes: the 2-rank tiny job of the
fault tests under `fluxtrain launch`, stopped with a real signal. Every rank must finish the step
in flight, agree on the stop step, commit its checkpoint and exit with code 4; the supervisor must
take exit 4 as "stopped on purpose" (no restart) and exit 4 itself; the next launch with
`--resume auto` must continue bit-identically: its losses equal the uninterrupted reference run's
(the fault_reference fixture) and every training sample is read exactly once.

usage: preempt_test.py FLUXTRAIN CONFIG WORK_DIR SCENARIO
  supervisor   SIGTERM to the supervisor (scancel, Kubernetes eviction of the launcher)
  rank         SIGTERM to rank 1 only (Slurm's --signal to the job step, eviction of one pod):
               the other rank learns of it at the step boundary
  ckpt         SIGUSR1 to the supervisor while the step-20 checkpoint is being written
               (asynchronously, slowed down): the stop waits for it, then saves its own
  grace        the checkpoint cannot finish within fault.preempt_grace_s: exit 5, the supervisor
               does not restart, and the resume starts from the last committed checkpoint"""
import json
import os
import shutil
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fault_lib import HOLD, Launch, check_losses_identical, check_samples, events, fail

FT, CFG, WORK, SCENARIO = sys.argv[1:5]
STEPS = 40
REF = os.path.join(WORK, "reference")
EXIT_STOPPED, EXIT_STOPPED_UNSAVED = 4, 5


def fresh(name):
    d = os.path.join(WORK, "preempt_" + name)
    shutil.rmtree(d, ignore_errors=True)
    if os.path.exists(d + ".launch.log"):
        os.remove(d + ".launch.log")
    return d


def committed_steps(run_dir):
    root = os.path.join(run_dir, "checkpoints")
    return sorted(int(d[5:]) for d in os.listdir(root)
                  if d.startswith("step_") and os.path.exists(os.path.join(root, d, "manifest.json")))


def stopped(run, expect_rc=EXIT_STOPPED, sets=(), env=None, check=None):
    """Checks the stopped launch (and `check(run)`), then resumes it to the end and compares with the
    reference."""
    t0 = time.time()
    rc = run.wait()
    out = run.output()
    if rc != expect_rc:
        fail(f"launch exited {rc}, expected {expect_rc}; log:\n" + out[-5000:])
    ev = events(run.run_dir)
    if any(e["event"] in ("restart", "failure") for e in ev):
        fail(f"a stop on request was taken for a failure: {ev}")
    st = [e for e in ev if e["event"] == "stopped"]
    if len(st) != 1 or st[0]["exit_code"] != expect_rc:
        fail(f"supervisor.jsonl should hold one 'stopped' event with exit code {expect_rc}: {ev}")
    hb = run.heartbeats()
    steps = {r["step"] for r in hb.values()}
    if len(hb) != 2 or len(steps) != 1:
        fail(f"the ranks did not stop after the same step: {hb}")
    stop_step = steps.pop()
    ckpts = committed_steps(run.run_dir)
    if expect_rc == EXIT_STOPPED:
        if any(r["phase"] != "stopped" for r in hb.values()):
            fail(f"every rank should report phase 'stopped': {hb}")
        if not ckpts or ckpts[-1] != stop_step:
            fail(f"stopped after step {stop_step} but the newest committed checkpoint is {ckpts}")
        print(f"stopped after step {stop_step} on both ranks, its checkpoint committed, exit {rc} "
              f"({time.time() - (run.hurt_at or t0):.2f} s after the signal)", flush=True)
    else:
        print(f"stopped without a checkpoint of step {stop_step} (newest committed: {ckpts}), exit {rc}", flush=True)
    line = [l for l in out.splitlines() if "supervisor: the job stopped" in l]
    print("supervisor said: " + (line[0] if line else "(nothing)"), flush=True)
    if check:
        check(run)

    resumed = Launch(FT, CFG, run.run_dir, sets=sets, env=env, extra=["--resume", "auto"])
    rc = resumed.wait()
    if rc != 0:
        fail(f"the resumed launch exited {rc}; log:\n" + resumed.output()[-5000:])
    check_losses_identical(REF, run.run_dir, STEPS)
    check_samples(run.run_dir, STEPS)


def supervisor():
    run = Launch(FT, CFG, fresh("supervisor"), env=HOLD)
    run.wait_for_step(17)
    run.hurt_at = time.time()
    run.p.send_signal(signal.SIGTERM)
    print("sent SIGTERM to the supervisor", flush=True)
    stopped(run)


def rank():
    run = Launch(FT, CFG, fresh("rank"), env=HOLD)
    run.wait_for_step(17)
    run.signal(1, signal.SIGTERM)
    stopped(run)
    log = open(os.path.join(run.run_dir, "logs", "attempt-1.log")).read()
    if "SIGTERM received" not in log or "stop requested (SIGTERM)" not in log:
        fail("rank 1's SIGTERM and the agreed stop are not in the log:\n" + log[-3000:])


def ckpt():
    # As fault_ckpt_kill: rank-file writes pause at every 1 MiB chunk, so the signal lands while
    # the step-20 checkpoint is being written in the background.
    sets, env = ["ckpt.chunk_mb=1"], {"FLUXTRAIN_CKPT_TEST_DELAY_MS": "300"}
    run = Launch(FT, CFG, fresh("ckpt"), sets=sets, env=env)
    d = os.path.join(run.run_dir, "checkpoints", "step_00000020")
    t0 = time.time()
    while time.time() - t0 < 120:
        files = os.listdir(d) if os.path.isdir(d) else []
        if any(".tmp" in f for f in files):
            break
        if run.p.poll() is not None:
            fail("launch exited before the step-20 checkpoint was written:\n" + run.output()[-3000:])
        time.sleep(0.005)
    else:
        fail("the step-20 checkpoint write was never seen in progress")
    run.hurt_at = time.time()
    run.p.send_signal(signal.SIGUSR1)
    print(f"sent SIGUSR1 to the supervisor while step_00000020 held {sorted(files)}", flush=True)
    def step_20_committed(run):
        if 20 not in committed_steps(run.run_dir):
            fail(f"the checkpoint being written when the signal came was lost: {committed_steps(run.run_dir)}")
        print("the step-20 checkpoint that was being written is committed", flush=True)

    stopped(run, sets=sets, env=env, check=step_20_committed)


def grace():
    # Writes pause 3 s per chunk, the grace is 2 s: the stop's checkpoint cannot be durable in time.
    sets, env = ["ckpt.chunk_mb=1", "fault.preempt_grace_s=2"], {"FLUXTRAIN_CKPT_TEST_DELAY_MS": "3000"}
    run = Launch(FT, CFG, fresh("grace"), sets=["ckpt.interval=1000"] + sets, env=env)
    run.wait_for_step(12)
    run.hurt_at = time.time()
    run.p.send_signal(signal.SIGTERM)
    print("sent SIGTERM to the supervisor (grace 2 s, checkpoint writes take longer)", flush=True)
    rc = run.wait()
    took = time.time() - run.hurt_at
    out = run.output()
    if rc != EXIT_STOPPED_UNSAVED:
        fail(f"launch exited {rc}, expected {EXIT_STOPPED_UNSAVED}; log:\n" + out[-5000:])
    said = [l for l in out.splitlines() if "(fault.preempt_grace_s)" in l]
    # Exit 5 already says the grace ended the stop before its save (3 s a chunk) was durable; the
    # time only bounds the rest (the signal's way to the ranks, the supervisor's exit) loosely.
    if not said or took > 2 + 60:
        fail(f"the ranks should give up after the 2 s grace, naming it (took {took:.1f} s):\n" + out[-3000:])
    ev = events(run.run_dir)
    if any(e["event"] in ("restart", "failure") for e in ev):
        fail(f"a stop on request was taken for a failure: {ev}")
    if committed_steps(run.run_dir):
        fail("no checkpoint can have been committed")
    print(f"exit {rc} {took:.1f} s after SIGTERM: " + said[0], flush=True)


os.makedirs(WORK, exist_ok=True)
{"supervisor": supervisor, "rank": rank, "ckpt": ckpt, "grace": grace}[SCENARIO]()
print(f"PASS preempt {SCENARIO}")
