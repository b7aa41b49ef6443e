"""The offline checkpoint tools under context parallelism (parallel.cp): `fluxtrain ckpt reshard
--cp` and a Hugging Face import resharded into a cp layout, each resumed by real ranks.

The tiny model, 4-step runs saving at step 2:
  A  cp 2 (ring), ZeRO 1, 2 ranks — the optimizer state sharded over the dp x cp group;
  B  one process.
  1. A's checkpoint resharded offline to its own layout (--cp 2 --zero 1) gives the trainer's files
     exactly (pieces, geometry, checksums): the offline writer places a cp rank's state as the
     trainer does (units padded to dp x cp, piece dp_index x cp + cp_index).
  2. A's checkpoint resharded to one process (--cp 1 --zero 0) and resumed: steps 3-4 equal A's.
  3. B's checkpoint resharded to cp 2 (--cp 2 --zero 1) and resumed by 2 ranks: steps 3-4 equal B's.
  4. A's checkpoint exported to Hugging Face (export-hf) and imported (import-hf) by one process;
     the one-process import resharded to cp 2 with all-to-all attention, and the same directory
     imported straight into cp 2 ZeRO 1 (import-hf --set parallel.cp=2 ...), each resumed by 2
     ranks for one step: loss and gradient norm equal the one-process import's.
Losses within 1e-5 relative (the parity tests' tolerance: summation orders differ between layouts),
and the data order continues (metrics.jsonl's data_hash). Every offline output passes `ckpt verify`.
Bad input: a cp that does not divide the sequence and an unknown schedule are one-line errors.

usage: reshard_cp_test.py FLUXTRAIN CONFIG
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import ckpt_lib as L  # noqa: E402

FT, CONFIG = sys.argv[1], sys.argv[2]
COMMON = ["train.steps=4", "train.eval_interval=0", "train.batch_size=8", "train.seq_len=32",
          "train.micro_batch_size=2", "ckpt.interval=2", "train.threads=1", "optim.grad_clip=1.0"]
CP2 = ["parallel.cp=2", "parallel.zero=1"]
failures = []


def rows(run_dir):
    return {r["step"]: r for r in (json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl")))}


def offline(*args):
    """`fluxtrain ckpt ARGS`, then `ckpt verify` of its output (the 3rd argument); True when both pass."""
    p = L.ckpt(FT, *args)
    if p.returncode != 0:
        failures.append(f"ckpt {' '.join(args[:1])} -> {args[2]}: exit {p.returncode}: {p.stderr.strip()[-500:]}")
        return False
    print("  " + p.stdout.strip().splitlines()[-1])
    v = L.ckpt(FT, "verify", args[2])
    if v.returncode != 0:
        failures.append(f"ckpt verify {args[2]}: {v.stderr.strip()[-500:]}")
    return v.returncode == 0


def compare(name, got, ref, steps):
    if sorted(got) != steps:
        failures.append(f"{name}: steps {sorted(got)}, expected {steps}")
        return
    worst = 0.0
    for s in steps:
        for key in ("loss", "grad_norm"):
            worst = max(worst, abs(got[s][key] - ref[s][key]) / abs(ref[s][key]))
    same_data = all(got[s]["data_hash"] == ref[s]["data_hash"] for s in steps)
    print(f"  {name:<34} " + "  ".join(f"{got[s]['loss']:.8f}" for s in steps) +
          f"   worst rel {worst:.1e}, {'same batches' if same_data else 'OTHER BATCHES'}")
    if worst > 1e-5:
        failures.append(f"{name}: losses/grad norms differ by {worst:.1e}")
    if not same_data:
        failures.append(f"{name}: the data order did not continue")


def expect_error(args, text):
    p = L.ckpt(FT, *args)
    line = p.stderr.strip().splitlines()[0] if p.stderr.strip() else ""
    if p.returncode == 0 or text not in p.stderr:
        failures.append(f"ckpt {' '.join(args)}: expected an error with '{text}', got exit {p.returncode}: {p.stderr}")
    else:
        print(f"  refused: {line[:160]}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        a, b = os.path.join(tmp, "a_cp2"), os.path.join(tmp, "b_single")
        L.train(FT, CONFIG, a, COMMON + CP2, nproc=2)
        L.train(FT, CONFIG, b, COMMON)
        ref_a, ref_b = rows(a), rows(b)
        a2, b2 = (os.path.join(r, "checkpoints", "step_00000002") for r in (a, b))
        m = json.load(open(os.path.join(a2, "manifest.json")))
        print(f"A: cp 2 ZeRO 1 saved layout {m['layout']}: {len(m['files'])} rank files")
        if m["layout"].get("cp") != 2 or m["layout"]["world"] != 2:
            failures.append(f"A's manifest layout {m['layout']}: expected world 2 with cp 2")

        print("1. offline reshard of A to its own layout")
        same = os.path.join(tmp, "same", "step_00000002")
        if offline("reshard", a2, same, "--cp", "2", "--zero", "1"):
            m2 = json.load(open(os.path.join(same, "manifest.json")))
            strip = lambda fs: [{k: f[k] for k in ("name", "rank", "payload_bytes")} for f in fs]  # noqa: E731
            ok = m2["tensors"] == m["tensors"] and strip(m2["files"]) == strip(m["files"]) and \
                m2["layout"] == m["layout"]
            print(f"  {len(m2['files'])} files, {sum(len(t['pieces']) for t in m2['tensors'])} pieces: "
                  f"{'identical to' if ok else 'DIFFERENT FROM'} the trainer's")
            if not ok:
                failures.append("offline reshard to A's own cp 2 layout differs from the trainer's files")

        print(f"  {'(uninterrupted A, cp 2)':<34} " + "  ".join(f"{ref_a[s]['loss']:.8f}" for s in (3, 4)))
        print("2. A (cp 2) -> one process")
        run = os.path.join(tmp, "a_to_cp1")
        if offline("reshard", a2, os.path.join(run, "checkpoints", "step_00000002"), "--cp", "1", "--zero", "0"):
            L.train(FT, CONFIG, run, COMMON, resume="auto")
            compare("cp 2 -> cp 1, resumed by 1 process", rows(run), ref_a, [3, 4])

        print(f"  {'(uninterrupted B, 1 process)':<34} " + "  ".join(f"{ref_b[s]['loss']:.8f}" for s in (3, 4)))
        print("3. B (one process) -> cp 2")
        run = os.path.join(tmp, "b_to_cp2")
        if offline("reshard", b2, os.path.join(run, "checkpoints", "step_00000002"), "--cp", "2", "--zero", "1"):
            L.train(FT, CONFIG, run, COMMON + CP2, nproc=2, resume="auto")
            compare("cp 1 -> cp 2, resumed by 2 ranks", rows(run), ref_b, [3, 4])

        print("4. Hugging Face export of A, import, reshard to cp 2 (all-to-all)")
        hf, imp, imp_cp2 = (os.path.join(tmp, n) for n in ("hf", "imported", "imported_cp2"))
        p = L.ckpt(FT, "export-hf", a2, hf)
        q = L.ckpt(FT, "import-hf", hf, imp, "--config", CONFIG) if p.returncode == 0 else p
        if q.returncode != 0:
            failures.append(f"export-hf/import-hf: {q.stderr[-800:]}")
        elif offline("reshard", imp, imp_cp2, "--cp", "2", "--cp-attention", "all_to_all"):
            one = ["train.steps=1", "train.eval_interval=0", "train.batch_size=8", "train.seq_len=32",
                   "train.micro_batch_size=2", "train.threads=1", "ckpt.interval=0"]
            r1 = os.path.join(tmp, "imp_run_cp1")
            L.train(FT, imp + ".toml", r1, one, resume=imp)
            print(f"  {'(the import, 1 process)':<34} {rows(r1)[1]['loss']:.8f}")
            r2 = os.path.join(tmp, "imp_run_cp2")
            L.train(FT, imp + ".toml", r2, one + ["parallel.cp=2", 'parallel.cp_attention="all_to_all"'], nproc=2,
                    resume=imp_cp2)
            compare("import, reshard -> cp 2 a2a, 2 ranks", rows(r2), rows(r1), [1])
            imp2 = os.path.join(tmp, "imported_into_cp2")
            p = L.ckpt(FT, "import-hf", hf, imp2, "--config", CONFIG, "--set", "parallel.cp=2", "--set",
                       "parallel.zero=1")
            v = L.ckpt(FT, "verify", imp2)
            m3 = json.load(open(os.path.join(imp2, "manifest.json"))) if p.returncode == 0 else {}
            if p.returncode != 0 or v.returncode != 0 or m3["layout"].get("cp") != 2 or m3["origin"] != "import-hf":
                failures.append(f"import-hf into cp 2: rc {p.returncode} {p.stderr[-500:]} verify {v.stderr[-300:]} "
                                f"layout {m3.get('layout')}")
            else:
                print(f"  import-hf into layout {m3['layout']}: {len(m3['files'])} rank files")
                r3 = os.path.join(tmp, "imp2_run_cp2")
                L.train(FT, imp2 + ".toml", r3, one, nproc=2, resume=imp2)
                compare("import-hf into cp 2 z1, 2 ranks", rows(r3), rows(r1), [1])

        print("5. bad input")
        expect_error(["reshard", a2, os.path.join(tmp, "bad1"), "--cp", "3"], "not divisible by 2 x parallel.cp")
        expect_error(["reshard", a2, os.path.join(tmp, "bad2"), "--cp-attention", "rings"], "parallel.cp_attention")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("reshard cp: offline cp layouts match the trainer's and resume with the same losses")
    return 0


if __name__ == "__main__":
    sys.exit(main())
