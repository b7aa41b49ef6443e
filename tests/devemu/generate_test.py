"""`fluxtrain generate` on the emulated GPU (--device cuda) gives the CPU's tokens (greedy and
sampled), scores and logits, from a checkpoint the CPU binary trained; the CPU binary refuses
--device cuda and train.device = "cuda" with one error naming why, and "auto" runs on its CPU."""
import filecmp
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import CPU, EMU, WORK, fail, run, stats  # noqa: E402

trained = f"{WORK}/trained"
run(CPU, trained, sets=["ckpt.interval=20"])


def generate(binary, *args, env=None, ok=True):
    cmd = [binary, "generate", "--ckpt", trained, "--tokens", "1 5 7 9 11", "--max-tokens", "24", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ, **(env or {})))
    if ok and p.returncode != 0:
        fail(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr[-2000:]}")
    return p


st = f"{WORK}/gen.stats"
for label, args in [("greedy", ["--temperature", "0"]), ("sampled", ["--temperature", "0.8", "--seed", "7"]),
                    ("score", ["--score"])]:
    a = generate(CPU, *args, "--device", "cpu").stdout
    b = generate(EMU, *args, "--device", "cuda", env={"FT_DEVEMU_STATS": st}).stdout
    if a != b or not a.strip():
        fail(f"{label}: cpu printed {a!r}, the emulated GPU {b!r}")
    if stats(st)[0]["ops"] == 0:
        fail(f"{label}: no op ran on the emulated GPU")
    print(f"ok {label}: {a.strip()[:80]}")

generate(CPU, "--logits-out", f"{WORK}/cpu.safetensors", "--device", "cpu")
generate(EMU, "--logits-out", f"{WORK}/emu.safetensors", "--device", "cuda")
if not filecmp.cmp(f"{WORK}/cpu.safetensors", f"{WORK}/emu.safetensors", shallow=False):
    fail("--logits-out: the emulated GPU's logits differ from the CPU's")
print("ok logits: identical files")

# The CPU binary: no cuda backend.
p = generate(CPU, "--device", "cuda", ok=False)
if p.returncode == 0 or "error: device cuda" not in p.stderr:
    fail(f"generate --device cuda on the CPU binary: exit {p.returncode}, {p.stderr[-500:]}")
p = run(CPU, f"{WORK}/refused", device="cuda", steps=2, expect_ok=False)
errors = [l for l in p.stderr.splitlines() + p.stdout.splitlines() if l.startswith("error:")]
if p.returncode == 0 or len(errors) != 1 or "device cuda" not in errors[0]:
    fail(f"train.device=cuda on the CPU binary: exit {p.returncode}, error lines {errors}")
print(f"ok refused: {errors[0]}")
p = run(CPU, f"{WORK}/auto", device="auto", steps=2)
if "device cuda" in p.stdout + p.stderr:
    fail("train.device=auto on the CPU binary did not run on the CPU")
print("ok")
