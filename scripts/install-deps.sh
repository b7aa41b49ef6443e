#!/usr/bin/env bash
# Installs every Debian package fluxtrain needs to build, test and run the demo.
# Idempotent: packages already present are skipped; nothing is done when all are present.
set -euo pipefail

PACKAGES=(
  # toolchain
  g++ cmake ninja-build make pkg-config git
  # libraries (the field's own). ocl-icd-opencl-dev: Debian's libdnnl-dev only recommends it, but
  # its dnnl-config.cmake fails without it (find_package(OpenCL)).
  libopenmpi-dev openmpi-bin libdnnl-dev ocl-icd-opencl-dev libopenblas-dev
  # fp32 GEMM candidates beside oneDNN (bench-peak picks the fastest per CPU), loaded at run time:
  # the OpenMP builds, whose threads are the OpenMP pool our kernels use
  libopenblas0-openmp libblis4-openmp
  libsentencepiece-dev sentencepiece libssl-dev libcurl4-openssl-dev
  libcpp-httplib-dev libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # data pipeline: checksums (XXH3), Unicode NFC, gzip'd man pages; libFuzzer for the readers
  libxxhash-dev xxhash libicu-dev zlib1g-dev clang libclang-rt-14-dev
  # oracle tests: PyTorch and NumPy from Debian
  python3 python3-torch python3-numpy python3-venv python3-pip python3-cryptography
  # monitoring tests: promtool (alert-rule tests) and a real Prometheus server to scrape us
  prometheus
  # fault tolerance: a real Slurm (controller, node daemon, clients) and munge for the Slurm test;
  # YAML for the static check of the Kubernetes manifests
  slurmctld slurmd slurm-client munge python3-yaml
  # cluster tests: hosts as network namespaces (ip, tc), each with its own sshd; nsenter/unshare
  openssh-server openssh-client iproute2 util-linux
  # the style check of CI (make format-check)
  clang-format
  # stack dumps of a hung job's ranks (fluxtrain launch)
  gdb
  # built-in corpus: English and Russian manual pages, rendered by groff
  manpages manpages-dev manpages-ru man-db groff-base
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Where the CUDA toolkit is installed (nvcc on PATH or in /usr/local/cuda, where CMake finds it),
# the build compiles the CUDA backend, and its cuDNN attention needs the cuDNN frontend headers:
# fetched here (a pinned PyPI wheel, checksummed, into .deps/; nothing when already there) so
# that configuring needs no network. CMake calls the same script when they are missing.
if command -v nvcc > /dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  "$(dirname "$0")/fetch-cudnn-frontend.sh" > /dev/null
fi
