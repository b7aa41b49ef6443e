#!/usr/bin/env python3
"""The stages of scripts/gpu_check.sh (read that first). Standard library only: it runs under the
GPU machine's python3 as it is.

The binaries: $FT_KERNELS_CUDA_TEST / $FT_FLUXTRAIN when set, else .gpu-pack/, build-gpu/, build/.

usage: gpu_check.py [--out DIR] [--budget SECONDS] [--stages 0,1,2,3,4] [--cpu-dry-run [--steps N]]
                    [--golden-runs runs|ci_runs]

Every stage runs alone (--stages 3): the GPU and the library path are found first whether or not
stage 0 runs, and stage 3 asks the trainer itself whether it trains on CUDA. Each stage has a cap
(CAPS: seconds on an H200) and every call inside it its own limit; the caps of stages 0-4 add up to
less than the default budget, 470 s, so a lease of 15 minutes (less a machine start of up to 4)
still has room to re-run the largest stage alone.

--cpu-dry-run exercises the stages on a machine without a GPU, against the CPU build (no caps,
budget 1800 s): stage 1 runs kernels_cuda_test (whose tests skip) and its SDPA and GEMM calls,
stage 2 trains the golden runs' first N steps on the CPU and compares them with the golden losses
(tests/cuda/CMakeLists.txt runs this in CI, so the golden file stays true to the code; with
--golden-runs ci_runs the file's batch 2 x seq 32 runs, which the virtual GPU's ctest
vgpu_golden_llama20m trains through this same stage 2 code, tests/vgpu/golden_test.py), stage 3
asks the trainer for train.device = "cuda" (refused here), then trains fluxtrain and the PyTorch
peer (where torch is installed) on the CPU at a tiny shape; stage 4 (stage 2's fp32 run with
parallel.comm = "nccl", run before stage 3) needs a GPU and skips.

Writes DIR/gpu_check.json after every stage (so a call cut short still returns what ran) and
the logs of the stages beside it (at most 8 files: what the device tool brings back), then prints
a table. Exit status 0 when no stage failed (skipped and not-available stages are not failures).
"""
import argparse
import datetime
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACK = os.path.join(ROOT, ".gpu-pack")
GOLDEN = os.environ.get("FT_GOLDEN_LOSSES") or os.path.join(ROOT, "tests", "cuda", "golden", "llama-20m.json")
# Stage 2 tolerances, relative, on the per-step loss and gradient norm (guesses until a GPU run
# measures the spread; on the CPU, bf16's gradient norms differ from fp32's by up to ~2%).
TOL = {"fp32": 1e-3, "bf16": 2e-2}
TOL_GRAD = {"fp32": 1e-2, "bf16": 1e-1}
# Stage 3's model: ~1.1B parameters (TinyLlama's shape), bf16, seq 2048, batch 8.
BIG = {"dim": 2048, "layers": 22, "heads": 32, "kv_heads": 4, "ffn": 5632, "vocab": 32000, "seq": 2048, "batch": 8}
# Its CPU dry run: the same code paths at a shape the CPU trains in seconds.
TINY = {"dim": 64, "layers": 2, "heads": 4, "kv_heads": 2, "ffn": 128, "vocab": 256, "seq": 32, "batch": 2}
# Seconds on an H200: each stage's cap and, inside it, the limit of each call (a call never runs
# past its stage's cap or the budget). Stages 0-4: 440 s of the 470 s budget; the largest, 170 s,
# fits again in a 15-minute lease after a machine start (up to 4 min) and a full run (470 s).
CAPS = {0: 30, 1: 120, 2: 80, 4: 40, 3: 170}
LIMITS = {"nvidia-smi": 10, "nvcc": 5, "torch-probe": 25, "ldd": 5,
          "kernels": 75, "sdpa": 25, "gemm": 20,  # stage 1: the op harness; cuDNN SDPA alone; GEMM rate
          "golden-run": 40,  # stages 2 and 4: one llama-20m run of 30 steps
          "fluxtrain-big": 60, "torch-eager": 35, "torch-compile": 75}  # stage 3
BUDGET = 470.0  # seconds: 8 minutes less margin (the device tool's call: timeout_s 540)
SDPA_TEST = "CudaTest.AttentionLowPrecisionMatchesReference"
GEMM_TEST = "CudaTest.DISABLED_GemmRate"
PEAK_BF16 = 989.4e12  # plan/catalog.cpp: H100 / H200 dense bf16
CUDA_LIBS = ["libcublasLt.so.13", "libcudnn.so.9", "libnvrtc.so.13", "libnccl.so.2"]
# Opened by the plugin on demand (dlopen), so not in its ldd list: NCCL when a communicator is made.
ON_DEMAND_LIBS = ["libnccl.so.2"]
# The cuDNN sub-plugin (cuDNN SDPA), opened by the plugin on the first SDPA call: beside the plugin
# (and beside kernels_cuda_test in the pack), or $FT_CUDNN_PLUGIN. It links cuDNN and NVRTC.
CUDNN_PLUGIN = "libfluxtrain_cudnn.so"


class Check:
    def __init__(self, out, budget):
        self.out, self.budget, self.t0 = out, budget, time.monotonic()
        self.doc = {"started": datetime.datetime.now().isoformat(timespec="seconds"), "root": ROOT, "stages": []}
        self.env = dict(os.environ)  # Python's (the PyTorch peers): never the pack's lib/
        self.ft_env = dict(os.environ)  # fluxtrain's and kernels_cuda_test's: the pack's lib/ and the CUDA libraries
        self.gpu = None  # name of the GPU, once stage 0 has seen one
        self.no_gpu = ""  # why not
        self.cpu_dry_run = False
        self.steps = None  # stage 2: steps of the golden runs to compare (None: all)
        self.golden_runs = "runs"  # stage 2: the golden file's set of runs ("ci_runs": batch 2 x seq 32)
        self.golden_limit = None  # seconds for one golden run (None: LIMITS["golden-run"], 600 in a dry run)
        self.gemm_bf16 = None
        self.found_env = False  # find_environment has run
        self.stage_end = None  # monotonic time the running stage's cap ends (None: no cap)

    def remaining(self):
        return self.budget - (time.monotonic() - self.t0)

    def begin(self, stage):
        """Starts a stage's cap (none in a CPU dry run: the CPU is far slower than the H200)."""
        self.stage_end = None if self.cpu_dry_run else time.monotonic() + CAPS[stage]

    def record(self, stage, name, status, t_start, summary, **details):
        self.doc["stages"].append({"stage": stage, "name": name, "status": status,
                                   "seconds": round(time.monotonic() - t_start, 1), "summary": summary, **details})
        self.doc["elapsed_s"] = round(time.monotonic() - self.t0, 1)
        tmp = os.path.join(self.out, "gpu_check.json.tmp")
        with open(tmp, "w") as f:
            json.dump(self.doc, f, indent=1)
        os.replace(tmp, os.path.join(self.out, "gpu_check.json"))

    def run(self, cmd, limit, log=None, env=None, cwd=ROOT):
        """Runs cmd with a time limit (never past the budget); returns (rc, output). rc None: timed out."""
        limit = min(limit, self.remaining() - 5)
        if self.stage_end is not None:
            limit = min(limit, self.stage_end - time.monotonic())
        limit = max(1, limit)
        try:
            p = subprocess.run(cmd, cwd=cwd, env=env or self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=limit, text=True, errors="replace")
            rc, output = p.returncode, p.stdout
        except subprocess.TimeoutExpired as e:
            rc, output = None, (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            output += f"\n[gpu_check: stopped after {limit:.0f} s]\n"
        except OSError as e:
            rc, output = 127, f"{cmd[0]}: {e}\n"
        if log:
            with open(os.path.join(self.out, log), "a") as f:
                f.write(f"$ {' '.join(cmd)}\n{output}\n")
        return rc, output


def first_existing(paths):
    for p in paths:
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


# ---- stage 0 ------------------------------------------------------------------------------

def library_dirs():
    """Directories that may hold the CUDA libraries: the toolkit, the loader's cache, PyTorch's wheels."""
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    dirs += ["/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/lib/x86_64-linux-gnu"]
    for sp in sys.path:
        dirs += sorted(glob.glob(os.path.join(sp, "nvidia", "*", "lib")))
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def resolve_library(name, ld_path):
    """Where the dynamic loader finds a library opened by name: LD_LIBRARY_PATH, then its cache."""
    for d in ld_path.split(":"):
        if d and os.path.exists(os.path.join(d, name)):
            return os.path.realpath(os.path.join(d, name))
    try:
        cache = subprocess.run(["/sbin/ldconfig", "-p"], stdout=subprocess.PIPE, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        cache = ""
    for line in cache.splitlines():
        if line.strip().startswith(name + " ") and "=>" in line:
            return os.path.realpath(line.split("=>")[1].strip())
    return "not found"


def cudnn_plugin_path(c, plugin):
    """The cuDNN sub-plugin fluxtrain's CUDA plugin opens: $FT_CUDNN_PLUGIN, else beside the plugin."""
    return c.ft_env.get("FT_CUDNN_PLUGIN") or os.path.join(os.path.dirname(plugin), CUDNN_PLUGIN)


def plugin_libraries(c):
    """The path of every library the CUDA plugin opens under fluxtrain's environment: those it links
    (ldd), those it opens on demand (ON_DEMAND_LIBS), and the cuDNN sub-plugin with what it links.
    Resolved without loading them here."""
    ft = fluxtrain_binary()
    plugin = os.path.join(os.path.dirname(ft), "libfluxtrain_cuda.so") if ft else ""
    if not os.path.exists(plugin):
        return {"libfluxtrain_cuda.so": "not found (no plugin beside fluxtrain)"}
    found = {}

    def linked(binary, note):
        rc, out = c.run(["ldd", binary], LIMITS["ldd"], "stage0.log", env=c.ft_env)
        for line in out.splitlines():
            parts = line.split()
            if "=>" in parts and parts[0].startswith("lib") and parts[0] not in found:
                where = parts[parts.index("=>") + 1]
                found[parts[0]] = ("not found" if where == "not" else os.path.realpath(where)) + note

    linked(plugin, "")
    for lib in ON_DEMAND_LIBS:
        found[lib] = resolve_library(lib, c.ft_env.get("LD_LIBRARY_PATH", "")) + " (opened on demand)"
    sub = cudnn_plugin_path(c, plugin)
    if os.path.exists(sub):
        found[CUDNN_PLUGIN] = os.path.realpath(sub) + " (opened on the first SDPA call)"
        linked(sub, f" (through {CUDNN_PLUGIN})")
    else:
        found[CUDNN_PLUGIN] = f"not found ({sub}): bf16 attention would run on the fp32 kernels"
    return found


def find_environment(c, log="stage0.log"):
    """The GPU (nvidia-smi) and the library path of fluxtrain and kernels_cuda_test: what every
    stage needs, so it runs first whether or not stage 0 does. Returns what it found."""
    info = {}
    rc, out = c.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm",
                     "--format=csv,noheader"], LIMITS["nvidia-smi"], log)
    gpus = [l.strip() for l in out.splitlines() if l.strip()] if rc == 0 else []
    info["gpus"] = gpus
    if gpus:
        c.gpu = gpus[0].split(",")[0]
    else:
        last = out.strip().splitlines()[-1] if out.strip() else f"exit {rc}"
        c.no_gpu = last if last.startswith("nvidia-smi") else "nvidia-smi: " + last
    # Where the CUDA libraries are; the pack's own libraries first.
    found, ld_dirs = {}, [os.path.join(PACK, "lib")] if os.path.isdir(os.path.join(PACK, "lib")) else []
    for lib in CUDA_LIBS:
        for d in library_dirs():
            if os.path.exists(os.path.join(d, lib)):
                found[lib] = d
                ld_dirs.append(d)
                break
    info["cuda_libraries"] = {lib: found.get(lib, "not found") for lib in CUDA_LIBS}
    ld = ":".join(dict.fromkeys(ld_dirs + [d for d in c.env.get("LD_LIBRARY_PATH", "").split(":") if d]))
    c.ft_env["LD_LIBRARY_PATH"] = ld
    info["LD_LIBRARY_PATH"] = ld  # fluxtrain's and kernels_cuda_test's only
    # kernels_cuda_test of a build tree (not the pack) has the cuDNN sub-plugin two levels up.
    kb = kernels_binary()
    if kb and "FT_CUDNN_PLUGIN" not in c.ft_env and not os.path.exists(os.path.join(os.path.dirname(kb), CUDNN_PLUGIN)):
        top = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(kb))), CUDNN_PLUGIN)
        if os.path.exists(top):
            c.ft_env["FT_CUDNN_PLUGIN"] = info["FT_CUDNN_PLUGIN"] = top
    c.found_env = True
    return info


def stage0(c):
    t = time.monotonic()
    info = find_environment(c)
    gpus = info["gpus"]
    rc, out = c.run(["nvcc", "--version"], LIMITS["nvcc"], "stage0.log")
    info["nvcc"] = out.strip().splitlines()[-1] if rc == 0 and out.strip() else "not found"
    probe = ("import json, torch; d = torch.cuda.is_available(); print(json.dumps({'torch': torch.__version__, "
             "'cuda': torch.version.cuda, 'cudnn': torch.backends.cudnn.version(), 'gpu': "
             "torch.cuda.get_device_name() if d else None}))")
    rc, out = c.run([sys.executable, "-c", probe], LIMITS["torch-probe"], "stage0.log")
    try:
        info["pytorch"] = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        info["pytorch"] = {"error": out.strip().splitlines()[-1] if out.strip() else f"exit {rc}"}
    info["plugin_libraries"] = plugin_libraries(c)
    for lib, path in info["plugin_libraries"].items():
        print(f"gpu_check: stage 0: the plugin opens {lib} -> {path}")
    cpu = ""
    flags = set()
    if os.path.exists("/proc/cpuinfo"):
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name") and not cpu:
                cpu = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    info["cpu"] = cpu
    info["cpu_avx2"] = "avx2" in flags  # the pack's host code is x86-64-v3
    if os.path.exists(os.path.join(PACK, "pack.json")):
        info["pack"] = json.load(open(os.path.join(PACK, "pack.json")))
    missing = {}
    for binary in [os.path.join(PACK, n) for n in ("kernels_cuda_test", "fluxtrain", "libfluxtrain_cuda.so",
                                                   CUDNN_PLUGIN)]:
        if os.path.exists(binary):
            rc, out = c.run(["ldd", binary], LIMITS["ldd"], "stage0.log", env=c.ft_env)
            missing[os.path.basename(binary)] = [l.split()[0] for l in out.splitlines() if "not found" in l]
    info["missing_libraries"] = missing
    if not gpus:
        status, summary = "skip", "no GPU: " + c.no_gpu
    elif any(missing.values()) or not info["cpu_avx2"]:
        status, summary = "fail", f"{c.gpu}: missing libraries {missing}" if any(missing.values()) else "CPU lacks AVX2"
    else:
        pt = info["pytorch"]
        status = "ok"
        summary = (f"{gpus[0]}; {info['nvcc'].strip()}; torch {pt.get('torch')} (CUDA {pt.get('cuda')}, "
                   f"cuDNN {pt.get('cudnn')})")
    c.record(0, "environment", status, t, summary, **info)


# ---- stage 1 ------------------------------------------------------------------------------

def gtest_counts(path):
    doc = json.load(open(path))
    ran = failed = skipped = 0
    failures = []
    for suite in doc.get("testsuites", []):
        for t in suite.get("testsuite", []):
            if t.get("status") != "RUN":
                continue
            if t.get("result") == "SKIPPED":
                skipped += 1
                continue
            ran += 1
            if t.get("failures"):
                failed += 1
                msg = t["failures"][0].get("failure", "").strip().splitlines()
                failures.append(f"{suite['name']}.{t['name']}: " + " | ".join(msg[:3]))
    return ran, failed, skipped, failures


def test_status(path, suite_name, test_name):
    """"ok", "failed", "skipped" or "not run": one test of a gtest JSON report."""
    for suite in json.load(open(path)).get("testsuites", []):
        for t in suite.get("testsuite", []):
            if suite["name"] == suite_name and t["name"] == test_name and t.get("status") == "RUN":
                return "skipped" if t.get("result") == "SKIPPED" else "failed" if t.get("failures") else "ok"
    return "not run"


def kernels_binary():
    return first_existing([os.environ.get("FT_KERNELS_CUDA_TEST", ""), os.path.join(PACK, "kernels_cuda_test"),
                           os.path.join(ROOT, "build-gpu", "tests", "cuda", "kernels_cuda_test"),
                           os.path.join(ROOT, "build", "tests", "cuda", "kernels_cuda_test")])


def sdpa_call(c, binary):
    """The cuDNN SDPA test in a call of its own (its own limit and report): (status, summary, details).
    A refusal of a head dim other than 64/128 is a warning line of the test, never a failure."""
    report = os.path.join(c.out, "kernels_cuda_sdpa.json")
    rc, out = c.run([binary, f"--gtest_filter={SDPA_TEST}", f"--gtest_output=json:{report}"], LIMITS["sdpa"],
                    "stage1.log", env=c.ft_env)
    warnings = [l.strip() for l in out.splitlines() if l.startswith("warning: cuDNN SDPA")]
    details = {"exit": rc, "warnings": warnings,
               "rows": [l.strip() for l in out.splitlines() if l.startswith("  B ") or "cuDNN SDPA in" in l]}
    status = test_status(report, *SDPA_TEST.split(".")) if os.path.exists(report) else "no report"
    if rc is None:
        status = f"stopped after its {LIMITS['sdpa']} s"
    details["status"] = status
    dims = sorted({int(m) for w in warnings for m in re.findall(r"head dim (\d+)", w)})
    summary = f"cuDNN SDPA {status}" + (f" (warning: head dim {', '.join(map(str, dims))} refused)" if dims else "")
    return {"ok": "ok", "skipped": "skip"}.get(status, "fail"), summary, details


def stage1(c):
    t = time.monotonic()
    name = "CUDA ops vs reference"
    binary = kernels_binary()
    if not binary:
        return c.record(1, name, "fail", t, "no kernels_cuda_test: run scripts/gpu_check.sh --pack on the development machine")
    if not c.gpu and not c.cpu_dry_run:
        return c.record(1, name, "skip", t, "no GPU: " + c.no_gpu, binary=binary)
    # 1. Every test but the SDPA one (and the disabled GEMM rate).
    report = os.path.join(c.out, "kernels_cuda_test.json")
    rc, out = c.run([binary, f"--gtest_filter=-{SDPA_TEST}", f"--gtest_output=json:{report}"], LIMITS["kernels"],
                    "stage1.log", env=c.ft_env)
    details = {"binary": binary, "exit": rc}
    if not os.path.exists(report):
        return c.record(1, name, "fail", t, "kernels_cuda_test wrote no report: " + (out.strip().splitlines() or ["?"])[-1],
                        **details)
    ran, failed, skipped, failures = gtest_counts(report)
    details.update(ran=ran, failed=failed, skipped=skipped, failures=failures)
    # The deliberate fault of the sync check runs in a child process of its own (a death test).
    details["sync_check"] = test_status(report, "CudaTest", "SyncCheckNamesTheFaultingOpAndFreesWithoutThrowing")
    # 2. cuDNN SDPA alone; 3. our GEMM rate.
    sdpa_status, sdpa_summary, details["sdpa"] = sdpa_call(c, binary)
    rc3, out3 = c.run([binary, "--gtest_also_run_disabled_tests", f"--gtest_filter={GEMM_TEST}"], LIMITS["gemm"],
                      "stage1.log", env=c.ft_env)
    rates = dict(re.findall(r"gemm rate (\w+) 8192\^3: ([0-9.e+]+) TFLOP/s", out3))
    details["gemm_tflops"] = {k: float(v) for k, v in rates.items()}
    c.gemm_bf16 = details["gemm_tflops"].get("bf16")
    if skipped and not ran:
        m = re.search(r"Skipped\n(.*)", out)
        summary = f"all {skipped} tests skipped: " + (m.group(1).strip() if m else "see stage1.log")
        return c.record(1, name, "skip" if sdpa_status != "fail" else "fail", t, f"{summary}; {sdpa_summary}", **details)
    status = "ok" if failed == 0 and ran > 0 and rc == 0 and details["sync_check"] == "ok" and sdpa_status == "ok" else "fail"
    summary = (f"{ran - failed}/{ran} tests passed" + (f", {skipped} skipped" if skipped else "") +
               f"; sync check {details['sync_check']}; {sdpa_summary}; our GEMM 8192^3: " +
               (", ".join(f"{k} {v:.0f} TFLOP/s" for k, v in details["gemm_tflops"].items()) or "no rate"))
    c.record(1, name, status, t, summary, **details)


# ---- stages 2 and 3: fluxtrain on the GPU -------------------------------------------------

def fluxtrain_binary():
    return first_existing([os.environ.get("FT_FLUXTRAIN", ""), os.path.join(PACK, "fluxtrain"), os.path.join(ROOT, "build-gpu", "fluxtrain"),
                           os.path.join(ROOT, "build", "fluxtrain")])


def not_in_build(output):
    """The trainer's answer when it has no CUDA device support yet (unknown key or value)."""
    for line in output.splitlines():
        if line.startswith("error:") and "train.device" in line:
            return line
    return None


def step_rows(run_dir):
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    return [r for r in (json.loads(l) for l in open(path) if l.strip()) if "loss" in r and "step" in r]


def worst_rel(got, want):
    rel = [abs(g - w) / max(abs(w), 1e-12) for g, w in zip(got, want)]
    return (max(rel), rel.index(max(rel)) + 1) if rel else (float("inf"), 0)


def stage2(c):
    golden_losses(c, 2, "llama-20m vs golden CPU losses", [], ("fp32", "bf16"))


def stage4(c):
    # Issue 17: the same run with its dp/tp/pp groups on NCCL (dp = 1 on one GPU: a one-rank NCCL
    # communicator; more ranks than GPUs is refused by NCCL).
    if c.cpu_dry_run:
        t = time.monotonic()
        return c.record(4, "llama-20m over NCCL vs golden", "skip", t,
                        "parallel.comm = \"nccl\" needs device buffers: no CPU dry run")
    golden_losses(c, 4, "llama-20m over NCCL vs golden", ["--set", 'parallel.comm="nccl"'], ("fp32",))


def golden_losses(c, stage, name, extra, precisions):
    t = time.monotonic()
    if not c.gpu and not c.cpu_dry_run:
        return c.record(stage, name, "skip", t, "no GPU: " + c.no_gpu)
    ft = fluxtrain_binary()
    if not ft:
        return c.record(stage, name, "n/a", t, "not available in this build: no fluxtrain binary")
    golden = json.load(open(GOLDEN))
    details = {"binary": ft, "golden": os.path.relpath(GOLDEN, ROOT), "tolerance_loss": TOL, "tolerance_grad_norm": TOL_GRAD}
    # The comparison means something only if the golden run learns.
    runs = golden[c.golden_runs]
    details["runs"] = c.golden_runs
    g32 = runs["fp32"]["loss"]
    if g32[0] - min(g32[-5:]) < 0.5:
        return c.record(stage, name, "fail", t, f"the golden fp32 run does not learn ({g32[0]:.3f} -> {g32[-1]:.3f}): "
                        "regenerate it with scripts/make-golden-losses.sh", **details)
    worst, parts = {}, []
    for prec in precisions:
        run_dir = os.path.join("/tmp", f"gpu_check_{prec}_{os.getpid()}")
        shutil.rmtree(run_dir, ignore_errors=True)
        cmd = [ft if a == "FLUXTRAIN" else run_dir if a == "RUN_DIR" else a for a in runs[prec]["command"]]
        if c.steps:
            cmd += ["--set", f"train.steps={c.steps}"]
        if not c.cpu_dry_run:
            cmd += ["--set", 'train.device="cuda"']
        cmd += extra
        limit = c.golden_limit or (600 if c.cpu_dry_run else LIMITS["golden-run"])
        rc, out = c.run(cmd, limit, f"stage{stage}.log", env=c.ft_env)
        why = not_in_build(out)
        if why:
            return c.record(stage, name, "n/a", t, "not available in this build: " + why, **details)
        rows = step_rows(run_dir)
        shutil.rmtree(run_dir, ignore_errors=True)
        want = runs[prec]
        n = c.steps or len(want["loss"])
        if rc != 0 or len(rows) != n:
            details[prec] = {"steps": len(rows), "error": out.strip().splitlines()[-1] if out.strip() else f"exit {rc}"}
            worst[prec] = False
            parts.append(f"{prec} failed: {details[prec]['error']}")
            continue
        wl, sl = worst_rel([r["loss"] for r in rows], want["loss"][:n])
        wg, sg = worst_rel([r["grad_norm"] for r in rows], want["grad_norm"][:n])
        details[prec] = {"loss": [r["loss"] for r in rows], "grad_norm": [r["grad_norm"] for r in rows],
                         "worst_rel_diff_loss": wl, "at_step": sl, "worst_rel_diff_grad_norm": wg, "grad_at_step": sg}
        worst[prec] = wl <= TOL[prec] and wg <= TOL_GRAD[prec]
        parts.append(f"{prec}: loss worst rel. diff {wl:.1e} at step {sl} (tol {TOL[prec]:g}), grad norm {wg:.1e} "
                     f"(tol {TOL_GRAD[prec]:g})")
    c.record(stage, name, "ok" if all(worst.values()) else "fail", t, f"{n} steps; " + "; ".join(parts), **details)


def torch_peer(c, mode, limit, gemm):
    cmd = [sys.executable, os.path.join(ROOT, "bench", "torch_gpu_train.py"), "--mode", mode]
    for k, v in (TINY if c.cpu_dry_run else BIG).items():
        cmd += ["--" + k.replace("_", "-"), str(v)]
    if c.cpu_dry_run:
        cmd += ["--device", "cpu", "--warmup", "1", "--steps", "2"]
        gemm = False
    if gemm:
        cmd.append("--gemm")
    rc, out = c.run(cmd, limit, "stage3.log")
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                break
    if "No module named 'torch'" in out:
        return {"status": "skip", "reason": f"no PyTorch under {sys.executable}"}
    return {"status": "fail", "reason": (out.strip().splitlines() or [f"exit {rc}"])[-1] if rc != 0 else "no result"}


def fluxtrain_big(c):
    """fluxtrain at stage 3's shape (TINY on the CPU in a dry run). The run itself is the probe of
    the trainer: a build whose trainer refuses train.device = "cuda" gives n/a with its error line,
    whatever stage 2 did or did not find."""
    ft = fluxtrain_binary()
    if not ft:
        return {"status": "n/a", "reason": "not available in this build: no fluxtrain binary"}
    shape = TINY if c.cpu_dry_run else BIG
    run_dir = os.path.join("/tmp", f"gpu_check_big_{os.getpid()}")
    shutil.rmtree(run_dir, ignore_errors=True)
    sets = [f"model.dim={shape['dim']}", f"model.n_layers={shape['layers']}", f"model.n_heads={shape['heads']}",
            f"model.n_kv_heads={shape['kv_heads']}", f"model.ffn_dim={shape['ffn']}", f"model.vocab_size={shape['vocab']}",
            "model.tie_embeddings=false", f"train.seq_len={shape['seq']}", f"train.batch_size={shape['batch']}",
            "train.steps=13", 'train.precision="bf16"', "train.eval_interval=0", "metrics.tensorboard=false"]
    base = [ft, "train", "--config", "configs/llama-20m.toml", "--run-dir", run_dir]
    cuda = ["--set", 'train.device="cuda"']
    if c.cpu_dry_run:  # the probe alone (refused without a GPU), then the same run on the CPU
        probe = base + [a for s in sets for a in ("--set", s)] + cuda + ["--set", "train.steps=1"]
        rc, out = c.run(probe, 60, "stage3.log", env=c.ft_env)
        shutil.rmtree(run_dir, ignore_errors=True)
        why = not_in_build(out) or error_line(out, rc)
        print(f"gpu_check: stage 3: the trainer asked for train.device = \"cuda\": {why}")
        cuda = []
    cmd = base + [a for s in sets for a in ("--set", s)] + cuda
    rc, out = c.run(cmd, 600 if c.cpu_dry_run else LIMITS["fluxtrain-big"], "stage3.log", env=c.ft_env)
    why = not_in_build(out)
    if why and cuda:
        shutil.rmtree(run_dir, ignore_errors=True)
        return {"status": "n/a", "reason": "not available in this build: " + why}
    rows = []
    if os.path.exists(os.path.join(run_dir, "metrics.jsonl")):
        rows = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl")) if l.strip()]
    shutil.rmtree(run_dir, ignore_errors=True)
    timed = [r for r in rows if r.get("step", 0) > 3 and "tokens_per_s" in r]
    if rc == 0 and timed:
        tps = sorted(r["tokens_per_s"] for r in timed)[len(timed) // 2]
        return {"status": "ok", "tokens_per_s": tps, "rows": timed[-1], "device": "cpu" if not cuda else "cuda"}
    return {"status": "fail", "reason": error_line(out, rc)}


def error_line(output, rc):
    """The first "error:" line of a run's output, else its last line."""
    lines = output.strip().splitlines()
    return next((l for l in lines if l.startswith("error:")), lines[-1] if lines else f"exit {rc}")


def stage3(c):
    t = time.monotonic()
    name = "1.1B LLaMA bf16: fluxtrain vs PyTorch"
    if not c.gpu and not c.cpu_dry_run:
        return c.record(3, name, "skip", t, "no GPU: " + c.no_gpu)
    details = {"model": TINY if c.cpu_dry_run else BIG, "fluxtrain": fluxtrain_big(c)}
    details["torch_eager"] = torch_peer(c, "eager", 600 if c.cpu_dry_run else LIMITS["torch-eager"], gemm=True)
    if c.cpu_dry_run:  # the CPU peer's torch may predate torch.compile
        details["torch_compile"] = {"status": "n/a", "reason": "not run in a CPU dry run"}
    else:
        details["torch_compile"] = torch_peer(c, "compile", LIMITS["torch-compile"], gemm=False)
    eager, comp, ours = details["torch_eager"], details["torch_compile"], details["fluxtrain"]
    fpt = eager.get("flops_per_token") or flops_per_token(details["model"])
    parts = []
    for label, r in (("fluxtrain", ours), ("PyTorch eager", eager), ("torch.compile", comp)):
        if r.get("status") == "ok":
            mfu = r.get("mfu", r.get("tokens_per_s", 0) * fpt / PEAK_BF16)
            parts.append(f"{label} {r['tokens_per_s']:.0f} tok/s (MFU {100 * mfu:.1f}%)")
        else:
            parts.append(f"{label} {r.get('status')}: {r.get('reason', '')}")
    if ours.get("status") == "ok":
        for label, r in (("eager", eager), ("compile", comp)):
            if r.get("status") == "ok":
                details[f"ratio_vs_{label}"] = ours["tokens_per_s"] / r["tokens_per_s"]
                parts.append(f"{ours['tokens_per_s'] / r['tokens_per_s']:.2f}x {label}")
    statuses = {r.get("status") for r in (eager, comp, ours)}
    status = "ok" if statuses == {"ok"} else "fail" if "fail" in statuses else "partial"
    if c.cpu_dry_run:
        status = "skip" if statuses <= {"ok", "n/a", "skip"} else "fail"
    c.record(3, name, status, t, "; ".join(parts), **details)


def flops_per_token(m):
    """fluxtrain's convention (ModelConfig::train_flops_per_token): 6 N_matmul + 12 L C T."""
    hd = m["dim"] // m["heads"]
    per_layer = m["dim"] * (m["heads"] + 2 * m["kv_heads"]) * hd + m["heads"] * hd * m["dim"] + 3 * m["dim"] * m["ffn"]
    return 6 * (m["layers"] * per_layer + m["dim"] * m["vocab"]) + 12 * m["layers"] * m["dim"] * m["seq"]


def table(doc):
    rows = [("stage", "status", "seconds", "summary")]
    for s in doc["stages"]:
        rows.append((f"{s['stage']} {s['name']}", s["status"], f"{s['seconds']:.0f}", s["summary"]))
    w0 = max(len(r[0]) for r in rows)
    lines = [f"{r[0]:<{w0}}  {r[1]:<7}  {r[2]:>7}  {r[3]}" for r in rows]
    return "\n".join(lines)


def parse_stages(text):
    """--stages: a comma list of 0-4. Bad input: one error line and a hint, exit status 2."""
    try:
        wanted = {int(x) for x in text.split(",") if x.strip()}
    except ValueError:
        wanted = set()
    if not wanted or not wanted <= set(CAPS):
        print(f"error: --stages {text!r}: not a comma list of stages 0-4; hint: e.g. --stages 3 (one stage alone) "
              "or --stages 0,1,2,4,3", file=sys.stderr)
        sys.exit(2)
    return wanted


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("OUT") or os.path.join(ROOT, "build", "gpu_check"))
    p.add_argument("--budget", type=float, default=None,
                   help=f"seconds for all stages (default {BUDGET:.0f}: 8 minutes less margin; 1800 for a CPU dry run)")
    p.add_argument("--stages", default="0,1,2,3,4", help="stages to run, e.g. 0,2; each runs alone too (e.g. 3)")
    p.add_argument("--cpu-dry-run", action="store_true", help="exercise the stages on the CPU build (no GPU)")
    p.add_argument("--steps", type=int, default=None, help="stage 2: compare only the first N steps")
    p.add_argument("--golden-runs", default="runs", choices=("runs", "ci_runs"),
                   help="stage 2: the golden file's runs (ci_runs: batch 2 x seq 32, the virtual GPU's)")
    a = p.parse_args()
    wanted = parse_stages(a.stages)
    os.makedirs(a.out, exist_ok=True)
    for f in ("stage0.log", "stage1.log", "stage2.log", "stage3.log", "stage4.log", "kernels_cuda_test.json",
              "kernels_cuda_sdpa.json"):
        if os.path.exists(os.path.join(a.out, f)):
            os.remove(os.path.join(a.out, f))
    c = Check(a.out, a.budget or (1800.0 if a.cpu_dry_run else BUDGET))
    c.cpu_dry_run, c.steps, c.golden_runs = a.cpu_dry_run, a.steps, a.golden_runs
    if a.cpu_dry_run:
        c.doc["cpu_dry_run"] = True
    order = [s for s in (0, 1, 2, 4, 3) if s in wanted]
    caps = sum(CAPS[s] for s in order)
    c.doc["caps_s"] = {str(s): CAPS[s] for s in order}
    print(f"gpu_check: stages {','.join(map(str, order))}: caps " + ", ".join(f"{s}: {CAPS[s]} s" for s in order) +
          f" = {caps} s of a {c.budget:.0f} s budget" + (" (no caps in a CPU dry run)" if c.cpu_dry_run else ""))
    if not c.cpu_dry_run and caps > c.budget:
        print(f"gpu_check: warning: the caps add up to {caps} s, over the budget: the last stages may not run")
    for stage in order:
        if c.remaining() < 10:
            break
        c.begin(stage)
        try:
            if stage != 0 and not c.found_env:
                find_environment(c, f"stage{stage}.log")
            globals()[f"stage{stage}"](c)
        except Exception as e:  # a broken stage is reported, the next ones still run
            c.record(stage, f"stage{stage}", "fail", time.monotonic(), f"{type(e).__name__}: {e}")
    print(table(c.doc))
    print(f"(details: {os.path.join(a.out, 'gpu_check.json')})")
    return 1 if any(s["status"] == "fail" for s in c.doc["stages"]) else 0


if __name__ == "__main__":
    sys.exit(main())
