"""Training across real hosts: network namespaces joined by veth links, ranks started over ssh by
`fluxtrain launch --hosts` (OpenMPI's TCP transport over the links). Each scenario makes its own
cluster (tests/cluster/netns_cluster.py) and removes it, also when it fails.

  host_lost_elastic   a host lost mid-run (link down, every process killed) with fault.elastic:
              named, marked bad, dp 4 -> 3 on the others; losses vs an uninterrupted dp 3 run (1e-4),
              every sample read once, recovery time printed, nothing left running
  host_lost_wait      the same without elastic: the supervisor waits for the host, which returns;
              resumed bit-identically to an uninterrupted run
  hang_stacks         a rank stopped on host 2: named with its host, (dp, tp, pp, cp) and phase, every rank's
              stacks (all threads, symbolised) read into the run directory before the job is stopped,
              restart; then a rank on host 3 killed (SIGKILL): that rank and host named, not the
              reporter; restart, bit-identical
  preempt             SIGTERM on host 2 to its rank (a node drain): every rank stops after the same
              step with its checkpoint, exit 4, no restart; `--resume auto` on the four hosts is
              bit-identical to an uninterrupted run, every sample once; stop step and time printed
  preempt_elastic     the same drain, then `--resume auto` on the other three hosts at dp 3: losses
              within 1e-4 of an uninterrupted dp 3 run, every sample once
  straggler           host 2 limited mid-run to the CPU share (measured) that makes its steps ~6x slower:
              its rank named (log, metrics.jsonl, Prometheus) within a few steps with its cost,
              nobody else; goodput exported
  sniff_cpu, sniff_link  sniff tests (obs.sniff_interval) name a CPU-capped host and a shaped link;
              fault.exclude_slow_hosts leaves the named host out of a restart (sniff_scenarios.py)
  slurm               slurmctld on host 0, a slurmd on hosts 1 and 2: a 2-node sbatch of training under
              the supervisor (srun, one rank a node) outranks a validation job submitted earlier
  parity      4 hosts: dp4, dp2 x tp2, dp2 x pp2, tp2 x pp2 (sequence parallel) with 4 ranks, and
              dp2 x tp2 x pp2 with 8 (2 slots a host) train the losses of one process (1e-5 rel.);
              every rank reads only its range of a real dataset (per-host bytes printed and
              bounded); the gradient traffic crossed the hosts' links (their byte counters)

usage: cluster_test.py FLUXTRAIN CONFIG WORKDIR SCENARIO        exit 77: no namespaces here
"""
import os
import re
import shutil
import sys
import time

from cluster_lib import (SKIP, Launch, check_no_leftovers, fail, host_of_rank, metrics_by_step, prepare_dataset,
                         ranks_json, raw_metrics, rel)
from netns_cluster import Cluster, skip_reason

FT, CONFIG, WORK, SCENARIO = sys.argv[1:5]
WORK = os.path.join(os.path.abspath(WORK), SCENARIO)
# MFU's GEMM peak (backends/cpu/peak.h) measured into a file of these tests, not the user's cache
# (which another fluxtrain build may have written in a format this one refuses); the supervisor
# forwards FLUXTRAIN_* to every rank.
os.environ["FLUXTRAIN_PEAK_FILE"] = os.path.join(os.path.dirname(WORK), "peak.json")

# The tiny model on a real dataset (512-piece tokenizer): fp32, one thread per rank.
COMMON = ["train.steps=20", "train.batch_size=8", "train.seq_len=32", "train.micro_batch_size=1",
          "train.eval_interval=10", "train.threads=1", "optim.lr=3e-3", "model.vocab_size=512", "metrics.port=0",
          "data.source=\"dataset\"", "fault.startup_timeout_s=120", "fault.heartbeat_timeout_s=60"]


def data_sets(ds):
    return [f"data.path=\"{ds}\""]


def one_process(ds, name, sets=()):
    """The reference: the same config in one process (no supervisor, no network)."""
    import subprocess
    run_dir = os.path.join(WORK, name)
    args = [FT, "train", "--config", CONFIG, "--run-dir", run_dir]
    for s in COMMON + data_sets(ds) + list(sets):
        args += ["--set", s]
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    if p.returncode != 0:
        fail(f"{name}: one-process run failed:\n{p.stdout[-3000:]}")
    return run_dir


def order_spread(ref_dir, other_dir, steps):
    """step -> relative grad-norm difference between two one-process runs that differ only in the
    order of their fp32 sums (micro-batches of 1 vs 2 samples): how well a step's grad norm is
    determined at all. At a spike (this dataset's step 17: 1.6 against 0.7 around it) the norm moves
    by up to ~1e-4 while the losses agree to 1e-6."""
    a, b = metrics_by_step(ref_dir), metrics_by_step(other_dir)
    return {s: rel(b[s]["grad_norm"], a[s]["grad_norm"]) for s in range(1, steps + 1)}


def compare(ref_dir, run_dir, name, steps, spread, tol=1e-5):
    """Losses (training and validation) within tol of one process at every step; the grad norm
    within tol or 4x what reordering the sums alone moves it in one process (spread)."""
    a, b = metrics_by_step(ref_dir), metrics_by_step(run_dir)
    worst_loss = worst_norm = 0.0
    for s in range(1, steps + 1):
        for key in ("loss", "grad_norm") + (("val_loss",) if "val_loss" in a[s] else ()):
            if key not in b[s]:
                fail(f"{name}: step {s} has no {key}")
            r = rel(b[s][key], a[s][key])
            bound = max(tol, 4 * spread[s]) if key == "grad_norm" else tol
            if key == "grad_norm":
                worst_norm = max(worst_norm, r)
            else:
                worst_loss = max(worst_loss, r)
            if r > bound:
                fail(f"{name}: step {s} {key} {b[s][key]!r} vs one process {a[s][key]!r} (rel. {r:.2e} > {bound:.1e}"
                     + (f"; reordering the sums in one process moves it {spread[s]:.1e}" if key == "grad_norm" else "")
                     + ")")
    print(f"{name}: {steps} steps, loss / validation loss within {worst_loss:.1e} of one process, grad norm "
          f"within {worst_norm:.1e} (one process reordered: up to {max(spread.values()):.1e})", flush=True)


def per_host_bytes(run_dir):
    """host -> bytes its ranks read from the dataset (the last step's per-rank figures; ranks of one
    host that share a data-parallel index read the same range, each counted)."""
    rows = raw_metrics(run_dir)
    hosts = host_of_rank(run_dir)
    out = {}
    for r, b in enumerate(rows[-1]["per_rank"]["data_read_bytes"]):
        out[hosts[r]] = out.get(hosts[r], 0) + b
    return out


def scenario_parity(c):
    ds = prepare_dataset(FT, WORK)
    ref = one_process(ds, "one_process")
    spread = order_spread(ref, one_process(ds, "one_process_micro2", ["train.micro_batch_size=2"]), 20)
    ref_bytes = raw_metrics(ref)[-1]["data_read_bytes"]
    layouts = [  # name, slots per host, sets
        ("dp4", 1, ["parallel.dp=4"]),
        ("dp2 x tp2 zero1", 1, ["parallel.dp=2", "parallel.tp=2", "parallel.zero=1"]),
        ("dp2 x pp2 zero2", 1, ["parallel.dp=2", "parallel.pp=2", "parallel.zero=2"]),
        ("tp2 sp x pp2", 1, ["parallel.tp=2", "parallel.pp=2", "parallel.sequence_parallel=true"]),
        ("dp2 x tp2 x pp2 zero1", 2, ["parallel.dp=2", "parallel.tp=2", "parallel.pp=2", "parallel.zero=1"]),
    ]
    for name, slots, sets in layouts:
        hostfile = os.path.join(WORK, f"hosts-{slots}.txt")
        with open(hostfile, "w") as f:
            for h in c.hosts:
                f.write(f"{h} slots={slots}\n")
        run_dir = os.path.join(WORK, name.replace(" ", "_"))
        before = [c.counters(i) for i in range(c.n)]
        t0 = time.time()
        run = Launch(c, FT, CONFIG, run_dir, COMMON + data_sets(ds) + sets, hosts_file=hostfile)
        rc = run.wait(300)
        if rc != 0:
            fail(f"{name}: launch exited {rc}:\n" + run.output()[-5000:])
        after = [c.counters(i) for i in range(c.n)]
        hosts = host_of_rank(run_dir)
        used = sorted(set(hosts.values()))
        if used != sorted(c.hosts):
            fail(f"{name}: ranks ran on {used}, expected every host of {c.hosts}")
        compare(ref, run_dir, name, 20, spread)
        tx = [after[i][1] - before[i][1] for i in range(c.n)]
        rows = raw_metrics(run_dir)
        if name == "dp4":
            sent = sum(r.get("comm_all_reduce_bytes", 0) for r in rows)  # rank 0's gradient bytes
            for i in range(c.n):
                if tx[i] < 0.95 * sent:
                    fail(f"dp4: host {c.hosts[i]} sent {tx[i]} bytes on its link, less than the {sent} bytes of "
                         f"gradients each rank sends: the traffic did not cross the veth links")
            print(f"dp4: every host's link carried >= the {sent / 2**20:.1f} MiB of gradients a rank sends "
                  f"(tx {', '.join(f'{t / 2**20:.1f}' for t in tx)} MiB)", flush=True)
        per_host = per_host_bytes(run_dir)
        print(f"{name}: bytes read from the dataset per host: " +
              ", ".join(f"{h} {per_host[h]}" for h in sorted(per_host)) +
              f" (one process: {ref_bytes}); {time.time() - t0:.1f} s", flush=True)
        dp = int([s for s in sets if s.startswith("parallel.dp=")][0].split("=")[1]) if any(
            s.startswith("parallel.dp=") for s in sets) else 1
        if dp >= 2:
            # A data-parallel rank reads its lanes' shards only: with dp 4 a host's one rank about a
            # quarter of the dataset (plus the shards its lanes' boundaries touch), never all of it.
            per_rank = rows[-1]["per_rank"]["data_read_bytes"]
            for r, b in enumerate(per_rank):
                if b >= 0.75 * ref_bytes:
                    fail(f"{name}: rank {r} on {hosts[r]} read {b} bytes, as much as one process reading "
                         f"everything ({ref_bytes}): it did not read only its range")


# Fault scenarios: the tiny model on synthetic data, dp 4 (one rank a host), batch 12 (so 3 hosts
# can carry dp 3), checkpoints every 5 steps, small timeouts so a failure shows within seconds.
FAULT_STEPS, FAULT_BATCH = 60, 12
FAULT = ["parallel.dp=4", f"train.steps={FAULT_STEPS}", "train.threads=1", "train.eval_interval=0",
         f"train.batch_size={FAULT_BATCH}", "ckpt.interval=5", "ckpt.keep=3", "fault.record_samples=true",
         "metrics.port=0", "fault.collective_timeout_s=3", "fault.heartbeat_timeout_s=8",
         "fault.startup_timeout_s=60", "fault.stop_grace_s=3", "fault.max_restarts=2", "fault.host_max_failures=1"]


# For the runs a scenario hurts once it has seen step 12 (a host lost, a rank stopped, a drain): 60
# tiny steps may end a fraction of a second later on a fast machine, and the fault must still find
# the job running. Each checkpoint (every 5 steps) holds the next update 250 ms (the checkpoint
# module's test knob, which the supervisor passes to every rank): at least 2.5 s from step 12 to
# the end on any machine, with the same losses.
HOLD = {"FLUXTRAIN_CKPT_TEST_COPY_DELAY_MS": "250"}


def warm_peak():
    """The first run with the peak file measures this machine's GEMM peak on rank 0 (backends/cpu/peak.h:
    a few GEMMs, seconds on a slow CPU) while the other ranks wait in a collective — past the 3 s
    collective timeout of FAULT on a slow or loaded machine. One single-process step at one thread
    records it first, as tests/fault/fault_injection_test.py does."""
    import subprocess
    p = subprocess.run([FT, "train", "--config", CONFIG, "--run-dir", os.path.join(WORK, "peak"), "--set",
                        "train.steps=1", "--set", "train.threads=1", "--set", "train.eval_interval=0", "--set",
                        "metrics.port=0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    if p.returncode != 0:
        fail(f"the single-process step failed:\n{p.stdout[-3000:]}")


def local_reference(name, dp):
    """An uninterrupted run on this machine (mpirun, no cluster): what the faulted runs must match."""
    import subprocess
    warm_peak()
    run_dir = os.path.join(WORK, name)
    args = [FT, "train", "--config", CONFIG, "--run-dir", run_dir, "--nproc", str(dp)]
    for s in FAULT + [f"parallel.dp={dp}"]:
        args += ["--set", s]
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    if p.returncode != 0:
        fail(f"{name}: reference run failed:\n{p.stdout[-3000:]}")
    return run_dir


def lose_host(c, run, lost=2):
    """Host `lost` goes away at step 12: its link down, then every process on it killed."""
    run.wait_for_step(12, 4)
    t = time.time()
    c.kill_host(lost)
    print(f"host {c.hosts[lost]} lost at step >= 12: link down, every process killed", flush=True)
    return t


def check_named(run_dir, host):
    from cluster_lib import events
    ev = events(run_dir)
    failures = [e for e in ev if e["event"] == "failure"]
    if not failures or failures[0].get("host") != host:
        fail(f"the first failure is not attributed to {host}: {failures[:1]}")
    print(f"supervisor: {failures[0]['kind']} named {host} ({failures[0]['detail'][:120]})", flush=True)
    return ev


def print_recovery(run_dir, label, hurt_at):
    from fault_lib import recovery_times
    rec = recovery_times(run_dir)
    if not rec:
        fail(f"{label}: no recovery recorded in supervisor.jsonl")
    kind, s, at = rec[0]
    print(f"RECOVERY {label}: {s:.2f} s from detection ({kind}) to the first step after the restart; "
          f"{at - hurt_at:.2f} s from the fault", flush=True)


def scenario_host_lost_elastic(c):
    """fault.elastic: the lost host is named and marked bad; training goes on at dp 3 on the other
    three hosts from the last checkpoint (resharded); losses within 1e-4 of an uninterrupted dp 3 run;
    every sample read exactly once."""
    from fault_lib import check_samples
    ref = local_reference("reference_dp3", 3)
    run_dir = os.path.join(WORK, "elastic")
    run = Launch(c, FT, CONFIG, run_dir, FAULT + ["fault.elastic=true"], env=HOLD)
    hurt = lose_host(c, run)
    rc = run.wait(300)
    out = run.output()
    if rc != 0:
        fail(f"launch exited {rc}:\n{out[-5000:]}")
    lost = c.hosts[2]
    ev = check_named(run_dir, lost)
    if not any(e["event"] == "host_bad" and e["host"] == lost for e in ev):
        fail(f"{lost} was not marked bad: {[e for e in ev if e['event'] == 'host_bad']}")
    if not any(e["event"] == "shrink" and e["from_dp"] == 4 and e["to_dp"] == 3 for e in ev):
        fail("no shrink from dp 4 to dp 3 in supervisor.jsonl")
    last_start = [e for e in ev if e["event"] == "start"][-1]
    if lost in last_start["command"] or last_start["world_size"] != 3:
        fail(f"the last attempt still uses {lost} or not 3 ranks: {last_start['command'][:300]}")
    compare_losses(ref, run_dir, "elastic dp 4 -> 3 vs uninterrupted dp 3", FAULT_STEPS, 1e-4)
    check_samples(run_dir, FAULT_STEPS, batch=FAULT_BATCH)
    print_recovery(run_dir, "host lost, elastic dp 4 -> 3", hurt)
    check_no_leftovers(c, [0, 1, 3])


def scenario_host_lost_wait(c):
    """Without elastic: the supervisor names the lost host, waits for it to come back (the test brings
    it back after 8 s), and resumes on all four hosts bit-identically to an uninterrupted run."""
    from fault_lib import check_losses_identical, check_samples
    ref = local_reference("reference_dp4", 4)
    run_dir = os.path.join(WORK, "wait")
    run = Launch(c, FT, CONFIG, run_dir, FAULT + ["fault.elastic=false", "fault.host_wait_s=120"], env=HOLD)
    hurt = lose_host(c, run)
    lost = c.hosts[2]
    t0 = time.time()
    while "waiting up to" not in run.output():  # after the timeouts, the reports and the stacks: 300 s bounds a hang
        if time.time() - t0 > 300 or run.p.poll() is not None:
            fail("the supervisor did not start waiting for the lost host:\n" + run.output()[-5000:])
        time.sleep(0.2)
    time.sleep(8)
    c.restore_host(2)
    print(f"host {lost} is back (sshd, link up) {time.time() - hurt:.1f} s after it was lost", flush=True)
    rc = run.wait(300)
    if rc != 0:
        fail(f"launch exited {rc}:\n{run.output()[-5000:]}")
    ev = check_named(run_dir, lost)
    if not any(e["event"] == "host_back" and e["host"] == lost for e in ev):
        fail(f"no host_back event for {lost}")
    if any(e["event"] in ("host_bad", "shrink") for e in ev):
        fail("without fault.elastic no host may be dropped")
    check_losses_identical(ref, run_dir, FAULT_STEPS)
    check_samples(run_dir, FAULT_STEPS, batch=FAULT_BATCH)
    print_recovery(run_dir, "host lost and back, same layout", hurt)
    check_no_leftovers(c, [0, 1, 2, 3])


def check_culprit(failure, victim, host, kind, process):
    """The failure event names the victim: kind, ranks, host, and in `culprits` its coordinates (dp 4:
    dp = rank), the phase and step of its last heartbeat and what its process was."""
    cul = failure.get("culprits") or [{}]
    want = {"rank": victim["rank"], "host": host, "dp": victim["rank"], "tp": 0, "pp": 0, "cp": 0, "phase": "train",
            "process": process}
    got = {k: cul[0].get(k) for k in want}
    if failure["kind"] != kind or failure["ranks"] != [victim["rank"]] or failure.get("host") != host or got != want:
        fail(f"the {kind} should name rank {victim['rank']} on {host}: {failure}")
    print(f"supervisor: {kind} named rank {cul[0]['rank']} on {cul[0]['host']} (dp {cul[0]['dp']}, tp {cul[0]['tp']}, "
          f"pp {cul[0]['pp']}, cp {cul[0]['cp']}), phase {cul[0]['phase']} after step {cul[0]['step']}, "
          f"process {cul[0]['process']}", flush=True)


def scenario_hang_stacks(c):
    """A rank stops (SIGSTOP) on host 2 mid-run: the others' collectives time out and report it; the
    supervisor names rank 2 on its host with its coordinates and phase, reads every rank's stacks
    (all threads, symbolised, over ssh for remote hosts) into the run directory before it ends the
    job and restarts. Then the rank on host 3 is killed (SIGKILL): the failure names it and its
    host, not a rank that reported the timeout or that the launcher's teardown ended. The run
    finishes bit-identically to an uninterrupted one."""
    import glob
    import signal
    from fault_lib import check_losses_identical, check_samples
    ref = local_reference("reference_dp4", 4)
    run_dir = os.path.join(WORK, "hang")
    run = Launch(c, FT, CONFIG, run_dir, FAULT, env=HOLD)
    hb = run.wait_for_step(12, 4)
    victim = [r for r in hb.values() if r["host"] == c.hosts[2]][0]
    hurt = time.time()
    os.kill(victim["pid"], signal.SIGSTOP)
    print(f"SIGSTOP to rank {victim['rank']} on {victim['host']} (pid {victim['pid']})", flush=True)
    hb = run.wait_for_step(30, 4, attempt=2, timeout=300)
    killed = [r for r in hb.values() if r["host"] == c.hosts[3]][0]
    os.kill(killed["pid"], signal.SIGKILL)
    print(f"SIGKILL to rank {killed['rank']} on {killed['host']} (pid {killed['pid']})", flush=True)
    rc = run.wait(300)
    if rc != 0:
        fail(f"launch exited {rc}:\n{run.output()[-5000:]}")
    ev = check_named(run_dir, c.hosts[2])
    failures = [e for e in ev if e["event"] == "failure"]
    check_culprit(failures[0], victim, c.hosts[2], "hang", "stopped")
    if len(failures) != 2:
        fail(f"expected two failures (the hang, the kill): {failures}")
    check_culprit(failures[1], killed, c.hosts[3], "rank_died", "gone")
    line = [l for l in run.output().splitlines() if "supervisor: attempt 1 failed" in l]
    if not line or c.hosts[2] not in line[0] or "phase train" not in line[0]:
        fail(f"the hang's log line names no host or phase: {line}")
    files = sorted(glob.glob(os.path.join(run_dir, "stacks", "attempt-1", "rank-*.txt")))
    if len(files) != 4:
        fail(f"expected the stacks of 4 ranks in {run_dir}/stacks/attempt-1, found {files}")
    for f in files:
        with open(f) as fh:
            text = fh.read()
        threads = text.count("\nThread ")
        # Symbolised: our own frames by name (the training thread's step loop or a collective).
        if threads < 2 or "ft::" not in text:
            fail(f"{f}: {threads} thread(s), frames named ft::... {'present' if 'ft::' in text else 'absent'}:\n"
                 + text[:2000])
        first = [l for l in text.splitlines() if "ft::" in l][:1]
        print(f"{os.path.basename(f)}: {threads} threads, e.g. {first[0].strip()[:110] if first else ''}", flush=True)
    check_losses_identical(ref, run_dir, FAULT_STEPS)
    check_samples(run_dir, FAULT_STEPS, batch=FAULT_BATCH)
    print_recovery(run_dir, "rank stopped on a remote host (stacks read first)", hurt)
    check_no_leftovers(c, [0, 1, 2, 3])


def drain_host(c, run_dir, drained=2):
    """A node drain mid-run: SIGTERM, sent on host `drained`, to its rank(s) only. Every rank must
    finish the step, agree on it, checkpoint it and exit 4; the supervisor takes that as a stop on
    purpose (no restart) and exits 4. Returns the stop step."""
    from fault_lib import events
    run = Launch(c, FT, CONFIG, run_dir, FAULT, env=HOLD)
    hb = run.wait_for_step(12, 4)
    victims = [r for r in hb.values() if r["host"] == c.hosts[drained]]
    if not victims:
        fail(f"no rank on {c.hosts[drained]}: {hb}")
    sent = time.time()
    c.run(drained, ["kill", "-TERM"] + [str(r["pid"]) for r in victims])
    print(f"SIGTERM on {c.hosts[drained]} to rank(s) {[r['rank'] for r in victims]} at step >= "
          f"{victims[0]['step']}", flush=True)
    rc = run.wait(120)
    took = time.time() - sent
    if rc != 4:
        fail(f"launch exited {rc}, expected 4 (stopped on purpose):\n{run.output()[-5000:]}")
    ev = events(run_dir)
    if any(e["event"] in ("restart", "failure") for e in ev) or [e["exit_code"] for e in ev
                                                                 if e["event"] == "stopped"] != [4]:
        fail(f"the supervisor should record one stop with exit code 4 and no failure: {ev}")
    hb = run.heartbeats()
    steps = {r["step"] for r in hb.values()}
    if len(hb) != 4 or len(steps) != 1 or any(r["phase"] != "stopped" for r in hb.values()):
        fail(f"the four ranks did not all stop after one step: {hb}")
    stop = steps.pop()
    if not os.path.exists(os.path.join(run_dir, "checkpoints", f"step_{stop:08d}", "manifest.json")):
        fail(f"no committed checkpoint of the stop step {stop}")
    with open(os.path.join(run_dir, "logs", "attempt-1.log")) as f:
        log = f.read()
    if "SIGTERM received" not in log or f"stop requested (SIGTERM) after step {stop}" not in log:
        fail("the rank's SIGTERM and the agreed stop are not in the log:\n" + log[-3000:])
    print(f"PREEMPT stop step {stop} on all 4 ranks (checkpoint committed), exit code {rc}, "
          f"{took:.2f} s from the signal to the launcher's exit", flush=True)
    check_no_leftovers(c, range(c.n))
    return stop


def relaunch(c, run_dir, stop, sets=(), hosts_file=None):
    """`fluxtrain launch --resume auto` of the stopped run: it must resume from the stop step."""
    run = Launch(c, FT, CONFIG, run_dir, FAULT + list(sets), hosts_file=hosts_file, extra=["--resume", "auto"])
    rc = run.wait(300)
    if rc != 0:
        fail(f"the resumed launch exited {rc}:\n{run.output()[-5000:]}")
    if f"resume: loaded {run_dir}/checkpoints/step_{stop:08d} " not in run.output():
        fail(f"the relaunch did not resume from the stop step {stop}:\n{run.output()[-3000:]}")


def scenario_preempt(c):
    """Host 2 drained (SIGTERM to its rank): the job stops; `--resume auto` on the same four hosts
    finishes bit-identically to an uninterrupted run, every sample read once."""
    from fault_lib import check_losses_identical, check_samples
    ref = local_reference("reference_dp4", 4)
    run_dir = os.path.join(WORK, "preempt")
    stop = drain_host(c, run_dir)
    relaunch(c, run_dir, stop)
    check_losses_identical(ref, run_dir, FAULT_STEPS)
    check_samples(run_dir, FAULT_STEPS, batch=FAULT_BATCH)
    check_no_leftovers(c, range(c.n))


def scenario_preempt_elastic(c):
    """Host 2 drained: the job stops; `--resume auto` on the other three hosts at dp 3 (the dp 4
    checkpoint resharded): losses within 1e-4 of an uninterrupted dp 3 run, every sample read once."""
    from fault_lib import check_samples
    ref = local_reference("reference_dp3", 3)
    run_dir = os.path.join(WORK, "preempt_elastic")
    stop = drain_host(c, run_dir)
    hostfile = os.path.join(WORK, "hosts-without-2.txt")
    with open(hostfile, "w") as f:
        f.writelines(f"{h} slots=1\n" for i, h in enumerate(c.hosts) if i != 2)
    relaunch(c, run_dir, stop, ["parallel.dp=3"], hostfile)
    if c.hosts[2] in {r["host"] for r in ranks_json(run_dir)["ranks"]}:
        fail(f"the relaunch used the drained host {c.hosts[2]}")
    compare_losses(ref, run_dir, f"dp 4 (steps 1-{stop}) then dp 3 on 3 hosts vs uninterrupted dp 3", FAULT_STEPS,
                   1e-4)
    check_samples(run_dir, FAULT_STEPS, batch=FAULT_BATCH)
    check_no_leftovers(c, range(c.n))


def cpu_seconds(pid):
    """User + system CPU time of process pid, all its threads, in seconds (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # fields 3.. of proc(5): utime is 14, stime 15
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scenario_straggler(c):
    """Host 2 gets a CPU quota at step 15 (cgroup) that makes its rank's steps about 6x slower: its
    rank is named a straggler within a few steps — in the log, in metrics.jsonl and as
    fluxtrain_straggler_slowdown on rank 0's /metrics — with what it costs the job; nobody else is
    named; goodput is exported and reported."""
    from cluster_lib import events
    steps, limited_at, slower = 40, 15, 6
    run_dir = os.path.join(WORK, "straggler")
    # Steps of ~0.1 s of compute, so the shared machine's noise stays well below the factor 2 that
    # makes a rank slow; 4 slow steps of 5 name it.
    sets = ["parallel.dp=4", f"train.steps={steps}", "train.threads=1", "train.eval_interval=0", "train.batch_size=8",
            "train.seq_len=256", "metrics.enabled=true", "metrics.port=9450", "metrics.straggler_factor=2",
            "metrics.straggler_min_steps=4", "fault.startup_timeout_s=60", "fault.heartbeat_timeout_s=60"]
    run = Launch(c, FT, CONFIG, run_dir, sets)
    # The quota is measured, not fixed: the CPU time the rank on host 2 takes per step and the
    # wall time of a step over steps 10..15, on this machine and under its load, give the share of
    # a CPU under which its steps take `slower` times as long — on a slow machine as on a fast one
    # (a fixed 2% of a CPU made each step 50x the rank's CPU time per step: 50 s a step where a
    # step takes a second of CPU). Its own waits in collectives count as its CPU time (MPI polls), which only makes
    # the quota larger and the slowdown, against the others' compute, still above `slower` / 2.
    hb = run.wait_for_step(limited_at - 5, 4, timeout=180)
    victim = [r for r in hb.values() if r["host"] == c.hosts[2]][0]
    slow_rank, pid = victim["rank"], victim["pid"]
    cpu0, wall0, step0 = cpu_seconds(pid), time.time(), run.heartbeats()[slow_rank]["step"]
    hb = run.wait_for_step(limited_at, 4, timeout=180)
    cpu1, wall1, step1 = cpu_seconds(pid), time.time(), hb[slow_rank]["step"]
    n = max(step1 - step0, 1)
    cpu_step, wall_step = (cpu1 - cpu0) / n, (wall1 - wall0) / n
    quota = min(1.0, max(0.01, cpu_step / (slower * wall_step)))
    at_step = max(r["step"] for r in hb.values())
    c.cpu_limit(2, quota)
    print(f"host {c.hosts[2]} (rank {slow_rank}) limited to {quota:.3f} CPU after step {at_step} (it took "
          f"{cpu_step * 1e3:.0f} ms of CPU in steps of {wall_step * 1e3:.0f} ms)", flush=True)
    # While it lasts, rank 0's endpoint (on host 0) carries the straggler's slowdown.
    scrape = ("import urllib.request,sys\n"
              "t=urllib.request.urlopen('http://127.0.0.1:9450/metrics',timeout=5).read().decode()\n"
              "print('\\n'.join(l for l in t.splitlines() if l.startswith('fluxtrain_straggler') or "
              "l.startswith('fluxtrain_goodput')))")
    series = ""
    t0 = time.time()
    while "fluxtrain_straggler_slowdown{" not in series and time.time() - t0 < 120 and run.p.poll() is None:
        time.sleep(0.5)
        series = c.run(0, [sys.executable, "-c", scrape], check=False)
    rc = run.wait(300)
    if rc != 0:
        fail(f"launch exited {rc}:\n{run.output()[-5000:]}")
    out = run.output()
    named = [l for l in out.splitlines() if "straggler: rank" in l]
    if not named:
        fail("no straggler named in the log:\n" + out[-4000:])
    print("log: " + named[0].strip(), flush=True)
    # Before the cap the ranks are alike and only the shared machine's noise can name one (a
    # busy 2-core host with steps of ~30 ms); from the cap on, only the capped rank may be named.
    def step_of(line):
        m = re.search(r"step ([0-9]+): straggler", line)
        return int(m.group(1)) if m else 0
    before = [l for l in named if step_of(l) <= at_step]
    if before:
        print(f"named before the cap (machine noise, not judged): {len(before)}", flush=True)
    others = [l for l in named if step_of(l) > at_step and f"rank {slow_rank} on {c.hosts[2]}" not in l]
    if others:
        fail(f"only rank {slow_rank} on {c.hosts[2]} may be named after the cap, also: {others}")
    rows = raw_metrics(run_dir)
    first = [r for r in rows if r.get("stragglers") and r["step"] > at_step]
    if not first or [x["rank"] for x in first[0]["stragglers"]] != [slow_rank]:
        fail(f"metrics.jsonl: stragglers {first[0]['stragglers'] if first else None}")
    delay = first[0]["step"] - at_step
    if delay > 10:
        fail(f"named at step {first[0]['step']}, {delay} steps after the CPU limit (at most 10 expected)")
    cost = sum(r.get("straggler_cost_s", 0) for r in rows)
    step_s = sum(r["step_s"] for r in rows if r.get("stragglers"))
    x = first[-1]["stragglers"][0]  # the last step it was a straggler
    print(f"metrics.jsonl: named at step {first[0]['step']} ({delay} steps after the limit), slowdown "
          f"{x['slowdown']:.2f}x, the job waited {cost:.2f} s for it ({100 * cost / step_s:.0f}% of those steps' time)",
          flush=True)
    if "fluxtrain_straggler_slowdown{" not in series or f'straggler_rank="{slow_rank}"' not in series:
        fail(f"rank 0's /metrics has no straggler series for rank {slow_rank}:\n{series}")
    print("prometheus: " + " | ".join(l for l in series.splitlines() if "slowdown{" in l or "seconds_total{" in l),
          flush=True)
    goodput = rows[-1].get("goodput")
    fin = [e for e in events(run_dir) if e["event"] == "finished"][0]
    if not (goodput and 0 < goodput <= 1 and 0 < fin["goodput"] <= 1):
        fail(f"goodput {goodput} (metrics.jsonl), {fin.get('goodput')} (supervisor)")
    print(f"goodput: {goodput:.3f} (rank 0 at its last step), {fin['goodput']:.3f} over the whole job "
          f"(supervisor: {fin['productive_s']:.1f} s productive of {fin['wall_s']:.1f} s)", flush=True)


SLURM_CONF = """ClusterName=fluxtrain-hosts
SlurmctldHost={ctl}({ctl_addr})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge.sock
CredType=cred/munge
StateSaveLocation={d}/ctld
SlurmdSpoolDir={d}/spool-%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
PriorityType=priority/multifactor
PriorityWeightPartition=10000
PriorityWeightAge=0
PriorityWeightFairshare=0
PriorityWeightJobSize=0
PriorityWeightQOS=0
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MinJobAge=600
ReturnToService=2
InactiveLimit=0
KillWait=5
GresTypes=gpu
{nodes}
PartitionName=train Nodes={names} PriorityTier=10 PriorityJobFactor=100 Default=YES MaxTime=INFINITE State=UP
PartitionName=validate Nodes={names} PriorityTier=1 PriorityJobFactor=1 MaxTime=INFINITE State=UP
"""


def scenario_slurm(c):
    """Slurm across hosts: slurmctld on host 0, one slurmd on each of hosts 1 and 2 (their own
    addresses and host names), munge's socket shared. A 2-node sbatch of the training job runs under
    the supervisor (srun --mpi=pmix puts one rank on each node, talking over the links), while a
    validation job submitted earlier waits at the lower priority and then reads its checkpoint."""
    import shutil as sh_
    import subprocess
    for b in ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "srun"):
        if not sh_.which(b):
            print(f"SKIP: {b} not installed (scripts/install-deps.sh installs Slurm and munge)", flush=True)
            sys.exit(SKIP)
    d = os.path.join(WORK, "slurm")
    os.makedirs(os.path.join(d, "ctld"))
    nodes = [1, 2]
    for i in nodes:
        os.makedirs(os.path.join(d, f"spool-{c.hosts[i]}"))
    with open(os.path.join(d, "munge.key"), "wb") as f:
        f.write(os.urandom(1024))
    os.chmod(os.path.join(d, "munge.key"), 0o400)
    os.chmod(d, 0o755)
    conf = os.path.join(d, "slurm.conf")
    with open(conf, "w") as f:
        f.write(SLURM_CONF.format(
            ctl=c.hosts[0], ctl_addr=c.addr[0], d=d, names=",".join(c.hosts[i] for i in nodes),
            nodes="\n".join(f"NodeName={c.hosts[i]} NodeAddr={c.addr[i]} CPUs=2 RealMemory=2000 Gres=gpu:1 State=UNKNOWN"
                            for i in nodes)))
    # One "GPU" per node, a plain file (these hosts have none): enough for Slurm to grant
    # train.sbatch's --gpus-per-node; nothing runs on it.
    with open(os.path.join(d, "gres.conf"), "w") as f:
        for i in nodes:
            open(os.path.join(d, f"gpu-{c.hosts[i]}"), "w").close()
            f.write(f"NodeName={c.hosts[i]} Name=gpu File={d}/gpu-{c.hosts[i]}\n")
    env = dict(os.environ, SLURM_CONF=conf, FLUXTRAIN=FT, OMP_NUM_THREADS="1")

    def on(i, argv, check=True, timeout=30):
        p = subprocess.run(c.wrap(i, argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                           timeout=timeout)
        if check and p.returncode != 0:
            fail(f"{' '.join(argv)} on {c.hosts[i]} failed ({p.returncode}): {p.stdout.strip()}")
        return p.stdout.strip()

    # munged on host 0: its socket is a file, which every host (one file system) reaches.
    on(0, ["munged", "--force", f"--key-file={d}/munge.key", f"--socket={d}/munge.sock",
           f"--log-file={d}/munged.log", f"--pid-file={d}/munged.pid", f"--seed-file={d}/munge.seed"])
    # `ip netns exec` gave each host its own /sys, without the cgroup hierarchies slurmd's cgroup/v1
    # plugin initialises: mount them (the machine's own v1 hierarchies) in the hosts' mount namespaces.
    ctrls = [x for x in ("cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "pids")
             if os.path.isdir(f"/sys/fs/cgroup/{x}")]
    # And each host its own /tmp, as real hosts have (Slurm's PMIx plugin keeps per-step files there).
    # A checkout under /tmp (a CI clone) stays visible: its top directory is bound back in.
    real = os.path.realpath(d)
    top = "/tmp/" + real.split("/")[2] if real.startswith("/tmp/") else ""
    for i in nodes:
        os.makedirs(os.path.join(d, f"tmp-{c.hosts[i]}"))
        keep = f"/run/ft-tmp-{c.hosts[i]}"
        script = f"mkdir -p {keep} && mount --bind /tmp {keep} && mount --bind {real}/tmp-{c.hosts[i]} /tmp"
        if top:
            script += f" && mkdir -p {top} && mount --bind {keep}{top[len('/tmp'):]} {top}"
        on(i, ["sh", "-c", script])
        on(i, ["sh", "-c", "mount -t tmpfs cgroup_root /sys/fs/cgroup && for s in " + " ".join(ctrls) +
               "; do mkdir -p /sys/fs/cgroup/$s && mount -t cgroup -o $s cgroup /sys/fs/cgroup/$s; done && "
               "mkdir -p /sys/fs/cgroup/systemd && mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd"])
    if subprocess.run(c.wrap(0, ["slurmctld", "-f", conf]), env=env).returncode != 0:
        print(f"SKIP: slurmctld does not start: {open(d + '/slurmctld.log').read()[-300:]}", flush=True)
        sys.exit(SKIP)
    for i in nodes:
        if subprocess.run(c.wrap(i, ["slurmd", "-f", conf]), env=env).returncode != 0:
            fail(f"slurmd on {c.hosts[i]} does not start: {open(f'{d}/slurmd-{c.hosts[i]}.log').read()[-500:]}")
    t0 = time.time()
    while len({l for l in on(0, ["sinfo", "-h", "-N", "-o", "%N %t"], check=False).splitlines() if l.endswith(" idle")}) < 2:
        if time.time() - t0 > 60:
            fail(f"the slurmds did not register: {on(0, ['sinfo', '-N'], check=False)}\n"
                 + "".join(open(f"{d}/slurmd-{c.hosts[i]}.log").read()[-400:] for i in nodes))
        time.sleep(0.5)
    print("slurm: " + on(0, ["sinfo", "-h", "-N", "-o", "%N %P %t"]).replace("\n", "; "), flush=True)

    run = os.path.join(WORK, "slurm-run")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sbatch_dir = os.path.join(root, "deploy", "slurm")
    # Both nodes drained; validation is submitted first, training (2 whole nodes) second; then both
    # nodes come back in one request and the scheduler picks by priority.
    names = ",".join(c.hosts[i] for i in nodes)
    on(0, ["scontrol", "update", f"NodeName={names}", "State=DRAIN", "Reason=fluxtrain-test"])
    val = on(0, ["sbatch", "--parsable", "-p", "validate", "-n", "1", "-o", f"{d}/validate.out",
                 f"{sbatch_dir}/validate.sbatch", CONFIG, run, "--set", "train.eval_batches=2", "--set",
                 "train.batch_size=8"])
    train = on(0, ["sbatch", "--parsable", "-N", "2", "-n", "2", "--ntasks-per-node=1", "--gpus-per-node=1", "--exclusive", "-o", f"{d}/train.out",
                   f"{sbatch_dir}/train.sbatch", CONFIG, "--run-dir", run, "--set", "parallel.dp=2", "--set",
                   "train.steps=60", "--set", "train.batch_size=8", "--set", "ckpt.interval=20", "--set",
                   "train.threads=1", "--set", "metrics.port=0", "--set", "train.eval_interval=0"])
    time.sleep(1)
    pt, pv = (int(on(0, ["squeue", "-h", "-j", j, "-o", "%Q"])) for j in (train, val))
    if not pt > pv:
        fail(f"training priority {pt} is not above validation's {pv}")
    print(f"priorities: training {pt} > validation {pv}", flush=True)
    on(0, ["scontrol", "update", f"NodeName={names}", "State=RESUME"])

    def job(j):
        return dict(w.split("=", 1) for w in on(0, ["scontrol", "show", "job", j]).split() if "=" in w)
    t0 = time.time()
    while True:
        t, v = job(train), job(val)
        if any(x["JobState"] in ("FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL") for x in (t, v)):
            fail(f"jobs ended {t['JobState']} / {v['JobState']}:\n" + "\n".join(
                open(f).read()[-3000:] for f in (f"{d}/train.out", f"{d}/validate.out") if os.path.exists(f)))
        if t["JobState"] == v["JobState"] == "COMPLETED":
            break
        if time.time() - t0 > 300:
            fail(f"jobs did not complete: {t['JobState']} / {v['JobState']}")
        time.sleep(0.5)
    code, start, end, nl, vstart = t["ExitCode"], t["StartTime"], t["EndTime"], t["NodeList"], v["StartTime"]
    if code != "0:0":
        fail(f"training exit code {code}")
    out = open(f"{d}/train.out").read()
    if "'srun'" not in out or "--mpi=pmix" not in out:
        fail("the supervisor did not start the ranks with srun inside the allocation:\n" + out[-3000:])
    hosts = host_of_rank(run)
    if sorted(set(hosts.values())) != sorted(c.hosts[i] for i in nodes):
        fail(f"the ranks ran on {hosts}, not one on each of the two nodes")
    if not vstart >= end:
        fail(f"validation started {vstart}, before training ended {end}")
    import glob
    import json
    res = json.load(open(sorted(glob.glob(os.path.join(run, "validation", "step_*.json")))[0]))
    if res["step"] != 60:
        fail(f"validation read step {res['step']}, not the training's last checkpoint")
    print(f"training job {train} on {nl} ({', '.join(f'rank {r} on {h}' for r, h in sorted(hosts.items()))}): "
          f"COMPLETED {start} .. {end}; validation job {val} (submitted first) started {vstart} and read step "
          f"{res['step']}: val_loss {res['val_loss']:.4f}", flush=True)


def scenario_sniff_cpu(c):
    from sniff_scenarios import sniff_cpu
    sniff_cpu(c, FT, CONFIG, WORK)


def scenario_sniff_link(c):
    from sniff_scenarios import sniff_link
    sniff_link(c, FT, CONFIG, WORK)


def compare_losses(ref_dir, run_dir, name, steps, tol):
    a, b = metrics_by_step(ref_dir), metrics_by_step(run_dir)
    worst = max(rel(b[s]["loss"], a[s]["loss"]) for s in range(1, steps + 1))
    if worst > tol:
        bad = [s for s in range(1, steps + 1) if rel(b[s]["loss"], a[s]["loss"]) > tol]
        fail(f"{name}: losses differ by up to {worst:.2e} (> {tol}) at steps {bad[:10]}")
    print(f"{name}: all {steps} losses within {worst:.1e} (tolerance {tol})", flush=True)


def main():
    reason = skip_reason()
    if reason:
        print(f"SKIP: {reason}", flush=True)
        return SKIP
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    fn = globals().get("scenario_" + SCENARIO)
    if fn is None:
        fail(f"unknown scenario {SCENARIO}")
    n = 4
    with Cluster(n, WORK) as c:
        print(f"cluster: {', '.join(f'{h} ({a})' for h, a in zip(c.hosts, c.addr))}", flush=True)
        try:
            fn(c)
        finally:  # the mount points scenario_slurm made for the hosts' own /tmp (empty once they are gone)
            for h in c.hosts:
                shutil.rmtree(f"/run/ft-tmp-{h}", ignore_errors=True) if not os.path.ismount(f"/run/ft-tmp-{h}") else None
    print(f"PASS {SCENARIO}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
