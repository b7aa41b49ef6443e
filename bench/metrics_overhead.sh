#!/usr/bin/env bash
# Monitoring overhead: tokens/s of `fluxtrain train` with everything on (Prometheus endpoint
# scraped every second, TensorBoard events, GPU sampling) against everything off, in one run.
# Runs alternate (off, on, off, on, ...) so machine noise hits both; each run's tokens/s is the
# median over its steps after warm-up (from metrics.jsonl). Prints the ratio on/off last.
#
#   bench/metrics_overhead.sh [CONFIG] [PAIRS] [STEPS]      # defaults: configs/tiny.toml 3 60
# Goal: on/off >= 0.99.
set -euo pipefail
cd "$(dirname "$0")/.."
FT=${FLUXTRAIN:-build/fluxtrain}
CONFIG=${1:-configs/tiny.toml}
PAIRS=${2:-3}
STEPS=${3:-60}
WORK=$(mktemp -d)
SCRAPER=""
cleanup() { [ -n "$SCRAPER" ] && kill "$SCRAPER" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

median_tps() {  # median tokens_per_s over the steps after the first 10%
  python3 - "$1" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
skip = max(1, len(rows) // 10)
print(statistics.median(r["tokens_per_s"] for r in rows[skip:]))
PY
}

run() {  # run MODE INDEX → prints median tokens/s
  local mode=$1 i=$2 dir="$WORK/$1$2" sets=(--set "train.steps=$STEPS" --set train.eval_interval=0)
  if [ "$mode" = on ]; then
    local port; port=$(free_port)
    sets+=(--set metrics.enabled=true --set metrics.bind_address=127.0.0.1 --set "metrics.port=$port"
           --set metrics.tensorboard=true --set metrics.gpu_interval_s=1)
    # A scraper as eager as a Prometheus at 1 s (ten times the deploy/ default): one long-lived
    # keep-alive client, like Prometheus, so the bench does not time process start-ups. Bounded.
    python3 - "$port" <<'PY' &
import http.client, sys, time
c = None
for _ in range(3600):
    try:
        c = c or http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=5)
        c.request("GET", "/metrics"); c.getresponse().read()
    except OSError:
        c = None
    time.sleep(1)
PY
    SCRAPER=$!
  else
    sets+=(--set metrics.enabled=false --set metrics.tensorboard=false --set metrics.gpu_interval_s=0)
  fi
  "$FT" train --config "$CONFIG" --run-dir "$dir" "${sets[@]}" 2>"$WORK/$mode$i.log" >/dev/null
  if [ -n "$SCRAPER" ]; then kill "$SCRAPER" 2>/dev/null || true; wait "$SCRAPER" 2>/dev/null || true; SCRAPER=""; fi
  median_tps "$dir/metrics.jsonl"
}

off=(); on=()
for i in $(seq 1 "$PAIRS"); do
  off+=("$(run off "$i")")
  on+=("$(run on "$i")")
  echo "pair $i: off ${off[-1]} tok/s, on ${on[-1]} tok/s"
done
python3 - "${off[*]}" "${on[*]}" <<'PY'
import statistics, sys
off = [float(x) for x in sys.argv[1].split()]
on = [float(x) for x in sys.argv[2].split()]
mo, mn = statistics.median(off), statistics.median(on)
print(f"metrics off: median {mo:.1f} tok/s over {len(off)} runs")
print(f"metrics on:  median {mn:.1f} tok/s over {len(on)} runs (endpoint scraped every 1 s, TensorBoard, GPU sampling)")
print(f"ratio on/off: {mn / mo:.4f}")
PY
