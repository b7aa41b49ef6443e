#!/usr/bin/env bash
# GEMM peak tables of bench/README.md: `fluxtrain bench-peak` (fp32 per library on a square and on
# the llama-125m shapes, bf16 native or emulated, fp16 emulated) on 1 and 2 threads, natively and
# with oneDNN limited to AVX2 (the AVX2 simulation: the x86-64-v3 build in <build-dir>-avx2 if present). Prints only;
# records nothing.
#   bench/gemm_peak.sh [build-dir] [--clock cpu]
set -euo pipefail
BUILD=${1:-build}
shift || true
AVX2_BIN=$BUILD/fluxtrain
[ -x "${BUILD}-avx2/fluxtrain" ] && AVX2_BIN=${BUILD}-avx2/fluxtrain
for t in 1 2; do
  echo "=== native, $t thread(s)"
  "$BUILD/fluxtrain" bench-peak --threads "$t" --no-record "$@"
  if grep -qw avx512f /proc/cpuinfo; then
    echo "=== AVX2 simulated ($AVX2_BIN, ONEDNN_MAX_CPU_ISA=AVX2), $t thread(s)"
    ONEDNN_MAX_CPU_ISA=AVX2 "$AVX2_BIN" bench-peak --threads "$t" --no-record "$@"
  fi
done
