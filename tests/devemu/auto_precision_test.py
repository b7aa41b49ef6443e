"""train.precision = "auto" on a GPU is the device's backend's decision, made through the trainer's
real path once the device is known: the emulated GPU reports compute capability FT_DEVEMU_CC
(tests/devemu/devemu.cpp, as the CUDA backend reads it from the device) — 9.0 trains in bf16
whatever the CPU (here limited to AVX2: no native bf16, where a CPU run's "auto" is fp32), 7.5 in
fp32."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import EMU, WORK, fail, run  # noqa: E402

CASES = [
    ("9.0", "precision bf16 (auto: a cuda device (bf16 tensor cores))"),
    ("7.5", "precision fp32 (auto: a cuda device of compute capability 7.5 (no bf16 tensor cores))"),
]
for cc, want in CASES:
    p = run(EMU, f"{WORK}/cc{cc}", device="cuda", steps=1, sets=['train.precision="auto"'],
            env={"FT_DEVEMU_CC": cc, "ONEDNN_MAX_CPU_ISA": "AVX2"})
    out = p.stdout + p.stderr
    if want not in out:
        fail(f"compute capability {cc}: no '{want}' in:\n{out[-3000:]}")
    print(f"ok compute capability {cc}: {want}")
