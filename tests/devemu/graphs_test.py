"""train.cuda_graphs on the emulated GPU: the steady-state step's forward/backward and its AdamW
update captured once each (two graphs: the update runs after the host has judged the step) and
replayed, with the same losses bit for bit as without graphs (fp32 and bf16, two micro-batches, a
validation between replays); the replays counted by the emulator (FT_DEVEMU_STATS); a step whose
gradients are NaN (fault injection), or overflow in fp16 (the loss scale then halves), skips its
update with graphs exactly as without; "auto"
captures the tiny model (launch-bound); "on" where it cannot capture is a one-line error."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import CPU, EMU, WORK, fail, losses, run, same_losses, stats  # noqa: E402

STEPS = 10
for precision in ("fp32", "bf16"):
    runs = {}
    for mode in ("off", "on"):
        d = f"{WORK}/{precision}_{mode}"
        st = f"{d}.stats.json"
        p = run(EMU, d, device="cuda", steps=STEPS, env={"FT_DEVEMU_STATS": st},
                sets=[f'train.cuda_graphs="{mode}"', f'train.precision="{precision}"', "train.micro_batch_size=4",
                      "train.eval_interval=5"])
        runs[mode] = (losses(d), stats(st)[0], p.stdout + p.stderr)
    same_losses(f"{precision} graphs on vs off", runs["off"][0], runs["on"][0])
    off, on = runs["off"][1], runs["on"][1]
    # Each graph (forward/backward, update): step 1 eager (warm-up), step 2 captured and replayed,
    # steps 3..10 replayed.
    if off["graph_replays"] != 0 or on["graph_captures"] != 2 or on["graph_replays"] != 2 * (STEPS - 1):
        fail(f"{precision}: captures/replays off {off['graph_captures']}/{off['graph_replays']}, "
             f"on {on['graph_captures']}/{on['graph_replays']} (want 0/0 and 2/{2 * (STEPS - 1)})")
    # The same device work either way, the replayed part issued by the graph, not by the host.
    if on["ops"] != off["ops"] or on["graph_ops"] == 0:
        fail(f"{precision}: {on['ops']} ops with graphs ({on['graph_ops']} replayed) vs {off['ops']} without")
    print(f"ok {precision}: 2 captures, {on['graph_replays']} replays ({on['graph_ops']} of {on['ops']} ops and "
          f"copies replayed)")


def metrics_text(run_dir):
    """Each step's row as text (NaN compares equal to NaN), without what depends on the clock or
    on the memory the graphs hold."""
    out = []
    for line in open(os.path.join(run_dir, "metrics.jsonl")):
        r = json.loads(line)
        if "step" not in r:
            continue
        keep = {k: r[k] for k in ("step", "loss", "grad_norm", "lr", "skipped", "guard", "val_loss") if k in r}
        out.append(json.dumps(keep, sort_keys=True))
    return out


# A NaN gradient at step 4 (the guard skips the update): the same rows with graphs as without —
# the skipped step and every loss after it; with graphs the update graph is not replayed that step.
# fp16: an overflow at step 4 skips the update and halves the loss scale; the update graph (no
# key) replays with the new factor from its device buffer, the forward/backward is captured again.
for precision, fault, guard in (("fp32", "gradnan@4", "nan_grad_norm"), ("bf16", "gradnan@4", "nan_grad_norm"),
                                ("fp16", "gradinf@4", "fp16_overflow")):
    runs = {}
    for mode in ("off", "on"):
        d = f"{WORK}/{fault}_{precision}_{mode}"
        st = f"{d}.stats.json"
        run(EMU, d, device="cuda", steps=STEPS, env={"FT_DEVEMU_STATS": st, "FLUXTRAIN_FAULT_INJECT": fault},
            sets=[f'train.cuda_graphs="{mode}"', f'train.precision="{precision}"'])
        runs[mode] = (metrics_text(d), stats(st)[0])
    off, on = runs["off"][0], runs["on"][0]
    skipped = [r for r in on if '"skipped": true' in r]
    if len(skipped) != 1 or '"step": 4' not in skipped[0] or guard not in skipped[0]:
        fail(f"{fault} {precision}: want step 4 skipped for {guard}, got {skipped}")
    for a, b in zip(off, on):
        if a != b:
            fail(f"{fault} {precision}: graphs off {a} vs on {b}")
    # The update: eager at step 1, captured at step 2, replayed at every later update but step 4's.
    if len(off) != len(on) or runs["on"][1]["graph_replays"] < STEPS - 2:
        fail(f"{fault} {precision}: {len(off)} vs {len(on)} rows, {runs['on'][1]['graph_replays']} replays")
    print(f"ok {fault} {precision}: step 4 skipped ({guard}) with graphs as without, {len(on)} rows identical "
          f"({runs['on'][1]['graph_captures']} captures, {runs['on'][1]['graph_replays']} replays)")

# "auto" on the tiny model: launch-bound, captured.
d = f"{WORK}/auto"
p = run(EMU, d, device="cuda", steps=4, env={"FT_DEVEMU_STATS": f"{d}.stats.json"})
out = p.stdout + p.stderr
if 'train.cuda_graphs = "auto": captured' not in out or stats(f"{d}.stats.json")[0]["graph_replays"] != 6:
    fail(f'"auto" did not capture the tiny model:\n{out[-2000:]}')
print("ok auto: the tiny model's step is captured")

# "on" where no graph can be: one line naming why.
for name, binary, device, sets in [("cpu", CPU, "cpu", []), ("dp=2", EMU, "cuda", ["parallel.dp=2"])]:
    p = run(binary, f"{WORK}/refused_{name}", device=device, steps=1, sets=['train.cuda_graphs="on"'] + sets,
            expect_ok=False)
    err = [line for line in (p.stdout + p.stderr).splitlines() if "cuda_graphs" in line]
    if p.returncode == 0 or not err:
        fail(f'train.cuda_graphs = "on" with {name}: exit {p.returncode}, no error naming the key:\n'
             f"{p.stdout[-1500:]}{p.stderr[-1500:]}")
    print(f'ok "on" with {name} refused: {err[0].strip()}')
