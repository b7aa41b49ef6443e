#!/bin/bash
# Model data is moved by the memory layer (mem_copy, mem_fill, Tensor::copy_from) and computed by
# ops, never by raw copies and fills: on a GPU those pointers are device memory, and a host
# memcpy of them is a crash (docs/kernels.md, "Memory"). This test fails when code in the
# model-data folders calls memcpy, memmove, memset, std::fill, std::copy, fill_n or copy_n,
# except on the host-only data allowed below.
#
#   raw_memory_test.sh <source dir>          (CTest: lint_raw_memory, label unit)
set -u
src="${1:?usage: raw_memory_test.sh <source dir>}/src"
cd "$src" || exit 2

# Allowed: "path<TAB>text on the line" (a folder path allows the folder), each with its reason.
allow=(
  # The host communicators (MPI, one rank) move host buffers: MPI is for host memory; a device's
  # collectives are its backend's communicator (NCCL), which never comes through here.
  $'parallel/comm/\t'
  # A rank's name packed into a fixed-size host char buffer for an MPI gather (metrics).
  $'train/rank_metrics.cpp\tstd::copy_n(mine.data()'
)

pattern='\b(memcpy|memmove|memset|std::fill|std::copy|fill_n|copy_n)\b'
bad=0
while IFS= read -r hit; do
  file="${hit%%:*}"
  code="${hit#*:*:}"
  code="${code%%//*}"  # a comment may name them
  [[ "$code" =~ $pattern ]] || continue
  ok=0
  for a in "${allow[@]}"; do
    path="${a%%$'\t'*}" text="${a#*$'\t'}"
    if [[ "$file" == "$path"* && "$code" == *"$text"* ]]; then ok=1; break; fi
  done
  if (( ! ok )); then
    echo "src/$hit"
    bad=1
  fi
done < <(grep -rnE "$pattern" model parallel optim generate train --include='*.cpp' --include='*.h' --include='*.inc')

if (( bad )); then
  echo "error: raw copies or fills of model data outside kernels/ and tensor/ (above)" >&2
  echo "hint: use mem_copy / mem_copy_2d / mem_zero (tensor/memory.h) or an op (kernels/ops.h); host-only data (configs, strings) goes on the allow-list in $0 with its reason" >&2
  exit 1
fi
echo "no raw copies or fills of model data in src/{model,parallel,optim,generate,train}"
