"""Pipeline parity and accounting: every pipeline layout trains the same losses as one process.

Runs `fluxtrain train` on the tiny model (4 layers, seq 32, batch 8, micro-batches of 1
sequence, fp32) for 20 steps on one process, then under mpirun at pp = 2 (1f1b, gpipe,
interleaved), pp = 4 (1f1b; interleaved on an 8-layer variant against its own single-process
run) and dp 2 × pp 2 with ZeRO 0–3, and checks the loss and gradient norm of every step, and the
validation loss of steps 10 and 20 (the forward-only schedule), within 1e-5 relative. pp 2 1F1B
with model.recompute = "selective" must be bit-identical to pp 2 1F1B keeping everything.

From metrics.jsonl it also checks, per rank, against theory derived here from the model's shapes:
  - activation bytes (the allocator's peak): stage s of 1F1B holds min(m, p − s) activation sets
    of its layers, GPipe m, plus one backward scratch — exactly;
    interleaved: 2(p−1−s) + (v−1)p + 1 chunk sets (exact where the stage's chunks have one shape);
  - micro-batches in flight: min(m, p − s) (1F1B), 2(p−1−s) + (v−1)p + 1 chunk sets (interleaved);
  - pipeline bytes per step: m · B·T·dim·4 per chunk boundary and direction.

usage: parity_pp_test.py FLUXTRAIN CONFIG
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
# The tiny preset: dim, heads, kv heads, ffn, vocab.
C, H, HKV, F, V = 64, 4, 2, 160, 256
D = C // H


def run(tmp, name, nproc, extra):
    return train(FT, CONFIG, os.path.join(tmp, name), COMMON + extra, nproc)


def chunk_bytes(B, layers, head, recompute="none"):
    """fp32 bytes of one activation set for `layers` blocks (model/activations.h lists them);
    selective recompute keeps qkv, att, lse, x_mid, gu per block and one shared set of the rest."""
    N = B * SEQ
    qkv = (H + 2 * HKV) * D
    kept = N * qkv + N * H * D + B * H * SEQ + N * C + N * 2 * F  # qkv, att, lse, x_mid, gu
    recomputed = N * C + N + N * C + N + N * F  # xn1, rstd1, xn2, rstd2, h
    if recompute == "selective":
        n = layers * kept + recomputed + (layers + 1) * N * C
    else:
        n = layers * (kept + recomputed) + (layers + 1) * N * C
    if head:
        chunk = min(max(16, (8 << 20) // V), N)
        n += N * C + N + N * C + N + chunk * V + chunk
    return 4 * n


def scratch_bytes(B):
    N = B * SEQ
    return 4 * (3 * N * C + N * F + N * 2 * F + N * H * D + N * (H + 2 * HKV) * D)


def main():
    failures = []
    layouts = {  # name: (nproc, layers, pp, schedule, virtual stages, dp, zero)
        "pp2 1f1b": (2, 4, 2, "1f1b", 1, 1, 0),
        "pp2 gpipe": (2, 4, 2, "gpipe", 1, 1, 0),
        "pp2 interleaved v2": (2, 4, 2, "interleaved", 2, 1, 0),
        "pp4 1f1b": (4, 4, 4, "1f1b", 1, 1, 0),
        "pp4 interleaved v2 (8 layers)": (4, 8, 4, "interleaved", 2, 1, 0),
        "dp2 x pp2 zero0": (4, 4, 2, "1f1b", 1, 2, 0),
        "dp2 x pp2 zero1": (4, 4, 2, "1f1b", 1, 2, 1),
        "dp2 x pp2 zero2": (4, 4, 2, "1f1b", 1, 2, 2),
        "dp2 x pp2 zero3": (4, 4, 2, "1f1b", 1, 2, 3),
    }
    with tempfile.TemporaryDirectory() as tmp:
        base = {4: run(tmp, "single4", 1, []), 8: run(tmp, "single8", 1, ["--set", "model.n_layers=8"])}
        results = {}
        for name, (nproc, layers, pp, sched, v, dp, zero) in layouts.items():
            results[name] = run(tmp, name.replace(" ", "_"), nproc,
                                ["--set", f"model.n_layers={layers}", "--set", f"parallel.pp={pp}",
                                 "--set", f"parallel.pp_schedule={sched}", "--set", f"parallel.virtual_stages={v}",
                                 "--set", f"parallel.dp={dp}", "--set", f"parallel.zero={zero}"])

        print(f"{'layout':<32} {'worst rel. loss/val diff':>24} {'worst rel. grad-norm diff':>26}")
        for name, (nproc, layers, pp, sched, v, dp, zero) in layouts.items():
            worst_loss = worst_norm = 0.0
            for s in range(STEPS):
                ref, got = base[layers][s], results[name][s]
                el = abs(got["loss"] - ref["loss"]) / abs(ref["loss"])
                en = abs(got["grad_norm"] - ref["grad_norm"]) / abs(ref["grad_norm"])
                worst_loss, worst_norm = max(worst_loss, el), max(worst_norm, en)
                if el > 1e-5 or en > 1e-5:
                    failures.append(f"{name} step {s + 1}: loss {got['loss']} vs {ref['loss']}, "
                                    f"grad norm {got['grad_norm']} vs {ref['grad_norm']}")
                if "val_loss" in ref:  # validation runs the forward-only schedule
                    ev = abs(got.get("val_loss", 0) - ref["val_loss"]) / ref["val_loss"]
                    worst_loss = max(worst_loss, ev)
                    if ev > 1e-5:
                        failures.append(f"{name} step {s + 1}: val_loss {got.get('val_loss')} vs {ref['val_loss']}")
            print(f"{name:<32} {worst_loss:>24.2e} {worst_norm:>26.2e}")

        print("\nper-rank accounting (last step) against theory")
        for name, (nproc, layers, pp, sched, v, dp, zero) in layouts.items():
            last = results[name][-1]
            ranks = last["per_rank"]
            m = BATCH // dp // MICRO
            K = pp * v
            # Chunk k holds layers split as fluxtrain's balanced partition does for these models:
            # equal layers per chunk (every layer costs the same; the head is lighter than a layer).
            per_chunk = layers // K
            msg = MICRO * SEQ * C * 4
            for r in range(nproc):
                s = r // dp  # pp is the outer axis: world rank = pp_index · dp + dp_index
                chunks = [k for k in range(K) if k % pp == s]
                sends = sum(m * msg * ((k < K - 1) + (k > 0)) for k in chunks)
                got_bytes = ranks["pp_send_bytes"][r]
                in_flight = ranks["pp_in_flight"][r]
                act = ranks["mem_activations_bytes"][r]
                if sched == "interleaved":
                    # Chunks of equal shape share one pool of sets; with one shape the peak is
                    # exact, with two (the head's chunk) each shape's pool is bounded.
                    want_flight = min(m * v, 2 * (pp - 1 - s) + (v - 1) * pp + 1)
                    shapes = {}
                    for k in chunks:
                        shapes.setdefault(chunk_bytes(MICRO, per_chunk, k == K - 1), []).append(k)
                    if len(shapes) == 1:
                        act_want = want_flight * next(iter(shapes)) + scratch_bytes(MICRO)
                        act_ok = act == act_want
                    else:
                        act_bound = sum(min(want_flight, m * len(ks)) * b for b, ks in shapes.items()) \
                            + scratch_bytes(MICRO)
                        act_ok = act <= act_bound
                        act_want = f"<= {act_bound}"
                else:
                    want_flight = m if sched == "gpipe" else min(m, pp - s)
                    act_want = want_flight * chunk_bytes(MICRO, per_chunk, s == pp - 1) + scratch_bytes(MICRO)
                    act_ok = act == act_want
                print(f"{name:<32} rank {r} stage {s}: in flight {in_flight} (theory {want_flight}), "
                      f"activation bytes {act} (theory {act_want}), pp bytes/step {got_bytes} (theory {sends})")
                if in_flight != want_flight:
                    failures.append(f"{name} rank {r}: {in_flight} micro-batches in flight, theory {want_flight}")
                if not act_ok:
                    failures.append(f"{name} rank {r}: activation bytes {act}, theory {act_want}")
                if got_bytes != sends:
                    failures.append(f"{name} rank {r}: pipeline bytes {got_bytes}, theory {sends}")
            if last["pp_bytes"] != sum(ranks["pp_send_bytes"]):
                failures.append(f"{name}: pp_bytes {last['pp_bytes']} is not the sum over ranks")

        # Selective recompute on a pipeline: bit-identical losses and gradient norms; each stage's
        # sets keep their blocks' GEMM outputs and share one set of the recomputed buffers.
        sel = run(tmp, "pp2_1f1b_selective", 2, ["--set", "parallel.pp=2", "--set", "parallel.pp_schedule=1f1b",
                                                 "--set", 'model.recompute="selective"'])
        ref = results["pp2 1f1b"]
        for s in range(STEPS):
            for key in ("loss", "grad_norm"):
                if sel[s][key] != ref[s][key]:
                    failures.append(f"pp2 1f1b selective step {s + 1} {key}: {sel[s][key]!r} is not "
                                    f"bit-identical to {ref[s][key]!r}")
        m = BATCH // MICRO
        for r in range(2):
            act = sel[-1]["per_rank"]["mem_activations_bytes"][r]
            want = min(m, 2 - r) * chunk_bytes(MICRO, 2, r == 1, "selective") + scratch_bytes(MICRO)
            print(f"pp2 1f1b selective rank {r}: activation bytes {act} (theory {want})")
            if act != want:
                failures.append(f"pp2 1f1b selective rank {r}: activation bytes {act}, theory {want}")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("pipeline parity: every layout matches one process; accounting matches theory")


if __name__ == "__main__":
    main()
