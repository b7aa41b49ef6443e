"""Out of device memory on the emulated GPU (FT_DEVEMU_BYTES smaller than the run needs): one
error line naming the request and its category, what holds the device's memory (the tracker's
table) and the planner's estimate for the run, then a hint; no traceback, no crash. With enough
memory, the device's live and peak bytes are in the metrics (fluxtrain_device_memory_* on
/metrics, mem_cuda_* in metrics.jsonl) and the CPU's parameters are not there."""
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from common import CONFIG, EMU, WORK, fail, run, rows  # noqa: E402

# The start-up memory check: tiny's device footprint (about 7 MiB) against the emulated GPU's 3 MiB
# free, one line naming the device, before any step; the host's RAM is not what it compares.
p = run(EMU, f"{WORK}/refused", device="cuda", steps=2, env={"FT_DEVEMU_BYTES": "3M"}, expect_ok=False)
out = p.stdout + p.stderr
errors = [l for l in out.splitlines() if l.startswith("error:")]
want = r"^error: cuda:0 \(host-emulated GPU\): the run needs [\d.]+ \w+ per rank \(.*\), 3\.0+ MiB free of 3\.0+ MiB"
trained = os.path.exists(f"{WORK}/refused/metrics.jsonl") and rows(f"{WORK}/refused")
if p.returncode <= 0 or len(errors) != 1 or not re.search(want, errors[0]) or trained:
    fail(f"start-up check: exit {p.returncode}, error lines {errors}:\n{out[-2000:]}")
if not any(l.startswith("hint:") for l in out.splitlines()):
    fail(f"start-up check: no hint: {out[-1000:]}")
print(f"ok start-up check: {errors[0]}")

# Past the check (train.memory_check = false): the allocation that fails names itself.
p = run(EMU, f"{WORK}/oom", device="cuda", steps=2, sets=["train.memory_check=false"], env={"FT_DEVEMU_BYTES": "3M"},
        expect_ok=False)
out = p.stdout + p.stderr
errors = [l for l in out.splitlines() if l.startswith("error:")]
hints = [l for l in out.splitlines() if l.startswith("hint:")]
if p.returncode == 0 or p.returncode < 0 or len(errors) != 1:
    fail(f"exit {p.returncode}, error lines {errors}:\n{out[-2000:]}")
e = errors[0]
for want in [r"out of memory allocating [\d.]+ \w+ for \w+ on cuda", r"live on cuda \(", "planner's estimate",
             r"per rank \(weights, gradients and optimizer state"]:
    if not re.search(want, e):
        fail(f"the error line lacks /{want}/: {e}")
if not hints:
    fail(f"no hint after the error: {out[-1000:]}")
print(f"ok oom: {e}\n   {hints[0]}")

# Device memory in the metrics: metrics.jsonl, and /metrics scraped while the run trains.
d = f"{WORK}/mem"
run(EMU, d, device="cuda", steps=3)
last = rows(d)[-1]
cuda = {k: v for k, v in last.items() if k.startswith("mem_cuda_")}
if not cuda.get("mem_cuda_peak_bytes") or not cuda.get("mem_cuda_parameters_bytes"):
    fail(f"metrics.jsonl: device memory {cuda}")
if last.get("mem_parameters_bytes", 0) > 0:
    fail(f"the CPU holds parameters on a cuda run: {last.get('mem_parameters_bytes')}")
print(f"ok metrics.jsonl: {cuda}")

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
cmd = [EMU, "train", "--config", CONFIG, "--run-dir", f"{WORK}/scraped", "--set", "train.steps=10000000", "--set",
       'train.device="cuda"', "--set", "metrics.enabled=true", "--set", f"metrics.port={port}", "--set",
       'metrics.bind_address="127.0.0.1"']
proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ,
                        OMP_NUM_THREADS="1"))
series = {}
try:
    deadline = time.time() + 120
    while time.time() < deadline and not series.get(("peak", "total")):
        time.sleep(0.5)
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        except OSError:
            continue
        for line in text.splitlines():
            m = re.match(r'fluxtrain_device_memory(_peak)?_bytes\{(.*)\} (\S+)', line)
            if m and 'device="cuda"' in m.group(2):
                cat = re.search(r'category="(\w+)"', m.group(2)).group(1)
                series[("peak" if m.group(1) else "live", cat)] = float(m.group(3))
finally:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
if not series.get(("peak", "total"), 0) > 0 or not series.get(("live", "parameters"), 0) > 0:
    fail(f"/metrics: fluxtrain_device_memory_* for cuda: {series}")
print(f"ok /metrics: cuda live parameters {series[('live', 'parameters')]:.0f} bytes, peak total "
      f"{series[('peak', 'total')]:.0f} bytes")
print("ok")
