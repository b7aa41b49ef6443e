#!/usr/bin/env bash
# GEMM peak table of bench/README.md: oneDNN fp32 (dnnl_sgemm, matmul primitive), oneDNN bf16 (AMX),
# OpenBLAS with its default core detection (forced to Prescott, what Debian's OpenBLAS 0.3.21
# picks on this CPU) and with SkylakeX; 1 and 2 threads. Prints only; records nothing.
#   bench/gemm_peak.sh [build-dir] [--clock cpu]
set -euo pipefail
BUILD=${1:-build}
shift || true
for t in 1 2; do
  echo "=== $t thread(s), OpenBLAS SkylakeX"
  OPENBLAS_CORETYPE=SkylakeX "$BUILD/fluxtrain" bench-peak --threads "$t" --no-record "$@"
  echo "=== $t thread(s), OpenBLAS Prescott"
  OPENBLAS_CORETYPE=Prescott "$BUILD/fluxtrain" bench-peak --threads "$t" --no-record "$@" | grep -E "OpenBLAS"
done
