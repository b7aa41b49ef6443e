#!/usr/bin/env bash
# Fetches the cuDNN frontend C++ headers (used by src/backends/cuda/attention_sdpa.cpp) from the
# PyPI wheel nvidia-cudnn-frontend at a pinned version and checksum, into
# .deps/cudnn-frontend-<version>/ (ignored by git). Called by CMake at configure time when the
# CUDA toolkit and cuDNN are found; idempotent (does nothing when the headers are there).
#
#   scripts/fetch-cudnn-frontend.sh            # prints the include directory
#
# Licence: the frontend is Apache-2.0 AND MIT (its NOTICE and LICENSE files are kept beside the
# headers); see docs/kernels.md, "CUDA backend".
set -euo pipefail

VERSION=1.32.0
# The wheel's headers are the same for every Python version; this one is pinned by its digest.
WHEEL=nvidia_cudnn_frontend-${VERSION}-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
SHA256=c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="$ROOT/.deps/cudnn-frontend-$VERSION"
if [ -f "$DEST/include/cudnn_frontend.h" ]; then
  echo "$DEST/include"
  exit 0
fi

PYTHON=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" > /dev/null 2>&1 && "$p" -m pip --version > /dev/null 2>&1; then PYTHON=$p; break; fi
done
if [ -z "$PYTHON" ]; then
  echo "error: fetch-cudnn-frontend: pip is not available (python3 -m pip)" >&2
  echo "hint: install python3-pip (scripts/install-deps.sh does), or build with -DFT_CUDA=OFF" >&2
  exit 1
fi

mkdir -p "$ROOT/.deps"
TMP="$(mktemp -d "$ROOT/.deps/.tmp.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
if ! "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 --implementation cp \
    --abi cp311 --platform manylinux_2_28_x86_64 -d "$TMP" "nvidia-cudnn-frontend==$VERSION" >&2; then
  echo "error: fetch-cudnn-frontend: could not download nvidia-cudnn-frontend==$VERSION from PyPI" >&2
  echo "hint: check the network (or pip's index settings), or build with -DFT_CUDA=OFF" >&2
  exit 1
fi
if [ ! -f "$TMP/$WHEEL" ]; then
  echo "error: fetch-cudnn-frontend: pip fetched $(ls "$TMP"), expected $WHEEL" >&2
  exit 1
fi
GOT=$(sha256sum "$TMP/$WHEEL" | cut -d' ' -f1)
if [ "$GOT" != "$SHA256" ]; then
  echo "error: fetch-cudnn-frontend: $WHEEL has sha256 $GOT, expected $SHA256" >&2
  echo "hint: the download is corrupt or the package was replaced upstream; do not use it" >&2
  exit 1
fi

mkdir -p "$TMP/x"
"$PYTHON" - "$TMP/$WHEEL" "$TMP/x" << 'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in z.namelist():
        if name.startswith("include/") or "/licenses/" in name:
            z.extract(name, sys.argv[2])
PY
mkdir -p "$TMP/out"
mv "$TMP/x/include" "$TMP/out/include"
mv "$TMP/x"/nvidia_cudnn_frontend-*.dist-info/licenses "$TMP/out/licenses"
rm -rf "$DEST"
mv "$TMP/out" "$DEST"  # one rename: a concurrent or interrupted run never leaves half a tree
echo "$DEST/include"
