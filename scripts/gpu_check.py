#!/usr/bin/env python3
"""The stages of scripts/gpu_check.sh (read that first). Standard library only: it runs under the
GPU machine's python3 as it is.

The binaries: $FT_KERNELS_CUDA_TEST / $FT_FLUXTRAIN when set, else .gpu-pack/, build-gpu/, build/.

usage: gpu_check.py [--out DIR] [--budget SECONDS] [--stages 0,1,2,3,4] [--cpu-dry-run [--steps N]]

--cpu-dry-run exercises the stages on a machine without a GPU, against the CPU build: stage 1 runs
kernels_cuda_test (whose tests skip), stage 2 trains the golden runs' first N steps on the CPU and
compares them with the golden losses (tests/cuda/CMakeLists.txt runs this in CI, so the golden file
stays true to the code), stage 3 runs the PyTorch peer on the CPU at a tiny shape; stage 4 (stage 2's
fp32 run with parallel.comm = "nccl", run before stage 3) needs a GPU and skips.

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
PEAK_BF16 = 989.4e12  # plan/catalog.cpp: H100 / H200 dense bf16
CUDA_LIBS = ["libcublasLt.so.13", "libcudnn.so.9", "libnvrtc.so.13", "libnccl.so.2"]
# Opened by the plugin on demand (dlopen), so not in its ldd list: NCCL when a communicator is made.
ON_DEMAND_LIBS = ["libnccl.so.2"]


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
        self.gemm_bf16 = None
        self.trainer = "stage 2 did not run"  # None when fluxtrain trains on the GPU

    def remaining(self):
        return self.budget - (time.monotonic() - self.t0)

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
        limit = max(1, min(limit, self.remaining() - 5))
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


def plugin_libraries(c):
    """The path of every library the CUDA plugin opens under fluxtrain's environment: those it links
    (ldd) and those it opens on demand (ON_DEMAND_LIBS). Resolved without loading them here."""
    ft = fluxtrain_binary()
    plugin = os.path.join(os.path.dirname(ft), "libfluxtrain_cuda.so") if ft else ""
    if not os.path.exists(plugin):
        return {"libfluxtrain_cuda.so": "not found (no plugin beside fluxtrain)"}
    found = {}
    rc, out = c.run(["ldd", plugin], 10, "stage0.log", env=c.ft_env)
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts and parts[0].startswith("lib"):
            where = parts[parts.index("=>") + 1]
            found[parts[0]] = "not found" if where == "not" else os.path.realpath(where)
    for lib in ON_DEMAND_LIBS:
        found[lib] = resolve_library(lib, c.ft_env.get("LD_LIBRARY_PATH", "")) + " (opened on demand)"
    return found


def stage0(c):
    t = time.monotonic()
    info = {}
    rc, out = c.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm",
                     "--format=csv,noheader"], 15, "stage0.log")
    gpus = [l.strip() for l in out.splitlines() if l.strip()] if rc == 0 else []
    info["gpus"] = gpus
    if gpus:
        c.gpu = gpus[0].split(",")[0]
    else:
        last = out.strip().splitlines()[-1] if out.strip() else f"exit {rc}"
        c.no_gpu = last if last.startswith("nvidia-smi") else "nvidia-smi: " + last
    rc, out = c.run(["nvcc", "--version"], 10, "stage0.log")
    info["nvcc"] = out.strip().splitlines()[-1] if rc == 0 and out.strip() else "not found"
    probe = ("import json, torch; d = torch.cuda.is_available(); print(json.dumps({'torch': torch.__version__, "
             "'cuda': torch.version.cuda, 'cudnn': torch.backends.cudnn.version(), 'gpu': "
             "torch.cuda.get_device_name() if d else None}))")
    rc, out = c.run([sys.executable, "-c", probe], 60, "stage0.log")
    try:
        info["pytorch"] = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        info["pytorch"] = {"error": out.strip().splitlines()[-1] if out.strip() else f"exit {rc}"}
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
    for binary in [os.path.join(PACK, n) for n in ("kernels_cuda_test", "fluxtrain", "libfluxtrain_cuda.so")]:
        if os.path.exists(binary):
            rc, out = c.run(["ldd", binary], 10, "stage0.log", env=c.ft_env)
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


def stage1(c):
    t = time.monotonic()
    binary = kernels_binary()
    if not binary:
        return c.record(1, "CUDA ops vs reference", "fail", t,
                        "no kernels_cuda_test: run scripts/gpu_check.sh --pack on the development machine")
    if not c.gpu and not c.cpu_dry_run:
        return c.record(1, "CUDA ops vs reference", "skip", t, "no GPU: " + c.no_gpu, binary=binary)
    report = os.path.join(c.out, "kernels_cuda_test.json")
    rc, out = c.run([binary, f"--gtest_output=json:{report}"], 150, "stage1.log", env=c.ft_env)
    details = {"binary": binary, "exit": rc}
    if not os.path.exists(report):
        return c.record(1, "CUDA ops vs reference", "fail", t,
                        "kernels_cuda_test wrote no report: " + (out.strip().splitlines() or ["?"])[-1], **details)
    ran, failed, skipped, failures = gtest_counts(report)
    details.update(ran=ran, failed=failed, skipped=skipped, failures=failures,
                   attention_lowp=[l.strip() for l in out.splitlines() if l.startswith("  B ") or "cuDNN SDPA" in l])
    if skipped and not ran:
        m = re.search(r"Skipped\n(.*)", out)
        summary = f"all {skipped} tests skipped: " + (m.group(1).strip() if m else "see stage1.log")
        return c.record(1, "CUDA ops vs reference", "skip", t, summary, **details)
    # The deliberate fault of the sync check runs in a child process of its own (a death test).
    details["sync_check"] = test_status(report, "CudaTest", "SyncCheckNamesTheFaultingOpAndFreesWithoutThrowing")
    rc3, out3 = c.run([binary, "--gtest_also_run_disabled_tests", "--gtest_filter=CudaTest.DISABLED_GemmRate"], 60,
                      "stage1.log", env=c.ft_env)
    rates = dict(re.findall(r"gemm rate (\w+) 8192\^3: ([0-9.e+]+) TFLOP/s", out3))
    details["gemm_tflops"] = {k: float(v) for k, v in rates.items()}
    c.gemm_bf16 = details["gemm_tflops"].get("bf16")
    status = "ok" if failed == 0 and ran > 0 and rc == 0 and details["sync_check"] == "ok" else "fail"
    summary = (f"{ran - failed}/{ran} tests passed" + (f", {skipped} skipped" if skipped else "") +
               f"; sync check {details['sync_check']}; our GEMM 8192^3: " +
               ", ".join(f"{k} {v:.0f} TFLOP/s" for k, v in details["gemm_tflops"].items()))
    c.record(1, "CUDA ops vs reference", status, t, summary, **details)


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
        c.trainer = "no fluxtrain binary"
        return c.record(stage, name, "n/a", t, "not available in this build: no fluxtrain binary")
    golden = json.load(open(GOLDEN))
    details = {"binary": ft, "golden": os.path.relpath(GOLDEN, ROOT), "tolerance_loss": TOL, "tolerance_grad_norm": TOL_GRAD}
    # The comparison means something only if the golden run learns.
    g32 = golden["runs"]["fp32"]["loss"]
    if g32[0] - min(g32[-5:]) < 0.5:
        return c.record(stage, name, "fail", t, f"the golden fp32 run does not learn ({g32[0]:.3f} -> {g32[-1]:.3f}): "
                        "regenerate it with scripts/make-golden-losses.sh", **details)
    worst, parts = {}, []
    for prec in precisions:
        run_dir = os.path.join("/tmp", f"gpu_check_{prec}_{os.getpid()}")
        shutil.rmtree(run_dir, ignore_errors=True)
        cmd = [ft if a == "FLUXTRAIN" else run_dir if a == "RUN_DIR" else a for a in golden["runs"][prec]["command"]]
        if c.steps:
            cmd += ["--set", f"train.steps={c.steps}"]
        if not c.cpu_dry_run:
            cmd += ["--set", 'train.device="cuda"']
        cmd += extra
        rc, out = c.run(cmd, 600 if c.cpu_dry_run else 60, f"stage{stage}.log", env=c.ft_env)
        why = not_in_build(out)
        if why:
            c.trainer = why
            return c.record(stage, name, "n/a", t, "not available in this build: " + why, **details)
        rows = step_rows(run_dir)
        shutil.rmtree(run_dir, ignore_errors=True)
        want = golden["runs"][prec]
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
    c.trainer = None if not c.cpu_dry_run else "a CPU dry run"
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
    return {"status": "fail", "reason": (out.strip().splitlines() or [f"exit {rc}"])[-1] if rc != 0 else "no result"}


def stage3(c):
    t = time.monotonic()
    name = "1.1B LLaMA bf16: fluxtrain vs PyTorch"
    if not c.gpu and not c.cpu_dry_run:
        return c.record(3, name, "skip", t, "no GPU: " + c.no_gpu)
    details = {"model": BIG}
    # fluxtrain: only when stage 2 found the trainer on CUDA.
    if c.trainer:
        details["fluxtrain"] = {"status": "n/a", "reason": "not available in this build: " + c.trainer}
    else:
        ft = fluxtrain_binary()
        run_dir = os.path.join("/tmp", f"gpu_check_big_{os.getpid()}")
        shutil.rmtree(run_dir, ignore_errors=True)
        sets = [f"model.dim={BIG['dim']}", f"model.n_layers={BIG['layers']}", f"model.n_heads={BIG['heads']}",
                f"model.n_kv_heads={BIG['kv_heads']}", f"model.ffn_dim={BIG['ffn']}", f"model.vocab_size={BIG['vocab']}",
                "model.tie_embeddings=false", f"train.seq_len={BIG['seq']}", f"train.batch_size={BIG['batch']}",
                "train.steps=13", 'train.precision="bf16"', 'train.device="cuda"', "train.eval_interval=0",
                "metrics.tensorboard=false"]
        cmd = [ft, "train", "--config", "configs/llama-20m.toml", "--run-dir", run_dir]
        for s in sets:
            cmd += ["--set", s]
        rc, out = c.run(cmd, 120, "stage3.log", env=c.ft_env)
        rows = []
        if os.path.exists(os.path.join(run_dir, "metrics.jsonl")):
            rows = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl")) if l.strip()]
        timed = [r for r in rows if r.get("step", 0) > 3 and "tokens_per_s" in r]
        if rc == 0 and timed:
            tps = sorted(r["tokens_per_s"] for r in timed)[len(timed) // 2]
            details["fluxtrain"] = {"status": "ok", "tokens_per_s": tps, "rows": timed[-1]}
        else:
            details["fluxtrain"] = {"status": "fail", "reason": (out.strip().splitlines() or [f"exit {rc}"])[-1]}
    details["torch_eager"] = torch_peer(c, "eager", 90, gemm=True)
    if c.cpu_dry_run:  # the CPU peer's torch may predate torch.compile
        details["torch_compile"] = {"status": "n/a", "reason": "not run in a CPU dry run"}
    else:
        details["torch_compile"] = torch_peer(c, "compile", 200, gemm=False)
    eager, comp, ours = details["torch_eager"], details["torch_compile"], details["fluxtrain"]
    parts = []
    for label, r in (("fluxtrain", ours), ("PyTorch eager", eager), ("torch.compile", comp)):
        if r.get("status") == "ok":
            mfu = r.get("mfu", r.get("tokens_per_s", 0) * eager.get("flops_per_token", 0) / PEAK_BF16)
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


def table(doc):
    rows = [("stage", "status", "seconds", "summary")]
    for s in doc["stages"]:
        rows.append((f"{s['stage']} {s['name']}", s["status"], f"{s['seconds']:.0f}", s["summary"]))
    w0 = max(len(r[0]) for r in rows)
    lines = [f"{r[0]:<{w0}}  {r[1]:<7}  {r[2]:>7}  {r[3]}" for r in rows]
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("OUT") or os.path.join(ROOT, "build", "gpu_check"))
    p.add_argument("--budget", type=float, default=None,
                   help="seconds for all stages (default 470: 8 minutes less margin; 1800 for a CPU dry run)")
    p.add_argument("--stages", default="0,1,2,3,4", help="stages to run, e.g. 0,2")
    p.add_argument("--cpu-dry-run", action="store_true", help="exercise the stages on the CPU build (no GPU)")
    p.add_argument("--steps", type=int, default=None, help="stage 2: compare only the first N steps")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for f in ("stage0.log", "stage1.log", "stage2.log", "stage3.log", "stage4.log", "kernels_cuda_test.json"):
        if os.path.exists(os.path.join(a.out, f)):
            os.remove(os.path.join(a.out, f))
    c = Check(a.out, a.budget or (1800.0 if a.cpu_dry_run else 470.0))
    c.cpu_dry_run, c.steps = a.cpu_dry_run, a.steps
    if a.cpu_dry_run:
        c.doc["cpu_dry_run"] = True
    wanted = {int(x) for x in a.stages.split(",") if x.strip()}
    for stage in (stage0, stage1, stage2, stage4, stage3):
        if int(stage.__name__[-1]) not in wanted:
            continue
        if c.remaining() < 10:
            break
        try:
            stage(c)
        except Exception as e:  # a broken stage is reported, the next ones still run
            c.record(int(stage.__name__[-1]), stage.__name__, "fail", time.monotonic(), f"{type(e).__name__}: {e}")
    print(table(c.doc))
    print(f"(details: {os.path.join(a.out, 'gpu_check.json')})")
    return 1 if any(s["status"] == "fail" for s in c.doc["stages"]) else 0


if __name__ == "__main__":
    sys.exit(main())
