"""Training across real hosts: network namespaces joined by veth links, ranks started over ssh by
`fluxtrain launch --hosts` (OpenMPI's TCP transport over the links). Each scenario makes its own
cluster (tests/cluster/netns_cluster.py) and removes it, also when it fails.

  parity      4 hosts: dp4, dp2 x tp2, dp2 x pp2, tp2 x pp2 (sequence parallel) with 4 ranks, and
              dp2 x tp2 x pp2 with 8 (2 slots a host) train the losses of one process (1e-5 rel.);
              every rank reads only its range of a real dataset (per-host bytes printed and
              bounded); the gradient traffic crossed the hosts' links (their byte counters)

usage: cluster_test.py FLUXTRAIN CONFIG WORKDIR SCENARIO        exit 77: no namespaces here
"""
import os
import shutil
import sys
import time

from cluster_lib import SKIP, Launch, fail, host_of_rank, metrics_by_step, prepare_dataset, raw_metrics, rel
from netns_cluster import Cluster, skip_reason

FT, CONFIG, WORK, SCENARIO = sys.argv[1:5]
WORK = os.path.join(os.path.abspath(WORK), SCENARIO)

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


def compare(ref_dir, run_dir, name, steps, tol=1e-5):
    a, b = metrics_by_step(ref_dir), metrics_by_step(run_dir)
    worst = 0.0
    for s in range(1, steps + 1):
        for key in ("loss", "grad_norm") + (("val_loss",) if "val_loss" in a[s] else ()):
            if key not in b[s]:
                fail(f"{name}: step {s} has no {key}")
            r = rel(b[s][key], a[s][key])
            worst = max(worst, r)
            if r > tol:
                fail(f"{name}: step {s} {key} {b[s][key]!r} vs one process {a[s][key]!r} (rel. {r:.2e} > {tol})")
    print(f"{name}: {steps} steps, loss / grad norm / validation loss within {worst:.1e} of one process", flush=True)


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
        compare(ref, run_dir, name, 20)
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
        fn(c)
    print(f"PASS {SCENARIO}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
