"""The parity matrix through NcclComm on device buffers: every distributed layout, with
train.device = "cuda" and parallel.comm = "nccl", in fluxtrain-devemu-nccl (the CLI on the
host-emulated GPU of tests/devemu, whose backend carries NcclComm over the host stand-in of CUDA
and NCCL, tests/ncclemu: CPU kernels on guarded device buffers, NcclComm's own code on stream and
event stand-ins, collectives over MPI). It tests our host logic through NcclComm, not NCCL itself.

parity_dp_test.py, parity_tp_test.py, parity_pp_test.py, parity_3d_test.py, unchanged, with
train.device = "cuda" and parallel.comm = "nccl" added to every run: dp × ZeRO 0–3, tp ± sp, the
pipeline schedules (gpipe, 1f1b, interleaved), 3D; every loss (and gradient norm, validation loss)
within 1e-5 of one process, and the bytes per step equal to theory, as over MPI. Gradient
compression over NCCL (bf16 wire, PowerSGD, every ZeRO stage) against MPI, and the log's
transport, are tests/ncclemu/layouts_test.py's.

usage: parity_nccl_test.py FLUXTRAIN_DEVEMU_NCCL CONFIG
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EMU, CONFIG = sys.argv[1], sys.argv[2]
NCCL = ["--set", 'train.device="cuda"', "--set", 'parallel.comm="nccl"']
SCRIPTS = ("parity_dp_test.py", "parity_tp_test.py", "parity_pp_test.py", "parity_3d_test.py")


def run_script(name):
    # A deadlock of the transfers' order would cost one timeout, not five minutes.
    env = dict(os.environ, FLUXTRAIN_TEST_EXTRA_ARGS=" ".join(NCCL + ["--set", "parallel.collective_timeout_s=60"]))
    p = subprocess.run([sys.executable, os.path.join(HERE, name), EMU, CONFIG], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    print(f"==== {name} through NcclComm on emulated device buffers (exit {p.returncode})")
    print(p.stdout[-6000:])
    return p.returncode == 0


def main():
    failures = [f"{s} failed through NcclComm" for s in SCRIPTS if not run_script(s)]
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("parity through NcclComm on device buffers: every layout matches one process")


if __name__ == "__main__":
    main()
