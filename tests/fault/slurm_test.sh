#!/usr/bin/env bash
# Slurm end to end, with real daemons: munged, slurmctld and slurmd (Debian's slurm-wlm and munge)
# started on this machine as one node with two partitions — "train" (PriorityTier 10,
# PriorityJobFactor 100) and "validate" (PriorityTier 1, PriorityJobFactor 1), as
# deploy/slurm/README.md recommends. While a blocker job holds the node, a validation job and then
# a training job are submitted; the test checks that
#   - the training job got the higher priority (squeue %Q) and ran first although submitted last,
#   - both completed (scontrol show job: COMPLETED, exit 0:0),
#   - training ran under the supervisor, which recognised the allocation and used srun, and after
#     one of its ranks was killed restarted them inside the allocation (srun again),
#   - validation evaluated the checkpoint the training job wrote (its JSON names it).
# Exit 77 (CTest SKIP_RETURN_CODE) only when the daemons cannot start here (not root, Slurm or
# munge missing, or slurmd never registers), with the reason printed.
set -euo pipefail
FT=$(readlink -f "$1"); ROOT=$(cd "$(dirname "$0")/../.." && pwd)
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; for f in "$D"/log/*.log "$D"/*.out; do [ -f "$f" ] && { echo "== $f"; tail -20 "$f"; }; done; exit 1; }

[ "$(id -u)" -eq 0 ] || skip "slurmd must run as root to start jobs; this test runs as $(id -un)"
for b in munged slurmctld slurmd sbatch squeue scontrol srun; do
  command -v $b >/dev/null || skip "$b not installed (scripts/install-deps.sh installs slurm-wlm and munge)"
done

D=$(mktemp -d /tmp/ft-slurm.XXXXXX); chmod 755 "$D"
cleanup() {
  scancel --quiet -u root 2>/dev/null || true
  for p in slurmd slurmctld munged; do
    [ -f "$D/$p.pid" ] && kill "$(cat "$D/$p.pid")" 2>/dev/null || true
  done
  sleep 1; rm -rf "$D"
}
trap cleanup EXIT
mkdir -p "$D"/munge "$D"/spool/ctld "$D"/spool/d "$D"/log "$D"/run
chmod 700 "$D/munge"
head -c 1024 /dev/urandom > "$D/munge/munge.key"; chmod 400 "$D/munge/munge.key"
munged --force --key-file="$D/munge/munge.key" --socket="$D/munge/munge.sock" --log-file="$D/log/munged.log" \
  --pid-file="$D/munged.pid" --seed-file="$D/munge/seed" || skip "munged does not start: $(tail -2 "$D/log/munged.log")"

read -r CTLD_PORT SLURMD_PORT < <(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
H=$(hostname)
export SLURM_CONF=$D/slurm.conf
cat > "$SLURM_CONF" <<EOF
ClusterName=fluxtrain-ci
SlurmctldHost=$H(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$D/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$D/spool/ctld
SlurmdSpoolDir=$D/spool/d
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
PriorityType=priority/multifactor
PriorityWeightPartition=10000
PriorityWeightAge=0
PriorityWeightFairshare=0
PriorityWeightJobSize=0
PriorityWeightQOS=0
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MinJobAge=600
ReturnToService=2
SlurmdParameters=config_overrides
InactiveLimit=0
KillWait=5
SchedulerParameters=sched_interval=2
GresTypes=gpu
NodeName=$H NodeHostname=$H NodeAddr=127.0.0.1 CPUs=2 RealMemory=2000 Gres=gpu:2 State=UNKNOWN
PartitionName=train Nodes=$H PriorityTier=10 PriorityJobFactor=100 Default=YES MaxTime=INFINITE State=UP
PartitionName=validate Nodes=$H PriorityTier=1 PriorityJobFactor=1 MaxTime=INFINITE State=UP
EOF
# Two GPUs by count only (this machine has none): enough for Slurm to grant train.sbatch's
# --gpus-per-node, which the test checks; nothing here runs on a GPU.
touch "$D/gpu0" "$D/gpu1"
echo "NodeName=$H Name=gpu File=$D/gpu[0-1]" > "$D/gres.conf"
slurmctld -f "$SLURM_CONF" || skip "slurmctld does not start: $(tail -3 "$D/log/slurmctld.log" 2>/dev/null)"
sleep 1
slurmd -f "$SLURM_CONF" || skip "slurmd does not start: $(tail -3 "$D/log/slurmd.log" 2>/dev/null)"
for _ in $(seq 60); do
  sinfo -h -o "%t" 2>/dev/null | grep -qx idle && break
  sleep 0.5
done
sinfo -h -o "%t" | grep -qx idle || skip "slurmd never registered as idle: $(tail -3 "$D/log/slurmd.log"; tail -3 "$D/log/slurmctld.log")"
echo "slurm is up: $(sinfo -h -o '%P %a %D %t' | tr '\n' ';')"

RUN=$D/run/tiny
export FLUXTRAIN=$FT OMP_NUM_THREADS=1
# The node is busy: both jobs wait. Validation is submitted first, training second.
BLOCK=$(sbatch --parsable -p validate -n 2 -o "$D/block.out" --wrap "sleep 300")
for _ in $(seq 60); do [ "$(squeue -h -j "$BLOCK" -o %T)" = RUNNING ] && break; sleep 0.5; done
[ "$(squeue -h -j "$BLOCK" -o %T)" = RUNNING ] || fail "the blocker job does not run: $(squeue -h -j "$BLOCK" -o '%T %r')"
VAL=$(sbatch --parsable -n 1 -o "$D/validate.out" "$ROOT/deploy/slurm/validate.sbatch" "$ROOT/configs/tiny.toml" "$RUN" \
      --set train.eval_batches=2 --set train.batch_size=8)
# The rank is killed once step 50 is seen; 200 tiny steps end a fraction of a second later on a
# fast machine, so each checkpoint (every 20 steps) holds the next update 250 ms (the checkpoint
# module's test knob, passed on to the ranks): at least 2 s from step 50 to the end, same losses.
TRAIN=$(FLUXTRAIN_CKPT_TEST_COPY_DELAY_MS=250 \
        sbatch --parsable -n 2 --ntasks-per-node=2 --gpus-per-node=2 -o "$D/train.out" "$ROOT/deploy/slurm/train.sbatch" "$ROOT/configs/tiny.toml" \
        --run-dir "$RUN" --set parallel.dp=2 --set train.steps=200 --set train.batch_size=8 --set ckpt.interval=20 \
        --set train.threads=1 --set metrics.port=0 --set train.eval_interval=0)
sleep 1
squeue -o "%.6i %.9P %.10Q %.8T %.20j %r" | tee "$D/squeue.txt"
prio() { squeue -h -j "$1" -o %Q; }
PT=$(prio "$TRAIN"); PV=$(prio "$VAL")
[ "$PT" -gt "$PV" ] || fail "training priority $PT is not above validation's $PV"
echo "priorities: training $PT > validation $PV"
# train.sbatch asks for GPUs per node (one per rank); Slurm granted them.
grep -q -- "^#SBATCH --gpus-per-node=" "$ROOT/deploy/slurm/train.sbatch" || fail "train.sbatch requests no GPUs"
scontrol show job "$TRAIN" | grep -q "TresPerNode=gres:gpu:2" ||
  fail "the training job holds no GPUs: $(scontrol show job "$TRAIN" | grep -o 'Tres[A-Za-z]*=[^ ]*' | tr '\n' ' ')"
echo "training job GPUs: $(scontrol show job "$TRAIN" | grep -o 'TresPerNode=[^ ]*')"
scancel "$BLOCK"

# A rank of the training job dies (SIGKILL) mid-run: the supervisor must restart the ranks inside
# the allocation (srun again) from the newest checkpoint.
/usr/bin/python3 - "$RUN" <<'EOF' || fail "could not kill a training rank mid-run"
import glob, json, os, signal, sys, time
hb_dir = os.path.join(sys.argv[1], "heartbeat")
t0 = time.time()
while time.time() - t0 < 120:
    beats = {}
    for p in glob.glob(os.path.join(hb_dir, "rank-*.json")):
        try:
            j = json.load(open(p))
            beats[j["rank"]] = j
        except (OSError, ValueError):
            pass
    if len(beats) == 2 and all(b["attempt"] == 1 and b["phase"] == "train" and b["step"] >= 50 for b in beats.values()):
        os.kill(beats[1]["pid"], signal.SIGKILL)
        print(f"killed training rank 1 (pid {beats[1]['pid']}) at step {beats[1]['step']}")
        sys.exit(0)
    time.sleep(0.005)
sys.exit(1)
EOF

state() { scontrol show job "$1" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
for _ in $(seq 600); do
  s1=$(state "$TRAIN"); s2=$(state "$VAL")
  case "$s1 $s2" in *FAILED*|*CANCELLED*|*TIMEOUT*|*NODE_FAIL*) fail "jobs ended as $s1 / $s2";; esac
  [ "$s1" = COMPLETED ] && [ "$s2" = COMPLETED ] && break
  sleep 0.5
done
[ "$(state "$TRAIN")" = COMPLETED ] && [ "$(state "$VAL")" = COMPLETED ] || fail "jobs did not complete: $(state "$TRAIN") / $(state "$VAL")"
field() { scontrol show job "$1" | tr ' ' '\n' | grep "^$2=" | cut -d= -f2; }
for j in "$TRAIN" "$VAL"; do [ "$(field "$j" ExitCode)" = "0:0" ] || fail "job $j exit code $(field "$j" ExitCode)"; done
TS=$(date -d "$(field "$TRAIN" StartTime)" +%s); TE=$(date -d "$(field "$TRAIN" EndTime)" +%s)
VS=$(date -d "$(field "$VAL" StartTime)" +%s)
echo "training (job $TRAIN, partition $(field "$TRAIN" Partition)) ran $(field "$TRAIN" StartTime) .. $(field "$TRAIN" EndTime)"
echo "validation (job $VAL, partition $(field "$VAL" Partition)) started $(field "$VAL" StartTime)"
[ "$VAL" -lt "$TRAIN" ] && [ "$TS" -le "$VS" ] || fail "validation (submitted first) started before training"
[ "$VS" -ge "$TE" ] || fail "validation started before training ended"

grep -q "supervisor: attempt 1 (2 ranks" "$D/train.out" || fail "training did not run under the supervisor"
grep -q "srun" "$D/train.out" || fail "the supervisor did not use srun inside the allocation"
grep -q "supervisor: attempt 2 (2 ranks, dp 2, resuming from $RUN/checkpoints/step_[0-9]*): 'srun'" "$D/train.out" ||
  fail "the supervisor did not restart the ranks with srun inside the allocation"
grep -o "supervisor: attempt 1 failed: [^:]*: [^;]*" "$D/train.out" | head -1
grep -o "supervisor: recovered in [0-9.]* s" "$D/train.out" || fail "no recovery time"
echo "training job's supervisor: $(grep -o "supervisor: attempt 1 (2 ranks[^:]*: 'srun' '--ntasks=2'[^ ]*" "$D/train.out")"
grep -E "supervisor: training finished|rank 1\] .*ranks" "$D/train.out" | head -2 || true
OUT=$(ls "$RUN"/validation/step_*.json 2>/dev/null | head -1)
[ -n "$OUT" ] || fail "validation wrote no result"
/usr/bin/python3 - "$OUT" "$RUN" <<'EOF' || fail "validation result is wrong: $(cat "$OUT")"
import json, math, os, sys
r = json.load(open(sys.argv[1]))
ckpt = os.path.realpath(r["checkpoint"])
assert ckpt.startswith(os.path.realpath(sys.argv[2]) + "/checkpoints/"), ckpt
assert r["step"] == 200 and os.path.exists(os.path.join(ckpt, "manifest.json")), r
# Trained weights, not a fresh model: below the loss of a uniform guess over the 256 tokens.
assert math.isfinite(r["val_loss"]) and 0 < r["val_loss"] < math.log(256) - 0.2, r
print(f"validation read {ckpt} (step {r['step']}, written by the training job): val_loss {r['val_loss']:.4f}")
EOF

# Stopping on purpose under Slurm (deploy/slurm/train.sbatch): what --signal=B:TERM@120 does before
# the time limit — SIGTERM to the batch shell, which is the supervisor (exec) — sent now with
# scancel --batch. Every rank checkpoints its last step and the job ends with exit code 4; the
# requeued job (SLURM_RESTART_COUNT = 1) continues with --resume auto and completes.
grep -q -- "--signal=B:TERM@" "$ROOT/deploy/slurm/train.sbatch" && grep -q -- "--requeue" "$ROOT/deploy/slurm/train.sbatch" ||
  fail "train.sbatch asks for no signal before the time limit, or no requeue"
RUN2=$D/run/stopped
STOP=$(sbatch --parsable -n 2 --ntasks-per-node=2 --gpus-per-node=2 -o "$D/stop.out" "$ROOT/deploy/slurm/train.sbatch" "$ROOT/configs/tiny.toml" \
       --run-dir "$RUN2" --set parallel.dp=2 --set train.steps=1500 --set train.batch_size=8 --set ckpt.interval=500 \
       --set train.threads=1 --set metrics.port=0 --set train.eval_interval=0)
for _ in $(seq 600); do [ "$(state "$STOP")" = RUNNING ] && break; sleep 0.5; done
/usr/bin/python3 - "$RUN2" <<'EOF2' || fail "the job to stop never reached step 30: $(state "$STOP")"
import glob, json, os, sys, time
t0 = time.time()
while time.time() - t0 < 120:
    steps = []
    for p in glob.glob(os.path.join(sys.argv[1], "heartbeat", "rank-*.json")):
        try:
            steps.append(json.load(open(p))["step"])
        except (OSError, ValueError, KeyError):
            pass
    if len(steps) == 2 and min(steps) >= 30:
        sys.exit(0)
    time.sleep(0.05)
sys.exit(1)
EOF2
scancel --batch --signal=TERM "$STOP"
for _ in $(seq 240); do case "$(state "$STOP")" in RUNNING|COMPLETING|PENDING|CONFIGURING) sleep 0.5;; *) break;; esac; done
[ "$(field "$STOP" ExitCode)" = "4:0" ] || fail "the stopped job ended $(state "$STOP") with exit code $(field "$STOP" ExitCode), not 4:0"
STOPPED_AT=$(/usr/bin/python3 -c '
import glob, json, sys
s = {json.load(open(p))["step"] for p in glob.glob(sys.argv[1] + "/heartbeat/rank-*.json")}
assert len(s) == 1, s
print(s.pop())' "$RUN2") || fail "the ranks did not stop after the same step"
[ -f "$RUN2/checkpoints/step_$(printf %08d "$STOPPED_AT")/manifest.json" ] ||
  fail "stopped after step $STOPPED_AT without its checkpoint: $(ls "$RUN2/checkpoints")"
grep -o "supervisor: the job stopped[^(]*(exit 4)" "$D/stop.out" || fail "the supervisor did not report the stop"
echo "SIGTERM to the batch shell: both ranks stopped after step $STOPPED_AT with its checkpoint; job exit code 4:0"
# slurmd revokes the ended job's credential with a one-second resolution: a requeued job started
# within the same second is killed ("Job credential revoked"), hence the pause before the requeue
# and the start time set to now (without it the scheduler may wait for its next pass).
sleep 2
scontrol requeue "$STOP"
scontrol update JobId="$STOP" StartTime=now 2>/dev/null || true
for _ in $(seq 600); do
  case "$(state "$STOP")" in COMPLETED) break;; FAILED|CANCELLED|TIMEOUT|NODE_FAIL) fail "the requeued job ended $(state "$STOP")";; esac
  sleep 0.5
done
[ "$(state "$STOP")" = COMPLETED ] && [ "$(field "$STOP" ExitCode)" = "0:0" ] ||
  fail "the requeued job did not complete: $(state "$STOP") $(field "$STOP" ExitCode)"
grep -q "resume: loaded $RUN2/checkpoints/step_$(printf %08d "$STOPPED_AT")" "$D/stop.out" ||
  fail "the requeued job did not resume from the stop's checkpoint"
[ "$(tail -n 1 "$RUN2/metrics.jsonl" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["step"])')" = 1500 ] ||
  fail "the requeued job did not train to step 1500"
echo "requeued (restart count $(field "$STOP" Restarts)): resumed from step $STOPPED_AT and completed step 1500, exit 0:0"
grep -o "supervisor: attempt [0-9]* failed: the launcher exited 0 but[^;]*" "$D/stop.out" || true
echo "PASS: training and validation completed under Slurm; training outranked validation; a stop on SIGTERM and its requeue resumed"
