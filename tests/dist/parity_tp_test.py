"""Tensor-parallel parity: every tp layout trains the same losses as one process.

Runs `fluxtrain train` on the tiny model (4 heads, 2 kv heads, 4 layers) for 20 steps on one
process, then under tensor parallelism — tp 2, tp 4 (kv heads replicated: 2 kv heads over 4
ranks), dp2 x tp2 with ZeRO 0-3, and sequence parallelism at tp 2 and 4 (and with full and
selective recomputation) — with the same global
batch, and checks the loss and the gradient norm (clipping is active: optim.grad_clip = 1) of
every step within 1e-5 relative. Recomputation at tp 2 with sequence parallelism must give
bit-identical losses and gradient norms to keeping everything, in fp32 and in bf16.

Also checks, from metrics.jsonl of the last step:
  - tensor-parallel bytes against theory: per micro-batch of N tokens and L blocks, 4L + 2
    all-reduces of N·C floats (2 per block forward, 2 backward, embedding, head), each a ring
    sending 2(P-1)/P of its bytes, plus the vocab-parallel cross-entropy's row statistics (max of
    N doubles, sums of 2N) and the gradient norm (1 double); with sequence parallelism 6L + 2
    all-gathers and 4L + 2 reduce-scatters of the N/P-token shards (each sends (P-1) shards)
    and one all-reduce of the partial norm-weight gradients per step;
  - per-rank activation bytes (allocator): tp < 1 rank, and sequence parallelism < tp;
  - bad input: a sequence-parallel micro-batch whose tokens tp does not divide, and a tp that
    does not divide the heads, fail with a clear error.

usage: parity_tp_test.py FLUXTRAIN CONFIG
"""
import os
import subprocess
import sys
import tempfile

from dist_lib import train

FT, CONFIG = sys.argv[1], sys.argv[2]
STEPS = 20
BATCH, MICRO, SEQ = 8, 2, 32
L, C, V = 4, 64, 256  # the tiny preset
COMMON = ["--set", f"train.steps={STEPS}", "--set", "train.eval_interval=0", "--set", f"train.batch_size={BATCH}",
          "--set", f"train.seq_len={SEQ}", "--set", f"train.micro_batch_size={MICRO}", "--set", "optim.lr=3e-3"]
# name: (dp, tp, zero, sequence_parallel[, extra --set arguments])
LAYOUTS = {
    "tp2": (1, 2, 0, False),
    "tp4 (kv repl.)": (1, 4, 0, False),
    "dp2xtp2 z0": (2, 2, 0, False),
    "dp2xtp2 z1": (2, 2, 1, False),
    "tp2 sp": (1, 2, 0, True),
    "tp4 sp": (1, 4, 0, True),
    "tp2 sp recompute": (1, 2, 0, True, ["--set", 'model.recompute="full"']),
    "tp2 sp selective": (1, 2, 0, True, ["--set", 'model.recompute="selective"']),
    "dp2xtp2 z2 sp": (2, 2, 2, True),
    "dp2xtp2 z3": (2, 2, 3, False),
}


def run(tmp, name, dp, tp, zero, sp, extra=(), check=True):
    run_dir = os.path.join(tmp, name.replace(" ", "_"))
    args = COMMON + list(extra) + ["--set", f"parallel.dp={dp}", "--set", f"parallel.tp={tp}",
                                   "--set", f"parallel.zero={zero}",
                                   "--set", f"parallel.sequence_parallel={'true' if sp else 'false'}"]
    if check:
        return train(FT, CONFIG, run_dir, args, dp * tp)
    cmd = [FT, "train", "--config", CONFIG, "--run-dir", run_dir] + args
    if dp * tp > 1:
        cmd += ["--nproc", str(dp * tp)]
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        base = run(tmp, "single", 1, 1, 0, False)
        results = {name: run(tmp, name, *lay) for name, lay in LAYOUTS.items()}

        print("step  " + f"{'1 rank':>14}" + "".join(f"{n:>16}" for n in LAYOUTS))
        worst = 0.0
        for s in range(STEPS):
            row = [base[s]["loss"]]
            for name in LAYOUTS:
                for key in ("loss", "grad_norm"):
                    ref, got = base[s][key], results[name][s][key]
                    err = abs(got - ref) / abs(ref)
                    worst = max(worst, err)
                    if err > 1e-5:
                        failures.append(f"{name} step {s + 1} {key}: {got} vs {ref} (rel {err:.1e})")
                row.append(results[name][s]["loss"])
            print(f"{s + 1:>4}  " + f"{row[0]:14.7f}" + "".join(f"{v:16.7f}" for v in row[1:]))
        print(f"worst relative loss/grad-norm difference over {len(LAYOUTS)} layouts x {STEPS} steps: {worst:.2e}")

        # Recomputation is bit-identical to keeping everything: fp32 (above) and bf16.
        BF16 = ["--set", 'train.precision="bf16"']
        bf16 = {mode: run(tmp, f"tp2 sp bf16 {mode}", 1, 2, 0, True, BF16 + ["--set", f'model.recompute="{mode}"'])
                for mode in ("none", "selective", "full")}
        for ref_name, ref, others in (
                ("tp2 sp", results["tp2 sp"], {m: results[f"tp2 sp {n}"] for m, n in
                                              (("full", "recompute"), ("selective", "selective"))}),
                ("tp2 sp bf16", bf16["none"], {m: bf16[m] for m in ("selective", "full")})):
            for mode, rows in others.items():
                for s in range(STEPS):
                    for key in ("loss", "grad_norm"):
                        if rows[s][key] != ref[s][key]:
                            failures.append(f"{ref_name} recompute={mode} step {s + 1} {key}: {rows[s][key]!r} "
                                            f"is not bit-identical to recompute=none's {ref[s][key]!r}")
            print(f"{ref_name}: recompute = selective and full give bit-identical losses and gradient norms "
                  f"to none over {STEPS} steps" if not failures else f"{ref_name}: see failures")

        # Tensor-parallel bytes per step against theory (this rank's sends; rank 0 logs).
        micro = BATCH // MICRO
        for name, P in (("tp2", 2), ("tp4 (kv repl.)", 4)):
            N = MICRO * SEQ
            floats = micro * (4 * L + 2) * N * C * 4 * 2 * (P - 1) // P
            xent = micro * (2 * (P - 1) * N * 8 // P + 2 * (P - 1) * 2 * N * 8 // P)
            norm = 2 * (P - 1) * 8 // P
            # tp 4 replicates the 2 kv heads: k and v gradients (global size) are summed per block.
            kv = L * 2 * (2 * 16 * C) * 4 * 2 * (P - 1) // P if P == 4 else 0
            theory = floats + xent + norm + kv
            got = results[name][-1]["tp_all_reduce_bytes"]
            print(f"{name}: tp all-reduce bytes/step {got} vs theory {theory} "
                  f"((4L+2) x N·C floats {floats} + xent rows {xent} + norm {norm} + kv grads {kv})")
            if got != theory:
                failures.append(f"{name}: tp all-reduce bytes {got} != theory {theory}")
        P, Ns = 2, MICRO * SEQ // 2
        sp = results["tp2 sp"][-1]
        shard = Ns * C * 4 * (P - 1)
        ag, rs = micro * (6 * L + 2) * shard, micro * (4 * L + 2) * shard
        ar = micro * (2 * (P - 1) * Ns * P * 8 // P + 2 * (P - 1) * 2 * Ns * P * 8 // P) + 2 * (P - 1) * 8 // P \
            + (2 * L + 1) * C * 4 * 2 * (P - 1) // P
        for kind, theory in (("all_gather", ag), ("reduce_scatter", rs), ("all_reduce", ar)):
            got = sp[f"tp_{kind}_bytes"]
            print(f"tp2 sp: tp {kind} bytes/step {got} vs theory {theory}")
            if got != theory:
                failures.append(f"tp2 sp: tp {kind} bytes {got} != theory {theory}")

        # Activation memory per rank (allocator peak of the activations category).
        act = {n: r[-1]["mem_activations_bytes"] for n, r in [("1 rank", base)] + list(results.items())}
        print("activation bytes per rank: " + ", ".join(f"{n} {b}" for n, b in act.items()))
        if not act["tp2 sp"] < act["tp2"] < act["1 rank"]:
            failures.append(f"activation bytes do not fall with tp and sequence parallelism: {act}")
        if not act["tp2 sp recompute"] < act["tp2 sp selective"] < act["tp2 sp"]:
            failures.append(f"activation bytes do not fall from recompute none to selective to full: {act}")
        if not act["tp4 sp"] < act["tp2 sp"]:
            failures.append(f"sequence-parallel activations do not fall from tp 2 to tp 4: {act}")

        # Bad input: clear errors, before or at start.
        bad = run(tmp, "bad_sp", 1, 2, 0, True, ["--set", "train.seq_len=31", "--set", "train.micro_batch_size=1"],
                  check=False)
        if bad.returncode == 0 or "multiple of parallel.tp" not in bad.stdout:
            failures.append("sequence parallelism with 31 tokens per micro-batch over tp 2 did not fail clearly:\n"
                            + bad.stdout[-2000:])
        bad = run(tmp, "bad_tp", 1, 3, 0, False, check=False)
        if bad.returncode == 0 or "parallel.tp = 3" not in bad.stdout or "1, 2, 4" not in bad.stdout:
            failures.append("tp 3 on the tiny model did not fail clearly:\n" + bad.stdout[-2000:])
        else:
            print("tp 3 rejected: " + bad.stdout.strip().splitlines()[-2][:200])
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("parity: all tensor-parallel layouts match")


if __name__ == "__main__":
    main()
