#!/usr/bin/env python3
"""Training on the virtual GPU (issue 29 point 5): fluxtrain-vgpu (the CLI with the CUDA plugin's
real host code on the virtual runtime, tests/vgpu/CMakeLists.txt) trains the tiny config with
train.device = "cuda" for a few steps and its losses and gradient norms are compared with the CPU
binary's, step by step, within the tolerances of scripts/gpu_check.py's stage 2 (imported, not
copied). A small batch: the executor runs each CUDA thread as a fiber.

usage: train_test.py NAME [--np N] [--set KEY=VALUE ...] [--vgpu-only-set KEY=VALUE ...] [--planted]
                    [--cpu-np N]
  --set             settings of both runs (train.precision="bf16": stage 2's bf16 tolerances)
  --np N            both runs under mpirun with N ranks (the layout from --set)
  --vgpu-only-set   settings of the virtual-GPU run alone (parallel.comm = "nccl", parallel.cp = 2)
  --cpu-np N        the CPU run with N ranks (default: --np): 1 with a --vgpu-only-set layout
                    compares the virtual GPU's layout against one CPU process; with parallel.cp
                    there, the bytes each virtual-GPU rank sent on the cp group in the last step
                    (per_rank.cp_bytes, NcclComm's counter) must also equal the dry run's exactly,
                    and the device allocator's peak of communication memory (the ring's or the
                    all-to-all's buffers) the dry run's cp term for a GPU (plan/context_parallel.h)
  --planted         FT_VGPU_BIN is a planted build: exit 1 ("caught") when its run fails with the
                    virtual runtime's cross-stream race, else 0 (ctest's WILL_FAIL inverts it)
Environment: FT_BIN (CPU fluxtrain), FT_VGPU_BIN (fluxtrain-vgpu), FT_CONFIG (configs/tiny.toml).
Exit status 0 when every step is within tolerance."""
import argparse
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import gpu_check  # noqa: E402  (TOL, TOL_GRAD, step_rows, worst_rel: stage 2's comparison)

STEPS = 3
SMALL = ["train.batch_size=2", "train.seq_len=16", "train.eval_interval=0", "ckpt.interval=0",
         "metrics.tensorboard=false", f"train.steps={STEPS}", 'train.precision="fp32"']


def train(binary, run_dir, sets, np, planted=False):
    shutil.rmtree(run_dir, ignore_errors=True)
    cmd = [binary, "train", "--config", os.environ["FT_CONFIG"], "--run-dir", run_dir]
    for s in sets:
        cmd += ["--set", s]
    if np > 1:
        cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", str(np)] + cmd
    # OpenMP's idle threads sleep rather than spin: under ctest -j the spinning took CPU from the
    # other tests (results do not depend on it).
    env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "passive"))
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900, env=env)
    print(f"$ {' '.join(cmd)}  (exit {out.returncode})")
    if planted:
        races = [l for l in out.stdout.splitlines() if "cross-stream race" in l]
        for l in races[:4]:
            print(l)
        if out.returncode != 0 and races:
            raise SystemExit("CAUGHT: the planted fault is reported as a cross-stream race")
        print(out.stdout[-4000:])
        raise SystemExit(0)  # not caught: the WILL_FAIL test fails
    if out.returncode != 0:
        print(out.stdout[-4000:])
        raise SystemExit(f"FAIL: {binary} exited {out.returncode}")
    return gpu_check.step_rows(run_dir)


def cp_bytes_match_dry_run(run_dir, sets, np):
    """The device path's cp bytes per rank (the last step's per_rank.cp_bytes) = the dry run's
    (ContextSplit::dry over fake communicators: the same loops, transfers only)."""
    last = None
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            if line.strip() and "per_rank" in line:
                last = json.loads(line)
    real = last["per_rank"]["cp_bytes"] if last else None
    cmd = [os.environ["FT_BIN"], "train", "--config", os.environ["FT_CONFIG"], "--dry-run", "--world-size", str(np),
           "--gpu", "cpu", "--json"]
    for s in sets:
        cmd += ["--set", s]
    d = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    dry = [r["comm_bytes_per_step"]["cp"]["total"] for r in sorted(d["ranks"], key=lambda r: r["rank"])]
    print(f"cp bytes per rank per step: virtual GPU {real}, dry run {dry}")
    if real is None or [int(b) for b in real] != dry:
        raise SystemExit("FAIL: the virtual GPU ranks' cp bytes differ from the dry run's")
    cp_memory_matches_dry_run(last, sets, np)


def dry_run_communication(sets, np):
    """Rank 0's communication memory in the dry run for a GPU (the planner's accounting, a100-80gb)."""
    cmd = [os.environ["FT_BIN"], "train", "--config", os.environ["FT_CONFIG"], "--dry-run", "--world-size", str(np),
           "--gpu", "a100-80gb", "--json"]
    for s in sets:
        cmd += ["--set", s]
    d = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    return next(r for r in d["ranks"] if r["rank"] == 0)["memory_bytes"]["communication"]


def cp_memory_matches_dry_run(last, sets, np):
    """The buffers the device path's ring or all-to-all allocates (the virtual GPU's allocator peak of
    its communication category, rank 0: nothing else there at cp 2) = the dry run's cp term
    for a GPU: its communication at cp 2 minus at dp 2 (the same dp x cp shards, so the same
    gradient buffers)."""
    real = last.get("mem_cuda_communication_bytes")
    cp = next(int(s.split("=")[1]) for s in sets if s.startswith("parallel.cp="))
    at_dp = [s for s in sets if not s.startswith("parallel.cp")] + [f"parallel.dp={cp}"]
    dry = dry_run_communication(sets, np) - dry_run_communication(at_dp, np)
    print(f"cp buffers (communication memory, rank 0): virtual GPU allocator {real}, dry run (GPU) {dry:.0f}")
    if real is None or int(real) != round(dry):
        raise SystemExit("FAIL: the virtual GPU's cp buffers differ from the dry run's communication memory")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("name")
    p.add_argument("--np", type=int, default=1)
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--vgpu-only-set", action="append", default=[])
    p.add_argument("--planted", action="store_true")
    p.add_argument("--cpu-np", type=int, default=None)
    a = p.parse_args()
    base = f"/tmp/vgpu_train_{a.name}_{os.getpid()}"
    sets = SMALL + a.set
    if a.planted:
        try:
            train(os.environ["FT_VGPU_BIN"], base + "_vgpu", sets + ['train.device="cuda"'] + a.vgpu_only_set, a.np,
                  planted=True)
        finally:
            shutil.rmtree(base + "_vgpu", ignore_errors=True)
    cpu = train(os.environ["FT_BIN"], base + "_cpu", sets, a.np if a.cpu_np is None else a.cpu_np)
    gpu = train(os.environ["FT_VGPU_BIN"], base + "_vgpu", sets + ['train.device="cuda"'] + a.vgpu_only_set, a.np)
    if any(s.startswith("parallel.cp=") for s in a.vgpu_only_set):
        cp_bytes_match_dry_run(base + "_vgpu", sets + a.vgpu_only_set, a.np)
    for d in ("_cpu", "_vgpu"):
        shutil.rmtree(base + d, ignore_errors=True)
    if len(cpu) != STEPS or len(gpu) != STEPS:
        raise SystemExit(f"FAIL: steps logged: CPU {len(cpu)}, virtual GPU {len(gpu)}, want {STEPS}")
    for c, g in zip(cpu, gpu):
        print(f"step {c['step']}: loss CPU {c['loss']:.9f} vgpu {g['loss']:.9f}; "
              f"grad norm CPU {c['grad_norm']:.9f} vgpu {g['grad_norm']:.9f}")
    wl, sl = gpu_check.worst_rel([r["loss"] for r in gpu], [r["loss"] for r in cpu])
    wg, sg = gpu_check.worst_rel([r["grad_norm"] for r in gpu], [r["grad_norm"] for r in cpu])
    prec = "bf16" if 'train.precision="bf16"' in sets else "fp32"  # the last --set wins over SMALL's fp32
    tol, tol_grad = gpu_check.TOL[prec], gpu_check.TOL_GRAD[prec]
    print(f"worst rel. diff: loss {wl:.2e} at step {sl} (tol {tol:g}), grad norm {wg:.2e} at step {sg} "
          f"(tol {tol_grad:g})")
    if wl > tol or wg > tol_grad:
        raise SystemExit("FAIL: the virtual GPU's run is outside stage 2's tolerance")
    print("PASS")


if __name__ == "__main__":
    main()
