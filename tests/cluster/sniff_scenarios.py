"""Sniff tests across hosts (obs.sniff_interval; cluster_test.py runs these scenarios):

  sniff_cpu    host 2 capped mid-run (cgroup CPU quota, measured so its steps take ~6x as long):
               the sniff test names its rank with its host and (dp, tp, pp) — log, metrics.jsonl,
               rank 0's fluxtrain_sniff_slow — no later than the straggler detector would; then a
               rank on host 3 is killed and, with fault.exclude_slow_hosts, the restart leaves host 2
               out (host_bad reason "sniff", dp 4 -> 3) and the job finishes
  sniff_link   host 2's link shaped to 20 Mbit/s (tc tbf) before the launch: the start-up sniff names
               its rank on the dp axis ("link_dp") and no other rank's link; the losses are
               bit-identical to a run without sniff tests on this machine (sniffing changes nothing)
"""
import os
import re
import signal
import subprocess
import sys
import time

from cluster_lib import Launch, events, fail, raw_metrics
from fault_lib import check_losses_identical


def _scrape(c, pattern):
    """Rank 0's /metrics lines (port 9450 on host 0) that start with `pattern`."""
    code = ("import urllib.request\n"
            "t=urllib.request.urlopen('http://127.0.0.1:9450/metrics',timeout=5).read().decode()\n"
            f"print('\\n'.join(l for l in t.splitlines() if l.startswith({pattern!r})))")
    return c.run(0, [sys.executable, "-c", code], check=False)


def _cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _slow_rows(rows, host):
    """(step, entry) of every metrics.jsonl sniff verdict naming `host`."""
    out = []
    for r in rows:
        for key in ("sniff_start", "sniff"):
            for s in r.get(key, {}).get("slow", []):
                if s["host"] == host:
                    out.append((r[key]["step"], s))
    return out


def sniff_cpu(c, ft, config, work):
    steps, slower = 40, 6
    run_dir = os.path.join(work, "sniff_cpu")
    victim_host = c.hosts[2]
    sets = ["parallel.dp=4", f"train.steps={steps}", "train.threads=1", "train.eval_interval=0",
            "train.batch_size=12", "train.seq_len=256", "metrics.enabled=true", "metrics.port=9450",
            "metrics.straggler_factor=2", "metrics.straggler_min_steps=4", "obs.sniff_interval=2",
            "obs.sniff_margin=2", "ckpt.interval=4", "ckpt.keep=2", "fault.elastic=true",
            "fault.exclude_slow_hosts=true", "fault.host_max_failures=3", "fault.max_restarts=2",
            "fault.collective_timeout_s=20", "fault.startup_timeout_s=60", "fault.heartbeat_timeout_s=60",
            "fault.stop_grace_s=3"]
    run = Launch(c, ft, config, run_dir, sets)
    # The quota as the straggler scenario measures it: the share of a CPU under which the rank on
    # host 2 takes `slower` times as long per step, on this machine under its load.
    hb = run.wait_for_step(5, 4, timeout=180)
    victim = [r for r in hb.values() if r["host"] == victim_host][0]
    slow_rank, pid = victim["rank"], victim["pid"]
    cpu0, wall0, step0 = _cpu_seconds(pid), time.time(), run.heartbeats()[slow_rank]["step"]
    hb = run.wait_for_step(9, 4, timeout=180)
    n = max(hb[slow_rank]["step"] - step0, 1)
    cpu_step, wall_step = (_cpu_seconds(pid) - cpu0) / n, (time.time() - wall0) / n
    quota = min(1.0, max(0.01, cpu_step / (slower * wall_step)))
    at_step = max(r["step"] for r in hb.values())
    c.cpu_limit(2, quota)
    print(f"host {victim_host} (rank {slow_rank}) limited to {quota:.3f} CPU after step {at_step}", flush=True)
    # Named by a sniff test: sniff.json (rank 0's latest verdict) names the host.
    import json
    t0, series = time.time(), ""
    while time.time() - t0 < 120 and run.p.poll() is None:
        try:
            with open(os.path.join(run_dir, "sniff.json")) as f:
                verdict = json.load(f)
        except (OSError, ValueError):
            verdict = {}
        if victim_host in verdict.get("slow_hosts", []) and verdict.get("step", 0) > at_step:
            series = _scrape(c, "fluxtrain_sniff_slow")
            break
        time.sleep(0.3)
    else:
        fail("no sniff test named " + victim_host + ":\n" + run.output()[-4000:])
    print(f"sniff.json: {victim_host} named after step {verdict['step']}: {verdict['slow']}", flush=True)
    if f'sniff_host="{victim_host}"' not in series or f'sniff_rank="{slow_rank}"' not in series:
        fail(f"rank 0's /metrics has no fluxtrain_sniff_slow for rank {slow_rank} on {victim_host}:\n{series}")
    print("prometheus: " + series.strip().splitlines()[0], flush=True)
    # A rank on host 3 dies: the restart leaves host 2 out (fault.exclude_slow_hosts).
    other = [r for r in run.heartbeats().values() if r["host"] == c.hosts[3]][0]
    os.kill(other["pid"], signal.SIGKILL)
    print(f"rank {other['rank']} on {c.hosts[3]} killed", flush=True)
    rc = run.wait(300)
    c.cpu_unlimit(2)
    out = run.output()
    if rc != 0:
        fail(f"launch exited {rc}:\n{out[-5000:]}")
    logged = [l for l in out.splitlines() if "sniff after step" in l and f"on {victim_host}" in l]
    if not logged:
        fail("the log names no slow rank on " + victim_host)
    print("log: " + logged[0].strip(), flush=True)
    rows = raw_metrics(run_dir)
    named = [(s, e) for s, e in _slow_rows(rows, victim_host) if s > at_step]
    if not named or named[0][1]["rank"] != slow_rank or named[0][1]["dp"] != slow_rank:
        fail(f"metrics.jsonl: the sniff verdicts after step {at_step} name {named[:2]}")
    others = [(r["step"], s) for r in rows for key in ("sniff_start", "sniff") for s in r.get(key, {}).get("slow", [])
              if r["step"] > at_step and s["host"] != victim_host and r.get(key, {}).get("step", 0) > at_step]
    if others:
        print(f"also named after the cap (this shared machine's noise): {others[:3]}", flush=True)
    stragglers = [r["step"] for r in rows if r.get("stragglers") and r["step"] > at_step
                  and any(x["host"] == victim_host for x in r["stragglers"])]
    first_sniff = named[0][0]
    if stragglers and stragglers[0] < first_sniff:
        fail(f"the straggler detector named it at step {stragglers[0]}, before the sniff test ({first_sniff})")
    print(f"named by the sniff test after step {first_sniff} ({first_sniff - at_step} step(s) after the cap, "
          f"{named[0][1]['check']} {named[0][1]['ratio']:.1f}x); as a straggler "
          f"{'at step ' + str(stragglers[0]) if stragglers else 'not before the restart'}", flush=True)
    ev = events(run_dir)
    bad = [e for e in ev if e["event"] == "host_bad"]
    if not any(e["host"] == victim_host and e["reason"] == "sniff" for e in bad) or \
            any(e["host"] != victim_host for e in bad):
        fail(f"host_bad events: {bad} (expected {victim_host} for reason sniff only)")
    if not any(e["event"] == "shrink" and e["from_dp"] == 4 and e["to_dp"] == 3 for e in ev):
        fail("no shrink from dp 4 to dp 3 in supervisor.jsonl")
    last = [e for e in ev if e["event"] == "start"][-1]
    if victim_host in last["command"] or last["world_size"] != 3:
        fail(f"the last attempt still uses {victim_host} or not 3 ranks: {last['command'][:300]}")
    print(f"supervisor: {victim_host} left out of the restart ({[e.get('detail') for e in bad][0]}); dp 4 -> 3",
          flush=True)


def sniff_link(c, ft, config, work):
    steps = 12
    base = ["parallel.dp=4", f"train.steps={steps}", "train.threads=1", "train.eval_interval=0",
            "train.batch_size=12", "metrics.port=0", "fault.startup_timeout_s=60", "fault.heartbeat_timeout_s=60"]
    # The reference without sniff tests: the same layout on this machine (mpirun, no cluster).
    ref = os.path.join(work, "no_sniff")
    args = [ft, "train", "--config", config, "--run-dir", ref, "--nproc", "4"]
    for s in base:
        args += ["--set", s]
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    if p.returncode != 0:
        fail(f"reference run failed:\n{p.stdout[-3000:]}")
    victim_host = c.hosts[2]
    c.shape(20e6, hosts=[2])
    run_dir = os.path.join(work, "sniff_link")
    run = Launch(c, ft, config, run_dir, base + ["obs.sniff_interval=4", "obs.sniff_margin=2"])
    rc = run.wait(300)
    c.unshape(hosts=[2])
    out = run.output()
    if rc != 0:
        fail(f"launch exited {rc}:\n{out[-5000:]}")
    rows = raw_metrics(run_dir)
    start = rows[0].get("sniff_start")
    if not start:
        fail(f"the first metrics.jsonl row has no sniff_start: {sorted(rows[0])}")
    named = [s for s in start["slow"] if s["check"].startswith("link_")]
    if [(s["host"], s["check"]) for s in named] != [(victim_host, "link_dp")]:
        fail(f"start-up sniff: links named {[(s['host'], s['check'], round(s['ratio'], 1)) for s in named]}, "
             f"expected only {victim_host} on dp; link_s {start['link_s']}")
    if start.get("measured_twice") is not True:
        fail(f"start-up sniff: named {victim_host} without measuring again: {start.get('measured_twice')}")
    s = named[0]
    print(f"start-up sniff: rank {s['rank']} on {s['host']} (dp {s['dp']}, tp {s['tp']}, pp {s['pp']}): its fastest "
          f"dp round trip {s['seconds'] * 1e3:.1f} ms, {s['ratio']:.1f}x its peers' ({s['median_s'] * 1e3:.2f} ms)",
          flush=True)
    if not re.search(rf"sniff after step 0: rank {s['rank']} on {re.escape(victim_host)} .*dp link", out):
        fail("the log does not name the slow link")
    later = [r["step"] for r in rows if "sniff" in r]
    if later != [4, 8, 12]:
        fail(f"sniff tests after steps {later}, expected 4, 8, 12 (obs.sniff_interval = 4)")
    check_losses_identical(ref, run_dir, steps)
