"""What the distributed tests share: run `fluxtrain train` (on N ranks through --nproc) and read
its metrics.jsonl.

    rows = train(FT, CONFIG, os.path.join(tmp, "dp2"), COMMON + ["--set", "parallel.dp=2"], nproc=2)
    rows[-1]["loss"]
"""
import json
import os
import shlex
import shutil
import subprocess
import sys

# Arguments added to every run (FLUXTRAIN_TEST_EXTRA_ARGS), e.g. to rerun a parity script by hand with
# --set parallel.comm="nccl" on a test binary that has it.
EXTRA_ARGS = shlex.split(os.environ.get("FLUXTRAIN_TEST_EXTRA_ARGS", ""))


def train(ft, config, run_dir, args, nproc=1):
    """Trains into run_dir and returns the rows of its metrics.jsonl; exits naming the run (with
    the tail of its log) when fluxtrain fails."""
    cmd = [ft, "train", "--config", config, "--run-dir", run_dir] + list(args) + EXTRA_ARGS
    if nproc > 1:
        cmd += ["--nproc", str(nproc)]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0 and openmpi_false_exit_report(p.stdout):
        print(f"{os.path.basename(run_dir)}: mpirun reported a rank with PID 0 exiting improperly after the run; "
              "running it once more (an Open MPI 4 runtime race, open-mpi/ompi#7833)", file=sys.stderr)
        shutil.rmtree(run_dir)  # a fresh start: fluxtrain refuses a directory that holds a run
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit(f"{os.path.basename(run_dir)}: fluxtrain exited with {p.returncode}:\n{p.stdout[-3000:]}")
    return metrics(run_dir)


def openmpi_false_exit_report(output):
    """Open MPI 4's mpirun sometimes reports a rank that finished normally as "with PID 0 ...
    exiting improperly" (a race in its runtime under load, open-mpi/ompi#7833, #9389, #12607);
    seen once in dist_parity_tp on this 2-core machine. Only that exact report is retried: any
    other failure, or the same report twice, still fails the test."""
    return "with PID 0 on" in output and "exiting improperly" in output


def metrics(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]
