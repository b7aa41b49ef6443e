"""Helpers for the checkpoint tests: run the real binary, read metrics and checkpoint records."""
import json
import os
import shutil
import subprocess

KEY = "5f1e2d3c4b5a69788796a5b4c3d2e1f000112233445566778899aabbccddeeff"


def train(ft, config, run_dir, sets=(), nproc=1, resume=None, env=None, check=True):
    cmd = [ft, "train", "--config", config, "--run-dir", run_dir]
    for s in sets:
        cmd += ["--set", s]
    if nproc > 1:
        cmd += ["--nproc", str(nproc)]
    if resume:
        cmd += ["--resume", resume]
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
    if check and p.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-3000:]}")
    return p


def losses(run_dir):
    rows = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))]
    return {r["step"]: r["loss"] for r in rows}


def column(run_dir, key):
    """{step: value} of one metrics.jsonl field (steps that have it)."""
    rows = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))]
    return {r["step"]: r[key] for r in rows if key in r}


def data_hashes(run_dir):
    """Each step's data_hash: which global batch it read (layout-independent)."""
    rows = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))]
    return {r["step"]: r["data_hash"] for r in rows}


def records(run_dir):
    path = os.path.join(run_dir, "checkpoints.jsonl")
    return [json.loads(l) for l in open(path)] if os.path.exists(path) else []


def piece_checksums(run_dir, step):
    """{(tensor, split offset, begin, end): XXH3 of weights, exp_avg, exp_avg_sq} of a committed checkpoint."""
    with open(os.path.join(run_dir, "checkpoints", f"step_{step:08d}", "manifest.json")) as f:
        m = json.load(f)
    return {(t["name"], p["split_offset"], p["begin"], p["end"]): tuple(p["xxh3"]) for t in m["tensors"]
            for p in t["pieces"]}


def copy_checkpoint(src_step_dir, run_dir):
    """Copies one step directory into run_dir/checkpoints/ (a fresh run resumes from it)."""
    dst = os.path.join(run_dir, "checkpoints", os.path.basename(src_step_dir))
    shutil.copytree(src_step_dir, dst)
    return dst


def ckpt(ft, *args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([ft, "ckpt", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
