"""Data-parallel parity: every dp × ZeRO layout trains the same losses as one process.

Runs `fluxtrain train` on the tiny model for 20 steps on one process, then at dp = 2 and 4 with
ZeRO 0, 1, 2, 3 (same global batch), and checks the loss of every step within 1e-5 relative.
Also checks, from metrics.jsonl: bytes on the wire against theory (ZeRO-0 all-reduce 2(N−1)/N
× gradient bytes; ZeRO-3 ≈ 3 × parameter bytes × (N−1)/N) and ZeRO-3's model-state memory.

usage: parity_dp_test.py FLUXTRAIN CONFIG
"""
import os
import sys
import tempfile

from dist_lib import train

FT, CONFIG = sys.argv[1], sys.argv[2]
STEPS = 20
BATCH, MICRO = 8, 1
COMMON = ["--set", f"train.steps={STEPS}", "--set", "train.eval_interval=0", "--set", f"train.batch_size={BATCH}",
          "--set", "train.seq_len=32", "--set", f"train.micro_batch_size={MICRO}", "--set", "optim.lr=3e-3"]


def run(tmp, name, nproc, extra):
    return train(FT, CONFIG, os.path.join(tmp, name), COMMON + extra, nproc)


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        base = run(tmp, "single", 1, [])
        layouts = [(dp, z) for dp in (2, 4) for z in (0, 1, 2, 3)]
        results = {}
        for dp, z in layouts:
            results[(dp, z)] = run(tmp, f"dp{dp}_z{z}", dp, ["--set", f"parallel.dp={dp}", "--set", f"parallel.zero={z}"])
        print("step  " + "  ".join(f"{'1 rank':>10}" if i == 0 else f"{f'dp{dp} z{z}':>10}"
                                   for i, (dp, z) in enumerate([(1, 0)] + layouts)))
        worst = 0.0
        for s in range(STEPS):
            ref = base[s]["loss"]
            row = [ref]
            for key in layouts:
                loss = results[key][s]["loss"]
                err = abs(loss - ref) / abs(ref)
                worst = max(worst, err)
                if err > 1e-5:
                    failures.append(f"dp{key[0]} zero{key[1]} step {s + 1}: {loss} vs {ref} (rel {err:.1e})")
                row.append(loss)
            print(f"{s + 1:>4}  " + "  ".join(f"{v:10.6f}" for v in row))
        print(f"worst relative loss difference over {len(layouts)} layouts x {STEPS} steps: {worst:.2e}")

        # Bytes on the wire, per step, against theory.
        grad_bytes = 4 * base[0]["mem_gradients_bytes"] // 4  # fp32 gradient arena of one full copy
        for dp in (2, 4):
            z0 = results[(dp, 0)][-1]
            ar = z0["comm_all_reduce_bytes"]
            theory = 2 * (dp - 1) / dp * grad_bytes
            print(f"dp{dp} zero0 all_reduce bytes/step {ar} vs theory {theory:.0f} ({ar / theory:.3f}x)")
            if not 0.98 < ar / theory < 1.02:
                failures.append(f"dp{dp} zero0 all-reduce bytes {ar} vs {theory:.0f}")
            z3 = results[(dp, 3)][-1]
            moved = z3["comm_all_gather_bytes"] + z3["comm_reduce_scatter_bytes"]
            # Every micro-batch gathers weights for forward and backward and reduce-scatters gradients.
            micro_batches = BATCH // dp // MICRO
            theory3 = 3 * (dp - 1) / dp * grad_bytes * micro_batches
            print(f"dp{dp} zero3 all_gather+reduce_scatter bytes/step {moved} vs 3(N-1)/N x params x "
                  f"{micro_batches} micro-batches {theory3:.0f} ({moved / theory3:.3f}x)")
            if not 0.85 < moved / theory3 < 1.05:
                failures.append(f"dp{dp} zero3 bytes {moved} vs {theory3:.0f}")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("parity: all layouts match")


if __name__ == "__main__":
    main()
