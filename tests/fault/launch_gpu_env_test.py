#!/usr/bin/env python3
"""`fluxtrain launch` gives its ranks the GPU/NCCL environment (launch/gpu_env.h), for real:
two ranks under mpirun, their environment read from /proc/PID/environ while they train.

1. Every rank has CUDA_DEVICE_ORDER=PCI_BUS_ID and NCCL_DEBUG=WARN (defaults the launcher's
   environment lacks), the cluster's NCCL_* / CUDA_* settings unchanged, and its local rank
   (OMPI_COMM_WORLD_LOCAL_RANK: the CUDA device it drives), one per rank.
2. NCCL_SOCKET_IFNAME naming no interface of this host: exit 2 with one error line naming the
   variable, its value and the host's interfaces, a hint, and no run directory written.
The ranks train on the CPU here (no GPU): this tests what the launcher hands them, not NCCL.

usage: launch_gpu_env_test.py FLUXTRAIN CONFIG WORK_DIR"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from check_lib import check, finish  # noqa: E402

FT, CFG, WORK = sys.argv[1:4]


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
base = [FT, "launch", "--config", CFG, "--nproc", "2", "--quiet", "--set", "parallel.dp=2", "--set", "train.steps=100000",
        "--set", "train.threads=1", "--set", "metrics.port=0", "--set", "train.eval_interval=0", "--set", "ckpt.interval=0"]
env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "CUDA_"))}
env.update(OMP_NUM_THREADS="1", NCCL_SOCKET_IFNAME="lo", NCCL_IB_DISABLE="1", NCCL_IB_TIMEOUT="22",
           CUDA_VISIBLE_DEVICES="GPU-aaaa,GPU-bbbb")

run = os.path.join(WORK, "run")
sup = subprocess.Popen(base + ["--run-dir", run], env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                       stderr=open(os.path.join(WORK, "launch.log"), "w"))
try:
    beats, deadline = {}, time.time() + 120
    while time.time() < deadline and len(beats) < 2:
        for p in glob.glob(os.path.join(run, "heartbeat", "rank-*.json")):
            try:
                j = json.load(open(p))
                if j.get("phase") == "train":
                    beats[j["rank"]] = j
            except (OSError, ValueError):
                pass
        if sup.poll() is not None:
            break
        time.sleep(0.2)
    check(len(beats) == 2, f"both ranks training under the supervisor ({sorted(beats)})")
    seen_local = set()
    for r, b in sorted(beats.items()):
        with open(f"/proc/{b['pid']}/environ", "rb") as f:
            renv = dict(kv.split("=", 1) for kv in f.read().decode().split("\0") if "=" in kv)
        want = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "NCCL_DEBUG": "WARN", "NCCL_SOCKET_IFNAME": "lo",
                "NCCL_IB_DISABLE": "1", "NCCL_IB_TIMEOUT": "22", "CUDA_VISIBLE_DEVICES": "GPU-aaaa,GPU-bbbb"}
        got = {k: renv.get(k) for k in want}
        check(got == want, f"rank {r} (pid {b['pid']}) environment: {got}")
        seen_local.add(renv.get("OMPI_COMM_WORLD_LOCAL_RANK"))
    check(seen_local == {"0", "1"}, f"one local rank (= CUDA device) per rank: {sorted(map(str, seen_local))}")
finally:
    if sup.poll() is None:
        os.killpg(sup.pid, signal.SIGTERM)  # the supervisor stops its ranks (preemption: exit 4)
        try:
            sup.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(sup.pid, signal.SIGKILL)
            sup.wait()

bad_run = os.path.join(WORK, "bad")
p = subprocess.run(base + ["--run-dir", bad_run], env=dict(env, NCCL_SOCKET_IFNAME="nosuchif"), capture_output=True,
                   text=True, timeout=60)
lines = [l for l in p.stderr.splitlines() if l.startswith("error:")]
check(p.returncode == 2 and len(lines) == 1 and "NCCL_SOCKET_IFNAME=nosuchif matches no network interface of this host"
      in lines[0] and "lo" in lines[0] and "hint:" in p.stderr, f"bad NCCL_SOCKET_IFNAME: rc {p.returncode}, {p.stderr.strip()!r}")
check(not os.path.exists(bad_run), "nothing was written for the refused job")

finish("the launcher hands every rank its GPU/NCCL environment", f"; supervisor log: {os.path.join(WORK, 'launch.log')}")
