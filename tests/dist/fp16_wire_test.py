"""The fp16 gradient wire (parallel.grad_compression = "fp16") with fp16 training, at dp = 2.

  1. Parity: ZeRO 0, 1, 2, 3 with the fp16 wire against the same layout uncompressed and against one
     process, every step's loss within 1e-3 relative (the bf16 wire's tolerance against
     uncompressed training, tests/ncclemu/layouts_test.py); the bf16 wire's distance at ZeRO 0 is printed
     beside it.
  2. Bytes: the gradient reduction sends half of fp32's bytes (the reduce-scatters exactly half; the
     ZeRO-0 all-reduce half but for the doubles it also carries).
  3. Overflow on the wire: at a loss scale where every rank's own gradients are finite (the
     uncompressed run skips nothing) but their sum does not fit fp16, the fp16 run's first step
     is skipped as an fp16 overflow and the scale halves until the sums fit; then it trains.
  4. With FLUXTRAIN_DEVEMU_NCCL given: 1 and 3 through NcclComm on the host-emulated GPU's device
     buffers (train.device = "cuda"; ncclFloat16 on the host stand-in of NCCL, tests/ncclemu)
     against the runs over MPI, within 2e-3 (the bf16 wire's tolerance between the transports).

usage: fp16_wire_test.py FLUXTRAIN CONFIG [FLUXTRAIN_DEVEMU_NCCL]
"""
import os
import sys
import tempfile

from dist_lib import train

FT, CONFIG = sys.argv[1], sys.argv[2]
SIM = sys.argv[3] if len(sys.argv) > 3 else None
STEPS = 20
COMMON = ["--set", f"train.steps={STEPS}", "--set", "train.eval_interval=0", "--set", "train.batch_size=8",
          "--set", "train.seq_len=32", "--set", "optim.lr=3e-3", "--set", 'train.precision="fp16"']
FP16 = ["--set", 'parallel.grad_compression="fp16"']
NCCL = ["--set", 'train.device="cuda"', "--set", 'parallel.comm="nccl"']
# A loss scale at which tiny's first-step gradients are finite on each rank (the fp32-wire run does
# not skip step 1; at 2^22 it does) but their sums do not fit fp16 (at 2^20 they do).
BIG_SCALE = ["--set", "optim.loss_scale_init=2097152"]


def worst_rel(a, b):
    return max(abs(x["loss"] - y["loss"]) / abs(y["loss"]) for x, y in zip(a, b))


def grad_bytes(row, kind):
    return row.get(f"comm_{kind}_bytes", 0)


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        def run(name, extra, nproc=2, ft=FT):
            rows = train(ft, CONFIG, os.path.join(tmp, name), COMMON + extra, nproc)
            if len(rows) != STEPS:
                failures.append(f"{name}: {len(rows)} rows, expected {STEPS}")
            return rows

        single = run("single", [], 1)
        print(f"{'zero':>4} {'fp16 vs none':>13} {'fp16 vs 1 rank':>15} {'bf16 vs none':>13} {'grad bytes fp16/none':>21}")
        mpi16 = {}
        for zero in (0, 1, 2, 3):
            z = ["--set", "parallel.dp=2", "--set", f"parallel.zero={zero}"]
            none = run(f"none{zero}", z)
            mpi16[zero] = fp16 = run(f"fp16_{zero}", z + FP16)
            skipped = [r["step"] for r in fp16 if r.get("skipped")]
            if skipped:
                failures.append(f"fp16 zero{zero}: steps {skipped} skipped at the default loss scale")
            d_none, d_single = worst_rel(fp16, none), worst_rel(fp16, single)
            bf16 = ""
            if zero == 0:
                b = run("bf16_0", z + ["--set", 'parallel.grad_compression="bf16"'])
                bf16 = f"{worst_rel(b, none):13.2e}"
            kind = "all_reduce" if zero == 0 else "reduce_scatter"
            nb, fb = grad_bytes(none[-1], kind), grad_bytes(fp16[-1], kind)
            print(f"{zero:>4} {d_none:13.2e} {d_single:15.2e} {bf16:>13} {fb:>10}/{nb:<10} {fb / nb:.4f}")
            for what, d in (("uncompressed dp2", d_none), ("one process", d_single)):
                if d > 1e-3:
                    failures.append(f"fp16 zero{zero}: losses {d:.2e} from {what} (> 1e-3)")
            if zero == 0:
                # The all-reduce also carries the gradient norm's and the losses' doubles (fp64).
                if not 0.499 < fb / nb < 0.501:
                    failures.append(f"fp16 zero0: all-reduce bytes {fb} vs {nb} fp32: not half")
            elif 2 * fb != nb:
                failures.append(f"fp16 zero{zero}: reduce-scatter bytes {fb} are not half of fp32's {nb}")

        # 3. An overflow on the wire only.
        z0 = ["--set", "parallel.dp=2"]
        big_none = run("big_none", z0 + BIG_SCALE)
        big_fp16 = run("big_fp16", z0 + BIG_SCALE + FP16)
        print("loss scale at a big initial scale (skipped steps marked *):")
        for name, rows in (("fp32 wire", big_none), ("fp16 wire", big_fp16)):
            print(f"  {name}: " + " ".join(f"{r['loss_scale']:.0f}{'*' if r.get('skipped') else ''}" for r in rows[:8]))
        if any(r.get("skipped") for r in big_none[:1]):
            failures.append("the fp32-wire run overflowed at step 1: the scale does not isolate the wire")
        first = big_fp16[0]
        if not (first.get("skipped") and first.get("guard") == "fp16_overflow"):
            failures.append(f"the fp16-wire run's step 1 was not skipped as an fp16 overflow: {first}")
        skips = [r for r in big_fp16 if r.get("skipped")]
        if any(r.get("guard") != "fp16_overflow" for r in skips):
            failures.append(f"fp16-wire skips not all fp16 overflows: {[r.get('guard') for r in skips]}")
        for a, b in zip(big_fp16, big_fp16[1:]):
            want = a["loss_scale"] / 2 if a.get("skipped") else a["loss_scale"]
            if b["loss_scale"] != want:
                failures.append(f"step {b['step']}: loss scale {b['loss_scale']} after {a['loss_scale']}"
                                f"{' (skipped)' if a.get('skipped') else ''}, expected {want}")
                break
        if len(skips) >= STEPS // 2 or big_fp16[-1].get("skipped"):
            failures.append(f"the fp16-wire run did not recover: {len(skips)} of {STEPS} steps skipped")

        # 4. The same through NcclComm (ncclFloat16) on emulated device buffers.
        if SIM:
            print("through NcclComm (emulated GPU, NCCL stand-in) against MPI:")
            for zero in (0, 1, 2):
                z = ["--set", "parallel.dp=2", "--set", f"parallel.zero={zero}"]
                nccl = run(f"nccl_fp16_{zero}", z + FP16 + NCCL, ft=SIM)
                d = worst_rel(nccl, mpi16[zero])
                kind = "all_reduce" if zero == 0 else "reduce_scatter"
                nb, mb = grad_bytes(nccl[-1], kind), grad_bytes(mpi16[zero][-1], kind)
                print(f"  zero {zero}: worst relative loss difference {d:.2e} (tolerance 2e-3), {kind} bytes {nb} "
                      f"vs MPI {mb}")
                if d > 2e-3:
                    failures.append(f"fp16 zero{zero}: losses over NCCL differ from MPI by {d:.2e}")
                if nb != mb:
                    failures.append(f"fp16 zero{zero}: {nb} {kind} bytes over NCCL, {mb} over MPI")
            big_nccl = run("big_nccl", z0 + BIG_SCALE + FP16 + NCCL, ft=SIM)
            print("  fp16 wire over NCCL: " +
                  " ".join(f"{r['loss_scale']:.0f}{'*' if r.get('skipped') else ''}" for r in big_nccl[:8]))
            # Later overflows depend on rounding that differs between the transports; step 1 does not.
            if not (big_nccl[0].get("skipped") and big_nccl[0].get("guard") == "fp16_overflow"):
                failures.append(f"over NCCL the fp16 wire's step 1 was not skipped as an overflow: {big_nccl[0]}")
            if big_nccl[-1].get("skipped"):
                failures.append("over NCCL the fp16-wire run did not recover")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("fp16 wire: parity with uncompressed training, half the gradient bytes, overflows skip the step")


if __name__ == "__main__":
    main()
