#!/usr/bin/python3
"""Links shaped like a cluster, and the planner held to them (issue 18, point 3).

Four hosts (network namespaces, tests/cluster/netns_cluster.py) joined by veth links shaped with tc
(tbf) to each rate; llama-20m data parallel dp = 4 (ZeRO 0, fp32, one thread a rank, synthetic data)
with no compression, bf16 and PowerSGD, gradient overlap on (25 MiB buckets during backward) and off
(one bucket after backward). For each configuration:

  1. compute on one host: the same dp = 4 job with all four ranks on host 0 (one network stack,
     no shaped link), the step's compute time = per step the slowest rank's compute_s
     (metrics.jsonl: wall time minus data and communication waits), median over steps. The ranks
     are started as on separate hosts, each through its own ssh session (the host file names four
     aliases of host 0): the kernel's scheduler shares the CPU between sessions (autogroups), so a
     one-host run started by a local mpirun (one session) gets half the CPU the 4-host runs get on
     this shared machine and its compute time is not theirs;
  2. across the hosts at each link rate: `fluxtrain launch --hosts` on host 0, median step_s;
  3. the planner: `fluxtrain plan --config ... --link-gbits R --link-latency-us L --compute-s C`
     with the link's rate, its measured one-way latency and the compute time of 1 — and once more
     with the rate the hosts really carry: every host streaming to the next at once over TCP (as
     the ring all-reduce does), measured before the runs. The four emulated hosts share this
     machine's CPUs, so their TCP stacks, not tc, bound a "10 Gbit/s" link.

Every configuration runs its one-host measurement before and after its cluster runs (the mean is
used), so a change of the shared machine's load shows as their difference. Prints predicted vs
measured and the error per row, then the compression ranking measured and predicted, then the
largest error last.

    bench/cluster_links.py [--rates 1,10] [--steps 8] [--seq-len 128] [--repeat 1]   (root; ~10 min)
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))
from netns_cluster import Cluster, skip_reason  # noqa: E402

FT = os.environ.get("FLUXTRAIN", os.path.join(ROOT, "build", "fluxtrain"))
CONFIG = os.path.join(ROOT, "configs", "llama-20m.toml")
PAYLOAD = 1448 / 1514  # TCP payload per Ethernet frame, as plan/research/links.h counts it
CONFIGS = [  # name, compression, overlap
    ("none, overlap off", "none", False),
    ("none, overlap on", "none", True),
    ("bf16, overlap off", "bf16", False),
    ("bf16, overlap on", "bf16", True),
    ("powersgd, overlap on", "powersgd", True),
]


def sets_for(args, compression, overlap):
    s = ["parallel.dp=4", f"train.steps={args.steps}", "train.batch_size=4", f"train.seq_len={args.seq_len}",
         "train.threads=1", "train.eval_interval=0", "data.source=\"synthetic\"", "metrics.port=0",
         f"parallel.grad_compression=\"{compression}\"", "parallel.powersgd_warmup_steps=0",
         "fault.startup_timeout_s=300", "fault.heartbeat_timeout_s=300"]
    # Overlap off: one bucket larger than the model, all-reduced once backward has finished.
    s.append("parallel.bucket_mb=25" if overlap else "parallel.bucket_mb=100000")
    return s


def set_args(sets):
    out = []
    for s in sets:
        out += ["--set", s]
    return out


def rows_of(run_dir, skip):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        rows = [json.loads(l) for l in f if l.strip()]
    return rows[skip:]


def launch(c, on, hostfile, sets, run_dir):
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = c.popen(on, [FT, "launch", "--config", CONFIG, "--hosts", hostfile, "--run-dir", run_dir] + set_args(sets),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    out, _ = p.communicate(timeout=1800)
    if p.returncode != 0:
        sys.exit(f"run {run_dir} failed:\n{out[-3000:]}")


def one_host(args, c, sets, run_dir):
    hostfile = os.path.join(c.dir, "one-host.txt")
    with open(hostfile, "w") as f:
        f.writelines(f"{a} slots=1\n" for a in c.aliases[0])
    launch(c, 1, hostfile, sets, run_dir)  # started from host 1; every rank runs on host 0
    hosts = {r["host"] for r in json.load(open(os.path.join(run_dir, "ranks.json")))["ranks"]}
    if hosts != {c.hosts[0]}:
        sys.exit(f"the one-host run ran on {hosts}")
    rows = rows_of(run_dir, args.skip)
    compute = statistics.median(max(r["per_rank"]["compute_s"]) for r in rows)
    return compute, statistics.median(r["step_s"] for r in rows)


def across(args, c, sets, run_dir):
    before = [c.counters(i) for i in range(c.n)]
    launch(c, 0, c.hostfile, sets, run_dir)
    after = [c.counters(i) for i in range(c.n)]
    rows = rows_of(run_dir, args.skip)
    sent = min(after[i][1] - before[i][1] for i in range(c.n))
    return statistics.median(r["step_s"] for r in rows), statistics.median(r["compute_s"] for r in rows), sent


def predict(sets, rate_gbit, latency_s, compute_s):
    p = subprocess.run([FT, "plan", "--config", CONFIG, "--gpu", "cpu", "--link-gbits", str(rate_gbit),
                        "--link-latency-us", f"{latency_s * 1e6:.2f}", "--compute-s", f"{compute_s:.6f}", "--json"]
                       + set_args(sets), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    if p.returncode != 0:
        sys.exit(f"fluxtrain plan failed:\n{p.stdout}")
    return json.loads(p.stdout)


def ranking(values):
    return " < ".join(k for k, _ in sorted(values.items(), key=lambda kv: kv[1]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rates", default="1,10", help="link rates in Gbit/s, comma-separated")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--skip", type=int, default=2, help="first steps left out of the medians")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--work", default="")
    args = ap.parse_args()
    reason = skip_reason()
    if reason:
        sys.exit(f"cannot make the cluster here: {reason}")
    work = args.work or tempfile.mkdtemp(prefix="ft_cluster_links_")
    os.makedirs(work, exist_ok=True)
    rates = [float(r) for r in args.rates.split(",")]
    with open("/proc/loadavg") as f:
        print(f"load average at start: {f.read().split()[0]}", flush=True)
    results = []
    with Cluster(4, work, aliases=4) as c:
        lat0 = c.latency_s(0, 1)
        print(f"cluster: {', '.join(c.hosts)}; netem available: {c.can_delay()}; unshaped one-way latency "
              f"{lat0 * 1e6:.1f} us", flush=True)
        latency, carried = {}, {}
        for r in rates:
            c.shape(r * 1e9)
            latency[r] = c.latency_s(0, 1)
            carried[r] = c.ring_throughput_bit()
            print(f"link {r:g} Gbit/s (tc tbf each way): one-way latency {latency[r] * 1e6:.1f} us; a ring of "
                  f"TCP streams carries {carried[r] / 1e9:.2f} Gbit/s of payload per host", flush=True)
        c.unshape()
        for name, comp, overlap in CONFIGS:
            sets = sets_for(args, comp, overlap)
            tag = name.replace(", ", "_").replace(" ", "_")
            compute_a, step1 = one_host(args, c, sets, os.path.join(work, f"{tag}_1host_a"))
            runs = []
            for r in rates:
                c.shape(r * 1e9)
                step, comp_across, sent = across(args, c, sets, os.path.join(work, f"{tag}_{r:g}g"))
                c.unshape()
                runs.append((r, step, comp_across, sent))
            compute_b, _ = one_host(args, c, sets, os.path.join(work, f"{tag}_1host_b"))
            compute = (compute_a + compute_b) / 2
            print(f"{name}: compute on one host {compute_a:.3f} / {compute_b:.3f} s (before / after), step there "
                  f"{step1:.3f} s", flush=True)
            for r, step, comp_across, sent in runs:
                p = predict(sets, r, latency[r], compute)
                # The carried rate as a line rate (the planner takes the TCP payload share off again).
                line = min(r, carried[r] / PAYLOAD / 1e9)
                q = predict(sets, line, latency[r], compute)
                err, err_c = p["step_s"] / step - 1, q["step_s"] / step - 1
                results.append({"config": name, "compression": comp, "overlap": overlap, "rate": r,
                                "carried_gbit": carried[r] / 1e9, "latency_us": latency[r] * 1e6, "compute": compute,
                                "predicted": p["step_s"], "predicted_carried": q["step_s"], "measured": step,
                                "error": err, "error_carried": err_c, "exposed": p["exposed_s"],
                                "compute_across": comp_across, "sent_mib": sent / 2**20})
                print(f"  {r:g} Gbit/s: measured {step:.3f} s (compute there {comp_across:.3f} s), predicted "
                      f"{p['step_s']:.3f} s ({100 * err:+.1f}%; exposed communication {p['exposed_s']:.3f} s), with "
                      f"the carried rate {q['step_s']:.3f} s ({100 * err_c:+.1f}%)", flush=True)
    with open("/proc/loadavg") as f:
        print(f"load average at end: {f.read().split()[0]}", flush=True)

    print("\n| link (tc) | carried | configuration | compute, one host (s) | predicted (s) | error | "
          "predicted, carried rate (s) | error | measured (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for x in results:
        print(f"| {x['rate']:g} Gbit/s, {x['latency_us']:.0f} us | {x['carried_gbit']:.2f} Gbit/s | {x['config']} | "
              f"{x['compute']:.3f} | {x['predicted']:.3f} | {100 * x['error']:+.1f}% | {x['predicted_carried']:.3f} | "
              f"{100 * x['error_carried']:+.1f}% | {x['measured']:.3f} |")
    print()
    for r in rates:
        on = {x["compression"]: x for x in results if x["rate"] == r and x["overlap"]}
        meas = ranking({k: v["measured"] for k, v in on.items()})
        for key, label in (("predicted", "tc rate"), ("predicted_carried", "carried rate")):
            pred = ranking({k: v[key] for k, v in on.items()})
            print(f"{r:g} Gbit/s, overlap on, fastest first: measured {meas}; predicted ({label}) {pred}"
                  f"{'' if meas == pred else '  (DIFFERENT)'}")
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    worst = max(abs(x["error"]) for x in results)
    worst_c = max(abs(x["error_carried"]) for x in results)
    print(f"results in {work}/results.json")
    print(f"largest |error| of the planner: {100 * worst:.1f}% given the tc rate, {100 * worst_c:.1f}% given the "
          f"carried rate")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
