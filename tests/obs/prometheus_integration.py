#!/usr/bin/env python3
"""A real Prometheus server (Debian's) on loopback scrapes live fluxtrain ranks; the test asks
Prometheus's HTTP query API for the series and checks their values and rank labels.

Two ranks are started (each serves metrics.port + its local rank), with the fake NVML library
standing in for the driver so GPU series exist, each rank watching its own GPU. Prometheus
also loads deploy/prometheus/alerts.yml, and every Grafana dashboard query is run against it.
Finally one rank is killed and Prometheus must see its target go down.

Until `fluxtrain train` serves metrics, the ranks are tests/obs/obs_demo_server (same
obs::Telemetry); pass --train-cmd to scrape real training ranks instead.
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

DEADLINE_S = 90


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


def query(base, expr):
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prometheus", required=True)
    ap.add_argument("--server", required=True, help="obs_demo_server binary")
    ap.add_argument("--fake-nvml", required=True)
    ap.add_argument("--deploy", required=True)
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
            f.write("devices 2\ntemp.0 65\ntemp.1 91\npower_w.1 640\n")
        env = dict(os.environ, FLUXTRAIN_NVML_LIB=a.fake_nvml, FAKE_NVML_STATE=nvml_state)
        for r in range(2):
            cmd = [a.server, "--rank", str(r), "--world", "2", "--local-rank", str(r), "--dp", str(r),
                   "--gpu", str(r), "--gpu-interval", "0.5", "--port", str(port), "--step-ms", "50",
                   "--seconds", str(DEADLINE_S + 30), "--run-dir", os.path.join(tmp, "integ")]
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                          stderr=open(os.path.join(tmp, f"rank{r}.log"), "w")))

        shutil.copy(os.path.join(a.deploy, "prometheus", "alerts.yml"), tmp)
        with open(os.path.join(tmp, "prometheus.yml"), "w") as f:
            f.write(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [alerts.yml]
scrape_configs:
  - job_name: fluxtrain
    static_configs:
      - targets: ['127.0.0.1:{port}', '127.0.0.1:{port + 1}']
""")
        prom = subprocess.Popen([a.prometheus, f"--config.file={tmp}/prometheus.yml",
                                 f"--storage.tsdb.path={tmp}/data", f"--web.listen-address=127.0.0.1:{prom_port}",
                                 "--log.level=warn"],
                                stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "prometheus.log"), "w"))
        procs.append(prom)
        base = f"http://127.0.0.1:{prom_port}"
        deadline = time.time() + DEADLINE_S

        steps = wait_for("fluxtrain_step from both ranks",
                         lambda: (lambda r: r if len(r) == 2 else None)(query(base, "fluxtrain_step > 2")), deadline)
        by_rank = {s["metric"]["rank"]: s for s in steps}
        check(set(by_rank) == {"0", "1"}, f"fluxtrain_step has ranks {sorted(by_rank)}")
        for r, s in sorted(by_rank.items()):
            m = s["metric"]
            check(m.get("job") == "fluxtrain" and m.get("run") == "integ" and m.get("dp") == r
                  and m.get("tp") == "0" and m.get("pp") == "0",
                  f"rank {r} labels {dict((k, v) for k, v in m.items() if k != '__name__')}")
            check(m.get("instance") == f"127.0.0.1:{port + int(r)}", f"rank {r} is served on port + local rank")

        up = query(base, 'up{job="fluxtrain"}')
        check(len(up) == 2 and all(float(s["value"][1]) == 1 for s in up), "both targets up")

        def values(expr):
            return {s["metric"].get("rank"): float(s["value"][1]) for s in query(base, expr)}

        loss = values("fluxtrain_loss")
        check(len(loss) == 2 and all(1.5 < v < 5.6 for v in loss.values()), f"fluxtrain_loss sane: {loss}")
        tps = values("fluxtrain_tokens_per_second")
        check(len(tps) == 2 and all(1e5 < v < 3e5 for v in tps.values()), f"tokens/s sane: {tps}")
        tokens = values("fluxtrain_tokens_total")
        check(all(v > 0 and v % 8192 == 0 for v in tokens.values()), f"tokens_total counts whole batches: {tokens}")
        rate = wait_for("a step rate", lambda: values("rate(fluxtrain_steps_total[5s])"), deadline)
        check(all(5 < v < 40 for v in rate.values()), f"steps/s from a 50 ms step period: {rate}")
        p50 = wait_for("step-time quantile", lambda: values(
            "histogram_quantile(0.5, sum by (rank, le) (rate(fluxtrain_step_duration_seconds_bucket[10s])))"), deadline)
        check(all(0.02 < v < 0.2 for v in p50.values()), f"median step time from the histogram: {p50}")
        comm = values('fluxtrain_comm_bytes_total{op="all_reduce"}')
        check(len(comm) == 2 and all(v > 0 for v in comm.values()), f"all_reduce bytes: {comm}")
        mem = values('fluxtrain_process_resident_memory_bytes')
        check(all(v > 1e6 for v in mem.values()), f"resident memory: {mem}")

        # GPU series: each rank reports the GPU it drives, labelled with its rank.
        temps = wait_for("GPU temperatures", lambda: (lambda r: r if len(r) == 2 else None)(
            query(base, "fluxtrain_gpu_temperature_celsius")), deadline)
        t = {(s["metric"]["rank"], s["metric"]["gpu"]): float(s["value"][1]) for s in temps}
        check(t == {("0", "0"): 65.0, ("1", "1"): 91.0}, f"GPU temperature by (rank, gpu): {t}")
        alert = values("fluxtrain_gpu_temperature_alert")
        check(alert == {"0": 0.0, "1": 1.0}, f"in-process temperature alarm: {alert}")
        power = values("fluxtrain_gpu_power_watts")
        check(power.get("1") == 640.0, f"GPU power in watts: {power}")

        # The alert rules load and evaluate on the real server; the hot GPU is pending (for: 1m).
        groups = get(base, "/api/v1/rules")["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        check(len(rules) == 7 and all(r.get("health") == "ok" for r in rules),
              f"{len(rules)} alert rules loaded, health {sorted(set(r.get('health') for r in rules))}")
        hot = wait_for("FluxtrainGpuTooHot pending", lambda: [
            x for x in get(base, "/api/v1/alerts")["data"]["alerts"] if x["labels"]["alertname"] == "FluxtrainGpuTooHot"],
            deadline)
        check(hot[0]["labels"].get("rank") == "1" and hot[0]["state"] in ("pending", "firing"),
              f"FluxtrainGpuTooHot for rank 1: {hot[0]['state']}")

        # Every Grafana dashboard query runs on the server without error.
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
        # Series the simulated ranks never produce (no restarts, no fp16, no failed checkpoints) may be empty.
        print(f"     dashboard panels with an empty query: {sorted(set(empty))}")
        check(len(set(empty)) <= 4, "at most a few dashboard panels without data")

        # A rank dies: its target goes down.
        procs[1].send_signal(signal.SIGKILL)
        procs[1].wait()
        down = wait_for("the killed rank's target down", lambda: [
            s for s in query(base, 'up{job="fluxtrain"} == 0')], deadline)
        check(down[0]["metric"]["instance"] == f"127.0.0.1:{port + 1}", "killed rank seen as down")
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        if failures:
            for name in ("rank0.log", "rank1.log", "prometheus.log"):
                path = os.path.join(tmp, name)
                if os.path.exists(path):
                    print(f"--- {name}\n" + open(path).read()[-3000:])
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
