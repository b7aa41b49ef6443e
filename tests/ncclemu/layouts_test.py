"""The parity layouts through NcclComm on emulated device buffers: fluxtrain-devemu-nccl (the CLI,
the host-emulated GPU of tests/devemu carrying NcclComm over the host stand-in of CUDA and NCCL of
tests/ncclsim as its device transport) with train.device = "cuda" and parallel.comm = "nccl", so
that every dp/tp/pp collective (and cp's: the ring's block transfers, the all-to-all's exchange,
also composed with pp 2 and with dp 2 at ZeRO 3) of a device buffer takes NcclComm's path: the event
recorded on
the compute stream and waited on by the communication stream, communication streams from
make_side_context, the bf16 conversions as device ops on that side context (queued on its
stand-in stream), device memory recognised by mem_on_device, the bf16 scratch buffer in device
memory — under the emulator's guard (host code that touches device memory dies).

Every case trains configs/tiny.toml for STEPS steps and checks, against the CPU binary over MPI
(fluxtrain, parallel.comm = "mpi", host buffers):
  - losses, gradient norms and validation losses: bit-identical (the same kernels; at two ranks a
    sum in rank order and MPI's ring add the same two numbers; PowerSGD's all-reduces are fp32),
    except for the bf16 wire (NCCL reduces bf16 inputs, MPI's ring keeps a rank's own share in
    fp32): the losses within 2e-3 of MPI's with the same wire, and within 1e-3 of uncompressed
    training (at a learning rate without chaotic drift); the gradient-compression matrix is every
    ZeRO stage with each of bf16 and PowerSGD (dp 2);
  - the bytes the groups moved in the last step (comm_*, tp_*, pp_*_bytes): equal to MPI's;
  - the log names the transport (the stand-in on the emulated GPU);
  - what crossed the emulated bus (FT_DEVEMU_STATS, every rank): only the step's scalars come back
    (one device-to-host copy a step plus one per validation batch, none over 1 KiB), as in the
    one-process emulated run — NCCL adds no host round trip (staged MPI adds two per collective);
    the communication streams are side contexts, and ops ran on them (queued behind the
    collectives) exactly when the wire is bf16;
  - with tensor or pipeline parallelism, the host's waits on communication (metrics.jsonl
    per_rank.comm_host_waits, every rank, every step): only the step's host scalars over MPI (at
    most HOST_SCALAR_WAITS) — the per-layer tp collectives and the pipeline's transfers are joined
    on the compute stream, never waited on the host (before they were: tp2 24 a step, tp2 + sp 55,
    pp2 8-11, interleaved 20-23, dp2 x tp2 x pp2 27-30).
Then hangs of an operation rank 0 only joins on its (emulated) compute stream (Work::stream_wait:
the emulator's stream wait blocks the host, so only NcclComm's watchdog can end it), each ending
the job with NcclComm's timeout line and exit code 3 (the supervisor restarts): world rank 1 stops
(SIGSTOP) on entering (at dp2: tests/dist/nccl_hang_test.sh, with the other hangs and deaths)
  hang-tp  its 40th NCCL collective at tp2, a forward/backward all-reduce of tensor parallelism
           (FT_NCCLSIM_STOP): the line names the collective, group tp and rank 1 as never arrived;
  hang-pp  its 20th send or receive at pp2 (1F1B; the stand-in's FT_NCCLSIM_STOP_P2P): rank 0's
           transfer with it (an activation sent, or a gradient received) times out, named with
           its peer, tag and group pp.

It tests our host logic on (emulated) device pointers; it is no evidence that CUDA or NCCL behave
as the stand-ins do.

usage: layouts_test.py [CASE...]   (env: FT_BIN, FT_DEVEMU_BIN, FT_DEVEMU_NCCL_BIN, FT_CONFIG, as
                                    ctest sets them)
"""
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "devemu"))
from common import CONFIG, CPU, MPIRUN, WORK, fail, losses, rows, run, stats  # noqa: E402

EMU_NCCL = os.environ["FT_DEVEMU_NCCL_BIN"]
TRANSPORT = "over NCCL (stand-in on the emulated GPU: tests only)"
STEPS = 20
VAL_BATCHES = 2  # tiny.toml validates 2 batches at step 20
NCCL = ['parallel.comm="nccl"', "parallel.collective_timeout_s=60"]
MPI = ['parallel.comm="mpi"']
PP = ["parallel.pp=2", "parallel.micro_batches=4"]
LR = "optim.lr=3e-3"  # the compression cases' rate (no chaotic drift)
BF16 = ['parallel.grad_compression="bf16"', LR]
POWERSGD = ['parallel.grad_compression="powersgd"', "parallel.powersgd_warmup_steps=2", LR]
# name: (ranks, settings, bf16 wire)
CASES = [
    ("dp2z0", 2, ["parallel.dp=2", "parallel.zero=0"], False),
    ("dp2z1", 2, ["parallel.dp=2", "parallel.zero=1"], False),
    ("dp2z2", 2, ["parallel.dp=2", "parallel.zero=2"], False),
    ("dp2z3", 2, ["parallel.dp=2", "parallel.zero=3"], False),
] + [(f"dp2z{z}-bf16", 2, ["parallel.dp=2", f"parallel.zero={z}"] + BF16, True) for z in range(4)] + [
    (f"dp2z{z}-powersgd", 2, ["parallel.dp=2", f"parallel.zero={z}"] + POWERSGD, False) for z in range(4)] + [
    ("tp2", 2, ["parallel.tp=2"], False),
    ("tp2sp", 2, ["parallel.tp=2", "parallel.sequence_parallel=true"], False),
    ("pp2-gpipe", 2, PP + ['parallel.pp_schedule="gpipe"'], False),
    ("pp2-1f1b", 2, PP + ['parallel.pp_schedule="1f1b"'], False),
    ("pp2-interleaved", 2, PP + ['parallel.pp_schedule="interleaved"', "parallel.virtual_stages=2"], False),
    # Context parallelism: the ring's blocks (cp group's p2p channels) and the all-to-all's
    # exchange through NcclComm on device buffers.
    ("cp2-ring", 2, ["parallel.cp=2", 'parallel.cp_attention="ring"'], False),
    ("cp2-a2a", 2, ["parallel.cp=2", 'parallel.cp_attention="all_to_all"'], False),
    ("dp2tp2pp2z1", 8, ["parallel.dp=2", "parallel.tp=2", "parallel.pp=2", "parallel.zero=1",
                        "parallel.micro_batches=2"], False),
    # Axes of 4 ranks (the parity matrix's, tests/dist/parity_*_test.py, at its learning rate):
    # within 1e-5 of MPI.
    ("dp4z3", 4, ["parallel.dp=4", "parallel.zero=3", LR], False),
    ("tp4", 4, ["parallel.tp=4", LR], False),
    ("dp2tp2z2sp", 4, ["parallel.dp=2", "parallel.tp=2", "parallel.zero=2", "parallel.sequence_parallel=true", LR],
     False),
    ("pp4-1f1b", 4, ["parallel.pp=4", "parallel.micro_batches=4", 'parallel.pp_schedule="1f1b"', LR], False),
    ("dp2pp2z3", 4, PP + ["parallel.dp=2", "parallel.zero=3", LR], False),
    # Context parallelism composed on device buffers: each stage's cp group runs its ring (cp 2 x
    # pp 2), and ZeRO 3 shards and gathers over dp x cp (dp 2 x cp 2).
    ("cp2pp2", 4, PP + ["parallel.cp=2", 'parallel.cp_attention="ring"', LR], False),
    ("dp2cp2z3", 4, ["parallel.dp=2", "parallel.cp=2", "parallel.zero=3", LR], False),
]
AXES = ("parallel.dp", "parallel.tp", "parallel.pp")
# Above two ranks an axis' sums are no longer the same two numbers in either order.
FOUR_RANK_TOL = 1e-5


# The step's host scalars over MPI: the loss and gradient-norm sums (dp, tp, pp) and the per-rank
# figures' gather (dp2 makes 3, tp2 4, dp2 x tp2 x pp2 5).
HOST_SCALAR_WAITS = 5


def host_waits(run_dir):
    """Every step's per-rank comm_host_waits."""
    return [r["per_rank"]["comm_host_waits"] for r in rows(run_dir) if "loss" in r and "per_rank" in r]


def comm_bytes(run_dir):
    """The last step's communication byte counters: comm_*_bytes (rank 0's groups), tp_*_bytes and
    pp_*_bytes (sums over the ranks), and per_rank's tp/pp/cp lists (every rank's: cp_bytes, what the
    cp communicator sent, the dry run's cp bytes per rank on MPI, tests/dist/dry_run_cp_test.py)."""
    last = [r for r in rows(run_dir) if "loss" in r][-1]

    def moved(k):
        return k.split("_")[0] in ("comm", "tp", "pp", "dp", "cp") and k.endswith("_bytes")
    out = {k: v for k, v in last.items() if moved(k)}
    out.update({"per_rank." + k: v for k, v in last.get("per_rank", {}).items() if moved(k)})
    return out


def worst_loss_rel(a, b):
    return max(abs(x[1] - y[1]) / abs(y[1]) for x, y in zip(a, b))


def check_case(name, np, sets, bf16):
    t0 = time.time()
    emu_dir, cpu_dir = f"{WORK}/{name}_emu", f"{WORK}/{name}_cpu"
    stats_path = f"{WORK}/{name}.stats"
    p = run(EMU_NCCL, emu_dir, np=np, device="cuda", sets=sets + NCCL, steps=STEPS, env={"FT_DEVEMU_STATS": stats_path})
    log = p.stdout + p.stderr
    if TRANSPORT not in log:
        fail(f"{name}: the log does not say the groups run {TRANSPORT}:\n{log[-2000:]}")
    run(CPU, cpu_dir, np=np, sets=sets + MPI, steps=STEPS)
    emu, cpu = losses(emu_dir), losses(cpu_dir)
    if len(emu) != STEPS or len(cpu) != STEPS:
        fail(f"{name}: {len(emu)} / {len(cpu)} logged steps, expected {STEPS}")
    four = any(x.split("=")[0] in AXES and x.split("=")[1] == "4" for x in sets) or {
        "parallel.dp=2", "parallel.cp=2"} <= set(sets)  # gradients summed over dp x cp: 4 ranks
    if not bf16 and not four:
        for x, y in zip(cpu, emu):
            if x != y:
                fail(f"{name}: step {x[0]} differs: cpu over MPI {x} vs emulated cuda over NCCL {y}")
        how = "bit-identical to MPI"
    elif not bf16:
        worst = max(abs(a - b) / abs(b) for x, y in zip(emu, cpu) for a, b in zip(x[1:], y[1:]) if a is not None and b)
        if worst > FOUR_RANK_TOL:
            fail(f"{name}: losses/gradient norms over NCCL {worst:.2e} from MPI's (tolerance {FOUR_RANK_TOL})")
        how = f"within {worst:.1e} of MPI"
    else:
        w = worst_loss_rel(emu, cpu)
        if w > 2e-3:
            fail(f"{name}: losses with the bf16 wire over NCCL {w:.2e} from MPI's (tolerance 2e-3)")
        # Uncompressed training at the same rate, on the CPU over MPI (the uncompressed cases show
        # NCCL's bit-identical to it).
        none_dir = f"{WORK}/{name}_none"
        run(CPU, none_dir, np=np, sets=[x for x in sets if "grad_compression" not in x] + MPI, steps=STEPS)
        drift = worst_loss_rel(emu, losses(none_dir))
        if drift > 1e-3:
            fail(f"{name}: losses with the bf16 wire over NCCL {drift:.2e} from uncompressed training (tolerance 1e-3)")
        how = f"losses {w:.1e} from MPI's, {drift:.1e} from uncompressed"
    eb, cb = comm_bytes(emu_dir), comm_bytes(cpu_dir)
    if eb != cb:
        fail(f"{name}: bytes of the last step over NCCL {eb}, over MPI {cb}")
    per_rank = stats(stats_path)
    if len(per_rank) != np:
        fail(f"{name}: counters of {len(per_rank)} ranks, expected {np}")
    for r, s in enumerate(per_rank):
        if s["ops"] == 0 or s["side_contexts"] == 0:
            fail(f"{name}: rank {r} ran no op or made no communication stream: {s}")
        # The bf16 conversions are device ops on the communication context, queued on its stream
        # behind the collectives before them; nothing else runs there.
        if (s["queued_ops"] > 0) != bf16:
            fail(f"{name}: rank {r} queued {s['queued_ops']} ops on a communication stream (bf16 wire: {bf16})")
        if s["max_d2h_bytes"] > 1024 or s["d2h_calls"] != STEPS + VAL_BATCHES:
            fail(f"{name}: rank {r} copied {s['d2h_calls']} buffers to the host (largest {s['max_d2h_bytes']} bytes); "
                 f"expected only the step's scalars ({STEPS} steps, {VAL_BATCHES} validation batches)")
    waits = host_waits(emu_dir)
    if len(waits) != STEPS:
        fail(f"{name}: comm_host_waits of {len(waits)} steps, expected {STEPS}")
    if any(s in " ".join(sets) for s in ("parallel.tp=", "parallel.pp=")) and max(map(max, waits)) > HOST_SCALAR_WAITS:
        fail(f"{name}: the host waited on communication {waits} times a step (ranks, per step); expected at most "
             f"{HOST_SCALAR_WAITS} (the step's host scalars): a tp collective or pipeline transfer blocked the host")
    bus = " ".join(f"{s['h2d_calls']}/{s['d2h_calls']}" for s in per_rank)
    if bf16:
        bus += f"; ops on the communication stream {per_rank[0]['queued_ops']} of {per_rank[0]['ops']}"
    dp = sum(v for k, v in eb.items() if k.startswith("comm_"))
    tp, pp = eb.get("tp_all_reduce_bytes", 0), eb.get("pp_bytes", 0)
    cp = f" cp {eb['per_rank.cp_bytes']}" if "per_rank.cp_bytes" in eb else ""
    print(f"ok {name}: {STEPS} steps {how} (last loss {emu[-1][1]!r}); bytes/step dp {dp} tp {tp} pp {pp}{cp} as MPI; "
          f"host->device/device->host copies per rank {bus}; host waits per step {max(map(max, waits))}; "
          f"{time.time() - t0:.0f}s")


ANY = r"#\d+ on group {g} \(world ranks 0\.\.1\) over NCCL timed out after 5 s; ranks holding it up: 1 \(never arrived\)"
# name: (settings, stand-in hook, the line rank 0 must end the job with)
HANGS = [
    ("hang-tp", ["parallel.tp=2"], "FT_NCCLSIM_STOP=1:40", r"rank 0: \w+ " + ANY.format(g="tp")),
    ("hang-pp", PP + ['parallel.pp_schedule="1f1b"'], "FT_NCCLSIM_STOP_P2P=1:20",
     r"rank 0: (send to|receive from) world rank 1 \(tag \d+\) on group pp over NCCL timed out after 5 s"),
]


def check_hang(name, sets, hook, pattern):
    """Rank 1 stops on entering an NCCL operation that rank 0 only joins on its stream: rank 0's
    watchdog times it out; the job ends with exit code 3 and the line."""
    t0 = time.time()
    run_dir = f"{WORK}/{name}"
    var, spec = hook.split("=")
    cmd = MPIRUN + ["-x", var, "-np", "2", EMU_NCCL, "train", "--config", CONFIG, "--run-dir", run_dir,
                    "--set", 'train.device="cuda"', "--set", "train.steps=1000",
                    "--set", "train.eval_interval=0", "--set", 'parallel.comm="nccl"',
                    "--set", "parallel.collective_timeout_s=5"]
    for s in sets:
        cmd += ["--set", s]
    env = dict(os.environ, OMP_NUM_THREADS="1", **{var: spec})
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        fail(f"{name}: the job still ran after 120 s:\n{out[-3000:]}")
    line = next((l for l in out.splitlines() if re.search(pattern, l)), "")
    if p.returncode != 3 or not line:
        fail(f"{name}: expected exit code 3 and a line matching '{pattern}' (exit {p.returncode}):\n{out[-3000:]}")
    print(f"ok {name}: job ended after {time.time() - t0:.0f}s (collective timeout 5 s, exit code 3): {line.strip()}")


only = sys.argv[1:]
for name, np, sets, bf16 in CASES:
    if not only or name in only:
        check_case(name, np, sets, bf16)
for name, sets, hook, pattern in HANGS:
    if not only or name in only:
        check_hang(name, sets, hook, pattern)
print("ok")
