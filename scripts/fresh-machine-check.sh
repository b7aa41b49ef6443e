#!/usr/bin/env bash
# Proves that a bare Debian 12 machine needs nothing but the project's own scripts: makes a bare
# Debian 12 root with debootstrap, puts the committed tree (git archive of HEAD) into it and, in a
# chroot with /proc, /sys, /dev/pts and /dev/shm mounted, runs scripts/install-deps.sh, `make build`,
# a 5-step configs/tiny.toml training, scripts/make-venv.sh (the test venv, from PyPI) and the tests
# that need a package from outside the compiler (PyTorch, mpirun, promtool, Prometheus, Slurm,
# clang/libFuzzer, the venv's moto, TensorBoard and transformers); `--full-test` runs all of
# `make test` instead. Then, with Debian's podman, it imports the bare root as a base image, builds
# deploy/docker/Dockerfile on it (no image registry is needed) and trains 5 steps inside the image.
#
#   nice -n 10 scripts/fresh-machine-check.sh            # everything, anew (~80 min on 2 busy cores)
#   scripts/fresh-machine-check.sh --keep --no-image     # reuse the root and skip the image
#
# One line per stage with its time, a summary table last; exit status 1 naming the failed stages.
# Each stage's full output is in ROOT/logs/STAGE.log. Needs root (debootstrap, chroot, mount).
# Too slow for every CI run: run it before a change to the install script or the Dockerfile lands.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/fresh-machine-check.sh [--root DIR] [--keep] [--no-image] [--full-test]
                                      [--mirror URL] [--jobs N]
  --root DIR    where the Debian root, logs and image storage live (default /var/tmp/fluxtrain-fresh)
  --keep        reuse the root a previous run left (default: made anew; a reused root hides
                missing packages, so only use it to iterate on a later stage)
  --no-image    skip the container stages (podman)
  --full-test   run all of `make test` in the root instead of the tests that need outside packages
  --mirror URL  Debian mirror (default: the host's, from /etc/apt/sources.list*)
  --jobs N      build parallelism (default: nproc)
EOF
}

REPO="$(cd "$(dirname "$0")/.." && pwd)"
ROOT=/var/tmp/fluxtrain-fresh
KEEP=0 IMAGES=1 FULL_TEST=0 MIRROR="" JOBS="$(nproc)"
while [ $# -gt 0 ]; do
  case "$1" in
    --root) ROOT="${2:?--root needs a directory}"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --no-image) IMAGES=0; shift ;;
    --full-test) FULL_TEST=1; shift ;;
    --mirror) MIRROR="${2:?--mirror needs a URL}"; shift 2 ;;
    --jobs) JOBS="${2:?--jobs needs a number}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "error: unknown argument '$1'" >&2; echo "hint: scripts/fresh-machine-check.sh --help" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "error: the check must run as root (debootstrap, chroot, mount)" >&2
                          echo "hint: sudo scripts/fresh-machine-check.sh" >&2; exit 2; }
case "$ROOT" in /|"") echo "error: --root '$ROOT' is not a directory for the check" >&2; exit 2 ;; esac
ROOT="$(realpath -m "$ROOT")"
case "$ROOT/" in "$REPO"/*) echo "error: --root $ROOT is inside the repository" >&2
                            echo "hint: use a directory outside it, e.g. /var/tmp/fluxtrain-fresh" >&2; exit 2 ;; esac

COMMIT="$(git -C "$REPO" rev-parse HEAD)"   # fixed at the start: later commits do not leak in
SUITE=bookworm
ROOTFS="$ROOT/rootfs"          # the bare Debian 12 machine
BASE_TAR="$ROOT/base.tar"      # that root as debootstrap left it: the container base image
CONTEXT="$ROOT/context"        # the image's build context: git archive of HEAD
LOGS="$ROOT/logs"
SRC=/src/fluxtrain             # where the tree lies inside the root
IMAGE_BASE=localhost/fluxtrain-base:bookworm
IMAGE_CPU=localhost/fluxtrain:cpu   # deploy/k8s names this image (tests/fault/k8s_manifests_test.py)

# Podman as it runs on the project's machines: rootful, its own storage under ROOT, runc (crun
# refuses their hybrid cgroup v1/v2 mounts), cgroupfs (no systemd), host network (no CNI plugins),
# and ulimits within the current ones (podman's defaults raise them, which the sandbox forbids).
PODMAN=(podman --root "$ROOT/containers" --runroot "$ROOT/containers-run" --storage-driver overlay
        --runtime runc --cgroup-manager cgroupfs --events-backend file)
nproc_limit=$(ulimit -u)
if [ "$nproc_limit" = unlimited ] || [ "$nproc_limit" -gt 32768 ]; then nproc_limit=32768; fi
ULIMITS=(--ulimit "nofile=$(ulimit -n):$(ulimit -n)" --ulimit "nproc=$nproc_limit:$nproc_limit")

# ---- the Debian mirror the host uses (only Debian's mirror need be reachable) -------------------
host_uri() {  # first URI in the host's apt sources whose path ends in $1 (debian, debian-security)
  { grep -hsE '^[[:space:]]*URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}'
    grep -hsE '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
      sed -E 's/\[[^]]*\]//' | awk '{print $2}'; } | grep -E "/$1/?\$" | head -1 || true
}
[ -n "$MIRROR" ] || MIRROR="$(host_uri debian)"
[ -n "$MIRROR" ] || MIRROR=http://deb.debian.org/debian
SECURITY="$(host_uri debian-security)"

# ---- stages --------------------------------------------------------------------------------------
NAMES=() RESULTS=() TIMES=()
CURRENT_PID=""
result_of() { local i; for i in "${!NAMES[@]}"; do [ "${NAMES[$i]}" = "$1" ] && { echo "${RESULTS[$i]}"; return; }; done; echo none; }

# run_stage NAME LIMIT_S "NEEDED STAGES" FUNCTION: runs FUNCTION under `timeout`, its output in
# LOGS/NAME.log; prints one line with the result and the time, then the function's evidence.
run_stage() {
  local name=$1 limit=$2 needs=$3 fn=$4 need t0 rc=0 secs status log="$LOGS/$1.log"
  for need in $needs; do
    if [ "$(result_of "$need")" != ok ]; then
      NAMES+=("$name"); RESULTS+=("skipped (needs $need)"); TIMES+=("-")
      printf '%-12s skipped: needs %s\n' "$name" "$need"; return 0
    fi
  done
  t0=$EPOCHREALTIME
  STAGE_LOG="$log" timeout --kill-after=20 "$limit" bash -c "set -euo pipefail; $(declare -f "$fn" in_root podman_); $(declare -p "${EXPORTS[@]}"); $fn" \
    > "$log" 2>&1 < /dev/null &
  CURRENT_PID=$!
  wait "$CURRENT_PID" || rc=$?
  CURRENT_PID=""
  secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  if [ $rc -eq 0 ]; then status=ok
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status="timed out after ${limit} s"
  else status="FAILED (exit $rc)"; fi
  NAMES+=("$name"); RESULTS+=("$status"); TIMES+=("$secs")
  printf '%-12s %-26s %8s s   log: %s\n' "$name" "$status" "$secs" "$log"
  if [ "$status" = ok ]; then
    grep -E '^evidence: ' "$log" | sed -E 's/^evidence: /             | /' || true
  else
    tail -n 40 "$log" | sed 's/^/             ! /'
  fi
}

# in_root 'COMMANDS': runs bash COMMANDS in the root, in the source tree, as root, with a clean
# environment; /proc, /sys (read-only, with the host's cgroup hierarchies), /dev/pts and a fresh
# /dev/shm are mounted. A private mount namespace holds the mounts (gone when it ends, even on SIGKILL) and
# a private PID namespace holds the processes (every daemon a test starts dies with it).
in_root() {
  unshare --fork --pid --kill-child --mount --propagation private /bin/bash -c '
    set -e; r=$1
    mount -t proc proc "$r/proc"
    mount -t sysfs -o ro sysfs "$r/sys"
    mount --rbind /sys/fs/cgroup "$r/sys/fs/cgroup"   # slurmd needs it (fault_slurm)
    mkdir -p "$r/dev/pts" "$r/dev/shm"
    mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$r/dev/pts"
    mount -t tmpfs -o mode=1777,size=8g tmpfs "$r/dev/shm"
    exec chroot "$r" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/bash -c "$2"
  ' _ "$ROOTFS" "set -euo pipefail; cd $SRC; $1"
}
podman_() { "${PODMAN[@]}" "$@"; }
EXPORTS=(REPO COMMIT ROOT ROOTFS BASE_TAR CONTEXT SRC IMAGE_BASE IMAGE_CPU PODMAN ULIMITS MIRROR SECURITY SUITE JOBS KEEP
         FULL_TEST IMAGES)

stage_host_tools() {
  local want=(debootstrap) missing=() p
  [ "$IMAGES" -eq 1 ] && want+=(podman runc)
  for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "evidence: installing on the host: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  else
    echo "evidence: host tools present: ${want[*]}"
  fi
  echo "evidence: debootstrap $(dpkg-query -W -f='${Version}' debootstrap)$([ "$IMAGES" -eq 0 ] || echo ", $(podman --version), $(runc --version | head -1)")"
}

stage_debootstrap() {
  if [ "$KEEP" -eq 1 ] && [ -x "$ROOTFS/usr/bin/apt-get" ] && [ -f "$BASE_TAR" ]; then
    echo "evidence: --keep: reusing $ROOTFS (packages installed by an earlier run stay installed)"
    return 0
  fi
  echo "evidence: debootstrap --variant=minbase $SUITE $ROOTFS $MIRROR"
  debootstrap --variant=minbase "$SUITE" "$ROOTFS" "$MIRROR"
  # apt sources as a Debian 12 install writes them: the release, its updates and security.
  rm -f "$ROOTFS/etc/apt/sources.list"
  {
    printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\n' "$MIRROR" "$SUITE" "$SUITE"
    printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
    if [ -n "$SECURITY" ]; then
      printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\n' "$SECURITY" "$SUITE"
      printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
    fi
  } > "$ROOTFS/etc/apt/sources.list.d/debian.sources"
  # What the Debian installer writes and debootstrap does not: the name service's files. The root
  # shares the host's network and host name (the tests serve and connect on localhost).
  cp /etc/resolv.conf "$ROOTFS/etc/resolv.conf"
  hostname > "$ROOTFS/etc/hostname"
  printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' "$(hostname)" \
    > "$ROOTFS/etc/hosts"
  # As in Debian's container images: packages do not start their daemons here (a daemon would bind
  # ports on the host; the tests start the ones they need themselves).
  printf '#!/bin/sh\nexit 101\n' > "$ROOTFS/usr/sbin/policy-rc.d"
  chmod 755 "$ROOTFS/usr/sbin/policy-rc.d"
  rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/archives/*.deb
  tar -C "$ROOTFS" --one-file-system --numeric-owner -cf "$BASE_TAR.tmp" .
  mv "$BASE_TAR.tmp" "$BASE_TAR"
  echo "evidence: bare root: $(du -sh --one-file-system "$ROOTFS" | cut -f1), $(chroot "$ROOTFS" dpkg-query -W | wc -l) packages"
}

stage_source() {
  [ -z "$(git -C "$REPO" status --porcelain --untracked-files=no)" ] ||
    echo "evidence: note: the working tree has uncommitted changes; they are not in the check"
  rm -rf "$CONTEXT"
  mkdir -p "$CONTEXT"
  git -C "$REPO" archive --format=tar "$COMMIT" | tar -x -C "$CONTEXT"
  if [ "$KEEP" -eq 1 ] && [ -d "$ROOTFS$SRC" ]; then
    # --keep: the tree in the root becomes the commit's, but only changed files are rewritten, so
    # build/ stays valid and `make build` is incremental. Files the commit lacks are removed
    # (build outputs and the venv, ignored by git, stay).
    local f n=0
    while IFS= read -r -d '' f; do
      cmp -s "$CONTEXT/$f" "$ROOTFS$SRC/$f" || { mkdir -p "$(dirname "$ROOTFS$SRC/$f")"; cp -a "$CONTEXT/$f" "$ROOTFS$SRC/$f"; n=$((n + 1)); }
    done < <(cd "$CONTEXT" && find . \( -type f -o -type l \) -print0)
    while IFS= read -r -d '' f; do
      [ -e "$CONTEXT/$f" ] || [ -L "$CONTEXT/$f" ] || { rm -f "$ROOTFS$SRC/$f"; n=$((n + 1)); }
    done < <(cd "$ROOTFS$SRC" && find . \( -path ./build -o -path ./.venv -o -path ./runs -o -path ./data \) -prune -o \( -type f -o -type l \) ! -name .venv.lock -print0)
    echo "evidence: --keep: $n files of the tree in the root changed"
  else
    rm -rf "$ROOTFS$SRC"
    mkdir -p "$ROOTFS$SRC"
    git -C "$REPO" archive --format=tar "$COMMIT" | tar -x -C "$ROOTFS$SRC"
  fi
  echo "evidence: commit ${COMMIT:0:12} ($(git -C "$REPO" log -1 --format=%s "$COMMIT" | cut -c1-60)...) in $SRC and $CONTEXT"
}

stage_deps() {
  # Certificates the host's administrator added (a TLS-inspecting proxy's CA, as on the project's
  # machines): any machine on this network needs them to reach PyPI; they are machine set-up, not
  # a package. The ca-certificates package, once installed, adds them to the root's trust store.
  local cas=(/usr/local/share/ca-certificates/*.crt)
  if [ -e "${cas[0]}" ]; then
    mkdir -p "$ROOTFS/usr/local/share/ca-certificates"
    cp "${cas[@]}" "$ROOTFS/usr/local/share/ca-certificates/"
    echo "evidence: the host's local CA certificates copied in: ${cas[*]##*/}"
    [ ! -x "$ROOTFS/usr/sbin/update-ca-certificates" ] || in_root 'update-ca-certificates > /dev/null'
  fi
  in_root 'scripts/install-deps.sh; scripts/install-deps.sh > /tmp/second-run.txt
           [ ! -s /tmp/second-run.txt ] || { echo "install-deps: a second run still installs:"; cat /tmp/second-run.txt; exit 1; }
           echo "evidence: $(dpkg-query -W | wc -l) packages installed; a second run installs nothing"'
  { grep -m1 '^install-deps: installing' "$STAGE_LOG" || true; } |
    awk '{print "evidence: install-deps.sh asked for " NF-2 " packages"}'
}

stage_build() {
  in_root "make build JOBS=$JOBS
           echo \"evidence: \$(ls build/fluxtrain) built with \$(g++ --version | head -1)\""
}

stage_train() {
  in_root 'rm -rf /tmp/fresh-tiny
           build/fluxtrain train --config configs/tiny.toml --set train.steps=5 --run-dir /tmp/fresh-tiny
           n=$(wc -l < /tmp/fresh-tiny/metrics.jsonl)
           [ "$n" -eq 5 ] || { echo "expected 5 rows in metrics.jsonl, found $n"; exit 1; }'
  grep -E "step 5/5 |done: 5 steps" "$STAGE_LOG" | sed -E 's/^\[[0-9:]+\] /evidence: /'
}

# The demo's dataset: the built-in corpus is the manual pages (manpages, manpages-ru, groff).
stage_prepare() {
  in_root 'rm -rf /tmp/fresh-data
           build/fluxtrain prepare --out /tmp/fresh-data --shards 8 --vocab-size 8192
           build/fluxtrain data verify /tmp/fresh-data'
  grep -E '^  (train|validation) ' "$STAGE_LOG" | tr -s ' ' | sed 's/^ /evidence: /'
}

stage_venv() {
  in_root 'scripts/make-venv.sh
           .venv/bin/python -c "import moto, tensorboard, transformers, torch, numpy; print(\"evidence: .venv imports moto\", moto.__version__, \"tensorboard\", tensorboard.__version__, \"transformers\", transformers.__version__, \"torch\", torch.__version__)"'
}

# The tests that need something besides the compiler and the libraries the build links: PyTorch
# (oracle), mpirun (dist), promtool and a real Prometheus (obs), TensorBoard, moto and transformers
# from the venv, Slurm and munge, clang's libFuzzer, PyYAML, sentencepiece's tools, man pages.
SMOKE='^(oracle_fp32|dist_comm_np2|obs_promtool_rules|obs_prometheus_integration|obs_tensorboard_read|data_s3|ckpt_hf_oracle|fault_slurm|fault_k8s_manifests|data_fuzz|data_cli)$'
EXPORTS+=(SMOKE)
stage_tests() {
  if [ "$FULL_TEST" -eq 1 ]; then
    in_root "make test JOBS=$JOBS 2>&1 | tee /tmp/ctest.txt"
  else
    in_root "cd build && ctest --output-on-failure --no-tests=error --timeout 900 -j $JOBS -R '$SMOKE' 2>&1 | tee /tmp/ctest.txt"
  fi
  # A skipped test would hide exactly what this check looks for (a package it could not find).
  if grep -q 'Skipped\|did not run' "$ROOTFS/tmp/ctest.txt"; then
    echo "tests were skipped:"; grep 'Skipped\|did not run' -A20 "$ROOTFS/tmp/ctest.txt"; exit 1
  fi
  grep -E 'tests passed|tests failed' "$ROOTFS/tmp/ctest.txt" | sed 's/^/evidence: /'
}

stage_base_image() {
  podman_ rmi -f "$IMAGE_BASE" > /dev/null 2>&1 || true
  podman_ import --change 'CMD ["/bin/bash"]' "$BASE_TAR" "$IMAGE_BASE"
  echo "evidence: $(podman_ images --format '{{.Repository}}:{{.Tag}} {{.Size}}' "$IMAGE_BASE")"
}

stage_image_build() {
  podman_ build --pull=never --network host "${ULIMITS[@]}" -f "$CONTEXT/deploy/docker/Dockerfile" \
    --build-arg BASE="$IMAGE_BASE" --build-arg JOBS="$JOBS" -t "$IMAGE_CPU" "$CONTEXT"
  echo "evidence: $(podman_ images --format '{{.Repository}}:{{.Tag}} {{.Size}}' "$IMAGE_CPU")"
}

stage_image_train() {
  # No network: the image carries everything the training needs.
  podman_ run --rm --network none "${ULIMITS[@]}" "$IMAGE_CPU" \
    train --config configs/tiny.toml --set train.steps=5 --run-dir /tmp/tiny
  grep -E "step 5/5 |done: 5 steps" "$STAGE_LOG" | sed -E 's/^\[[0-9:]+\] /evidence: /'
  # The MPI Operator's workers run sshd from this image (deploy/k8s/train-mpijob.yaml).
  podman_ run --rm --network none "${ULIMITS[@]}" --entrypoint /bin/sh "$IMAGE_CPU" -c '/usr/sbin/sshd -t && echo sshd-config-ok'
  echo "evidence: trained in $IMAGE_CPU with no network; the workers' sshd config passes sshd -t"
}

# ---- cleanup: nothing of ours mounted or running under ROOT after we exit --------------------------
mounts_under() { awk -v r="$1" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r; }
cleanup() {
  local m
  if [ -n "$CURRENT_PID" ]; then kill -TERM "$CURRENT_PID" 2>/dev/null || true; wait "$CURRENT_PID" 2>/dev/null || true; fi
  for m in $(mounts_under "$ROOT"); do umount -l "$m" 2>/dev/null || true; done
}
on_signal() { echo; echo "fresh-machine-check: interrupted; stopping the running stage"; cleanup; exit 130; }
trap cleanup EXIT
trap on_signal INT TERM

# ---- main (a function, so that bash has read all of it before it runs: editing this file during a
# run cannot change what the run does) ---------------------------------------------------------------
main() {
mkdir -p "$(dirname "$ROOT")"
exec 8> "$ROOT.lock"
flock -n 8 || { echo "error: another fresh-machine-check is using $ROOT ($ROOT.lock)" >&2; exit 2; }
if [ "$KEEP" -eq 0 ] && [ -e "$ROOT" ]; then
  for m in $(mounts_under "$ROOT"); do umount -l "$m"; done
  [ -z "$(mounts_under "$ROOT")" ] || { echo "error: cannot unmount what is mounted under $ROOT" >&2; exit 1; }
  rm -rf --one-file-system "$ROOT"
fi
mkdir -p "$ROOT" "$LOGS"

echo "fresh-machine-check: commit ${COMMIT:0:12}, root $ROOT, mirror $MIRROR," \
     "$JOBS jobs, $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
t_all=$EPOCHREALTIME
#         name        limit(s) needs                     function
run_stage host-tools    900   ""                         stage_host_tools
run_stage debootstrap  1800   "host-tools"               stage_debootstrap
run_stage source         300   "debootstrap"              stage_source
run_stage deps          2700   "source"                   stage_deps
run_stage build         3600   "deps"                     stage_build
run_stage train          600   "build"                    stage_train
run_stage prepare        900   "build"                    stage_prepare
run_stage venv          1800   "deps"                     stage_venv
TESTS_LIMIT=2400; [ "$FULL_TEST" -eq 0 ] || TESTS_LIMIT=7200
run_stage tests   "$TESTS_LIMIT"   "build venv"               stage_tests
if [ "$IMAGES" -eq 1 ]; then
  run_stage base-image   600   "debootstrap"              stage_base_image
  run_stage image-build 5400   "base-image source"        stage_image_build
  run_stage image-train  600   "image-build"              stage_image_train
fi

echo
echo "fresh-machine-check summary (root $ROOT; logs in $LOGS)"
printf '  %-12s %-28s %10s\n' stage result seconds
failed=()
for i in "${!NAMES[@]}"; do
  printf '  %-12s %-28s %10s\n' "${NAMES[$i]}" "${RESULTS[$i]}" "${TIMES[$i]}"
  [ "${RESULTS[$i]}" = ok ] || failed+=("${NAMES[$i]}")
done
printf '  %-12s %-28s %10s\n' total "" "$(awk -v a="$t_all" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fresh-machine-check: FAILED: ${failed[*]}"
  exit 1
fi
echo "fresh-machine-check: all stages passed"
[ "$IMAGES" -eq 0 ] || echo "the image: ${PODMAN[*]} image save $IMAGE_CPU | podman load   (or: ... push $IMAGE_CPU docker://REGISTRY/fluxtrain:TAG)"
}
main; exit $?  # one line: parsed whole before it runs
