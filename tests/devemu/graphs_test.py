"""train.cuda_graphs on the emulated GPU: the steady-state step's forward/backward captured once
and replayed, with the same losses bit for bit as without graphs (fp32 and bf16, two micro-batches,
a validation between replays); the replays counted by the emulator (FT_DEVEMU_STATS); "auto"
captures the tiny model (launch-bound); "on" where it cannot capture is a one-line error."""
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
    # Step 1 eager (warm-up), step 2 captured and replayed, steps 3..10 replayed.
    if off["graph_replays"] != 0 or on["graph_captures"] != 1 or on["graph_replays"] != STEPS - 1:
        fail(f"{precision}: captures/replays off {off['graph_captures']}/{off['graph_replays']}, "
             f"on {on['graph_captures']}/{on['graph_replays']} (want 0/0 and 1/{STEPS - 1})")
    # The same device work either way, the replayed part issued by the graph, not by the host.
    if on["ops"] != off["ops"] or on["graph_ops"] == 0:
        fail(f"{precision}: {on['ops']} ops with graphs ({on['graph_ops']} replayed) vs {off['ops']} without")
    print(f"ok {precision}: 1 capture, {on['graph_replays']} replays ({on['graph_ops']} of {on['ops']} ops replayed)")

# "auto" on the tiny model: launch-bound, captured.
d = f"{WORK}/auto"
p = run(EMU, d, device="cuda", steps=4, env={"FT_DEVEMU_STATS": f"{d}.stats.json"})
out = p.stdout + p.stderr
if 'train.cuda_graphs = "auto": captured' not in out or stats(f"{d}.stats.json")[0]["graph_replays"] != 3:
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
