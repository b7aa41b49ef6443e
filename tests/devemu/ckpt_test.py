"""Checkpoints from the emulated GPU: the asynchronous save copies device state into host staging
on a side context while the next step runs (a copy delayed by 300 ms makes the overlap certain),
the next update waits for it, and the checkpoint is the CPU's format: written on the emulated GPU
it resumes on the CPU binary, and the reverse, with the losses of the uninterrupted run. The
stall stays measured (checkpoints.jsonl). Also a dp2 ZeRO-1 save on the emulated GPU resumed
on the CPU."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import CPU, EMU, WORK, fail, losses, run, same_losses, stats  # noqa: E402

DELAY = {"FLUXTRAIN_CKPT_TEST_COPY_DELAY_MS": "300"}


def find_step(run_dir, step):
    root = os.path.join(run_dir, "checkpoints")
    for d in sorted(os.listdir(root)):
        if d.startswith("step_") and int(d[5:]) == step:
            return os.path.join(root, d)
    fail(f"no checkpoint of step {step} under {root}: {os.listdir(root)}")


def tail(rows, first):
    return [r for r in rows if r[0] >= first]


for name, np, sets in [("one", 1, ['train.precision="fp16"']), ("dp2z1", 2, ["parallel.dp=2", "parallel.zero=1"])]:
    ref = f"{WORK}/{name}_ref"
    run(CPU, ref, np=np, sets=sets)
    want = losses(ref)

    # Emulated GPU saves at 10 (async, the copy overlapping step 11) and 20.
    emu = f"{WORK}/{name}_emu"
    st = f"{WORK}/{name}_emu.stats"
    run(EMU, emu, np=np, device="cuda", sets=list(sets) + ["ckpt.interval=10", "ckpt.async=true"],
        env=dict(DELAY, FT_DEVEMU_STATS=st))
    same_losses(f"{name}: saving on the emulated GPU", want, losses(emu))
    for s in stats(st):
        if s["side_contexts"] < 1 or s["side_d2h_bytes"] == 0:
            fail(f"{name}: the checkpoint copies did not run on a side context: {s}")
        if s["stream_waits"] < 2:
            fail(f"{name}: the side context was not ordered with stream_wait: {s}")
    saves = [json.loads(l) for l in open(f"{emu}/checkpoints.jsonl")]
    saves = [r for r in saves if r.get("event") == "save" and r.get("ok")]
    if [r["step"] for r in saves] != [10, 20] or not all(r["async"] and r["stall_s"] >= 0 for r in saves):
        fail(f"{name}: checkpoints.jsonl saves: {saves}")
    print(f"ok {name}: async saves from the emulated GPU, stall {saves[0]['stall_s'] * 1e3:.1f} ms, "
          f"side-context copies {stats(st)[0]['side_d2h_bytes']} bytes")

    # The emulated GPU's step 10 resumed on the CPU binary.
    cpu_resumed = f"{WORK}/{name}_cpu_resumed"
    run(CPU, cpu_resumed, np=np, sets=list(sets) + [f'ckpt.resume="{find_step(emu, 10)}"'])
    same_losses(f"{name}: emulated-GPU checkpoint resumed on the CPU", tail(want, 11), tail(losses(cpu_resumed), 11))

    # The reverse: the CPU's step 10 resumed on the emulated GPU.
    cpu_saved = f"{WORK}/{name}_cpu_saved"
    run(CPU, cpu_saved, np=np, sets=list(sets) + ["ckpt.interval=10"])
    emu_resumed = f"{WORK}/{name}_emu_resumed"
    run(EMU, emu_resumed, np=np, device="cuda", sets=list(sets) + [f'ckpt.resume="{find_step(cpu_saved, 10)}"'])
    same_losses(f"{name}: CPU checkpoint resumed on the emulated GPU", tail(want, 11), tail(losses(emu_resumed), 11))
print("ok")
