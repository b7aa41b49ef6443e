#!/usr/bin/env bash
# fluxtrain vs PyTorch training throughput on the same config, threads, batch and steps, in one run.
#
#   bench/train_vs_torch.sh CONFIG THREADS [PRECISION] [STEPS] [--avx2] [--pairs N] [--set k=v ...]
#
# PyTorch (Debian's python3-torch 1.13: OpenBLAS for its fp32 matmuls, oneDNN for bf16) gets its
# best settings for the CPU found here:
#   - OPENBLAS_CORETYPE: SkylakeX only where the CPU has AVX-512 (Debian's OpenBLAS 0.3.21 picks a
#     Prescott kernel on CPUs it does not know; SkylakeX on a CPU without AVX-512 is SIGILL),
#     Zen (AMD) or Haswell (Intel) on an AVX2 CPU;
#   - one thread pool: the OpenMP build of OpenBLAS (libopenblas0-openmp) ahead of the default
#     pthread build on its library path, so BLAS threads are PyTorch's own OpenMP threads;
#     OMP_WAIT_POLICY=PASSIVE in case only the pthread build is installed.
# --avx2 simulates an AVX2-only CPU on an AVX-512 machine, for both sides: fluxtrain built with
# -DFT_ARCH=x86-64-v3 ($FLUXTRAIN_AVX2, default build-avx2/fluxtrain) with ONEDNN_MAX_CPU_ISA=AVX2
# (oneDNN, OpenBLAS and BLIS then run AVX2 kernels, and the fp32 library is the one bench-peak
# chose for AVX2); PyTorch with ATEN_CPU_CAPABILITY=avx2, ONEDNN_MAX_CPU_ISA=AVX2 and an AVX2
# OpenBLAS core. It is a simulation: the cores, caches and clocks stay this machine's.
# --pairs N runs fluxtrain and PyTorch alternately N times and reports each pair, the medians and
# the spread. A PyTorch failure is reported as such (exit 1), never as a crash of the script.
#
# Both report the median tokens/s of the steps after the first, and the median tokens per CPU-second
# (process CPU time of the step, all threads): on a machine shared with other work the wall-clock
# rate swings with their load, the CPU-time rate much less.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CONFIG=$1; THREADS=$2; PRECISION=${3:-fp32}; STEPS=${4:-6}; shift $(( $# < 4 ? $# : 4 ))
AVX2=0; PAIRS=1; EXTRA=()
while [ $# -gt 0 ]; do
  case $1 in
    --avx2) AVX2=1 ;;
    --pairs) PAIRS=$2; shift ;;
    *) EXTRA+=("$1") ;;
  esac
  shift
done
FT=${FLUXTRAIN:-$ROOT/build/fluxtrain}
if [ $AVX2 = 1 ]; then FT=${FLUXTRAIN_AVX2:-$ROOT/build-avx2/fluxtrain}; fi
if [ ! -x "$FT" ]; then
  echo "error: $FT is not built"
  [ $AVX2 = 1 ] && echo "hint: cmake -S . -B build-avx2 -G Ninja -DFT_ARCH=x86-64-v3 && cmake --build build-avx2"
  exit 1
fi
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
SETS=(--set train.threads=$THREADS --set train.precision=\"$PRECISION\" --set train.steps=$STEPS
      --set train.eval_interval=0 --set data.source=\"synthetic\" "${EXTRA[@]}")
"$FT" config --config "$CONFIG" "${SETS[@]}" > "$WORK/config.json" || exit 1

# ---- the CPU and each side's settings -----------------------------------------------------------
flags=$(grep -m1 '^flags' /proc/cpuinfo)
has() { [[ " $flags " == *" $1 "* ]]; }
vendor=$(grep -m1 '^vendor_id' /proc/cpuinfo | awk '{print $3}')
model=$(grep -m1 '^model name' /proc/cpuinfo | sed 's/.*: //')
avx2_core=$([ "$vendor" = AuthenticAMD ] && echo Zen || echo Haswell)
export OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=PASSIVE
TORCH_ENV=()
if [ $AVX2 = 1 ]; then
  has avx512f || echo "note: this CPU has no AVX-512; --avx2 changes nothing but the binary"
  mode="AVX2 simulated on an AVX-512 CPU"
  export ONEDNN_MAX_CPU_ISA=AVX2
  TORCH_ENV+=(ATEN_CPU_CAPABILITY=avx2 OPENBLAS_CORETYPE=$avx2_core)
elif has avx512f; then
  mode="native (AVX-512)"
  TORCH_ENV+=(OPENBLAS_CORETYPE=SkylakeX)
elif has avx2; then
  mode="native (AVX2)"
  TORCH_ENV+=(OPENBLAS_CORETYPE=$avx2_core)
else
  mode="native (no AVX2)"
fi
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
ob_omp=/usr/lib/$multiarch/openblas-openmp
if [ -e "$ob_omp/libblas.so.3" ]; then
  TORCH_ENV+=(LD_LIBRARY_PATH=$ob_omp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH})
  torch_pool="OpenBLAS OpenMP build (one pool)"
else
  torch_pool="OpenBLAS pthread build (install libopenblas0-openmp for one pool)"
fi
echo "CPU: $model; $(has avx512f && echo avx512f) $(has avx512_bf16 && echo avx512_bf16) $(has amx_bf16 && echo amx_bf16) $(has avx2 && echo avx2); mode: $mode"
echo "fluxtrain: $FT${ONEDNN_MAX_CPU_ISA:+ ONEDNN_MAX_CPU_ISA=$ONEDNN_MAX_CPU_ISA}"
echo "pytorch:   ${TORCH_ENV[*]} OMP_WAIT_POLICY=PASSIVE; $torch_pool"

# ---- one run of each ----------------------------------------------------------------------------
run_ours() {  # prints "tok/s mfu tok_per_cpu_s"
  rm -rf "$WORK/run"
  "$FT" train --config "$CONFIG" "${SETS[@]}" --run-dir "$WORK/run" 2> "$WORK/ft.log" || {
    echo "fluxtrain failed:" >&2; tail -20 "$WORK/ft.log" >&2; return 1; }
  /usr/bin/python3 -c "
import json, statistics
rows = [json.loads(l) for l in open('$WORK/run/metrics.jsonl')]
steady = rows[1:] if len(rows) > 1 else rows
tokens = rows[0]['tokens']
print(f\"{statistics.median(r['tokens_per_s'] for r in steady):.2f} {statistics.median(r['mfu'] for r in steady):.3f} \"
      f\"{tokens / statistics.median(r['cpu_s'] for r in steady):.2f}\")"
}
run_torch() {  # prints "tok/s tok_per_cpu_s"
  local out rc
  out=$(env "${TORCH_ENV[@]}" /usr/bin/python3 "$ROOT/bench/torch_train.py" "$WORK/config.json" $THREADS $STEPS \
        2> "$WORK/torch.log"); rc=$?
  if [ $rc -ne 0 ] || [ -z "$out" ]; then
    local why="exit $rc"; [ $rc -gt 128 ] && why="killed by signal $((rc - 128))"
    echo "pytorch failed ($why):" >&2; tail -5 "$WORK/torch.log" >&2; return 1
  fi
  echo "$out"
}

ours_tps=(); ours_cpu=(); torch_tps=(); torch_cpu=(); mfu=()
for ((p = 1; p <= PAIRS; ++p)); do
  o=$(run_ours) || exit 1
  t=$(run_torch) || { echo "ratio fluxtrain/pytorch: n/a (the PyTorch peer failed)"; exit 1; }
  read -r a m c <<< "$o"; read -r b d <<< "$t"
  ours_tps+=("$a"); mfu+=("$m"); ours_cpu+=("$c"); torch_tps+=("$b"); torch_cpu+=("$d")
  [ "$PAIRS" -gt 1 ] && echo "pair $p: fluxtrain $a tok/s ($c per CPU-s), pytorch $b tok/s ($d per CPU-s)"
done
/usr/bin/python3 - "$CONFIG" "$THREADS" "$PRECISION" "$STEPS" "${ours_tps[*]}" "${ours_cpu[*]}" "${mfu[*]}" \
  "${torch_tps[*]}" "${torch_cpu[*]}" <<'EOF'
import os, statistics, sys
cfg, threads, prec, steps = sys.argv[1:5]
ot, oc, mf, tt, tc = ([float(x) for x in a.split()] for a in sys.argv[5:10])
med = statistics.median
def spread(v, d=1):
    return f" (range {min(v):.{d}f}-{max(v):.{d}f})" if len(v) > 1 else ""
print(f"config {os.path.basename(cfg)} threads {threads} precision {prec} steps {steps}, {len(ot)} pair(s)")
print(f"fluxtrain: {med(ot):.2f} tok/s{spread(ot)} (mfu {med(mf):.3f}), {med(oc):.2f} tok per CPU-s{spread(oc)}")
print(f"pytorch:   {med(tt):.2f} tok/s{spread(tt)}, {med(tc):.2f} tok per CPU-s{spread(tc)}")
r_cpu = [a / b for a, b in zip(oc, tc)]
r = [a / b for a, b in zip(ot, tt)]
print(f"ratio per CPU-second: {med(r_cpu):.2f}{spread(r_cpu, 2)}")
print(f"ratio fluxtrain/pytorch: {med(r):.2f}{spread(r, 2)}")
EOF
