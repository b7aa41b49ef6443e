"""3D parity: tensor x pipeline (x data) parallel layouts train the same losses as one process.

Runs `fluxtrain train` on the tiny model (4 layers, 4 heads, 2 kv heads, untied; seq 32, batch 8,
micro-batches of 1 sequence, fp32, optim.lr = 3e-3, gradient clipping at 1 active) for 20 steps on
one process, then under mpirun (oversubscribed on the CI's cores):

  tp2 x pp2               ZeRO 0 and 1 (1F1B)
  tp4 x pp2               8 ranks; the 2 kv heads replicated over pairs of tp ranks
  tp2 sp x pp2            sequence parallelism: the pipeline carries each tp rank's token shard
  tp2 sp x pp2 interleaved (v = 2)
  dp2 x tp2 x pp2         8 ranks, ZeRO 0, 1, 2 and 3
  dp2 x tp2 sp x pp2      8 ranks, ZeRO 1 and 3 (ZeRO 3 sums partial gradients every micro-batch)

and checks the loss, the gradient norm (summed over dp, tp — replicated pieces once — and pp)
and the validation loss (forward-only schedule, steps 10 and 20) of every step within 1e-5
relative.

From metrics.jsonl (last step, per world rank = (pp · dp + dp) · tp + tp) it also checks against
theory derived here from the model's shapes:
  - pipeline bytes: m micro-batches × (what the rank holds of the residual stream: B·T·dim fp32,
    or its B·T/tp-token shard under sequence parallelism) per chunk boundary and direction;
  - activation bytes (allocator peak) under 1F1B: min(m, p − s) activation sets of the stage's
    layers in the rank's tensor-parallel shapes, plus one backward scratch — exactly;
  - tensor-parallel bytes: the collectives of the stage's own units only (see tp_bytes below).

usage: parity_3d_test.py FLUXTRAIN CONFIG
"""
import os
import sys
import tempfile

from dist_lib import train

FT, CONFIG = sys.argv[1], sys.argv[2]
STEPS, BATCH, MICRO, SEQ = 20, 8, 1, 32
COMMON = ["--set", f"train.steps={STEPS}", "--set", "train.eval_interval=10", "--set", f"train.batch_size={BATCH}",
          "--set", f"train.seq_len={SEQ}", "--set", f"train.micro_batch_size={MICRO}", "--set", "optim.lr=3e-3",
          "--set", "train.threads=1"]
# The tiny preset: layers, dim, heads, kv heads, ffn, vocab.
L, C, H, HKV, F, V = 4, 64, 4, 2, 160, 256
D = C // H
# name: (dp, tp, pp, sequence parallel, zero, schedule, virtual stages)
LAYOUTS = {
    "tp2 x pp2 z0": (1, 2, 2, False, 0, "1f1b", 1),
    "tp2 x pp2 z1": (1, 2, 2, False, 1, "1f1b", 1),
    "tp4 x pp2 (kv repl.)": (1, 4, 2, False, 0, "1f1b", 1),
    "tp2 sp x pp2": (1, 2, 2, True, 0, "1f1b", 1),
    "tp2 sp x pp2 interleaved": (1, 2, 2, True, 0, "interleaved", 2),
    "dp2 x tp2 x pp2 z0": (2, 2, 2, False, 0, "1f1b", 1),
    "dp2 x tp2 x pp2 z1": (2, 2, 2, False, 1, "1f1b", 1),
    "dp2 x tp2 x pp2 z2": (2, 2, 2, False, 2, "1f1b", 1),
    "dp2 x tp2 x pp2 z3": (2, 2, 2, False, 3, "1f1b", 1),
    "dp2 x tp2 sp x pp2 z1": (2, 2, 2, True, 1, "1f1b", 1),
    "dp2 x tp2 sp x pp2 z3": (2, 2, 2, True, 3, "1f1b", 1),
}


def run(tmp, name, nproc, extra):
    return train(FT, CONFIG, os.path.join(tmp, name.replace(" ", "_")), COMMON + extra, nproc)


class Shard:
    """One rank's sizes: its tensor-parallel share of heads, ffn, vocabulary, and of the tokens
    of the residual stream under sequence parallelism (model/activation_sizes.cpp's Local)."""

    def __init__(self, tp, sp):
        self.tp, self.sp = tp, sp
        self.N = MICRO * SEQ
        self.Ns = self.N // tp if sp else self.N
        self.H, self.F, self.V = H // tp, F // tp, V // tp
        self.Hkv = HKV // tp if HKV % tp == 0 else 1  # else one kv head, replicated
        self.kv_replicated = HKV % tp != 0
        self.qkv = (self.H + 2 * self.Hkv) * D


def chunk_bytes(s, layers, head):
    """fp32 bytes of one activation set for `layers` blocks (model/activations.h lists them)."""
    N, Ns = s.N, s.Ns
    block = Ns * C + Ns + N * s.qkv + N * s.H * D + MICRO * s.H * SEQ + Ns * C + Ns * C + Ns + N * 2 * s.F + N * s.F
    n = layers * block + (layers + 1) * Ns * C
    if head:
        chunk = min(max(16, (8 << 20) // V), N)
        n += Ns * C + Ns + N * C + N + chunk * s.V + chunk + (chunk if s.tp > 1 else 0)
    return 4 * n


def scratch_bytes(s):
    N, Ns = s.N, s.Ns
    n = 3 * Ns * C + N * s.F + N * 2 * s.F + N * s.H * D + N * s.qkv
    if s.sp and s.tp > 1:
        n += 2 * N * C  # full_in, full_out
    return 4 * n


def tp_bytes(s, layers, embed, head, m, zero):
    """Bytes one tp rank sends over mesh.tp() in a training step (ring collectives: an all-reduce
    sends 2(P-1)/P of its bytes, an all-gather or reduce-scatter P-1 shards). Per micro-batch:
    without sequence parallelism 4 all-reduces of N·C floats per block, one for the embedding's
    forward and one for the head's backward; with it 6 all-gathers and 4 reduce-scatters of the
    (N/P, C) shard per block, one of each for the embedding and the head; the vocab-parallel
    cross-entropy's row statistics (max of N doubles, sums of 2N) on the head. Per step: the
    gradient norm (1 double) and the partial gradients of replicated pieces: with sequence
    parallelism the norm weights (2 per block, 1 in the head), with replicated kv heads k_proj and
    v_proj at their global size — per micro-batch under ZeRO 2/3, which reduce every micro-batch."""
    P, N, Ns = s.tp, s.N, s.Ns
    ar = lambda nbytes: 2 * (P - 1) * nbytes // P
    syncs = m if zero >= 2 else 1
    total = 0
    if s.kv_replicated:
        total += syncs * layers * ar(2 * HKV * D * C * 4)
    if s.sp:
        shard = Ns * C * 4 * (P - 1)
        total += m * ((6 * layers + embed + head) + (4 * layers + embed + head)) * shard
        total += syncs * ar((2 * layers + head) * C * 4)
    else:
        total += m * (4 * layers + embed + head) * ar(N * C * 4)
    total += head * m * (ar(N * 8) + ar(2 * N * 8))
    return total + ar(8)


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        base = run(tmp, "single", 1, [])
        results = {}
        for name, (dp, tp, pp, sp, zero, sched, v) in LAYOUTS.items():
            results[name] = run(tmp, name, dp * tp * pp,
                                ["--set", f"parallel.dp={dp}", "--set", f"parallel.tp={tp}", "--set", f"parallel.pp={pp}",
                                 "--set", f"parallel.sequence_parallel={'true' if sp else 'false'}",
                                 "--set", f"parallel.zero={zero}", "--set", f"parallel.pp_schedule={sched}",
                                 "--set", f"parallel.virtual_stages={v}"])

        print(f"{'layout':<28} {'worst rel. loss/val diff':>24} {'worst rel. grad-norm diff':>26}")
        for name in LAYOUTS:
            worst_loss = worst_norm = 0.0
            for s in range(STEPS):
                ref, got = base[s], results[name][s]
                el = abs(got["loss"] - ref["loss"]) / abs(ref["loss"])
                en = abs(got["grad_norm"] - ref["grad_norm"]) / abs(ref["grad_norm"])
                worst_loss, worst_norm = max(worst_loss, el), max(worst_norm, en)
                if el > 1e-5 or en > 1e-5:
                    failures.append(f"{name} step {s + 1}: loss {got['loss']} vs {ref['loss']}, "
                                    f"grad norm {got['grad_norm']} vs {ref['grad_norm']}")
                if "val_loss" in ref:
                    ev = abs(got.get("val_loss", 0) - ref["val_loss"]) / ref["val_loss"]
                    worst_loss = max(worst_loss, ev)
                    if ev > 1e-5:
                        failures.append(f"{name} step {s + 1}: val_loss {got.get('val_loss')} vs {ref['val_loss']}")
            print(f"{name:<28} {worst_loss:>24.2e} {worst_norm:>26.2e}")
        clipped = sum(1 for r in base if r["grad_norm"] > 1.0)
        print(f"(gradient clipping at 1.0 acted on {clipped} of {STEPS} single-process steps)")

        print("\nper-rank accounting (last step) against theory")
        for name, (dp, tp, pp, sp, zero, sched, v) in LAYOUTS.items():
            ranks = results[name][-1]["per_rank"]
            m = BATCH // dp // MICRO
            K = pp * v
            per_chunk = L // K  # the balanced partition gives every chunk the same layers here
            sh = Shard(tp, sp)
            msg = sh.Ns * C * 4
            for r in range(dp * tp * pp):
                stage = r // (dp * tp)
                chunks = [k for k in range(K) if k % pp == stage]
                sends = sum(m * msg * ((k < K - 1) + (k > 0)) for k in chunks)
                head = int(K - 1 in chunks)
                want_tp = tp_bytes(sh, per_chunk * len(chunks), int(0 in chunks), head, m, zero)
                got = {k: ranks[k][r] for k in ("pp_send_bytes", "pp_in_flight", "mem_activations_bytes", "tp_bytes")}
                line = (f"{name:<28} rank {r} stage {stage}: pp bytes {got['pp_send_bytes']} (theory {sends}), "
                        f"tp bytes {got['tp_bytes']:.0f} (theory {want_tp})")
                if got["pp_send_bytes"] != sends:
                    failures.append(f"{name} rank {r}: pipeline bytes {got['pp_send_bytes']}, theory {sends}")
                if got["tp_bytes"] != want_tp:
                    failures.append(f"{name} rank {r}: tensor-parallel bytes {got['tp_bytes']}, theory {want_tp}")
                if sched == "1f1b":
                    flight = min(m, pp - stage)
                    act = flight * chunk_bytes(sh, per_chunk, head) + scratch_bytes(sh)
                    line += (f", in flight {got['pp_in_flight']} (theory {flight}), "
                             f"activation bytes {got['mem_activations_bytes']} (theory {act})")
                    if got["pp_in_flight"] != flight:
                        failures.append(f"{name} rank {r}: {got['pp_in_flight']} in flight, theory {flight}")
                    if got["mem_activations_bytes"] != act:
                        failures.append(f"{name} rank {r}: activation bytes {got['mem_activations_bytes']}, "
                                        f"theory {act}")
                print(line)
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("3D parity: every tp x pp (x dp) layout matches one process; accounting matches theory")


if __name__ == "__main__":
    main()
