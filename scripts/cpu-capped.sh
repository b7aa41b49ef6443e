#!/usr/bin/env bash
# Runs a command with the CPU capped, as on a slower machine: a cgroup whose cpu quota is CPUS
# (e.g. 0.4 = 40% of one CPU: five times slower than two free cores). The tests must pass the
# same capped and uncapped (nothing in a test may depend on the machine's speed); this is how
# that is checked (docs/operations.md, "Tests and the machine's speed"). Needs root and a
# cgroup v2 (cpu.max) or v1 (cpu.cfs_quota_us) cpu controller.
#   usage: scripts/cpu-capped.sh CPUS COMMAND...
#   e.g.   scripts/cpu-capped.sh 0.4 ctest --test-dir build -R 'e2e_bad_input' --timeout 3000
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 CPUS COMMAND... (CPUS: the CPU time allowed, e.g. 0.4)" >&2
  exit 2
fi
cpus=$1
shift
period=100000
quota=$(python3 -c 'import sys; q = float(sys.argv[1]); assert q > 0; print(int(q * 100000))' "$cpus") ||
  { echo "error: CPUS = '$cpus' is not a positive number" >&2; exit 2; }
name="fluxtrain-capped-$$"
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then  # cgroup v2
  dir=/sys/fs/cgroup/$name
  mkdir "$dir"
  echo "$quota $period" >"$dir/cpu.max"
elif [ -d /sys/fs/cgroup/cpu ]; then  # cgroup v1
  dir=/sys/fs/cgroup/cpu/$name
  mkdir "$dir"
  echo "$period" >"$dir/cpu.cfs_period_us"
  echo "$quota" >"$dir/cpu.cfs_quota_us"
else
  echo "error: no cgroup cpu controller under /sys/fs/cgroup" >&2
  echo "hint: run as root on a Linux machine with cgroups mounted" >&2
  exit 2
fi
cleanup() {
  # Processes left behind keep the group busy: move them out, then remove it.
  if [ -f "$dir/cgroup.procs" ]; then
    while read -r p; do echo "$p" >"$(dirname "$dir")/cgroup.procs" 2>/dev/null || true; done <"$dir/cgroup.procs"
  fi
  rmdir "$dir" 2>/dev/null || true
}
trap cleanup EXIT
echo "cpu-capped: $cpus CPU ($quota us per $period us) for: $*" >&2
rc=0
bash -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' capped "$dir" "$@" || rc=$?
exit $rc
