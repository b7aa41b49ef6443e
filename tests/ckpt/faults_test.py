"""Faults during saving.

Disk full: checkpoints go to a small filesystem (a 4 MiB tmpfs mounted for the test; where
mounting is not allowed, a file-size limit, RLIMIT_FSIZE, makes the writes fail instead). The
first save fits, the next ones do not: training must go on to the last step, each failure must
be logged and recorded, no partial checkpoint may remain, the earlier checkpoint must verify
and resume, and the run must exit 2 saying that its final checkpoint was not written.

kill -9 during a save: a run whose writes are slowed down (FLUXTRAIN_CKPT_TEST_DELAY_MS) is killed
while its second checkpoint is being written; `--resume auto` must drop the partial directory,
resume from the first checkpoint and reproduce the uninterrupted losses bit for bit.

usage: faults_test.py FLUXTRAIN CONFIG
"""
import glob
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import ckpt_lib as L  # noqa: E402

FT, CONFIG = sys.argv[1], sys.argv[2]
COMMON = ["train.eval_interval=0", "train.batch_size=8", "train.seq_len=32", "train.threads=1"]


def disk_full(tmp, failures):
    small = os.path.join(tmp, "small")
    os.makedirs(small)
    # FT_TEST_NO_MOUNT=1 takes the RLIMIT_FSIZE path even where mounting works.
    mounted = not os.environ.get("FT_TEST_NO_MOUNT") and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", small], stderr=subprocess.DEVNULL).returncode == 0
    run = os.path.join(tmp, "full_run")
    # keep = 1: the failed saves of steps 4 and 6 must not have removed step 2 (older checkpoints
    # go only after a newer one is committed).
    sets = COMMON + ["train.steps=6", "ckpt.interval=2", "ckpt.keep=1", f"ckpt.dir=\"{small}\""]
    try:
        if mounted:
            print("disk full: checkpoints on a 4 MiB tmpfs")
            p = L.train(FT, CONFIG, run, sets, check=False)
        else:
            # No mount: the first run saves normally; a second run resumes under a file-size limit.
            print("disk full: mount not permitted; RLIMIT_FSIZE of 1 MiB instead")
            L.train(FT, CONFIG, run, sets[:-1] + [f"ckpt.dir=\"{small}\"", "train.steps=2"])
            lim = 1 << 20
            p = subprocess.run([FT, "train", "--config", CONFIG, "--run-dir", run, "--resume", "auto"] +
                               sum((["--set", s] for s in sets), []), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (lim, lim)))
        recs = [r for r in L.records(run) if r.get("event") == "save"]
        steps = sorted(L.losses(run))
        ok = [r["step"] for r in recs if r["ok"]]
        bad = [r for r in recs if not r["ok"]]
        print(f"disk full: exit {p.returncode}, trained to step {steps[-1]}; saves ok at {ok}, failed at "
              f"{[r['step'] for r in bad]}: {bad[0]['error'] if bad else '-'}")
        # Training goes on through the failed saves, but the exit code says that the final state is
        # not on disk (issue 14.4): exit 2 with one error naming the step and the newest checkpoint.
        final = "error: the final checkpoint, step 6, was not written (its error is above); the newest checkpoint " \
                "on disk is step 2"
        if p.returncode != 2 or steps[-1] != 6 or final not in p.stderr:
            failures.append(f"disk full: expected training to step 6, then exit 2 with '{final}': rc "
                            f"{p.returncode}\n{p.stderr[-1500:]}")
        if ok != [2] or [r["step"] for r in bad] != [4, 6]:
            failures.append(f"disk full: saves {recs}")
        if "failed" not in p.stderr or "training continues" not in p.stderr:
            failures.append("disk full: no error logged")
        if "discarded (2 failure(s) so far)" not in p.stderr:  # counted (fluxtrain_checkpoint_failures_total too)
            failures.append("disk full: failures not counted")
        left = sorted(os.listdir(small))
        if [d for d in left if d.startswith("step_")] != ["step_00000002"]:
            failures.append(f"disk full: partial checkpoints left behind: {left}")
        v = L.ckpt(FT, "verify", os.path.join(small, "step_00000002"))
        print("disk full: earlier checkpoint:", v.stdout.strip() or v.stderr.strip())
        if v.returncode != 0:
            failures.append("disk full: the earlier checkpoint does not verify")
        again = os.path.join(tmp, "after_full")
        L.copy_checkpoint(os.path.join(small, "step_00000002"), again)
        L.train(FT, CONFIG, again, COMMON + ["train.steps=6"], resume="auto")
        if sorted(L.losses(again)) != [3, 4, 5, 6]:
            failures.append("disk full: the earlier checkpoint does not resume")
    finally:
        if mounted:
            subprocess.run(["umount", small])


def kill_during_save(tmp, failures):
    sets = COMMON + ["train.steps=8", "ckpt.interval=4", "ckpt.chunk_mb=1"]
    ref_run = os.path.join(tmp, "ref")
    L.train(FT, CONFIG, ref_run, sets)
    ref = L.losses(ref_run)
    run = os.path.join(tmp, "killed")
    env = dict(os.environ, FLUXTRAIN_CKPT_TEST_DELAY_MS="400")
    cmd = [FT, "train", "--config", CONFIG, "--run-dir", run] + sum((["--set", s] for s in sets), [])
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    partial = os.path.join(run, "checkpoints", "step_00000008")
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and not glob.glob(partial + "/*.tmp.*"):
        time.sleep(0.01)
    if proc.poll() is not None:
        failures.append("kill -9: the run ended before its second save was under way")
        return
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    print(f"kill -9: killed while writing {os.listdir(partial)} (step 4 committed: "
          f"{os.path.exists(os.path.join(run, 'checkpoints', 'step_00000004', 'manifest.json'))})")
    p = L.train(FT, CONFIG, run, sets, resume="auto")
    got = L.losses(run)
    same = all(got[s] == ref[s] for s in range(5, 9))
    removed = "incomplete" in p.stderr and not os.path.exists(os.path.join(partial, "rank-00000.ftckpt.tmp"))
    print(f"kill -9: resumed from step 4 ({'partial step 8 removed' if removed else 'PARTIAL NOT REPORTED'}), "
          f"losses 5..8 {'bit-identical' if same else 'DIFFER'} to the uninterrupted run")
    if not same or not removed or "step_00000004" not in p.stderr:
        failures.append(f"kill -9: same {same}, removed {removed}\n{p.stderr[-1500:]}")


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        disk_full(tmp, failures)
        kill_during_save(tmp, failures)
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("faults: training survived a full disk; a killed save left the previous checkpoint in charge")
    return 0


if __name__ == "__main__":
    sys.exit(main())
