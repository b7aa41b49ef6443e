"""20 steps of configs/tiny.toml on the emulated GPU (fluxtrain-devemu, train.device = "cuda")
against the CPU binary: bit-identical losses, gradient norms and validation losses — the same
kernels run, so any difference is host logic (a buffer on the wrong device, a skipped copy, a
reordering). One process: fp32, bf16, fp16 (loss scaling), recompute = full and selective; with mpirun: dp2
ZeRO-1, dp2 ZeRO-3, tp2 + sequence parallelism, pp2 with 4 micro-batches (MPI on host staging).

Single process, the emulator's counters show what crossed the bus: host-to-device only the
token batches (and the initial weights), device-to-host only the step's scalars, in one copy a
step."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import CPU, EMU, WORK, fail, losses, run, same_losses, stats, rows  # noqa: E402

STEPS = 20
CASES = [
    ("fp32", 1, []),
    ("bf16", 1, ['train.precision="bf16"']),
    ("fp16", 1, ['train.precision="fp16"']),
    ("recompute", 1, ['model.recompute="full"']),
    ("selective", 1, ['model.recompute="selective"']),
    ("dp2z1", 2, ["parallel.dp=2", "parallel.zero=1"]),
    ("dp2z3", 2, ["parallel.dp=2", "parallel.zero=3"]),
    ("tp2sp", 2, ["parallel.tp=2", "parallel.sequence_parallel=true"]),
    ("pp2", 2, ["parallel.pp=2", "parallel.micro_batches=4"]),
]
only = sys.argv[1:]
for name, np, sets in CASES:
    if only and name not in only:
        continue
    cpu_dir, emu_dir = f"{WORK}/{name}_cpu", f"{WORK}/{name}_emu"
    stats_path = f"{WORK}/{name}.stats"
    run(CPU, cpu_dir, np=np, sets=sets, steps=STEPS)
    run(EMU, emu_dir, np=np, device="cuda", sets=sets, steps=STEPS, env={"FT_DEVEMU_STATS": stats_path})
    same_losses(name, losses(cpu_dir), losses(emu_dir))
    last = rows(emu_dir)[-1]
    if not last.get("mem_cuda_peak_bytes", 0) > 0:
        fail(f"{name}: metrics.jsonl has no device memory peak (mem_cuda_peak_bytes): {sorted(last)}")
    per_rank = stats(stats_path)
    if len(per_rank) != np:
        fail(f"{name}: counters of {len(per_rank)} ranks, expected {np}")
    for s in per_rank:
        if s["ops"] == 0:
            fail(f"{name}: no op ran on the emulated GPU: {s}")
    if np == 1:
        s = per_rank[0]
        # Device to host: one copy a step (the micro-batches' loss sums and the gradient's per-unit
        # sums of squares, doubles, together), and one per validation batch (tiny.toml validates
        # 2 batches at step 20).
        if s["max_d2h_bytes"] > 1024:
            fail(f"{name}: a device-to-host copy of {s['max_d2h_bytes']} bytes: more than the step's scalars")
        if s["d2h_calls"] != STEPS + 2:
            fail(f"{name}: {s['d2h_calls']} device-to-host copies in {STEPS} steps and 2 validation batches")
        print(f"   {name} bus: {s['d2h_calls']} device->host copies ({s['d2h_bytes']} bytes, largest "
              f"{s['max_d2h_bytes']}), {s['h2d_calls']} host->device ({s['h2d_bytes']} bytes), {s['ops']} ops; "
              f"device peak {last['mem_cuda_peak_bytes']} bytes")
print("ok")
