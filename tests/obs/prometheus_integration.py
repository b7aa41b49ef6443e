#!/usr/bin/env python3
"""A real Prometheus server (Debian's) on loopback scrapes live fluxtrain ranks; the test asks
Prometheus's HTTP query API for the series and checks their values and rank labels.

Two ranks are started (each serves metrics.port + its local rank), with the fake NVML library
standing in for the driver so GPU series exist, each rank watching its own GPU: the CUDA device of
its local rank, found through CUDA_VISIBLE_DEVICES given as GPU UUIDs in the reverse of NVML's
order (rank 0 drives NVML GPU 1, the hot one). The stand-in tests our sampler, not NVML. Prometheus
also loads deploy/prometheus/alerts.yml, and every Grafana dashboard query is run against it.
Finally one rank is killed and Prometheus must see its target go down.

Two kinds of ranks are scraped side by side by one Prometheus:
- a real 2-rank context-parallel `fluxtrain train --nproc 2` (--fluxtrain, --config;
  parallel.cp = 2, ring attention): its series must carry each rank's labels, both ranks' loss
  must equal what rank 0 wrote to metrics.jsonl for that step, all-reduce traffic (the gradients
  over dp x cp) must be counted, and each rank's fluxtrain_cp_bytes_total and
  fluxtrain_cp_ring_hidden_ratio must be its per_rank.cp_bytes summed over the steps and its
  per_rank.cp_ring_hidden_ratio; a second run on the same port must fail naming it;
- two tests/obs/obs_demo_server ranks (the same obs::Telemetry, simulated steps) with the fake
  NVML library, for per-rank GPU series, the temperature alarm and a rank that dies.
"""
import argparse
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

# A bound that only a hang reaches: the whole test takes about 12 s on a 2-core machine, and its
# waits end as soon as Prometheus shows what they wait for (a machine 10x slower must not fail).
DEADLINE_S = 300


# The stand-in's GPUs: GPU 1 (rank 0's) is hot, held back by a thermal slowdown, has reported XID 13
# (the application's: counted, not fatal) and remapped rows; GPU 0 (rank 1's) retires pages instead
# (a GPU before Ampere). A fatal XID is appended at the end of the test.
NVML_STATE = ("devices 2\ntemp.0 65\ntemp.1 91\npower_w.1 640\nthrottle.1 0x20\nxid.1 13\nremap_corr.1 2\n"
              "remap_unc.1 1\nremap_pending.1 1\nremap_unsupported.0 1\nretired_sbe.0 3\nretired_dbe.0 0\n")


def free_port_pair():
    """Two consecutive free loopback ports (the ranks use port and port + 1)."""
    for _ in range(50):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        p = s.getsockname()[1]
        s.close()
        if p >= 65535:
            continue
        try:
            a, b = socket.socket(), socket.socket()
            a.bind(("127.0.0.1", p))
            b.bind(("127.0.0.1", p + 1))
            a.close()
            b.close()
            return p
        except OSError:
            continue
    raise RuntimeError("no two consecutive free ports")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def query(base, expr, at=None):
    """An instant query, evaluated now or at Unix time `at`."""
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr, **({"time": f"{at:.3f}"} if at else {})})
    with urllib.request.urlopen(url, timeout=5) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"query {expr!r} failed: {body}")
    return body["data"]["result"]


def get(base, path):
    with urllib.request.urlopen(base + path, timeout=5) as r:
        return json.load(r)


def wait_for(what, fn, deadline):
    last = None
    while time.time() < deadline:
        try:
            v = fn()
            if v:
                return v
        except Exception as e:  # server not up yet
            last = e
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what} (last error: {last})")


def check_train(base, run_dir, train_port, a, tmp, deadline, check):
    """The real 2-rank trainer: labels, loss equal to metrics.jsonl, traffic, and a port clash."""
    # Loss and step of both ranks from the same evaluation instant, a few evaluations in: two queries
    # at one fixed time, 2 s (two scrapes) back, so that both read the same scrape (a scrape landing
    # between two queries "now" pairs the loss of one step with another, steps apart on a fast
    # machine) and metrics.jsonl has that step's line when it is read.
    def sample():
        at = time.time() - 2
        loss = query(base, 'fluxtrain_loss{run="train_run"} and on(rank) (fluxtrain_validation_loss{run="train_run"} > 0)',
                     at)
        step = query(base, 'fluxtrain_step{run="train_run"}', at)
        return (loss, step, at) if len(loss) == 2 and len(step) == 2 and min(
            float(x["value"][1]) for x in step) >= 6 else None
    loss, step, at = wait_for("both trainer ranks scraped past step 6", sample, deadline)
    for x in sorted(loss, key=lambda x: x["metric"]["rank"]):
        m, r = x["metric"], x["metric"]["rank"]
        check(m.get("dp") == "0" and m.get("tp") == "0" and m.get("instance") == f"127.0.0.1:{train_port + int(r)}",
              f"fluxtrain train rank {r} labels {dict((k, v) for k, v in m.items() if k != '__name__')}")
    logged = {}
    for line in open(os.path.join(run_dir, "metrics.jsonl")):
        j = json.loads(line)
        logged[j["step"]] = j
    steps = {x["metric"]["rank"]: int(float(x["value"][1])) for x in step}
    for x in loss:
        r = x["metric"]["rank"]
        n, scraped = steps[r], float(x["value"][1])
        # on_step sets the step before the loss, so a scrape in between pairs step n with loss n-1.
        ok = any(k in logged and logged[k]["loss"] == scraped for k in (n, n - 1))
        check(ok, f"rank {r}: scraped loss {scraped!r} at step {n} equals metrics.jsonl's ({logged.get(n, {}).get('loss')!r})")
    tokens = [float(x["value"][1]) for x in query(base, 'fluxtrain_tokens_total{run="train_run"}')]
    check(len(tokens) == 2 and all(t > 0 and t % 256 == 0 for t in tokens), f"tokens_total {tokens} counts 8x32 batches")
    comm = [float(x["value"][1]) for x in query(base, 'fluxtrain_comm_bytes_total{run="train_run",op="all_reduce"}')]
    check(len(comm) == 2 and all(c > 0 for c in comm), f"all_reduce bytes counted on both ranks: {comm}")
    # Context parallelism: each rank's cp bytes counter is its per_rank.cp_bytes summed over the steps
    # it has counted (the counter moves after the step gauge: step n or n - 1), and the ring's hidden
    # share is its per_rank.cp_ring_hidden_ratio of that step.
    cp_bytes = {x["metric"]["rank"]: float(x["value"][1]) for x in query(base, 'fluxtrain_cp_bytes_total{run="train_run"}', at)}
    hidden = {x["metric"]["rank"]: float(x["value"][1])
              for x in query(base, 'fluxtrain_cp_ring_hidden_ratio{run="train_run"}', at)}
    for r in ("0", "1"):
        n, i = steps[r], int(r)
        sums = {k: sum(logged[s]["per_rank"]["cp_bytes"][i] for s in range(1, k + 1)) for k in (n, n - 1)
                if all(s in logged for s in range(1, k + 1))}
        check(cp_bytes.get(r, -1) > 0 and cp_bytes.get(r) in sums.values(),
              f"rank {r}: fluxtrain_cp_bytes_total {cp_bytes.get(r)!r} = per_rank.cp_bytes summed to step {n} or {n - 1} "
              f"({sums})")
        ratios = [logged[k]["per_rank"]["cp_ring_hidden_ratio"][i] for k in (n, n - 1) if k in logged]
        check(r in hidden and 0 <= hidden[r] <= 1 and hidden[r] in ratios,
              f"rank {r}: fluxtrain_cp_ring_hidden_ratio {hidden.get(r)!r} is per_rank.cp_ring_hidden_ratio ({ratios})")
    val = float(query(base, 'fluxtrain_validation_loss{run="train_run",rank="0"}', at)[0]["value"][1])
    check(any(abs(j.get("val_loss", -1) - val) < 1e-12 for j in logged.values()), f"validation loss {val} is in metrics.jsonl")

    # Sniff tests (obs.sniff_interval = 5): rank 0 exposes both ranks' GEMM and cp-link times, and the
    # dashboard's sniff table has rows for them.
    sniff = wait_for("both ranks' sniff GEMM times on rank 0", lambda: (lambda r: r if len(r) == 2 else None)(
        query(base, 'fluxtrain_sniff_gemm_seconds{run="train_run"}')), deadline)
    check(sorted(x["metric"]["sniff_rank"] for x in sniff) == ["0", "1"] and all(x["metric"]["rank"] == "0" for x in sniff)
          and all(float(x["value"][1]) > 0 for x in sniff), f"sniff GEMM series {[x['metric'] for x in sniff]}")
    links = query(base, 'fluxtrain_sniff_link_seconds{run="train_run",axis="cp"}')
    check(len(links) == 2, f"sniff cp-link series of both ranks: {[x['metric'] for x in links]}")
    dash = json.load(open(os.path.join(a.deploy, "grafana", "fluxtrain-dashboard.json")))
    table = [p for p in dash["panels"] if p["title"] == "Sniff tests"][0]
    rows = query(base, table["targets"][1]["expr"].replace("$run", "train_run"))
    check(len(rows) == 2 and {x["metric"].get("sniff_host") for x in rows} != {None},
          f"the dashboard's sniff table query: {[x['metric'] for x in rows]}")

    # The trainer's own exposition passes Prometheus's linter.
    promtool = shutil.which("promtool") or os.path.join(os.path.dirname(a.prometheus), "promtool")
    with urllib.request.urlopen(f"http://127.0.0.1:{train_port + 1}/metrics", timeout=5) as resp:
        text = resp.read()
    lint = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True)
    check(lint.returncode == 0, f"promtool check metrics on rank 1's exposition: {(lint.stdout + lint.stderr).decode()[-300:]!r}")

    # A second run on the same port: a clear error naming the port, exit code 2.
    r = subprocess.run([a.fluxtrain, "train", "--config", a.config, "--run-dir", os.path.join(tmp, "clash"),
                        "--set", "metrics.enabled=true", "--set", "metrics.bind_address=127.0.0.1",
                        "--set", f"metrics.port={train_port}"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and f"port {train_port} on 127.0.0.1 is already in use" in r.stderr
          and "hint:" in r.stderr, f"second run on port {train_port}: rc {r.returncode}, {r.stderr.strip()[-160:]!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prometheus", required=True)
    ap.add_argument("--server", required=True, help="obs_demo_server binary")
    ap.add_argument("--fake-nvml", required=True)
    ap.add_argument("--deploy", required=True)
    ap.add_argument("--fluxtrain", help="build/fluxtrain: also scrape a real `fluxtrain train`")
    ap.add_argument("--config", help="config for --fluxtrain (configs/tiny.toml)")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="ft_prom_")
    procs = []
    failures = []

    def check(cond, msg):
        print(("ok   " if cond else "FAIL ") + msg)
        if not cond:
            failures.append(msg)

    try:
        port = free_port_pair()
        prom_port = free_port()
        nvml_state = os.path.join(tmp, "gpus.txt")
        with open(nvml_state, "w") as f:
            f.write(NVML_STATE)
        env = dict(os.environ, FLUXTRAIN_NVML_LIB=a.fake_nvml, FAKE_NVML_STATE=nvml_state,
                   CUDA_VISIBLE_DEVICES="GPU-fake-0001,GPU-fake-0000")
        for r in range(2):
            cmd = [a.server, "--rank", str(r), "--world", "2", "--local-rank", str(r), "--dp", str(r),
                   "--cuda-device", str(r), "--gpu-interval", "0.5", "--port", str(port), "--step-ms", "50",
                   "--host", f"node-{r}",
                   "--seconds", str(DEADLINE_S + 30), "--run-dir", os.path.join(tmp, "integ")]
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                          stderr=open(os.path.join(tmp, f"rank{r}.log"), "w")))

        train_port = None
        if a.fluxtrain:
            train_port = free_port_pair()
            train_dir = os.path.join(tmp, "train_run")
            train_cmd = [a.fluxtrain, "train", "--config", a.config, "--run-dir", train_dir, "--nproc", "2",
                         "--set", "parallel.cp=2", "--set", "train.steps=10000000", "--set", "train.eval_interval=3",
                         "--set", "metrics.enabled=true", "--set", "metrics.bind_address=127.0.0.1",
                         "--set", f"metrics.port={train_port}", "--set", "obs.sniff_interval=5"]
            # Its own process group: mpirun and both ranks are stopped together at the end. So many
            # steps that no machine finishes them before the test does (it must still serve /metrics).
            procs.append(subprocess.Popen(train_cmd, stdout=subprocess.DEVNULL, start_new_session=True,
                                          stderr=open(os.path.join(tmp, "train.log"), "w")))
        targets = [f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}"]
        if train_port:
            targets += [f"127.0.0.1:{train_port}", f"127.0.0.1:{train_port + 1}"]

        shutil.copy(os.path.join(a.deploy, "prometheus", "alerts.yml"), tmp)
        with open(os.path.join(tmp, "prometheus.yml"), "w") as f:
            f.write(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [alerts.yml]
scrape_configs:
  - job_name: fluxtrain
    static_configs:
      - targets: {json.dumps(targets)}
""")
        prom = subprocess.Popen([a.prometheus, f"--config.file={tmp}/prometheus.yml",
                                 f"--storage.tsdb.path={tmp}/data", f"--web.listen-address=127.0.0.1:{prom_port}",
                                 "--log.level=warn"],
                                stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "prometheus.log"), "w"))
        procs.append(prom)
        base = f"http://127.0.0.1:{prom_port}"
        deadline = time.time() + DEADLINE_S

        steps = wait_for("fluxtrain_step from both ranks",
                         lambda: (lambda r: r if len(r) == 2 else None)(query(base, 'fluxtrain_step{run="integ"} > 2')),
                         deadline)
        by_rank = {s["metric"]["rank"]: s for s in steps}
        check(set(by_rank) == {"0", "1"}, f"fluxtrain_step has ranks {sorted(by_rank)}")
        for r, s in sorted(by_rank.items()):
            m = s["metric"]
            check(m.get("job") == "fluxtrain" and m.get("run") == "integ" and m.get("dp") == r
                  and m.get("tp") == "0" and m.get("pp") == "0",
                  f"rank {r} labels {dict((k, v) for k, v in m.items() if k != '__name__')}")
            check(m.get("instance") == f"127.0.0.1:{port + int(r)}", f"rank {r} is served on port + local rank")

        up = wait_for("every target up", lambda: (lambda r: r if len(r) == len(targets) else None)(
            query(base, 'up{job="fluxtrain"} == 1')), deadline)
        check(len(up) == len(targets), f"all {len(targets)} targets up")

        def values(expr):
            return {s["metric"].get("rank"): float(s["value"][1]) for s in query(base, expr)
                    if s["metric"].get("run", "integ") == "integ"}

        loss = values("fluxtrain_loss")
        check(len(loss) == 2 and all(1.5 < v < 5.6 for v in loss.values()), f"fluxtrain_loss sane: {loss}")
        tps = values("fluxtrain_tokens_per_second")
        check(len(tps) == 2 and all(1e5 < v < 3e5 for v in tps.values()), f"tokens/s sane: {tps}")
        tokens = values("fluxtrain_tokens_total")
        check(all(v > 0 and v % 8192 == 0 for v in tokens.values()), f"tokens_total counts whole batches: {tokens}")
        rate = wait_for("a step rate", lambda: (lambda v: v if len(v) == 2 else None)(values('rate(fluxtrain_steps_total{run="integ"}[5s])')), deadline)
        # A simulated rank sleeps 45-55 ms a step, and steps more slowly on a busy or slow machine
        # (under a CPU cap, 4 a second were seen): the step period bounds the rate from above only.
        # That it counts steps is checked against the step gauge's rate over the same scrapes (a
        # scrape between the two updates of a step may see them one step apart: hence 0.8-1.25).
        check(all(0 < v < 40 for v in rate.values()), f"steps/s, at most one per 45 ms: {rate}")
        ratio = wait_for("the step counter's rate against the step gauge's", lambda: (lambda v: v if len(v) == 2 else None)(
            values('rate(fluxtrain_steps_total{run="integ"}[10s]) / rate(fluxtrain_step{run="integ"}[10s])')), deadline)
        check(all(0.8 < v < 1.25 for v in ratio.values()), f"fluxtrain_steps_total counts steps (its rate over the step gauge's): {ratio}")
        p50 = wait_for("step-time quantile", lambda: values(
            'histogram_quantile(0.5, sum by (rank, le) (rate(fluxtrain_step_duration_seconds_bucket{run="integ"}[10s])))')
            if len(values('rate(fluxtrain_steps_total{run="integ"}[10s])')) == 2 else None, deadline)
        check(all(0.02 < v < 0.2 for v in p50.values()), f"median step time from the histogram: {p50}")
        comm = values('fluxtrain_comm_bytes_total{op="all_reduce"}')
        check(len(comm) == 2 and all(v > 0 for v in comm.values()), f"all_reduce bytes: {comm}")
        mem = values('fluxtrain_process_resident_memory_bytes')
        check(all(v > 1e6 for v in mem.values()), f"resident memory: {mem}")

        # GPU series: each rank reports the GPU it drives (CUDA device = local rank, through
        # CUDA_VISIBLE_DEVICES's UUIDs: rank 0 → NVML GPU 1), labelled with its rank.
        temps = wait_for("GPU temperatures", lambda: (lambda r: r if len(r) == 2 else None)(
            query(base, "fluxtrain_gpu_temperature_celsius")), deadline)
        t = {(s["metric"]["rank"], s["metric"]["gpu"]): float(s["value"][1]) for s in temps}
        check(t == {("0", "1"): 91.0, ("1", "0"): 65.0}, f"GPU temperature by (rank, gpu): {t}")
        alert = values("fluxtrain_gpu_temperature_alert")
        check(alert == {"0": 1.0, "1": 0.0}, f"in-process temperature alarm: {alert}")
        power = values("fluxtrain_gpu_power_watts")
        check(power.get("0") == 640.0, f"GPU power in watts: {power}")
        info = {s["metric"]["rank"]: s["metric"]["uuid"] for s in query(base, "fluxtrain_gpu_info")}
        check(info == {"0": "GPU-fake-0001", "1": "GPU-fake-0000"}, f"each rank's GPU by UUID: {info}")

        # Health with cause, with the rank's labels (host included).
        def by_rank(expr):
            return {(x["metric"]["rank"], x["metric"].get("host"), x["metric"]["gpu"]): float(x["value"][1])
                    for x in query(base, expr) if x["metric"].get("run") == "integ"}
        thermal = wait_for("the throttle reasons", lambda: by_rank('fluxtrain_gpu_throttle_active{reason="sw_thermal_slowdown"}')
                           if len(by_rank('fluxtrain_gpu_throttle_active{reason="sw_thermal_slowdown"}')) == 2 else None, deadline)
        check(thermal == {("0", "node-0", "1"): 1.0, ("1", "node-1", "0"): 0.0}, f"sw thermal slowdown by (rank, host, gpu): {thermal}")
        xids = by_rank("fluxtrain_gpu_xid_events_total")
        last = by_rank("fluxtrain_gpu_last_xid")
        check(xids == {("0", "node-0", "1"): 1.0, ("1", "node-1", "0"): 0.0} and last[("0", "node-0", "1")] == 13.0,
              f"XID events {xids}, last XID {last}")
        rows = by_rank('fluxtrain_gpu_remapped_rows{cause="correctable"}')
        pages = by_rank('fluxtrain_gpu_retired_pages{cause="single_bit_ecc"}')
        check(rows == {("0", "node-0", "1"): 2.0} and pages == {("1", "node-1", "0"): 3.0},
              f"remapped rows where the GPU remaps {rows}, retired pages where it retires {pages}")
        fault = by_rank("fluxtrain_gpu_fault")
        check(fault == {("0", "node-0", "1"): 0.0, ("1", "node-1", "0"): 0.0}, f"no GPU fault yet: {fault}")

        # The alert rules load and evaluate on the real server; the hot GPU is pending (for: 1m).
        groups = get(base, "/api/v1/rules")["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        with open(os.path.join(a.deploy, "prometheus", "alerts.yml")) as f:
            declared = sum(1 for line in f if line.strip().startswith("- alert:"))
        check(len(rules) == declared and all(r.get("health") == "ok" for r in rules),
              f"{len(rules)} of {declared} alert rules loaded, health {sorted(set(r.get('health') for r in rules))}")
        hot = wait_for("FluxtrainGpuTooHot pending", lambda: [
            x for x in get(base, "/api/v1/alerts")["data"]["alerts"] if x["labels"]["alertname"] == "FluxtrainGpuTooHot"],
            deadline)
        check(len(hot) == 1 and hot[0]["labels"].get("rank") == "0" and hot[0]["labels"].get("gpu") == "1"
              and hot[0]["state"] in ("pending", "firing"),
              f"FluxtrainGpuTooHot for rank 0's GPU 1 only: {[(x['labels'].get('rank'), x['state']) for x in hot]}")
        # A new XID fires at once (no `for`), naming the rank, its host and the XID; thermal
        # throttling is pending (for: 2m).
        def alerts(name):
            return [x for x in get(base, "/api/v1/alerts")["data"]["alerts"] if x["labels"]["alertname"] == name
                    and x["labels"].get("run") == "integ"]
        xid = wait_for("FluxtrainGpuXid firing", lambda: [x for x in alerts("FluxtrainGpuXid") if x["state"] == "firing"],
                       deadline)
        check(len(xid) == 1 and xid[0]["labels"].get("rank") == "0" and xid[0]["labels"].get("host") == "node-0"
              and "reported XID 13" in xid[0]["annotations"]["summary"],
              f"FluxtrainGpuXid for rank 0 on node-0: {[(x['labels'], x['annotations']['summary']) for x in xid]}")
        throttled = wait_for("FluxtrainGpuThermalThrottling pending", lambda: alerts("FluxtrainGpuThermalThrottling"), deadline)
        check([(x["labels"]["rank"], x["labels"]["reason"]) for x in throttled] == [("0", "sw_thermal_slowdown")],
              f"FluxtrainGpuThermalThrottling for rank 0's thermal slowdown only: {[x['labels'] for x in throttled]}")

        # Every Grafana dashboard query runs on the server without error. The checkpoint panels have
        # data once the simulated ranks have checkpointed (step 100: 5 s on an idle machine, longer on
        # a slow one): waited for, not assumed.
        wait_for("a checkpoint of both simulated ranks", lambda: (lambda r: r if len(r) == 2 else None)(
            query(base, 'fluxtrain_checkpoint_last_success_timestamp_seconds{run="integ"}')), deadline)
        # The badput and goodput panels read the real trainer's series (the simulated ranks have none):
        # waited for too, for a loaded machine may still be starting it.
        if a.fluxtrain:
            wait_for("the trainer's badput", lambda: query(base, 'fluxtrain_productive_seconds{run="train_run"}'), deadline)
        dash = json.load(open(os.path.join(a.deploy, "grafana", "fluxtrain-dashboard.json")))
        n = 0
        empty = []
        for p in dash["panels"]:
            for tgt in p.get("targets", []):
                e = (tgt["expr"].replace("$__rate_interval", "10s").replace("$__range", "1m")
                     .replace("$run", ".*").replace("$rank", ".*"))
                if not query(base, e):
                    empty.append(p["title"])
                n += 1
        check(n > 30, f"{n} dashboard queries ran")
        # Panels of series the simulated ranks never produce may be empty: no guard events or
        # restarts, no fp16 loss scale, no straggler, no per-source validation (one data source),
        # no accelerator memory (no accelerator backend is built in).
        may_be_empty = {"Guards, rollbacks and recovery", "Loss scale (fp16)", "Stragglers", "Sniff tests",
                        "Validation bits per character by source", "Validation loss by source",
                        "Accelerator memory by device and category"}
        print(f"     dashboard panels with an empty query: {sorted(set(empty))}")
        check(not set(empty) - may_be_empty,
              f"every panel but those of series the simulation lacks has data (empty: {sorted(set(empty) - may_be_empty)})")

        if a.fluxtrain:
            check_train(base, os.path.join(tmp, "train_run"), train_port, a, tmp, deadline, check)

        # A rank dies: its target goes down.
        procs[1].send_signal(signal.SIGKILL)
        procs[1].wait()
        down = wait_for("the killed rank's target down", lambda: [
            s for s in query(base, 'up{job="fluxtrain"} == 0')], deadline)
        check(down[0]["metric"]["instance"] == f"127.0.0.1:{port + 1}", "killed rank seen as down")

        # A fatal XID (79: the GPU has fallen off the bus) on rank 0's GPU: the rank stops, exit 6,
        # naming the GPU, the XID and why.
        with open(nvml_state, "w") as f:
            f.write(NVML_STATE.replace("xid.1 13", "xid.1 13,79"))
        try:
            rc = procs[0].wait(timeout=60)
        except subprocess.TimeoutExpired:
            rc = None
        log0 = open(os.path.join(tmp, "rank0.log")).read()
        check(rc == 6 and "GPU 1 (GPU-fake-0001) reported XID 79: GPU has fallen off the bus" in log0,
              f"rank 0 stops on the fatal XID: exit {rc}, log {log0.strip()[-300:]!r}")
    finally:
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)  # the trainer's group: mpirun and its ranks
                except (PermissionError, ProcessLookupError):
                    pass
                if p.poll() is None:
                    p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        # Nothing of the trainer's process group may outlive the test.
        for p in procs:
            for _ in range(50):
                try:
                    os.killpg(p.pid, 0)
                except (ProcessLookupError, PermissionError):
                    break
                time.sleep(0.2)
            else:
                os.killpg(p.pid, signal.SIGKILL)
        if failures:
            for name in ("rank0.log", "rank1.log", "train.log", "prometheus.log"):
                path = os.path.join(tmp, name)
                if os.path.exists(path):
                    print(f"--- {name}\n" + open(path).read()[-3000:])
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
