"""Shared by the devemu tests: run configs/tiny.toml on the CPU binary (fluxtrain) and on the
emulated GPU (fluxtrain-devemu with train.device = "cuda"), read the losses and the emulator's
traffic counters (FT_DEVEMU_STATS)."""
import glob
import json
import os
import subprocess
import sys
import tempfile

CPU = os.environ["FT_BIN"]
EMU = os.environ["FT_DEVEMU_BIN"]
CONFIG = os.environ["FT_CONFIG"]
MPIRUN = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1"]
WORK = tempfile.mkdtemp(prefix="devemu_")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(binary, run_dir, np=1, device="cpu", sets=(), steps=20, env=None, expect_ok=True, timeout=600, args=()):
    """`binary train` on tiny.toml; returns the CompletedProcess."""
    cmd = [binary, "train", "--config", CONFIG, "--run-dir", run_dir, "--set", f"train.steps={steps}",
           "--set", f'train.device="{device}"']
    for s in sets:
        cmd += ["--set", s]
    cmd += list(args)
    e = dict(os.environ, OMP_NUM_THREADS="1")
    e.update(env or {})
    if np > 1:
        # mpirun passes FT_DEVEMU_* to the ranks with -x.
        xs = []
        for k in e:
            if k.startswith("FT_DEVEMU_"):
                xs += ["-x", k]
        cmd = MPIRUN + xs + ["-np", str(np)] + cmd
    p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)
    if expect_ok and p.returncode != 0:
        fail(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def losses(run_dir):
    """[(step, loss, grad_norm, val_loss or None)] with every digit."""
    out = []
    for line in open(os.path.join(run_dir, "metrics.jsonl")):
        r = json.loads(line)
        if "loss" in r and "step" in r:
            out.append((r["step"], r["loss"], r.get("grad_norm"), r.get("val_loss")))
    return out


def rows(run_dir):
    return [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))]


def stats(path):
    """The emulator's counters of every rank that wrote them (FT_DEVEMU_STATS=path[.rank])."""
    files = sorted(glob.glob(path) + glob.glob(path + ".*"))
    if not files:
        fail(f"the emulator wrote no counters at {path}")
    return [json.load(open(f)) for f in files]


def same_losses(name, a, b):
    if not a or len(a) != len(b):
        fail(f"{name}: {len(a)} vs {len(b)} logged steps")
    for x, y in zip(a, b):
        if x != y:
            fail(f"{name}: step {x[0]} differs: cpu {x} vs emulated cuda {y}")
    print(f"ok {name}: {len(a)} steps bit-identical (last loss {a[-1][1]!r})")
